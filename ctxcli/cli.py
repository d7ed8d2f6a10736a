"""The ``ctxcli`` command line: parse options, call the library, print.

stdout is data (``-o -`` writes compressed records there); stderr is for people:
warnings, the progress bar and the end-of-run table.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from ctxcli.errors import ConfigError, CtxcliError
from ctxcli.tokens import MAX_BUDGET

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"]}


def _stop_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so temporary files are removed as on Ctrl-C."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


class _Commands(click.Group):
    """ctxcli's commands; the ``skills`` group is imported only when asked for (it
    loads YAML), so that ``compress`` starts without it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), "skills"])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "skills":
            from ctxcli.skills_cli import skills

            return skills
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings=CONTEXT)
@click.version_option(package_name="ctxcli")
def cli() -> None:
    """Compress LLM conversation transcripts to a token budget, in batch.

    Example: ctxcli compress logs.jsonl --max-tokens 4000
    """


def budget_options(func: F) -> F:
    """The options that say how tokens are counted and what the budget is."""
    options = [
        click.option(
            "--max-tokens",
            type=click.IntRange(min=0, max=MAX_BUDGET),
            help="Token budget per conversation (default 8000; 0 for none).",
        ),
        click.option("--model", help="Count tokens as this model does (default gpt-4o)."),
        click.option(
            "--encoding", help="tiktoken encoding, overriding --model (e.g. cl100k_base)."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def format_options(func: F) -> F:
    """The options that say how records are read: their format and messages key."""
    options = [
        click.option(
            "--format",
            "format_name",
            help="Read every record as this format: openai, anthropic, sharegpt, responses, "
            "claude-code, codex "
            "(default: detected per record).",
        ),
        click.option(
            "--messages-key",
            help="Record key holding the messages, e.g. traj or history "
            "(default: messages, or conversations for ShareGPT).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def summarizer_options(func: F) -> F:
    """The options that choose the summarizer and how it reaches a model."""
    options = [
        click.option(
            "--summarizer",
            type=click.Choice(["extractive", "llm"]),
            help="extractive (offline, default) or llm (an OpenAI-compatible endpoint).",
        ),
        click.option("--summary-model", help="Model that writes summaries (default gpt-4o-mini)."),
        click.option(
            "--base-url", help="Endpoint, e.g. http://127.0.0.1:8080/v1 [OPENAI_BASE_URL]."
        ),
        click.option(
            "--api-key-env", help="Environment variable holding the key (default OPENAI_API_KEY)."
        ),
        click.option(
            "--llm-timeout",
            type=click.FloatRange(min=0, min_open=True),
            help="Seconds per model request attempt (default 60).",
        ),
        click.option(
            "--llm-concurrency", type=click.IntRange(min=1), help="Requests in flight (default 4)."
        ),
        click.option(
            "--summary-input-max-tokens",
            type=click.IntRange(min=1),
            help="Bound on one summary request; more is done in chunks (default 2500).",
        ),
        click.option(
            "--cache",
            "cache_path",
            help="Summary cache file (SQLite; default in the user cache dir).",
        ),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Neither read nor write the caches (summaries, parsed tokenizer).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@cli.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", help="Output file, or - for stdout (one input only).")
@click.option("--out-dir", type=click.Path(file_okay=False), help="Folder for the outputs.")
@click.option("--stats", "stats_path", help="Stats JSON path (one input only).")
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False), help="YAML settings file."
)
@click.option(
    "--stages", help="Stages in order, comma-separated (default placeholder,summary,priority)."
)
@budget_options
@click.option(
    "--keep-last",
    type=click.IntRange(min=0),
    help="Messages window and summary keep (default: window 10, summary 6).",
)
@click.option("--summary-role", type=click.Choice(["user", "system"]), help="Role of the summary.")
@click.option(
    "--summary-max-tokens",
    type=click.IntRange(min=1),
    help="Bound on the summaries of a conversation in tokens, headers included (400).",
)
@click.option("--priority-order", help="Classes priority drops first, e.g. assistant,user,tool.")
@format_options
@click.option(
    "--placeholder-threshold",
    type=click.IntRange(min=0),
    help="Replace tool results over this many tokens with placeholders (default 500).",
)
@click.option(
    "--placeholder-keep-recent",
    type=click.IntRange(min=0),
    help="The last N tool results stay whole (default 3).",
)
@click.option(
    "--store",
    "store_path",
    help="Store of placeholder originals (default <output stem>.store.jsonl).",
)
@summarizer_options
@click.option(
    "--on-error",
    type=click.Choice(["fail", "keep"]),
    help="On a bad line: stop (default), or copy it unchanged and go on.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="Worker processes (default: one per usable core for inputs over 8 MB; 1 for none).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    help="local (this machine, default) or ray (a Ray Data pipeline; ctxcli[ray]).",
)
@click.option(
    "--ray-address",
    help="With --engine ray: the cluster (auto: this machine's; default: a local Ray).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 3 if a conversation stays over budget.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or table.")
def compress(
    inputs: tuple[str, ...],
    output: str | None,
    out_dir: str | None,
    stats_path: str | None,
    config_path: str | None,
    stages: str | None,
    max_tokens: int | None,
    model: str | None,
    encoding: str | None,
    keep_last: int | None,
    summary_role: str | None,
    summary_max_tokens: int | None,
    priority_order: str | None,
    format_name: str | None,
    messages_key: str | None,
    placeholder_threshold: int | None,
    placeholder_keep_recent: int | None,
    store_path: str | None,
    summarizer: str | None,
    summary_model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    llm_timeout: float | None,
    llm_concurrency: int | None,
    summary_input_max_tokens: int | None,
    cache_path: str | None,
    no_cache: bool,
    on_error: str | None,
    jobs: int | None,
    engine: str,
    ray_address: str | None,
    check: bool,
    quiet: bool,
) -> None:
    """Compress conversations in JSONL files to a token budget.

    Each INPUT is a JSONL file (one conversation per line), a JSON file holding an
    array of them or one of them, a Parquet file (a messages column), a folder of
    JSONL and Parquet files, or - for stdin; with --engine ray also s3:// paths. Records may
    be OpenAI, Anthropic or ShareGPT; a Claude Code session log is one conversation.
    Writes <name>.compressed.<ext> (same shape and format) and
    <name>.compressed.stats.json beside each input, and a summary table on stderr.
    With the placeholder stage (on by default), large tool results become placeholders
    whose originals go to <name>.compressed.store.jsonl; ctxcli restore puts them back.

    With --summarizer llm a model writes the summaries (see the README); a summary
    that fails falls back to the extractive one, with a warning.

    Exit status: 0 done; 1 a bad input line or setting (nothing written); 3 with
    --check, a conversation over budget; 5 a conversation's compressed form broke a
    rule and a safer one was written (listed under fallbacks in the stats); 4 a model
    summary fell back. When several hold, the first in that order.

    Example: ctxcli compress samples/agent_run.jsonl --max-tokens 2000
    """
    from ctxcli import config
    from ctxcli.compress import Compressor, plan

    _stop_cleanly_on_sigterm()

    try:
        file_settings = config.load_file(config_path) if config_path else None
        stage_options: dict[str, dict[str, Any]] = {
            "window": {},
            "summary": {},
            "priority": {},
            "placeholder": {},
        }
        if keep_last is not None:
            stage_options["window"]["keep_last"] = keep_last
            stage_options["summary"]["keep_last"] = keep_last
        if summary_role:
            stage_options["summary"]["role"] = summary_role
        if summary_max_tokens:
            stage_options["summary"]["max_tokens"] = summary_max_tokens
        if priority_order:
            stage_options["priority"]["order"] = [p.strip() for p in priority_order.split(",")]
        if placeholder_threshold is not None:
            stage_options["placeholder"]["threshold"] = placeholder_threshold
        if placeholder_keep_recent is not None:
            stage_options["placeholder"]["keep_recent"] = placeholder_keep_recent
        settings = config.resolve(
            file_settings,
            stages=stages,
            stage_options=stage_options,
            max_tokens=max_tokens,
            model=model,
            encoding=encoding,
            on_error=on_error,
            format=format_name,
            messages_key=messages_key,
            summarizer={
                "name": summarizer,
                "model": summary_model,
                "base_url": base_url,
                "api_key_env": api_key_env,
                "timeout": llm_timeout,
                "concurrency": llm_concurrency,
                "input_max_tokens": summary_input_max_tokens,
                "cache": False if no_cache else cache_path,
            },
        )
        restorable = "placeholder" in settings.stage_names
        if engine == "ray" and any("://" in item for item in inputs):
            from ctxcli.ray_engine import plan_remote

            if output or stats_path or store_path:
                raise ConfigError("with s3:// inputs give --out-dir, not -o, --stats or --store")
            plans = plan_remote(inputs, out_dir=out_dir, restorable=restorable)
        else:
            plans = plan(
                inputs,
                output=output,
                out_dir=out_dir,
                stats=stats_path,
                store=store_path,
                restorable=restorable,
            )
        compressor = Compressor(
            settings,
            warn=lambda text: click.echo(f"warning: {text}", err=True),
            summarizer=_summarizer(settings.summarizer),
            jobs=jobs,
            cache_dir=None if no_cache else _cache_dir(),
        )
        progress = not quiet and sys.stderr.isatty()
        if engine == "ray":
            from ctxcli import ray_engine

            ray_engine.start(ray_address)
            results = ray_engine.compress_files(compressor, plans)
        else:
            results = [
                compressor.file(
                    item.input,
                    item.output,
                    stats_path=item.stats,
                    store_path=item.store,
                    progress=progress,
                )
                for item in plans
            ]
    except CtxcliError as exc:
        raise click.ClickException(str(exc)) from None
    if not quiet:
        click.echo(_table(results), err=True)
    fallbacks = sum(int(stats.llm.get("fallbacks", 0)) for stats in results)
    if fallbacks:
        summaries = sum(s.stage_events["summary"]["summaries_written"] for s in results)
        click.echo(
            f"warning: {fallbacks} of {summaries} summaries fell back to the extractive "
            "summarizer (see the warnings above)",
            err=True,
        )
    contained = sum(stats.total("fallbacks") for stats in results)
    if contained:
        click.echo(
            f"warning: {contained} conversation(s) written with a safer plan because their "
            "compressed form broke a rule (a ctxcli bug: please report it; see the warnings "
            "above and the stats' fallbacks)",
            err=True,
        )
    over = sum(stats.total("over_budget") for stats in results)
    if check and over:
        click.echo(f"error: {over} conversation(s) over budget (--check)", err=True)
        sys.exit(3)
    if contained:
        sys.exit(5)
    if fallbacks:
        # The output is complete and valid, but not what was asked for: say so.
        sys.exit(4)


@cli.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="FILE...")
@format_options
def validate(inputs: tuple[str, ...], format_name: str | None, messages_key: str | None) -> None:
    """Check transcripts against the rules of their formats.

    Prints each problem (tool calls without results, results without calls, a first
    message the provider rejects, altered thinking blocks, broken session links) with
    its file and line, and exits 1 if there is any.

    Example: ctxcli validate logs.compressed.jsonl
    """
    from ctxcli.validate import validate_file

    count = 0
    try:
        for path in inputs:
            for problem in validate_file(path, format=format_name, messages_key=messages_key):
                click.echo(str(problem))
                count += 1
    except CtxcliError as exc:
        raise click.ClickException(str(exc)) from None
    if count:
        click.echo(f"error: {count} problem(s) in {len(inputs)} file(s)", err=True)
        sys.exit(1)
    click.echo(f"ok: {len(inputs)} file(s), no problems", err=True)


def _cache_dir() -> Path:
    """The user cache folder (``XDG_CACHE_HOME``, read here at the edge)."""
    from ctxcli import cache

    return cache.default_dir(os.environ)


def _summarizer(options: Mapping[str, Any]) -> Any:
    """Build the summarizer, reading the environment here at the edge: the key from
    the variable ``api_key_env`` names, ``OPENAI_BASE_URL``, ``XDG_CACHE_HOME``."""
    from ctxcli import cache, summarizers

    if options.get("name") != "llm":
        return summarizers.build(options)
    options = dict(options)
    options.setdefault("base_url", os.environ.get("OPENAI_BASE_URL") or None)
    if options.get("cache") in (None, True):
        options["cache"] = str(cache.default_path(os.environ))
    key_variable = options.pop("api_key_env", None) or "OPENAI_API_KEY"
    return summarizers.build(options, api_key=os.environ.get(key_variable) or None)


def _table(results: list[Any]) -> str:
    header = ("file", "convs", "msgs before→after", "tokens before→after", "ratio", "over")
    rows = [header]
    for s in results:
        rows.append(
            (
                s.input,
                str(s.conversations),
                f"{s.messages_before:,}→{s.messages_after:,}",
                f"{s.tokens_before:,}→{s.tokens_after:,}",
                f"{s.ratio:.2f}",
                str(s.total("over_budget")),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    for s in results:
        placeholders = s.stage_events.get("placeholder", {})
        if placeholders.get("placeholders_written"):
            written = placeholders["placeholders_written"]
            kept = placeholders.get("placeholders_kept", 0)
            later = "" if kept == written else f", {kept:,} left after later stages"
            lines.append(
                f"{s.input}: {_count(written, 'placeholder')} saved "
                f"{placeholders.get('tokens_saved', 0):,} tokens{later}"
            )
        if s.llm:
            lines.append(
                f"llm {s.input}: {s.llm['calls']:,} calls ({s.llm['retries']:,} retries), "
                f"{s.llm['cache_hits']:,} cache hits, {s.llm['fallbacks']:,} fallbacks, "
                f"{s.llm['prompt_tokens']:,}+{s.llm['completion_tokens']:,} tokens, "
                f"{s.llm['wait_seconds']:.1f} s waiting"
            )
    for s in results:
        if s.output != "-":
            lines.append(f"wrote {s.output}")
        if s.store and s.store == os.devnull:
            lines.append(
                f"threw away {_count(s.store_entries, 'original')} (the store is {s.store})"
            )
        elif s.store:
            lines.append(
                f"wrote {s.store} ({s.store_entries:,} originals, {s.store_bytes:,} bytes)"
            )
    return "\n".join(lines)


@cli.command(context_settings=CONTEXT)
@click.argument("compressed")
@click.option(
    "--store",
    "store_path",
    help="The store compress wrote (default: where compress writes it for that output, "
    "<stem>.store.jsonl beside COMPRESSED).",
)
@click.option(
    "-o", "--output", default="-", show_default=True, help="Output file, or - for stdout."
)
def restore(compressed: str, store_path: str | None, output: str) -> None:
    """Put the originals back in place of the placeholders in a compressed file.

    Lines without placeholders are written back as they are. Placeholders the store
    cannot resolve are an error naming them (exit 1), and nothing is written.

    Example: ctxcli restore logs.compressed.jsonl -o logs.jsonl
    """
    from ctxcli.compress import default_store
    from ctxcli.store import restore_file

    if store_path is None:
        store_path = default_store(compressed)
        if store_path is None:
            raise click.UsageError("give --store when the compressed file is read from stdin")

    try:
        stats = restore_file(compressed, output, store_path)
    except CtxcliError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"restored {_count(stats.placeholders, 'placeholder')} ({stats.chars:,} characters) "
        f"in {stats.changed:,} of {_count(stats.records, 'record')} from {store_path}",
        err=True,
    )
    if stats.store_missing:
        click.echo(
            f"note: {store_path} does not exist; nothing in {compressed} needed it", err=True
        )
    if stats.earlier:
        click.echo(
            f"note: {_count(len(stats.earlier), 'placeholder')} of an earlier run "
            f"{'stays' if len(stats.earlier) == 1 else 'stay'} as "
            f"{compressed} had them; restore the result with that run's store too (or "
            "give both stores joined into one file)",
            err=True,
        )


def _count(n: int, noun: str) -> str:
    """``1 record``, ``2 records``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
