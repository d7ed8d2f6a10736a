"""Help that teaches: defaults, stage names, config-only options, examples that parse."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ctxcli import cli as cli_module
from ctxcli.cli import cli
from ctxcli.formats import FORMATS
from ctxcli.inputs import DEFAULT_GLOBS
from ctxcli.pipeline import STAGES

#: Stage options that have a flag of their own; every other option of a stage must be
#: listed under "Config-only options" in compress --help.
FLAGGED = {
    "placeholder": {"threshold", "keep_recent"},
    "summary": {"keep_last", "role", "max_tokens"},
    "window": {"keep_last"},
    "priority": {"order"},
}


def commands() -> Iterator[tuple[list[str], click.Command]]:
    def walk(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
        yield path, command
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, [*path, name])

    yield from walk(cli, [])


COMMANDS = [
    pytest.param(path, command, id=" ".join(path) or "ctxcli") for path, command in commands()
]


def help_of(path: list[str]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    too_wide = [line for line in result.output.splitlines() if len(line) > 80]
    assert not too_wide, too_wide  # examples and notes are kept as written: keep them short
    return result.output


@pytest.mark.parametrize(("path", "command"), COMMANDS)
def test_every_option_shows_its_default(path: list[str], command: click.Command) -> None:
    ctx = click.Context(command, info_name=path[-1] if path else "ctxcli")
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in ("help", "version"):
            continue
        record = param.get_help_record(ctx)
        assert record is not None and "default:" in record[1], f"{path} {param.opts}"
        assert not re.search(r"x[<>]=", record[1]), f"{path} {param.opts}: {record[1]}"


@pytest.mark.parametrize(("path", "command"), COMMANDS)
def test_every_help_ends_with_two_or_three_examples_that_parse(
    path: list[str], command: click.Command
) -> None:
    text = help_of(path)
    examples = [line.strip() for line in text.split("Examples:")[-1].splitlines() if line.strip()]
    runs = [line for line in examples if not line.startswith("#")]
    assert 2 <= len(runs) <= 3, text
    assert all(line.startswith("ctxcli ") for line in runs), runs
    assert text.rstrip().endswith(runs[-1])
    for line in runs:
        words = shlex.split(line)[1:]
        cut = next((i for i, w in enumerate(words) if w in ("|", ">", "||", "&&")), len(words))
        parse(words[:cut])


def parse(args: list[str]) -> None:
    """Parse ``args`` as the command line would, without running the command."""
    command: click.Command = cli
    ctx = click.Context(cli)
    while isinstance(command, click.Group):
        found = command.get_command(ctx, args[0])
        assert found is not None, args
        command, args = found, args[1:]
        ctx = click.Context(command)
    try:
        command.make_context(command.name or "", list(args))
    except click.BadParameter as exc:
        assert "does not exist" in str(exc), exc  # an example folder such as ~/.agents/skills


def test_the_command_list_is_not_cut() -> None:
    listing = help_of([]).split("Commands:")[1].split("Examples:")[0]
    assert "..." not in listing
    lines = [line.split(None, 1) for line in listing.strip().splitlines()]
    assert [name for name, _ in lines] == [
        "compress",
        "count",
        "restore",
        "score",
        "skills",
        "validate",
    ]


def test_compress_help_names_the_stages_formats_and_globs() -> None:
    text = " ".join(help_of(["compress"]).split())
    assert f"from: {', '.join(STAGES)}." in text
    unwrapped = re.sub(r"(?<=\w-) ", "", text)  # "gemini-" / "checkpoint" broke at the hyphen
    assert f"this format: {', '.join(cli_module.FORMAT_NAMES)}." in unwrapped
    assert f"[default: {', '.join(DEFAULT_GLOBS)}]" in text
    assert "--max-tokens N Token budget per conversation; 0 for none. [default: 8000]" in text
    assert sorted(FORMATS) == sorted(cli_module.FORMAT_NAMES)


def test_config_only_options_are_listed_in_compress_help() -> None:
    listed = cli_module.CONFIG_ONLY
    text = help_of(["compress"])
    assert "Config-only options" in text
    for name, cls in STAGES.items():
        for field in dataclasses.fields(cls):
            if field.name not in FLAGGED[name]:
                assert f"{name}:" in listed and f" {field.name} " in listed, (name, field.name)
    for key in ("retries", "template"):
        assert f" {key} " in listed


def test_the_readme_shows_every_example_of_the_help() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for path, _ in commands():
        examples = help_of(path).split("Examples:")[-1].splitlines()
        for line in (line.strip() for line in examples):
            assert not line or line in readme, f"README lacks {line!r} ({' '.join(path)} --help)"


def test_the_command_list_says_the_skills_line_as_the_group_does() -> None:
    from ctxcli.skills_cli import skills

    assert skills.get_short_help_str(200) == cli_module.SKILLS_HELP


def test_input_format_names_the_transcripts_format_in_every_command() -> None:
    """A new user found --format meaning the input's format in compress and validate
    and the report's in count and score (which read --input-format): --input-format
    now works in all four."""
    from ctxcli.cli import cli

    sample = str(Path(__file__).resolve().parents[1] / "samples" / "agent_run.jsonl")
    for command in (["compress", "-o", os.devnull, "-q"], ["validate"], ["count"]):
        result = CliRunner().invoke(cli, [*command, sample, "--input-format", "openai"])
        assert result.exit_code == 0, (command, result.output)
    refused = CliRunner().invoke(cli, ["validate", sample, "--input-format", "anthropic"])
    assert refused.exit_code == 1  # read as Anthropic records, they are not


def test_an_empty_messages_key_is_a_usage_error() -> None:
    # It was taken as no key at all, and the run went on with the format's own.
    from ctxcli.cli import cli

    sample = str(Path(__file__).resolve().parents[1] / "samples" / "agent_run.jsonl")
    for command in (["compress", "-o", os.devnull], ["validate"], ["count"]):
        result = CliRunner().invoke(cli, [*command, sample, "--messages-key", " "])
        assert result.exit_code == 2, (command, result.output)
        assert "Invalid value for '--messages-key': is empty" in result.output
    # nor from Python: the API takes what the flag does
    from ctxcli.api import count_tokens, validate_file
    from ctxcli.errors import ConfigError

    for function in (count_tokens, validate_file):
        with pytest.raises(ConfigError, match="messages_key must be a string that is not empty"):
            function(sample, messages_key="")
