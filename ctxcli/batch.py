"""One ``ctxcli compress`` run over many inputs, as a library call: plan the outputs,
compress each input (here or on Ray), report on stderr, and give the exit status.

:func:`run` is what the command does once its options are parsed; the command reads
the environment (keys, cache folder, whether stderr is a terminal) and passes what it
found. Lines for people go to ``say`` (the command prints them on stderr).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from ctxcli import github, inplace, jsonio
from ctxcli.compress import Compressor, FileStats
from ctxcli.config import Settings
from ctxcli.errors import InputError, UsageError
from ctxcli.inplace import Outcome
from ctxcli.inputs import Plan, plan
from ctxcli.summarizers import Summarizer, build

Say = Callable[[str], None]
#: Builds the summarizer from the ``summarizer:`` settings (``None``: the extractive one).
Build = Callable[[Mapping[str, Any]], Summarizer | None]

#: Exit statuses of a run (the first that applies), as ``compress --help`` lists them.
OVER_BUDGET = 3
WOULD_CHANGE = 1
CONTAINED = 5
FELL_BACK = 4


@dataclass(frozen=True, kw_only=True)
class Batch:
    """What to compress and where to write it, beyond the :class:`Settings`: the
    ``compress`` options of the same names (see ``ctxcli compress --help``).
    ``progress`` shows a bar per file (the command sets it when stderr is a terminal
    and not ``quiet``); ``cache_dir`` keeps the parsed tokenizer (``None``: nowhere).
    """

    inputs: tuple[str, ...]
    output: str | None = None
    out_dir: str | None = None
    in_place: bool = False
    dry_run: bool = False
    globs: tuple[str, ...] = ()
    stats_path: str | None = None
    store_path: str | None = None
    jobs: int | None = None
    engine: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    check: bool = False
    score: bool = False
    quiet: bool = False
    progress: bool = False
    cache_dir: str | Path | None = None


class Warnings:
    """Says each warning (``warning: <text>``), and in GitHub Actions (``annotate``)
    also an annotation on the input being read (``file``) at the line the warning
    opens with."""

    def __init__(self, say: Say, *, annotate: bool) -> None:
        self.say = say
        self.annotate = annotate
        self.file: str | None = None

    def __call__(self, text: str) -> None:
        self.say(f"warning: {text}")
        if self.annotate:
            line = github.line_in(text, self.file) if self.file else None
            self.say(github.command("warning", text, file=self.file, line=line))


def run(batch: Batch, settings: Settings, *, warn: Warnings, summarizer: Build = build) -> int:
    """Compress every input of ``batch`` with ``settings`` and the summarizer that
    ``summarizer`` builds from ``settings.summarizer`` (once the inputs are planned);
    say the table and notes through ``warn.say``; return the
    exit status (0, or :data:`OVER_BUDGET`, :data:`WOULD_CHANGE`, :data:`CONTAINED`,
    :data:`FELL_BACK`). Raises :class:`ctxcli.errors.CtxcliError` for a bad setting;
    a file with a bad input line gets no output, the others are done, and then the
    last such :class:`InputError` is raised (the others said as ``error:`` lines)."""
    outcomes, failed = _compress(batch, settings, summarizer=summarizer, warn=warn)
    results = [outcome.stats for outcome in outcomes]
    rewrites = batch.in_place or batch.dry_run
    if results and not batch.quiet:
        warn.say(table(results, wrote=not rewrites, store_given=batch.store_path is not None))
    for stats in results if batch.quiet and batch.store_path is None else ():
        if _unkept(stats):  # the table said it; with -q, a warning (not for --store /dev/null)
            warn.say(f"warning: {_thrown_away(stats, unasked=True)}")
    if rewrites and results:
        for line in changes(outcomes, batch, annotate=warn.annotate):
            warn.say(line)
    status = _status(batch, outcomes, warn.say)
    if failed:
        done = "checked" if batch.dry_run else "written"
        raise_failed(failed, len(failed) + len(outcomes), done, warn)
    return status


def raise_failed(failed: list[InputError], total: int, done: str, warn: Warnings) -> NoReturn:
    """Say which of ``total`` files were not ``done`` (``written``, ``checked``,
    ``counted``) and why (a bad line, a file that cannot be read), each but the last
    error as an ``error:`` line (and a GitHub annotation), then raise the last (its
    ``Error:`` line and exit 1 are the command's)."""
    if total > 1:
        warn.say(f"error: {len(failed)} of {plural(total, 'file')} not {done}:")
    for error in failed[:-1]:
        warn.say(f"error: {error}")
        if warn.annotate:
            warn.say(github.command("error", error.reason, file=error.path, line=error.line))
    raise failed[-1]


def _compress(
    batch: Batch, settings: Settings, *, summarizer: Build, warn: Warnings
) -> tuple[list[Outcome], list[InputError]]:
    """Each input's :class:`Outcome`, in the order planned, and the error of each input
    with a bad line (it gets no output: one file's bad line never costs the others)."""
    plans = _plans(batch, restorable="placeholder" in settings.stage_names, warn=warn)
    compressor = Compressor(
        settings,
        warn=warn,
        summarizer=summarizer(settings.summarizer),
        jobs=batch.jobs,
        cache_dir=batch.cache_dir,
        score=batch.score,
    )
    if batch.engine == "ray":
        from ctxcli import ray_engine

        ray_engine.start(batch.ray_address)
        stats = ray_engine.compress_files(compressor, plans)
        return [Outcome(s, changes=bool(s.changed), rewritten=False) for s in stats], []
    outcomes = []
    failed = []
    for item in plans:
        warn.file = item.input
        try:
            outcome = inplace.run(compressor, item, dry_run=batch.dry_run, progress=batch.progress)
        except InputError as error:
            failed.append(error)
            continue
        outcomes.append(outcome)
    return outcomes, failed


def _plans(batch: Batch, *, restorable: bool, warn: Warnings) -> list[Plan]:
    """The inputs with their outputs' paths; raises :class:`ConfigError` for options
    Ray cannot honour."""
    if batch.engine == "ray" and (batch.in_place or batch.dry_run):
        raise UsageError("--engine ray writes new files: use it without --in-place and --dry-run")
    if batch.engine == "ray" and any("://" in item for item in batch.inputs):
        from ctxcli.ray_engine import plan_remote

        if batch.output or batch.stats_path or batch.store_path:
            raise UsageError("with s3:// inputs give --out-dir, not -o, --stats or --store")
        return plan_remote(batch.inputs, out_dir=batch.out_dir, restorable=restorable)
    return plan(
        batch.inputs,
        output=batch.output,
        out_dir=batch.out_dir,
        stats=batch.stats_path,
        store=batch.store_path,
        restorable=restorable,
        globs=batch.globs,
        in_place=batch.in_place,
        warn=warn,
    )


def _status(batch: Batch, outcomes: Sequence[Outcome], say: Say) -> int:
    """The exit status of a run, saying the warnings and the error that go with it."""
    results = [outcome.stats for outcome in outcomes]
    fallbacks = _model_summaries(results, say)
    contained = sum(stats.total("fallbacks") for stats in results)
    if contained:
        say(
            f"warning: {contained} conversation(s) written with a safer plan because their "
            "compressed form broke a rule (a ctxcli bug: please report it; see the warnings "
            "above and the stats' fallbacks)"
        )
    over = sum(stats.total("over_budget") for stats in results)
    if batch.check and over:
        say(f"error: {over} conversation(s) over budget (--check)")
        return OVER_BUDGET
    if batch.dry_run and any(outcome.changes for outcome in outcomes):
        return WOULD_CHANGE
    if contained:
        return CONTAINED
    # With fallbacks the output is complete and valid, but not what was asked for.
    return FELL_BACK if fallbacks else 0


def _model_summaries(results: Sequence[FileStats], say: Say) -> int:
    """Say how many summaries fell back to the extractive summarizer (the model
    failed) and how many are the extraction by design (the model's text left out
    facts its room could not hold beside it); return the first count."""
    fallbacks = sum(int(stats.llm.get("fallbacks", 0)) for stats in results)
    extracted = sum(int(stats.llm.get("extracted", 0)) for stats in results)
    summaries = sum(s.stage_events.get("summary", Counter())["summaries_written"] for s in results)
    if fallbacks:
        say(
            f"warning: {fallbacks} of {summaries} summaries fell back to the extractive "
            "summarizer (see the warnings above)"
        )
    if extracted:
        say(
            f"warning: {extracted} of {summaries} summaries are the extractive one: the "
            "model's text left out facts that its room could not hold beside it (a larger "
            "budget gives it more room)"
        )
    return fallbacks


def changes(outcomes: Sequence[Outcome], batch: Batch, *, annotate: bool) -> list[str]:
    """The lines saying which inputs changed (or in a dry run would), by how many
    tokens; in a dry run in GitHub Actions (``annotate``) each is also an error
    annotation."""
    lines = []
    changing = [outcome for outcome in outcomes if outcome.changes]
    for outcome in changing:
        line = inplace.describe(outcome, dry_run=batch.dry_run)
        lines.append(line)
        if batch.dry_run and annotate:
            lines.append(github.command("error", line, file=outcome.stats.input))
        if outcome.rewritten and outcome.stats.store and not batch.quiet:
            stats = outcome.stats
            lines.append(f"  originals in {stats.store} ({stats.store_entries:,} in all)")
    left = len(outcomes) - len(changing)
    if batch.dry_run:
        run = "--in-place" if batch.in_place else "the run without --dry-run"
        lines.append(
            f"{len(changing)} of {plural(len(outcomes), 'file')} would change"
            + (f"; {run} writes them" if changing else "")
        )
    elif left and not batch.quiet:
        lines.append(f"left {plural(left, 'file')} as found: nothing to change")
    return lines


Pair = tuple[int, int]


def table(results: Sequence[FileStats], *, wrote: bool = True, store_given: bool = False) -> str:
    """The end-of-run table: a row per input, a ``total`` row when there are several,
    then what the placeholders saved, the scores, the model's use, and the files
    written (``wrote``; originals thrown away said with why and how to keep them,
    unless the user gave the store: ``store_given``)."""
    header = ("file", "convs", "msgs before→after", "tokens before→after", "ratio", "over")
    rows = [header, *(_row(stats.input, [stats]) for stats in results)]
    if len(results) > 1:
        rows.append(_row(f"total ({len(results)} files)", results))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    for stats in results:
        lines.extend(_notes(stats))
    for stats in results if wrote else ():
        lines.extend(_written(stats, unasked=not store_given))
    return "\n".join(lines)


def _row(name: str, results: Sequence[FileStats]) -> tuple[str, ...]:
    """A row of :func:`table` for the sum of ``results``."""
    tokens: Pair = (
        sum(s.tokens_before for s in results),
        sum(s.tokens_after for s in results),
    )
    ratio = tokens[1] / tokens[0] if tokens[0] else 1.0
    return (
        name,
        f"{sum(s.conversations for s in results):,}",
        f"{sum(s.messages_before for s in results):,}→{sum(s.messages_after for s in results):,}",
        f"{tokens[0]:,}→{tokens[1]:,}",
        f"{ratio:.2f}",
        f"{sum(s.total('over_budget') for s in results):,}",
    )


def _notes(stats: FileStats) -> list[str]:
    """What one input's placeholders saved, its score and its model use."""
    lines = []
    placeholders: Mapping[str, Any] = stats.stage_events.get("placeholder", {})
    if placeholders.get("placeholders_written"):
        written = placeholders["placeholders_written"]
        # the summary stage turns more results into placeholders in the part it keeps
        summary: Mapping[str, Any] = stats.stage_events.get("summary", {})
        more = summary.get("results_compacted", 0)
        kept = placeholders.get("placeholders_kept", 0)
        made = f", the summary stage made {more:,} more" if more else ""
        later = "" if kept == written + more else f", {kept:,} in the output"
        if not kept:  # what they saved is in no output: they went with what was folded
            later = ", none in the output (folded into summaries or dropped)"
        lines.append(
            f"{stats.input}: {plural(written, 'placeholder')} saved "
            f"{placeholders.get('tokens_saved', 0):,} tokens{made}{later}"
        )
    if stats.score is not None:
        from ctxcli.score import summary_line

        lines.append(f"{stats.input}: {summary_line(stats.score)}")
    if stats.llm:
        llm = stats.llm
        lines.append(
            f"llm {stats.input}: {llm['calls']:,} calls ({llm['retries']:,} retries), "
            f"{llm['cache_hits']:,} cache hits, {llm['fallbacks']:,} fallbacks, "
            f"{llm.get('extracted', 0):,} replaced by the extraction, "
            f"{llm['prompt_tokens']:,}+{llm['completion_tokens']:,} tokens, "
            f"{llm['wait_seconds']:.1f} s waiting"
        )
    return lines


def _written(stats: FileStats, *, unasked: bool) -> list[str]:
    """The files one input's compression wrote; originals thrown away with why when
    the store was not given (``unasked``: :func:`_thrown_away`)."""
    lines = []
    if stats.output != "-":
        lines.append(f"wrote {stats.output}")
    if stats.store and stats.store == os.devnull:
        lines.append(_thrown_away(stats, unasked=unasked))
    elif stats.store:
        lines.append(
            f"wrote {stats.store} ({plural(stats.store_entries, 'original')}, "
            f"{stats.store_bytes:,} bytes)"
        )
    return lines


def _thrown_away(stats: FileStats, *, unasked: bool) -> str:
    """The line that says how many originals a run with the store ``/dev/null`` threw
    away, and, when that was for want of a place (:func:`_unkept`) and not asked for
    (``unasked``: no ``--store``), how to keep them."""
    line = f"threw away {plural(stats.store_entries, 'original')} (the store is {stats.store})"
    if not (unasked and _unkept(stats)):
        return line
    if jsonio.is_stream(stats.input):  # as inputs._default_store decided it
        source = "stdin" if stats.input == "-" else "a pipe"
        why = f"from {source} to stdout there is no file to keep them beside"
    else:
        why = f"{os.path.dirname(stats.input) or '.'} takes no new file to keep them beside"
    return f"{line}: {why}; --store PATH keeps them for `ctxcli restore`"


def _unkept(stats: FileStats) -> bool:
    """Whether the run of ``stats`` threw away originals for want of a place to keep
    them (to stdout from stdin, or from a file in a folder that takes no new file, no
    ``--store``: the store is ``/dev/null``), which even ``-q`` says."""
    return stats.output == "-" and stats.store == os.devnull and stats.store_entries > 0


def plural(count: int, noun: str) -> str:
    """``1 record``, ``2 records``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
