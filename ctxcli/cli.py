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
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ctxcli.clihelp import Group, Named, Whole, option
from ctxcli.summarizers import MAX_CONCURRENCY, MAX_TIMEOUT
from ctxcli.tokens import MAX_BUDGET

if TYPE_CHECKING:
    from ctxcli.config import Settings

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"]}
#: The names of :data:`ctxcli.formats.FORMATS` (a test holds them equal), here so
#: that ``--help`` loads no format.
FORMAT_NAMES = (
    "openai",
    "anthropic",
    "sharegpt",
    "responses",
    "gemini",
    "gemini-cli",
    "claude-code",
    "codex",
    "gemini-checkpoint",
    "responses-items",
)


def _stop_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so temporary files are removed as on Ctrl-C."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


class _Commands(Group):
    """ctxcli's commands; the ``skills`` group is imported only when asked for (it
    loads YAML), so that ``compress`` starts without it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), "skills"])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "skills":
            from ctxcli.skills.cli import skills

            return skills
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, as click writes it, with the skills group's line said here
        (:data:`SKILLS_HELP`), so that ``ctxcli --help`` imports no YAML either."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [
            (
                name,
                SKILLS_HELP if name == "skills" else self.commands[name].get_short_help_str(limit),
            )
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


#: The skills group's one-line help in ``ctxcli --help`` (a test holds it to the
#: group's own).
SKILLS_HELP = "List, show and validate skills (Markdown tools)."


@click.group(
    cls=_Commands,
    context_settings=CONTEXT,
    epilog="""Examples:

\b
  ctxcli compress samples/agent_run.jsonl --max-tokens 2000
  ctxcli count ~/.claude/projects --per-conversation --by role
  ctxcli skills show read_file
""",
)
@click.version_option(package_name="ctxcli")
def cli() -> None:
    """Compress LLM conversation transcripts to a token budget, in batch.

    Each command's --help has its options, their defaults and examples.
    """


def _apply(func: F, options: list[Callable[[F], F]]) -> F:
    for each in reversed(options):
        func = each(func)
    return func


def token_options(func: F) -> F:
    """The options that say how tokens are counted."""
    return _apply(
        func,
        [
            option("--model", shown="gpt-4o", help="Count tokens as this model does."),
            option(
                "--encoding",
                shown="--model's",
                help="tiktoken encoding, overriding --model (e.g. cl100k_base).",
            ),
        ],
    )


def on_error_option(help: str) -> Callable[[F], F]:
    """``--on-error fail|keep`` (default ``fail``), with what it does in ``help``."""
    return option("--on-error", type=click.Choice(["fail", "keep"]), shown="fail", help=help)


def budget_options(func: F) -> F:
    """The options that say how tokens are counted and what the budget is."""
    budget = option(
        "--max-tokens",
        type=Whole(min=0, max=MAX_BUDGET),
        metavar="N",
        shown="8000",
        hide_range=True,
        help="Token budget per conversation; 0 for none.",
    )
    return _apply(func, [budget, token_options])


def format_options(flag: str = "--format") -> Callable[[F], F]:
    """The options that say how records are read: their format (under ``flag``, and
    ``--input-format`` as well, the name count and score give it, whose ``--format``
    is their report's) and messages key."""
    names = (flag, "--input-format") if flag != "--input-format" else (flag,)
    return lambda func: _apply(
        func,
        [
            option(
                *names,
                "format_name",
                metavar="NAME",
                shown="detected per record",
                help=f"Read every record as this format: {', '.join(FORMAT_NAMES)}.",
            ),
            option(
                "--messages-key",
                type=Named(),
                metavar="KEY",
                shown="messages; conversations for ShareGPT",
                help="Record key holding the messages, e.g. traj (tau-bench) or history "
                "(SWE-agent).",
            ),
        ],
    )


def glob_option(func: F) -> F:
    """``--glob``: which files a folder input finds."""
    from ctxcli.inputs import DEFAULT_GLOBS

    return option(
        "--glob",
        "globs",
        multiple=True,
        metavar="PATTERN",
        shown=", ".join(DEFAULT_GLOBS),
        help="Files a folder input finds, at any depth (repeatable); ctxcli's own "
        "outputs are never included.",
    )(func)


def summarizer_options(func: F) -> F:
    """The options that choose the summarizer and how it reaches a model."""
    return _apply(
        func,
        [
            option(
                "--summarizer",
                type=click.Choice(["extractive", "llm"]),
                shown="extractive",
                help="extractive (offline) or llm (an OpenAI-compatible endpoint).",
            ),
            option("--summary-model", shown="gpt-4o-mini", help="Model that writes summaries."),
            endpoint_options,
            option(
                "--summary-input-max-tokens",
                type=Whole(min=1, max=MAX_BUDGET),
                metavar="N",
                shown="2500",
                hide_range=True,
                help="Bound on one summary request; more is done in chunks.",
            ),
            option(
                "--cache",
                "cache_path",
                metavar="PATH",
                shown="$XDG_CACHE_HOME/ctxcli/summaries.sqlite",
                help="Summary cache file (SQLite).",
            ),
            no_cache_option(
                "caches on", "Neither read nor write the caches (summaries, parsed tokenizer)."
            ),
        ],
    )


def endpoint_options(func: F) -> F:
    """The options that say how the llm summarizer reaches its endpoint."""
    return _apply(
        func,
        [
            option(
                "--base-url",
                shown="$OPENAI_BASE_URL, else OpenAI",
                help="Endpoint, e.g. http://127.0.0.1:8080/v1.",
            ),
            option(
                "--api-key-env",
                metavar="NAME",
                shown="OPENAI_API_KEY",
                help="Environment variable holding the key.",
            ),
            option(
                "--llm-timeout",
                type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT),
                metavar="SECONDS",
                shown="60",
                hide_range=True,
                help="Seconds per model request attempt.",
            ),
            option(
                "--llm-concurrency",
                type=Whole(min=1, max=MAX_CONCURRENCY),
                metavar="N",
                shown="4",
                hide_range=True,
                help="Requests in flight at most; fewer after timeouts or 429s, down to 1.",
            ),
        ],
    )


