"""Tests of ctxcli.config: config files, as ``compress --config`` reads them, and resolve()."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import run_cli_bounded, yaml_bomb

from ctxcli import config, summarizers
from ctxcli.cli import cli
from ctxcli.errors import ConfigError
from ctxcli.pipeline import STAGES

CHAT = {"messages": [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Yo."}]}


def compress_with(tmp_path: Path, text: str | bytes) -> Any:
    """``ctxcli compress a.jsonl --config c.yaml`` in ``tmp_path``, ``c.yaml`` holding ``text``."""
    (tmp_path / "a.jsonl").write_text(json.dumps(CHAT) + "\n")
    path = tmp_path / "c.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return CliRunner().invoke(cli, ["compress", str(tmp_path / "a.jsonl"), "--config", str(path)])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("model: [a]\n", "1: model: expected a string or null, got a list",
                     id="model-list"),
        pytest.param("max_tokens: 500\nmodel: 5\n",
                     "2: model: expected a string or null, got a whole number", id="model-int"),
        pytest.param("format: [a]\n", "1: format: expected a string or null, got a list",
                     id="format-list"),
        # taken as no key at all, silently
        pytest.param('messages_key: ""\n',
                     "1: messages_key: expected a string that is not empty or null, got ''",
                     id="messages-key-empty"),
        pytest.param("summarizer:\n  name: llm\n  cache: 5\n",
                     "3: summarizer.cache: expected a file path, true, false or null,"
                     " got a whole number", id="summarizer-cache-int"),
        pytest.param("summarizer: {timeout: soon}\n",
                     "1: summarizer.timeout: expected a number of seconds over 0, at most a day, or null, "
                     "got a string",
                     id="summarizer-timeout"),
        pytest.param("summarizer: llm\n",
                     "1: summarizer: expected a mapping of options or null, got a string",
                     id="summarizer-not-a-mapping"),
        pytest.param("encoding: 5\n", "1: encoding: expected a string or null, got a whole number",
                     id="encoding"),
        pytest.param("messages_key: {a: 1}\n",
                     "1: messages_key: expected a string that is not empty or null, got a mapping",
                     id="messages-key"),
        pytest.param("on_error: maybe\n", "1: on_error: expected one of 'fail', 'keep', got 'maybe'",
                     id="on-error"),
        pytest.param("max_tokens: '2000'\n",
                     "1: max_tokens: expected a whole number or null, got a string",
                     id="max-tokens-string"),
        pytest.param("stages: 5\n",
                     "1: stages: expected a list of stages or a comma-separated string,"
                     " got a whole number", id="stages-int"),
        pytest.param("stages:\n  - window\n  - [summary]\n",
                     "3: stages[1]: expected a stage name or {name: options}, got a list",
                     id="stage-item"),
        pytest.param("stages:\n  - summary: {keep_last: three}\n",
                     "2: stages[0].summary.keep_last: expected a whole number or null, got a string",
                     id="stage-list-option"),
        pytest.param("stages:\n  - summary: 4\n",
                     "2: stages[0].summary: expected a mapping of options or null,"
                     " got a whole number", id="stage-list-options"),
        pytest.param("window: {keep_last: 2.5}\n",
                     "1: window.keep_last: expected a whole number, got 2.5",
                     id="window-float"),
        pytest.param("summary:\n  role: [user]\n",
                     "2: summary.role: expected one of 'user', 'system', got a list",
                     id="summary-role"),
        pytest.param("summary: {max_tokens: true}\n",
                     "1: summary.max_tokens: expected a whole number or null, got true/false",
                     id="summary-bool"),
        pytest.param("priority: {order: [user, 3]}\n",
                     "1: priority.order[1]: expected a string, got a whole number",
                     id="priority-order-item"),
        pytest.param("placeholder:\n  tool_thresholds:\n    bash: lots\n",
                     "3: placeholder.tool_thresholds.bash: expected a whole number, got a string",
                     id="placeholder-thresholds"),
        pytest.param("placeholder: {keep_errors: 'no'}\n",
                     "1: placeholder.keep_errors: expected true or false, got a string",
                     id="placeholder-bool"),
        pytest.param("placeholder: {exclude_tools: {a: 1}}\n",
                     "1: placeholder.exclude_tools: expected a list of strings, got a mapping",
                     id="placeholder-tools"),
        pytest.param("placeholder: 3\n",
                     "1: placeholder: expected a mapping of options or null, got a whole number",
                     id="stage-options-int"),
    ],
)  # fmt: skip
def test_a_wrong_type_is_one_line_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    result = compress_with(tmp_path, text)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # a message, not a traceback
    assert result.output == f"Error: {tmp_path / 'c.yaml'}:{message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "c.yaml"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("summarizer:\n" + "".join(f"  {x}\n" for x in yaml_bomb().splitlines()),
                     ":3: invalid YAML: aliases are not allowed (found *l0); write the value out",
                     id="bomb"),
        pytest.param("window: &w {keep_last: 3}\nsummary: *w\n",
                     ":2: invalid YAML: aliases are not allowed (found *w); write the value out",
                     id="alias"),
        pytest.param("window: " + "[" * 600 + "]" * 600 + "\n",
                     ":1: invalid YAML: nested more than 100 levels deep", id="deep"),
        pytest.param("window: {keep_last: 3\n",
                     ":2: invalid YAML: while parsing a flow mapping, expected ',' or '}',"
                     " but got '<stream end>'", id="syntax"),
        pytest.param(b"max_tokens: 100\nmodel: \xff\n", ":2: not valid UTF-8", id="not-utf8"),
        pytest.param("# a comment\n" * 6000,
                     ": longer than 65536 bytes; not a config file", id="too-long"),
        pytest.param("- window\n", ": expected a mapping of settings, got a list", id="list"),
        # What only resolving the settings finds, named by file and line too:
        pytest.param("model: gpt-4o\nmax_tokens: -5\n",
                     ":2: max_tokens must be a whole number of tokens up to", id="budget"),
        pytest.param("model: gpt-4o\nstages: [window, bogus]\n",
                     ":2: unknown stage 'bogus'; known stages:", id="stage"),
        pytest.param("stages:\n  - placeholder\nplaceholder: {thresold: 3}\n",
                     ":3: stage 'placeholder' has no option 'thresold'", id="option"),
        # A new user's, which named no line (or no file):
        pytest.param("model: gpt-4o\nmax_tokns: 300\n",
                     ":2: unknown setting 'max_tokns'; known:", id="setting"),
        pytest.param("summarizer:\n  name: extractive\n  retrys: 3\n",
                     ":3: summarizer has no option 'retrys'; its options: name,",
                     id="summarizer-option"),
        pytest.param("model: gpt-4o\nencoding: nope\n",
                     ":2: unknown encoding 'nope' (known: cl100k_base,", id="encoding"),
        pytest.param("max_tokens: 300\nmax_tokens: 5\n",
                     ":2: invalid YAML: 'max_tokens' is given twice; give it once",
                     id="twice"),  # PyYAML kept the last, silently
        pytest.param("summary:\n  keep_last: 2\n  keep_last: 3\n",
                     ":3: invalid YAML: 'keep_last' is given twice", id="option-twice"),
        # A second breaker's: a traceback, no line, YAML 1.1's bases, a wait past a day
        pytest.param("foo: 1\n1: 2\n", ":2: unknown setting 1; known:", id="int-key"),
        pytest.param("model: gpt-4o\nformat: responsez\n",
                     ":2: unknown format 'responsez'; known formats:", id="format"),
        pytest.param("max_tokens: 010\n",
                     ":1: invalid YAML: 010 reads as a number in base 8 or 60 here", id="octal"),
        pytest.param("max_tokens: 1:30\n",
                     ":1: invalid YAML: 1:30 reads as a number in base 8 or 60 here",
                     id="sexagesimal"),
        pytest.param("summarizer:\n  timeout: 1:30.5\n",
                     ":2: invalid YAML: 1:30.5 reads as a number in base 8 or 60 here",
                     id="sexagesimal-float"),  # 90.5 seconds
        # A stage's error at its item in the list, and at the option it names:
        pytest.param("max_tokens: 300\nstages:\n  - window\n  - bogus\n",
                     ":4: unknown stage 'bogus'", id="listed-stage"),
        pytest.param("stages:\n  - window\n  - placeholder:\n      threshold: 3\n"
                     "      thresold: 3\n",
                     ":5: stage 'placeholder' has no option 'thresold'", id="listed-option"),
        pytest.param("summarizer:\n  timeout: 100000.0\n",
                     ":2: summarizer.timeout: expected a number of seconds over 0, at most a "
                     "day, or null, got 100000.0", id="timeout"),
        # Out of range whatever the summarizer's name (a new user's retries: -3 ran).
        pytest.param("summarizer:\n  retries: -3\n",
                     ":2: summarizer.retries: expected a whole number from 0 to 100 or null,"
                     " got -3", id="retries-negative"),
        pytest.param("summarizer:\n  concurrency: 0\n",
                     ":2: summarizer.concurrency: expected a whole number from 1 to 1024 or"
                     " null, got 0", id="concurrency-zero"),
        # A breaker's: past 64 bits the stats could not be written (a traceback), and
        # retries of 1e22 retried a dead endpoint without end.
        pytest.param("summarizer:\n  concurrency: 99999999999999999999999\n",
                     ":2: summarizer.concurrency: expected a whole number from 1 to 1024 or"
                     " null, got 99999999999999999999999", id="concurrency-huge"),
        pytest.param("summarizer:\n  retries: 101\n",
                     ":2: summarizer.retries: expected a whole number from 0 to 100 or null,"
                     " got 101", id="retries-huge"),
        pytest.param("summarizer:\n  timeout: 0\n",
                     ":2: summarizer.timeout: expected a number of seconds over 0, at most a "
                     "day, or null, got 0", id="timeout-zero"),
    ],
)  # fmt: skip
def test_an_unreadable_config_is_one_line_naming_file_and_line(
    tmp_path: Path, text: str | bytes, message: str
) -> None:
    result = compress_with(tmp_path, text)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.output.startswith(f"Error: {tmp_path / 'c.yaml'}{message}")
    assert result.output.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "c.yaml"]


def test_a_yaml_bomb_config_ends_fast_in_little_memory(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(CHAT) + "\n")
    # Under a known setting: ctxcli 0.x expanded it writing the value into its message.
    text = "on_error:\n" + "".join(f"  {line}\n" for line in yaml_bomb().splitlines())
    (tmp_path / "bomb.yaml").write_text(text)
    assert len(text.encode()) < 1024
    out = run_cli_bounded(
        "ctxcli.cli:cli", ["compress", "a.jsonl", "--config", "bomb.yaml"], tmp_path
    )
    assert out["exit_code"] == 1, out
    assert out["output"] == (
        "Error: bomb.yaml:3: invalid YAML: aliases are not allowed (found *l0);"
        " write the value out\n"
    ), out
    assert out["seconds"] < 1.0 and out["peak_mb"] < 100, out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "bomb.yaml"]


def test_every_setting_of_a_full_config_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "model: gpt-4o\nencoding: null\nmax_tokens: 2000\non_error: keep\nformat: openai\n"
        "messages_key: messages\n"
        "stages:\n"
        "  - placeholder: {threshold: 300, keep_recent: 1, exclude_tools: [bash],"
        " tool_thresholds: {grep: 50}, keep_errors: false, clear_inputs: true,"
        " head_chars: 10, tail_chars: 5}\n"
        "  - summary: {keep_last: 4, role: system, max_tokens: 300}\n"
        "  - window\n"
        "  - priority: {order: [assistant, tool]}\n"
        "window: {keep_last: 6}\n"
        "summarizer: {name: llm, model: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: K,"
        " timeout: 2.5, retries: 1, concurrency: 2, input_max_tokens: 1000, template: null,"
        " cache: false}\n"
    )
    settings = config.resolve(config.load_file(path))
    assert settings.stage_names == ["placeholder", "summary", "window", "priority"]
    assert (settings.model, settings.max_tokens, settings.on_error) == ("gpt-4o", 2000, "keep")
    assert settings.summarizer["timeout"] == 2.5


def test_resolve_checks_a_mapping_given_in_python() -> None:
    with pytest.raises(
        ConfigError, match=r"^config: model: expected a string or null, got a list$"
    ):
        config.resolve({"model": ["a"]})


def test_stages_on_the_command_line_keep_the_options_the_file_gives_them() -> None:
    # `--stages placeholder,priority` with a file listing `- placeholder: {…}` had
    # dropped the options: exclude_tools was ignored, with no word.
    file = {"stages": [{"placeholder": {"exclude_tools": ["read_file"]}}, "priority"]}
    for stages in (None, "placeholder,priority", "summary,placeholder"):
        settings = config.resolve(file, stages=stages)
        (placeholder,) = [s for s in settings.stages if s.name == "placeholder"]
        assert placeholder.exclude_tools == ("read_file",), stages  # type: ignore[attr-defined]
    settings = config.resolve(file, stages="placeholder", stage_options={"placeholder": {}})
    assert settings.stages[0].exclude_tools == ("read_file",)  # type: ignore[attr-defined]


def test_every_option_has_a_type_to_check() -> None:
    assert set(config._SUMMARIZER_KINDS) == set(summarizers.OPTIONS)
    for name in STAGES:
        kinds = config.stage_option_kinds(name)
        assert kinds and all(kind.expects != "anything" for kind in kinds.values()), name


@pytest.mark.parametrize(
    ("option", "value", "bounds"),
    [
        ("concurrency", 10**30, "a whole number from 1 to 1024"),
        ("retries", 101, "a whole number from 0 to 100"),
        ("retries", 2.9, "a whole number from 0 to 100"),  # was cut to 2
        ("retries", True, "a whole number from 0 to 100"),  # was 1
        ("retries", float("inf"), "a whole number from 0 to 100"),  # was OverflowError
        ("input_max_tokens", 2**53 + 1, "a whole number from 1 to 9007199254740992"),
        ("timeout", 1e10, "a number of seconds over 0 and at most 86400"),
        ("timeout", float("nan"), "a number of seconds over 0 and at most 86400"),
    ],
)
def test_the_api_holds_the_llm_options_to_their_bounds_too(
    option: str, value: Any, bounds: str
) -> None:
    """What the config file and the flags refuse, ctxcli.summarizers.build refuses as
    well (breakers found each of these passed, or failed otherwise)."""
    from ctxcli.summarizers import build

    with pytest.raises(ConfigError) as caught:
        build({"name": "llm", "model": "m", option: value})
    assert str(caught.value) == f"summarizer option {option} must be {bounds}, not {value!r}"