def config_option(help: str) -> Callable[[F], F]:
    """``--config``: the YAML settings file, saying in ``help`` what the command takes
    of it."""
    return option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        shown="none",
        help=help,
    )


def no_cache_option(shown: str, help: str) -> Callable[[F], F]:
    """``--no-cache``: keep nothing in the user cache folder (``help`` says what)."""
    return option("--no-cache", is_flag=True, shown=shown, help=help)


def output_options(func: F) -> F:
    """The options of ``compress`` that say where its outputs go."""
    return _apply(
        func,
        [
            option(
                "-o",
                "--output",
                metavar="PATH",
                shown="<name>.compressed.<ext> beside the input",
                help="Output file, or - for stdout (one input only).",
            ),
            option(
                "--out-dir",
                type=click.Path(file_okay=False),
                shown="beside each input",
                help="Folder for the outputs, at each input's path under the folder it was "
                "found in.",
            ),
            option(
                "--in-place",
                is_flag=True,
                shown="off: inputs are never modified",
                help="Rewrite each input with its compressed form (atomically, its mode kept; "
                "a file with nothing to change is left alone); the store goes beside it.",
            ),
            option(
                "--dry-run",
                is_flag=True,
                shown="off",
                help="Write nothing; name each file compressing would change, with its tokens "
                "before and after, and exit 1 if any would.",
            ),
            glob_option,
            option(
                "--stats",
                "stats_path",
                metavar="PATH",
                shown="<output stem>.stats.json beside a .jsonl output, <output name>"
                ".stats.json beside another; none in place or to stdout",
                help="Stats JSON path (one input only).",
            ),
            config_option("YAML settings file; options given here win."),
        ],
    )


def stage_options(func: F) -> F:
    """The options of ``compress`` that choose the stages and set their options."""
    return _apply(
        func,
        [
            option(
                "--stages",
                metavar="LIST",
                shown="placeholder,summary,priority",
                help="Stages in order, comma-separated, from: window, placeholder, summary, "
                "priority.",
            ),
            budget_options,
            option(
                "--keep-last",
                type=Whole(min=0),
                metavar="N",
                shown="window 10, summary: the budget decides",
                hide_range=True,
                help="Messages the window keeps, and the most the summary keeps after what it "
                "folds.",
            ),
            option(
                "--summary-role",
                type=click.Choice(["user", "system"]),
                shown="user",
                help="Role of the summary message (system suits OpenAI only).",
            ),
            option(
                "--summary-max-tokens",
                type=Whole(min=1),
                metavar="N",
                shown="none: the budget decides",
                hide_range=True,
                help="Cap on the summaries of a conversation in tokens, headers included.",
            ),
            option(
                "--priority-order",
                metavar="LIST",
                shown="assistant,user,tool,summary",
                help="Classes of messages the priority stage drops first.",
            ),
            format_options(),
            placeholder_options,
        ],
    )


def placeholder_options(func: F) -> F:
    """The options of the placeholder stage, and where its originals go."""
    return _apply(
        func,
        [
            option(
                "--placeholder-threshold",
                type=Whole(min=0),
                metavar="N",
                shown="500",
                hide_range=True,
                help="Replace tool results over this many tokens with placeholders.",
            ),
            option(
                "--placeholder-keep-recent",
                type=Whole(min=0),
                metavar="N",
                shown="3",
                hide_range=True,
                help="The last N tool results stay whole.",
            ),
            option(
                "--store",
                "store_path",
                metavar="PATH",
                shown="<output stem>.store.jsonl beside a .jsonl output, <output name>"
                ".store.jsonl beside another",
                help="Store of the originals placeholders replaced; one named here is "
                "added to, never replaced, so outputs may share it.",
            ),
        ],
    )


def run_options(func: F) -> F:
    """The options of ``compress`` that say how it runs and what its exit status says."""
    return _apply(
        func,
        [
            on_error_option("On a bad line: stop, or copy it unchanged and go on."),
            option(
                "-j",
                "--jobs",
                type=Whole(min=1),
                metavar="N",
                shown="one per usable core for inputs of 8 MB or more, else 1",
                hide_range=True,
                help="Worker processes.",
            ),
            option(
                "--engine",
                type=click.Choice(["local", "ray"]),
                default="local",
                shown="local",
                help="local (this machine) or ray (a Ray Data pipeline; needs ctxcli[ray]).",
            ),
            option(
                "--ray-address",
                metavar="ADDRESS",
                shown="a local Ray started for the run",
                help="With --engine ray: the cluster (auto: the one this machine belongs to).",
            ),
            option(
                "--check",
                is_flag=True,
                shown="off",
                help="Exit 3 if a conversation stays over budget.",
            ),
            option(
                "--score",
                is_flag=True,
                shown="off",
                help="Also measure fact retention against the input, as ctxcli score does: "
                "in the stats (score) and a line of the table.",
            ),
            option("-q", "--quiet", is_flag=True, shown="off", help="No progress bar or table."),
        ],
    )


#: What ``compress --help`` says of the stage options that only a config file sets;
#: a test holds it to the stages' own option fields.
CONFIG_ONLY = """\
Config-only options (set them in the --config file, under the stage's name):

\b
  placeholder: exclude_tools   tools whose results stay whole [none]
               tool_thresholds {tool: tokens}, per tool [none]
               keep_errors     results reporting an error stay whole [true]
               clear_inputs    also replace large tool-call arguments [false]
                               (over budget, the summary stage does so in
                               the kept part first, but for exclude_tools)
               head_chars      preview characters kept at the start [100]
               tail_chars      preview characters kept at the end [50]
               facts           list the ids a preview omits [true in the
                               default pipeline, else false]
               until_fit       only while over the budget [true in the
                               default pipeline, else false: --stages
                               placeholder alone replaces every large result]
  summarizer:  retries         retries of a failed model request [2]
               template        the prompt file [the packaged summary.md]
"""

COMPRESS_EXAMPLES = """\
Examples:

\b
  # at most 2000 tokens each, written to samples/agent_run.compressed.jsonl
  ctxcli compress samples/agent_run.jsonl --max-tokens 2000
  # tau-bench runs keep their messages under "traj": compress them to stdout
  ctxcli compress runs.json --messages-key traj --max-tokens 4000 -o - | jq .
  # the CI gate: exit 1 naming each fixture --in-place would shrink
  ctxcli compress tests/fixtures --dry-run --check
"""


@cli.command(
    context_settings=CONTEXT,
    short_help="Compress conversations to a token budget.",
    epilog=CONFIG_ONLY + "\n" + COMPRESS_EXAMPLES,
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@output_options
@stage_options
@summarizer_options
@run_options
def compress(inputs: tuple[str, ...], **options: Any) -> None:
    """Compress conversations in transcript files to a token budget.

    Each INPUT is a JSONL file (one conversation per line), a JSON file holding an
    array of them or one of them (a .traj), a Parquet file (a messages column), a
    folder (searched at any depth, see --glob), or - for stdin; with --engine ray
    also s3:// paths. Records may be OpenAI, Anthropic or ShareGPT; a Claude
    Code session log is one conversation. Writes <name>.compressed.<ext> (same shape
    and format) and <name>.compressed.stats.json beside each input (or under
    --out-dir; <name>.compressed.<ext>.stats.json when <ext> is not jsonl), and a
    table on stderr. With the placeholder stage (on by default), large tool results
    become placeholders whose originals go to <name>.compressed.store.jsonl (or
    <name>.compressed.<ext>.store.jsonl); ctxcli restore puts them back. Inputs are never
    modified unless --in-place is given.

    With --summarizer llm a model writes the summaries (see the README); a summary
    that fails falls back to the extractive one, with a warning. In GitHub Actions
    (GITHUB_ACTIONS=true) every warning is also a ::warning file=...,line=...::
    annotation, and a bad input line an ::error one.

    \b
    Exit status (the first that applies):
      2  a usage error: an unknown option, a value out of its range
      1  a bad input line (nothing written for that file; the others are
         done) or setting
      3  with --check, a conversation stays over budget
      1  with --dry-run, a file would change
      5  a conversation's compressed form broke a rule and a safer one was
         written (listed under fallbacks in the stats: a ctxcli bug)
      4  a model summary fell back to the extractive one
      0  otherwise
    """
    from ctxcli import batch, github

    _stop_cleanly_on_sigterm()
    settings = _compress_settings(options)
    run = batch.Batch(
        inputs=inputs,
        **{name: options[name] for name in BATCH_OPTIONS},
        progress=not options["quiet"] and sys.stderr.isatty(),
        cache_dir=None if options["no_cache"] else _cache_dir(),
    )
    warn = batch.Warnings(_say, annotate=github.enabled(os.environ))
    status = batch.run(run, settings, warn=warn, summarizer=_summarizer)
    if status:
        sys.exit(status)


#: The options of ``compress`` that are fields of :class:`ctxcli.batch.Batch`.
BATCH_OPTIONS = (
    "output",
    "out_dir",
    "in_place",
    "dry_run",
    "globs",
    "stats_path",
    "store_path",
    "jobs",
    "engine",
    "ray_address",
    "check",
    "score",
    "quiet",
)


def _compress_settings(options: Mapping[str, Any]) -> Settings:
    """The settings of ``compress``: its config file's, with the options given here
    winning (see :func:`ctxcli.config.resolve`)."""
    from ctxcli import config

    path = options["config_path"]
    return config.resolve(
        config.load_file(path) if path else None,
        stages=options["stages"],
        stage_options=_stage_options(options),
        max_tokens=options["max_tokens"],
        model=options["model"],
        encoding=options["encoding"],
        on_error=options["on_error"],
        format=options["format_name"],
        messages_key=options["messages_key"],
        summarizer={
            "name": options["summarizer"],
            "model": options["summary_model"],
            "base_url": options["base_url"],
            "api_key_env": options["api_key_env"],
            "timeout": options["llm_timeout"],
            "concurrency": options["llm_concurrency"],
            "input_max_tokens": options["summary_input_max_tokens"],
            "cache": False if options["no_cache"] else options["cache_path"],
        },
    )


def _stage_options(options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The stage options given on the command line, by stage (see
    :func:`ctxcli.config.resolve`)."""
    stages: dict[str, dict[str, Any]] = {
        "window": {},
        "summary": {},
        "priority": {},
        "placeholder": {},
    }
    if options["keep_last"] is not None:
        stages["window"]["keep_last"] = options["keep_last"]
        stages["summary"]["keep_last"] = options["keep_last"]
    if options["summary_role"]:
        stages["summary"]["role"] = options["summary_role"]
    if options["summary_max_tokens"]:
        stages["summary"]["max_tokens"] = options["summary_max_tokens"]
    if options["priority_order"]:
        stages["priority"]["order"] = [p.strip() for p in options["priority_order"].split(",")]
    if options["placeholder_threshold"] is not None:
        stages["placeholder"]["threshold"] = options["placeholder_threshold"]
    if options["placeholder_keep_recent"] is not None:
        stages["placeholder"]["keep_recent"] = options["placeholder_keep_recent"]
    return stages


def _say(text: str) -> None:
    """A line for people, on stderr."""
    click.echo(text, err=True)


def _warning(text: str) -> None:
    """A warning for people, on stderr: ``warning: <text>``."""
    _say(f"warning: {text}")


COUNT_EXAMPLES = """\
Examples:

\b
  # tokens of each file, and of all of them
  ctxcli count samples/agent_run.jsonl samples/customer_service_zh.jsonl
  # every Claude Code session, conversation by conversation, split by role
  ctxcli count ~/.claude/projects --per-conversation --by role
  # tau-bench runs (messages under "traj"), as CSV for a spreadsheet
  ctxcli count runs.json --messages-key traj --format csv > tokens.csv
"""


@cli.command(
    context_settings=CONTEXT,
    short_help="Count the tokens of transcripts, as compress does.",
    epilog=COUNT_EXAMPLES,
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@option(
    "--per-conversation", is_flag=True, shown="off: a row per file", help="A row per conversation."
)
@option(
    "--by",
    type=click.Choice(["role"]),
    shown="none",
    help="role: also a token column per message role, and one for the overhead (reply "
    "priming and tool definitions); together they make the total.",
)
@option(
    "--format",
    "out_format",
    type=click.Choice(["table", "json", "csv"]),
    shown="table",
    default="table",
    help="table for people; json or csv for scripts. Every one ends with the total.",
)
@token_options
@format_options("--input-format")
@glob_option
@on_error_option(
    "On a bad line: leave its file out of the report (the others are counted, "
    "exit 1), or leave the line out of the counts and go on."
)
@option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    shown="none",
    help="compress's YAML settings file: its model, encoding, format, messages_key and on_error.",
)
@option(
    "--no-cache",
    is_flag=True,
    shown="cache on",
    help="Do not keep the parsed tokenizer in the user cache folder.",
)
def count(
    inputs: tuple[str, ...],
    per_conversation: bool,
    by: str | None,
    out_format: str,
    model: str | None,
    encoding: str | None,
    format_name: str | None,
    messages_key: str | None,
    globs: tuple[str, ...],
    on_error: str | None,
    config_path: str | None,
    no_cache: bool,
) -> None:
    """Count the tokens of conversations in transcript files.

    Reads every INPUT as compress does (JSONL, a JSON array or one record, a
    folder at any depth, - for stdin; OpenAI, Anthropic, ShareGPT, Claude Code
    sessions) and counts tokens by the same rule, so a file's total is compress's
    "tokens before" with the same settings. The report goes to stdout; a file with
    a bad line is left out of it, named with its line on stderr, and the run exits 1
    (with no file counted, json and csv still give their report, of zeros).
    """
    from ctxcli import batch, github
    from ctxcli.count import Counting, render
    from ctxcli.errors import InputError
    from ctxcli.inputs import expand_inputs

    counting = Counting(
        **_reading(
            config_path,
            no_cache,
            model=model,
            encoding=encoding,
            format=format_name,
            messages_key=messages_key,
            on_error=on_error,
        )
    )
    paths = expand_inputs(inputs, globs, warn=_warning)
    counts, failed = [], []
    for path in paths:
        try:
            counts.append(counting.file(path, per_conversation=per_conversation))
        except InputError as error:  # one file's bad line never costs the others
            failed.append(error)
    if counts or out_format != "table":  # a script reads a report, empty or not
        by_role = by == "role"
        click.echo(render(counts, out_format, per_conversation=per_conversation, by_role=by_role))
    if failed:
        warn = batch.Warnings(_say, annotate=github.enabled(os.environ))
        batch.raise_failed(failed, len(paths), "counted", warn)


SCORE_EXAMPLES = """\
Examples:

\b
  # the share of the facts compress kept; budget use against the budget it had
  ctxcli score samples/agent_run.jsonl samples/agent_run.compressed.jsonl
  # tau-bench runs (messages under "traj") compressed to 2000 tokens
  ctxcli score runs.json out.json --messages-key traj --max-tokens 2000
  # a row per conversation, with the facts it lost, for a script
  ctxcli score a.jsonl a.compressed.jsonl --per-conversation --format json
"""


@cli.command(
    context_settings=CONTEXT,
    short_help="Measure the facts a compressed file kept of its original.",
    epilog=SCORE_EXAMPLES,
)
@click.argument("original")
@click.argument("compressed")
@option(
    "--max-tokens",
    type=Whole(min=0, max=MAX_BUDGET),
    metavar="N",
    shown="the budget in the stats file compress wrote beside COMPRESSED, else 8000",
    hide_range=True,
    help="The budget COMPRESSED was compressed to, for budget use; 0 for none.",
)
@option(
    "--per-conversation", is_flag=True, shown="off: the file only", help="A row per conversation."
)
@option(
    "--format",
    "out_format",
    type=click.Choice(["table", "json"]),
    shown="table",
    default="table",
    help="table for people; json for scripts (with --per-conversation, each "
    "conversation's lost facts too).",
)
@token_options
@format_options("--input-format")
@option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    shown="none",
    help="compress's YAML settings file: its max_tokens, model, encoding, format, "
    "messages_key and on_error.",
)
@on_error_option(
    "On a bad line of either file: stop, or leave it out of the score and go on "
    "(compress --on-error keep copies it to its output)."
)
@option(
    "--no-cache",
    is_flag=True,
    shown="cache on",
    help="Do not keep the parsed tokenizer in the user cache folder.",
)
def score(
    original: str,
    compressed: str,
    max_tokens: int | None,
    per_conversation: bool,
    out_format: str,
    model: str | None,
    encoding: str | None,
    format_name: str | None,
    messages_key: str | None,
    config_path: str | None,
    on_error: str | None,
    no_cache: bool,
) -> None:
    """Measure how many facts of ORIGINAL its compressed form COMPRESSED kept.

    Facts are identifiers and numbers, dates, amounts, file paths and error lines
    taken from the non-system messages of each conversation of ORIGINAL; one is kept
    when its text is anywhere in the conversation in the same place of COMPRESSED
    (the README defines each kind). Both files are read as compress reads them
    (either may be - for stdin). Also reports tokens before and after and budget use (tokens after /
    budget, median over the conversations that were over budget). The report goes to
    stdout.
    """
    from ctxcli.inputs import refuse_stdin_twice
    from ctxcli.score import render
    from ctxcli.scoring import Scoring

    twice = "ORIGINAL and COMPRESSED cannot both be - (stdin is read once)"
    refuse_stdin_twice([original, compressed], twice)  # ``/dev/stdin`` too

    if max_tokens is None and not _config_has(config_path, "max_tokens"):
        max_tokens = _budget_compressed_to(compressed)
    scoring = Scoring(
        **_reading(
            config_path,
            no_cache,
            max_tokens=max_tokens,
            model=model,
            encoding=encoding,
            format=format_name,
            messages_key=messages_key,
            on_error=on_error,
        )
    )
    scored = scoring.file(original, compressed, per_conversation=per_conversation)
    click.echo(render(scored, out_format, per_conversation=per_conversation))


VALIDATE_EXAMPLES = """\
Examples:

\b
  # check what compress wrote
  ctxcli validate samples/agent_run.compressed.jsonl
  # a SWE-agent trajectory keeps its messages under "history"
  ctxcli validate run.traj --messages-key history
"""


@cli.command(
    context_settings=CONTEXT,
    short_help="Check transcripts against their formats' rules.",
    epilog=VALIDATE_EXAMPLES,
)
@click.argument("inputs", nargs=-1, required=True, metavar="FILE...")
@format_options()
def validate(inputs: tuple[str, ...], format_name: str | None, messages_key: str | None) -> None:
    """Check transcripts against the rules of their formats.

    Prints each problem (tool calls without results, results without calls, a first
    message the provider rejects, altered thinking blocks, broken session links) with
    its file and line, and exits 1 if there is any. A folder is read at any depth, the
    files compress wrote in it included (not its stores and stats). In GitHub Actions
    (GITHUB_ACTIONS=true) each is also an ::error annotation on its file and line.
    """
    from ctxcli import github
    from ctxcli.inputs import find_inputs
    from ctxcli.validate import validate_file

    in_actions = github.enabled(os.environ)
    count = 0
    paths = [found.path for found in find_inputs(inputs, outputs=True, warn=_warning)]
    for path in paths:
        for problem in validate_file(path, format=format_name, messages_key=messages_key):
            click.echo(str(problem))
            if in_actions:
                click.echo(
                    github.command("error", problem.reason, file=problem.path, line=problem.line),
                    err=True,
                )
            count += 1
    if count:
        click.echo(f"error: {count} problem(s) in {len(paths)} file(s)", err=True)
        sys.exit(1)
    click.echo(f"ok: {len(paths)} file(s), no problems", err=True)


def _config_has(config_path: str | None, name: str) -> bool:
    """Whether the config file at ``config_path`` (if any) sets ``name``."""
    from ctxcli import config

    return config_path is not None and name in config.load_file(config_path)


def _budget_compressed_to(compressed: str) -> int | None:
    """The ``max_tokens`` of the stats file compress wrote beside ``compressed``
    (:func:`ctxcli.inputs.default_stats`; 0 where it had none), when there is one
    whose output has the name of ``compressed``; else ``None``. ``score out.jsonl`` after
    ``compress --max-tokens 2000`` had measured the budget use against 8000."""
    import json

    from ctxcli.inputs import default_stats

    if compressed == "-":
        return None
    try:
        with open(default_stats(compressed), "rb") as file:
            stats = json.loads(file.read(1_000_000))
    except (OSError, ValueError):
        return None
    if not isinstance(stats, dict) or not isinstance(stats.get("output"), str):
        return None
    budget = stats.get("max_tokens", 0) or 0
    # as compress named it, from its own folder: the name is what tells
    same = os.path.basename(stats["output"]) == os.path.basename(compressed)
    return budget if same and isinstance(budget, int) and budget >= 0 else None


def _reading(config_path: str | None, no_cache: bool, **options: Any) -> dict[str, Any]:
    """The keyword arguments of a command that reads as compress does (``count``,
    ``score``): its settings from the config file and ``options``, warnings to stderr,
    the user cache unless ``no_cache``."""
    from ctxcli import config

    file_settings = config.load_file(config_path) if config_path else None
    return {
        "settings": config.resolve(file_settings, **options),
        "warn": _warning,
        "cache_dir": None if no_cache else _cache_dir(),
    }


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


RESTORE_EXAMPLES = """\
Examples:

\b
  # the original transcript again, from the store beside the compressed file
  ctxcli restore samples/agent_run.compressed.jsonl -o agent_run.jsonl
  # a fixture compressed --in-place: its store, run.store.jsonl, is beside it
  ctxcli restore tests/fixtures/run.jsonl -o run.original.jsonl
"""


@cli.command(
    context_settings=CONTEXT,
    short_help="Put the originals back in place of placeholders.",
    epilog=RESTORE_EXAMPLES,
)
@click.argument("compressed")
@option(
    "--store",
    "store_path",
    metavar="PATH",
    shown="<stem>.store.jsonl beside COMPRESSED",
    help="The store compress wrote (where compress writes it for that output).",
)
@click.option(
    "-o", "--output", default="-", show_default=True, help="Output file, or - for stdout."
)
def restore(compressed: str, store_path: str | None, output: str) -> None:
    """Put the originals back in place of the placeholders in a compressed file.

    Lines without placeholders are written back as they are. Placeholders the store
    cannot resolve are an error naming them (exit 1), and nothing is written.
    """
    from ctxcli.batch import plural
    from ctxcli.inputs import store_of
    from ctxcli.store import restore_file

    if store_path is None:
        store_path = store_of(compressed)
        if store_path is None:
            raise click.UsageError("give --store when the compressed file is read from stdin")

    stats = restore_file(compressed, output, store_path)
    if stats.store_missing:  # and nothing needed it: restoring from it would have failed
        click.echo(
            f"restored nothing: {compressed} has no placeholders ({plural(stats.records, 'record')}"
            f" written back unchanged; {store_path} does not exist, and was not needed)",
            err=True,
        )
    else:
        click.echo(
            f"restored {plural(stats.placeholders, 'placeholder')} ({stats.chars:,} characters)"
            f" in {stats.changed:,} of {plural(stats.records, 'record')} from {store_path}",
            err=True,
        )
    if stats.earlier:
        click.echo(
            f"note: {plural(len(stats.earlier), 'placeholder')} of an earlier run "
            f"{'stays' if len(stats.earlier) == 1 else 'stay'} as "
            f"{compressed} had them; restore the result with that run's store too (or "
            "give both stores joined into one file)",
            err=True,
        )
