"""``ctxcli compress`` as a user runs it: inputs, outputs, errors, config, stats."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl

from ctxcli import tokens
from ctxcli.cli import cli
from ctxcli.model import SUMMARY_MARKER
from ctxcli.tokens import TokenCounter

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


#: Options of a run whose only stage replaces every tool result over 50 tokens.
PLACEHOLDERS_ONLY = [
    "--stages",
    "placeholder",
    "--placeholder-threshold",
    "50",
    "--placeholder-keep-recent",
    "0",
]


def chat(n: int, *, system: bool = True, words: int = 30) -> dict[str, Any]:
    """A plain chat of ``n`` user/assistant pairs, ending on a user message."""
    messages: list[dict[str, Any]] = (
        [{"role": "system", "content": "Be helpful."}] if system else []
    )
    for i in range(n):
        messages.append({"role": "user", "content": f"Question {i}: " + "why " * words + "?"})
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "because " * words})
    messages.append({"role": "user", "content": "Last question?"})
    return {"id": f"chat-{n}", "messages": messages}


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def invoke(*args: str, input: str | bytes | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), input=input)


def test_every_command_has_help_with_an_example() -> None:
    def walk(command: Any, path: list[str]) -> None:
        result = invoke(*path, "--help")
        assert result.exit_code == 0, path
        assert "Examples:" in result.output, f"{' '.join(path) or 'ctxcli'} --help has no example"
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(cli, [])


def test_writes_output_and_stats_beside_the_input(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "logs.jsonl", [chat(3), chat(40)])
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    result = invoke("compress", str(source), "--max-tokens", "300")
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(source.read_bytes()).hexdigest() == digest
    out = tmp_path / "logs.compressed.jsonl"
    stats = json.loads((tmp_path / "logs.compressed.stats.json").read_text())
    assert "logs.jsonl  2" in result.output and f"wrote {out}" in result.output
    lines_in = source.read_text().splitlines()
    lines_out = out.read_text().splitlines()
    assert lines_out[0] == lines_in[0]  # under budget: the same bytes
    counter = TokenCounter("o200k_base")
    before, after = read_jsonl(source), read_jsonl(out)
    for b, a in zip(before, after):
        assert_valid(b, a, counter, max_tokens=300)
    assert stats["conversations"] == 2
    assert stats["conversations_changed"] == 1
    assert stats["tokens"]["before"] == sum(counter.messages(r["messages"]) for r in before)
    assert stats["tokens"]["after"] == sum(counter.messages(r["messages"]) for r in after)
    assert stats["messages"] == {
        "before": 3 * 2 + 2 + 40 * 2 + 2,
        "after": len(after[0]["messages"]) + len(after[1]["messages"]),
    }
    assert stats["stage_events"]["summary"]["summaries_written"] == 1
    assert stats["by_role"]["summary"]["messages_after"] == 1
    assert stats["over_budget"] == [] and stats["errors"] == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        pytest.param("{not json", "invalid JSON", id="not-json"),
        pytest.param("[1, 2]", "expected a JSON object, got an array", id="not-object"),
        pytest.param(
            '{"id": 1}', "no format fits this record (tried sharegpt, anthropic", id="no-messages"
        ),
        pytest.param(
            "{}",
            "no format fits this record (tried sharegpt, anthropic, gemini, gemini-cli, "
            "responses, openai); keys: none (an empty object); --format",
            id="empty-object",
        ),
        pytest.param('{"messages": [{"content": "hi"}]}', "message 0 has no 'role'", id="no-role"),
        pytest.param(
            '{"messages": ["hi"]}', "message 0 is a string, not an object", id="not-message"
        ),
        pytest.param(
            '{"messages": [{"role": "bot", "content": "x"}]}',
            "message 0 has unknown role 'bot'",
            id="bad-role",
        ),
    ],
)
def test_a_bad_line_names_file_and_line_and_leaves_no_output(
    tmp_path: Path, line: str, reason: str
) -> None:
    source = tmp_path / "bad.jsonl"
    good = json.dumps(chat(2))
    source.write_text(f"{good}\n{good}\n{line}\n{good}\n")
    result = invoke("compress", str(source), "--max-tokens", "100")
    assert result.exit_code == 1
    assert f"Error: {source}:3: {reason}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_a_bad_line_in_one_file_of_a_folder_costs_only_that_file(tmp_path: Path) -> None:
    """``compress .`` stopped at the first file with a bad line: the files before it
    were written with no line saying so, those after it were never read."""
    good = json.dumps(chat(6)) + "\n"
    for name, text in (("a", good), ("b", good + "{bad\n"), ("c", good), ("d", "[1]\n")):
        (tmp_path / f"{name}.jsonl").write_text(text)
    result = invoke("compress", str(tmp_path), "--max-tokens", "100")
    assert result.exit_code == 1, result.output
    written = sorted(p.name for p in tmp_path.glob("*.compressed.jsonl"))
    assert written == ["a.compressed.jsonl", "c.compressed.jsonl"]
    lines = result.output.splitlines()
    assert "error: 2 of 4 files not written:" in lines
    assert f"error: {tmp_path / 'b.jsonl'}:2: invalid JSON" in result.output
    assert lines[-1].startswith(f"Error: {tmp_path / 'd.jsonl'}")


def test_on_error_keep_copies_bad_lines_and_lists_them(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(f"{json.dumps(chat(2))}\n[1]\n{json.dumps(chat(30))}\n")
    result = invoke("compress", str(source), "--max-tokens", "300", "--on-error", "keep")
    assert result.exit_code == 0, result.output
    assert f"warning: {source}:2: expected a JSON object" in result.output
    lines = (tmp_path / "bad.compressed.jsonl").read_text().splitlines()
    assert lines[1] == "[1]" and len(lines) == 3
    stats = json.loads((tmp_path / "bad.compressed.stats.json").read_text())
    assert stats["errors"] == [{"line": 2, "reason": "expected a JSON object, got an array"}]
    assert stats["conversations"] == 2


def test_bom_crlf_and_blank_lines_are_accepted(tmp_path: Path) -> None:
    source = tmp_path / "win.jsonl"
    body = "\r\n".join([json.dumps(chat(1)), "", json.dumps(chat(25)), ""])
    source.write_bytes(b"\xef\xbb\xbf" + body.encode())
    result = invoke("compress", str(source), "--max-tokens", "300")
    assert result.exit_code == 0, result.output
    records = read_jsonl(tmp_path / "win.compressed.jsonl")
    assert [r["id"] for r in records] == ["chat-1", "chat-25"]
    stats = json.loads((tmp_path / "win.compressed.stats.json").read_text())
    assert stats["over_budget"] == []
    output = (tmp_path / "win.compressed.jsonl").read_bytes()
    assert output.startswith(b"\xef\xbb\xbf") and output.count(b"\r\n") == 2  # kept


def test_stdin_to_stdout_carries_only_data() -> None:
    records = [chat(2), chat(30)]
    text = "".join(json.dumps(r) + "\n" for r in records)
    result = CliRunner().invoke(cli, ["compress", "-", "--max-tokens", "300", "-q"], input=text)
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in out] == ["chat-2", "chat-30"]
    assert out[0] == records[0]


def test_stdin_into_an_out_dir_is_named_stdin(tmp_path: Path) -> None:
    # It had been "-.compressed.jsonl": `rm -.compressed.jsonl` reads as options.
    text = json.dumps(chat(30)) + "\n"
    out = tmp_path / "o"
    args = ["compress", "-", "--out-dir", str(out), "--max-tokens", "300", "-q"]
    result = CliRunner().invoke(cli, args, input=text)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "stdin.compressed.jsonl",
        "stdin.compressed.stats.json",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["count", "-", "-"], "stdin (-) is named more than once; it can be read only once"),
        (["count", "/dev/stdin", "/dev/stdin"], "stdin (-) is named more than once"),
        (["validate", "-", "/dev/stdin"], "stdin (-) is named more than once"),
        (["validate", "-", "-"], "stdin (-) is named more than once"),
        (["count", "-", "/dev//stdin"], "stdin (-) is named more than once"),  # read twice
        (["score", "/dev/./stdin", "-"], "ORIGINAL and COMPRESSED cannot both be -"),
        (["compress", "-", "-", "--out-dir", "o"], "stdin (-) is named more than once"),
        (["score", "-", "-"], "ORIGINAL and COMPRESSED cannot both be - (stdin is read once)"),
    ],
)
def test_stdin_named_twice_is_a_usage_error(args: list[str], message: str) -> None:
    """``cat a.jsonl | ctxcli count - -`` printed a second row of 0 conversations, and
    ``score - -`` said "- holds 0 conversations but - holds 9"."""
    result = CliRunner().invoke(cli, args, input=json.dumps(chat(2)) + "\n")
    assert result.exit_code == 2 and message in result.output


def test_a_compressed_input_is_named_so(tmp_path: Path) -> None:
    """A gzip file said "not valid UTF-8 (at byte 2 of the line)"."""
    import gzip

    source = tmp_path / "a.jsonl.gz"
    source.write_bytes(gzip.compress((json.dumps(chat(2)) + "\n").encode()))
    for command in ("compress", "count"):
        result = invoke(command, str(source))
        assert result.exit_code == 1
        assert (
            f"{source}: is gzip-compressed; decompress it first (`zcat {source}` writes its "
            "text; - reads stdin)"
        ) in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl.gz"]


@pytest.mark.parametrize(("encoding", "named"), [("utf-16", "UTF-16LE"), ("utf-32", "UTF-32LE")])
def test_a_utf16_input_is_named_so(tmp_path: Path, encoding: str, named: str) -> None:
    """A new user's UTF-16 file (as Windows tools write them) said only "not valid
    UTF-8 (at byte 1)"."""
    source = tmp_path / "a.jsonl"
    source.write_bytes((json.dumps(chat(2)) + "\n").encode(encoding))  # with its mark
    for command in ("compress", "count", "validate"):
        result = invoke(command, str(source))
        assert result.exit_code == 1
        assert (
            f"{source}: is {named} (its byte order mark says so), not UTF-8; convert it first"
            f" (`iconv -f {named[:6]} -t UTF-8 {source}` writes it as UTF-8)"
        ) in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_a_folder_takes_a_transcript_whatever_the_case_of_its_suffix(tmp_path: Path) -> None:
    """``RUN.JSONL`` in a folder: "no *.jsonl … files in this folder"; named, its stats
    were ``RUN.compressed.JSONL.stats.json``."""
    write_jsonl(tmp_path / "RUN.JSONL", [chat(2)])
    result = invoke("compress", str(tmp_path), "-q")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "RUN.JSONL",
        "RUN.compressed.JSONL",
        "RUN.compressed.stats.json",
    ]


def test_a_folder_input_skips_what_ctxcli_wrote(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [chat(1)])
    write_jsonl(tmp_path / "b.jsonl", [chat(1)])
    assert invoke("compress", str(tmp_path)).exit_code == 0
    result = invoke("compress", str(tmp_path), "--out-dir", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "a.compressed.jsonl",
        "a.compressed.stats.json",
        "b.compressed.jsonl",
        "b.compressed.stats.json",
    ]


def test_the_output_never_overwrites_the_input(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(1)])
    before = source.read_bytes()
    result = invoke("compress", str(source), "-o", str(source))
    assert result.exit_code == 1
    assert "would overwrite the input" in result.output
    assert source.read_bytes() == before
    # Two inputs, one the other's default output: the message names whose it is.
    other = write_jsonl(tmp_path / "a.compressed.jsonl", [chat(2)])
    result = invoke("compress", str(source), str(other))
    assert result.exit_code == 1
    assert f"{other}: the output of {source} would overwrite the input {other}" in result.output


def test_one_output_path_takes_one_input(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [chat(1)])
    result = invoke("compress", str(a), str(a), "-o", str(tmp_path / "x.jsonl"))
    assert result.exit_code == 2  # options that cannot go together: a usage error
    assert "use --out-dir for several" in result.output
    for option in ("--store", "--stats"):
        result = invoke("compress", str(a), "-o", "-", option, "-")
        assert result.exit_code == 2
        assert f"{option} cannot be -" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--stages", "window,shrink"], "unknown stage 'shrink'; known stages: ", id="stage"
        ),
        pytest.param(["--priority-order", "assistant,bogus"], "unknown class 'bogus'", id="class"),
        pytest.param(
            ["--priority-order", "assistant,assistant"],
            "class 'assistant' is in order twice; name each once",
            id="class-twice",
        ),
        pytest.param(["--encoding", "nope_base"], "unknown encoding 'nope_base'", id="encoding"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, args: list[str], message: str) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(1)])
    result = invoke("compress", str(source), *args)
    assert result.exit_code == 1
    assert message in result.output


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "'abc' is not a valid whole number."),  # Click's: "integer range"
        ("-4", "-4 is not in the range x>=0 (at most 2^53)."),  # not 9007199254740992
    ],
)
def test_a_bad_budget_is_named_in_words_a_user_knows(
    tmp_path: Path, value: str, message: str
) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(1)])
    result = invoke("compress", str(source), "--max-tokens", value)
    assert result.exit_code == 2
    assert f"Invalid value for '--max-tokens': {message}" in result.output


def test_config_file_with_command_line_overrides(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    config = tmp_path / "ctxcli.yaml"
    config.write_text(
        "max_tokens: 400\nencoding: cl100k_base\nstages:\n  - window: {keep_last: 4}\n"
    )
    assert invoke("compress", str(source), "--config", str(config)).exit_code == 0
    out = read_jsonl(tmp_path / "a.compressed.jsonl")[0]
    assert len(out["messages"]) == 1 + 4  # the system message and the last 4
    stats = json.loads((tmp_path / "a.compressed.stats.json").read_text())
    assert (stats["encoding"], stats["max_tokens"], stats["stages"]) == (
        "cl100k_base",
        400,
        ["window"],
    )
    result = invoke(
        "compress", str(source), "--config", str(config), "--keep-last", "8", "--max-tokens", "5000"
    )
    assert result.exit_code == 0, result.output
    out = read_jsonl(tmp_path / "a.compressed.jsonl")[0]
    assert len(out["messages"]) == 1 + 8


def test_config_errors_name_the_file(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(1)])
    config = tmp_path / "bad.yaml"
    config.write_text("stages: [window]\nwindow: {keep_lsat: 3}\n")
    result = invoke("compress", str(source), "--config", str(config))
    assert result.exit_code == 1
    assert "stage 'window' has no option 'keep_lsat'; its options: keep_last" in result.output
    config.write_text("budget: 3\n")
    result = invoke("compress", str(source), "--config", str(config))
    assert f"{config}:1: unknown setting 'budget'" in result.output


def test_a_second_run_merges_into_the_one_summary(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    first = tmp_path / "first.jsonl"
    assert invoke("compress", str(source), "-o", str(first), "--max-tokens", "600").exit_code == 0
    record = read_jsonl(first)[0]
    for i in range(10):  # the conversation goes on, then is compressed again
        record["messages"] += [
            {"role": "assistant", "content": f"Later answer {i}: " + "so " * 30},
            {"role": "user", "content": f"Later question {i}, order ORD-{i}77?"},
        ]
    write_jsonl(tmp_path / "longer.jsonl", [record])
    second = tmp_path / "second.jsonl"
    result = invoke(
        "compress", str(tmp_path / "longer.jsonl"), "-o", str(second), "--max-tokens", "600"
    )
    assert result.exit_code == 0, result.output
    messages = read_jsonl(second)[0]["messages"]
    summaries = [m for m in messages if str(m.get("content", "")).startswith(SUMMARY_MARKER)]
    assert len(summaries) == 1
    assert "Question 0" in summaries[0]["content"]  # carried over from the first summary
    assert "ORD-077" in summaries[0]["content"]  # added by the second
    folded = int(summaries[0]["content"].split("]")[1].split()[0])
    assert folded > 60


def test_check_fails_only_when_something_is_over_budget(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(3)])
    assert invoke("compress", str(source), "--check", "--max-tokens", "5000").exit_code == 0
    result = invoke("compress", str(source), "--check", "--max-tokens", "10")
    assert result.exit_code == 3
    assert "over budget" in result.output


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ctxcli", "--help"], capture_output=True, text=True, check=True
    )
    assert "compress" in result.stdout


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev//stdout", "/dev/../dev/./stdout"])
def test_dev_stdout_is_stdout_whatever_it_leads_to(tmp_path: Path, name: str) -> None:
    """``-o /dev/stdout > o.jsonl``: /dev/stdout led to a regular file, so the run took
    it for one and wrote /dev/stdout.store.jsonl and /dev/stdout.stats.json into /dev
    (as root; shared by every run); so did other spellings of the name. It is stdout:
    the store goes beside the input, as with -o -, and no stats file is written. And
    it is appended to, as a shell's '>>' asks: opened anew with "wb", it was emptied."""
    source = tmp_path / "a.jsonl"
    source.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    log = tmp_path / "o.jsonl"
    log.write_text('{"id": "earlier", "messages": []}\n')
    args = [sys.executable, "-m", "ctxcli", "compress", "a.jsonl", "-o", name]
    with log.open("ab") as out:
        subprocess.run(
            [*args, "--stages", "placeholder", "-q"], cwd=tmp_path, stdout=out, check=True
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a.store.jsonl", "o.jsonl"]
    assert [r["id"] for r in read_jsonl(log)] == ["earlier", "agent-billing-fix-001"]


def test_stdin_from_a_private_file_gives_private_outputs(tmp_path: Path) -> None:
    """``compress - -o out.jsonl < private.jsonl``: stdin is the 0600 file, and what is
    made of it came out 0644 (given as /dev/stdin, 0600)."""
    source = tmp_path / "private.jsonl"
    source.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    source.chmod(0o600)
    args = [sys.executable, "-m", "ctxcli", "compress", "-", "-o", "out.jsonl", "-q"]
    with source.open("rb") as given:
        subprocess.run([*args, "--max-tokens", "2000"], cwd=tmp_path, stdin=given, check=True)
    made = ["out.jsonl", "out.stats.json", "out.store.jsonl"]
    assert {stat.S_IMODE((tmp_path / name).stat().st_mode) for name in made} == {0o600}


def test_dev_stdin_from_a_file_to_stdout_says_why_the_originals_went(tmp_path: Path) -> None:
    """``compress /dev/stdin -o - < a.jsonl``: the store was /dev/null, as for a pipe
    (inputs decided it by jsonio.is_stream), but the line that says why asked
    os.path.isfile, which /dev/stdin leading to a file is: '/dev takes no new file'."""
    source = tmp_path / "a.jsonl"
    source.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    args = [sys.executable, "-m", "ctxcli", "compress", "/dev/stdin", "-o", "-", "-q"]
    with source.open("rb") as given:
        done = subprocess.run(
            [*args, "--stages", "placeholder"], stdin=given, capture_output=True, check=True
        )
    assert done.stderr.decode() == (
        "warning: threw away 4 originals (the store is /dev/null): from a pipe to stdout there"
        " is no file to keep them beside; --store PATH keeps them for `ctxcli restore`\n"
    )


def test_in_place_refuses_a_stream_as_it_refuses_stdin(tmp_path: Path) -> None:
    """``compress /dev/fd/3 --in-place 3< a.jsonl`` rewrote a.jsonl behind the name,
    where ``- --in-place`` is refused."""
    source = tmp_path / "a.jsonl"
    source.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    with source.open("rb") as held:
        fd = held.fileno()
        args = ["compress", f"/dev/fd/{fd}", "--in-place", "--max-tokens", "2000"]
        result = invoke(*args)
    assert result.exit_code == 2
    assert f"--in-place needs files: /dev/fd/{fd} is a pipe or stream" in result.output
    assert source.read_bytes() == (SAMPLES / "agent_run.jsonl").read_bytes()


@pytest.mark.parametrize("name", ["customer_service_zh.jsonl", "agent_run.jsonl"])
def test_the_samples_compress_within_budget(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out.jsonl"
    result = invoke("compress", str(SAMPLES / name), "-o", str(out), "--max-tokens", "800")
    assert result.exit_code == 0, result.output
    counter = TokenCounter("o200k_base")
    for before, after in zip(read_jsonl(SAMPLES / name), read_jsonl(out)):
        assert_valid(before, after, counter, max_tokens=800)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["-o", "out.jsonl", "--stats", "a.jsonl"],
            "the stats of a.jsonl would overwrite the input",
            id="stats-input",
        ),
        pytest.param(
            ["-o", "out.jsonl", "--stats", "out.jsonl"],
            "the stats of a.jsonl would overwrite the output",
            id="stats-output",
        ),
        pytest.param(
            ["-o", "out.jsonl", "--store", "s.jsonl", "--stats", "s.jsonl"],
            "would overwrite the",
            id="stats-store",
        ),
        pytest.param(["-o", "."], "is a folder", id="output-folder"),
    ],
)
def test_no_file_the_run_writes_can_replace_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    before = source.read_bytes()
    result = invoke("compress", "a.jsonl", "--max-tokens", "300", *args)
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_two_inputs_of_one_name_cannot_share_an_out_dir(tmp_path: Path) -> None:
    for folder in ("d1", "d2"):
        (tmp_path / folder).mkdir()
        write_jsonl(tmp_path / folder / "x.jsonl", [chat(3)])
    result = invoke(
        "compress",
        str(tmp_path / "d1/x.jsonl"),
        str(tmp_path / "d2/x.jsonl"),
        "--out-dir",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 1
    assert "would overwrite the output of" in result.output
    assert not (tmp_path / "out").exists()


def test_a_device_output_is_written_to_not_replaced(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    result = invoke("compress", str(source), "-o", os.devnull, "--max-tokens", "300")
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert not Path(os.devnull + ".stats.json").exists()


def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    old = os.umask(0o022)
    try:
        assert invoke("compress", str(source), "--max-tokens", "300").exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.compressed.jsonl").stat().st_mode) == 0o644


def test_a_budget_past_exact_json_numbers_is_a_usage_error(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(3)])
    result = invoke("compress", str(source), "--max-tokens", str(2**64))
    assert result.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_a_stage_listed_twice_is_refused(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(3)])
    result = invoke("compress", str(source), "--stages", "summary,summary")
    assert result.exit_code == 1
    assert "stage 'summary' is listed twice" in result.output


@pytest.mark.parametrize(
    "stages", ["window", "priority", "summary,priority", "window,summary,priority"]
)
def test_a_conversation_may_end_on_a_call_still_waiting_for_its_result(
    tmp_path: Path, stages: str
) -> None:
    call = {"id": "c9", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    record = chat(8)
    record["messages"] += [{"role": "assistant", "content": None, "tool_calls": [call]}]
    source = write_jsonl(tmp_path / "a.jsonl", [record])
    result = invoke("compress", str(source), "--max-tokens", "60", "--stages", stages)
    assert result.exit_code == 0, result.output
    out = read_jsonl(tmp_path / "a.compressed.jsonl")[0]
    assert out["messages"][-1] == record["messages"][-1]
    assert out["messages"][-2] == record["messages"][-2]  # the latest user message


def test_warnings_past_twenty_are_counted_not_printed(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(2) for _ in range(25)])
    result = invoke("compress", str(source), "--max-tokens", "5")
    assert result.exit_code == 0
    assert result.output.count("is over budget") == 20
    assert f"{source}: 5 more warnings not shown; the stats list them" in result.output
    stats = json.loads((tmp_path / "a.compressed.stats.json").read_text())
    assert stats["warnings"] == 25 and len(stats["over_budget"]) == 25


def test_worker_processes_give_the_same_output_stats_and_errors(
    tmp_path: Path, small_pieces: None
) -> None:
    records = [chat(n % 40 + 1) for n in range(150)]
    lines = [json.dumps(r) for r in records]
    lines[97] = '{"messages": [{"content": "no role"}]}'
    source = tmp_path / "a.jsonl"
    source.write_text("\n".join(lines) + "\n")
    outputs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}.jsonl"
        args = ["compress", str(source), "-o", str(out), "--max-tokens", "300", "--jobs", jobs]
        failed = invoke(*args)
        assert failed.exit_code == 1
        assert f"{source}:98: message 0 has no 'role'" in failed.output
        assert not out.exists()
        result = invoke(*args, "--on-error", "keep")
        assert result.exit_code == 0, result.output
        stats = json.loads((tmp_path / f"j{jobs}.stats.json").read_text())
        for key in ("elapsed_seconds", "output", "store"):
            stats.pop(key)
        outputs[jobs] = (out.read_bytes(), stats)
    assert outputs["1"] == outputs["2"]
    assert outputs["1"][1]["errors"] == [{"line": 98, "reason": "message 0 has no 'role'"}]


class Run(NamedTuple):
    """One ``compress`` run of :func:`each_jobs`."""

    result: Any
    output: bytes
    stats: dict[str, Any]  # less what differs between runs: time and paths
    store: bytes | None  # None when none was written
    printed: str  # with the output's name made alike


def each_jobs(source: Path, *args: str) -> dict[str, Run]:
    """``compress SOURCE -o jN.jsonl --jobs N ARGS`` beside ``source`` for N = 1, 2."""
    runs = {}
    for jobs in ("1", "2"):
        out, stats, store = (
            source.with_name(f"j{jobs}.{end}") for end in ("jsonl", "stats.json", "store.jsonl")
        )
        result = invoke("compress", str(source), "-o", str(out), "--jobs", jobs, *args)
        numbers = json.loads(stats.read_text()) if stats.exists() else {}
        for key in ("elapsed_seconds", "output", "store"):
            numbers.pop(key, None)
        runs[jobs] = Run(
            result,
            out.read_bytes() if out.exists() else b"",
            numbers,
            store.read_bytes() if store.exists() else None,
            result.output.replace(f"j{jobs}.", "jN."),
        )
    return runs


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of 300 bytes, so that a small file is compressed by worker processes."""
    from ctxcli import pool

    monkeypatch.setattr(pool, "CHUNK_BYTES", 300)


def agent_run(n: int) -> dict[str, Any]:
    """A chat whose middle holds a tool call with a large result (a placeholder's)."""
    record = chat(n % 7 + 1)
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"n": n})},
    }
    record["messages"][2:2] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": f"row {n} " * 400},
    ]
    return record


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_worker_pieces_join_into_the_serial_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, newline: str
) -> None:
    """Many small pieces across two workers give the bytes, store, stats and warnings
    (in order) of one process: placeholders, over-budget records, blank lines, bad
    lines kept, the input's line ends."""
    from ctxcli import pool

    monkeypatch.setattr(pool, "CHUNK_BYTES", 4000)
    lines = [json.dumps(agent_run(n) if n % 3 else chat(n % 5 + 1)) for n in range(60)]
    lines[17] = '{"messages": [{"content": "no role"}]}'
    lines[41] = "{not json"
    lines.insert(30, "")
    source = tmp_path / "a.jsonl"
    source.write_bytes(newline.join(lines).encode() + newline.encode())
    runs = each_jobs(
        source,
        "--max-tokens",
        "120",
        "--stages",
        "placeholder",
        "--placeholder-keep-recent",
        "0",
        "--on-error",
        "keep",
    )
    for run in runs.values():
        assert run.result.exit_code == 0, run.result.output
    seen = {jobs: (run.output, run.store, run.stats, run.printed) for jobs, run in runs.items()}
    output, store, stats, printed = seen["1"]
    assert seen["2"] == seen["1"]
    assert output.count(newline.encode()) == 60 and b"\n\n" not in output
    assert stats["conversations"] == 58 and len(stats["errors"]) == 2
    assert stats["errors"][1]["line"] == 43
    assert stats["stage_events"]["placeholder"]["placeholders_written"] == 38
    assert store.count(b"\n") == 38 and len(stats["over_budget"]) == 54
    assert f"{source}:18: message 0 has no 'role' (copied unchanged)" in printed
    assert "over budget" not in printed  # listed, not warned of: no stage could fit them


def _killed(task: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_named_with_its_file_and_leaves_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxcli import pool

    monkeypatch.setattr(pool, "_piece", _killed)
    monkeypatch.setattr(pool, "CHUNK_BYTES", 2000)
    source = write_jsonl(tmp_path / "a.jsonl", [chat(3) for _ in range(20)])
    result = invoke("compress", str(source), "-o", str(tmp_path / "out.jsonl"), "--jobs", "2")
    assert result.exit_code == 1
    assert f"{source}: a worker process was killed by SIGKILL (out of memory?)" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_deeply_nested_originals_travel_back_from_workers(
    tmp_path: Path, small_pieces: None
) -> None:
    """A worker pickles what it stores; nesting that one process handles must pass."""
    record = agent_run(1)
    nested: Any = "deep " * 900
    for _ in range(600):
        nested = [nested]
    record["messages"][3]["content"] = [{"type": "json", "data": nested}]
    source = write_jsonl(tmp_path / "a.jsonl", [record, chat(2)])
    runs = each_jobs(source, "--stages", "placeholder", "--placeholder-keep-recent", "0")
    outputs = []
    for run in runs.values():
        assert run.result.exit_code == 0, run.result.output
        outputs.append((run.output, run.store))
    assert outputs[0] == outputs[1] and b"deep" in outputs[0][1]


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_progress_bar_ends_at_the_files_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    import io

    from tqdm import tqdm

    from ctxcli import compress, config, drivers, pool

    bars: list[Any] = []

    def progress(path: str) -> Any:
        bars.append(tqdm(total=os.path.getsize(path), file=io.StringIO()))
        return bars[-1]

    monkeypatch.setattr(drivers, "progress", progress)
    monkeypatch.setattr(pool, "CHUNK_BYTES", 3000)
    lines = [json.dumps(chat(n % 5 + 1)) for n in range(40)]
    lines.insert(7, "")
    source = tmp_path / "a.jsonl"
    source.write_text("\r\n".join(lines) + "\r\n")  # CRLF line ends, a blank line
    settings = config.resolve(stages="window", max_tokens=300)
    compressor = compress.Compressor(settings, jobs=jobs)
    compressor.file(str(source), str(tmp_path / "out.jsonl"), progress=True)
    assert bars[0].n == bars[0].total == source.stat().st_size


def test_json_as_deep_as_is_read_is_counted_and_written(tmp_path: Path, small_pieces: None) -> None:
    """orjson reads 1,024 levels but writes 254; the rest must not be a traceback."""
    deep = "[" * 1000 + '"x"' + "]" * 1000
    line = (
        '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "'
        + "hi " * 300
        + '"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": '
        '[{"type": "text", "text": "q"}, {"type": "json", "data": ' + deep + "}]}]}"
    )
    source = tmp_path / "a.jsonl"
    source.write_text(line + "\n")
    for run in each_jobs(source, "--max-tokens", "50").values():
        assert run.result.exit_code == 0, run.result.output
        assert run.output.count(b"[") >= 1000


def test_invalid_utf8_is_named_as_such(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_bytes(b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n')
    result = invoke("compress", str(source))
    assert result.exit_code == 1
    assert f"{source}:1: not valid UTF-8 (at byte 47 of the line)" in result.output


def test_a_system_role_summary_is_merged_on_the_next_run(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    args = ["--summary-role", "system"]
    assert (
        invoke("compress", str(source), "-o", str(first), "--max-tokens", "700", *args).exit_code
        == 0
    )
    record = read_jsonl(first)[0]
    record["messages"] += [
        {"role": "assistant", "content": "More. " * 40},
        {"role": "user", "content": "And now?"},
    ]
    write_jsonl(tmp_path / "longer.jsonl", [record])
    result = invoke(
        "compress", str(tmp_path / "longer.jsonl"), "-o", str(second), "--max-tokens", "600", *args
    )
    assert result.exit_code == 0, result.output
    messages = read_jsonl(second)[0]["messages"]
    summaries = [m for m in messages if str(m.get("content", "")).startswith(SUMMARY_MARKER)]
    assert len(summaries) == 1 and summaries[0]["role"] == "system"
    assert messages[0]["content"] == "Be helpful."


def test_json_nested_too_deeply_is_a_bad_line_not_a_crash(tmp_path: Path) -> None:
    source = tmp_path / "deep.jsonl"
    source.write_text(
        json.dumps(chat(1))
        + "\n"
        + '{"messages": [{"role": "user", "content": '
        + "[" * 5000
        + "]" * 5000
        + "}]}\n"
    )
    result = invoke("compress", str(source))
    assert result.exit_code == 1
    assert f"Error: {source}:2: invalid JSON: nested too deeply" in result.output
    result = invoke("compress", str(source), "--on-error", "keep")
    assert result.exit_code == 0, result.output


def test_a_config_budget_past_exact_json_numbers_is_refused(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(3)])
    config = tmp_path / "c.yaml"
    config.write_text("max_tokens: 99999999999999999999\n")
    result = invoke("compress", str(source), "--config", str(config))
    assert result.exit_code == 1
    assert "max_tokens must be a whole number of tokens up to 9007199254740992" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "c.yaml"]


def test_validate_needs_no_tokenizer(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(3)])
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run(
        [sys.executable, "-m", "ctxcli", "validate", str(source)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "ok: 1 file(s), no problems" in out.stderr


def test_cleared_legacy_function_arguments_can_be_restored(tmp_path: Path) -> None:
    big = json.dumps({"query": "x " * 400})
    record = {
        "messages": [
            {"role": "user", "content": "Search."},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "search", "arguments": big},
            },
            {"role": "function", "name": "search", "content": "found"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Thanks."},
        ]
    }
    source = write_jsonl(tmp_path / "a.jsonl", [record])
    config = tmp_path / "c.yaml"
    config.write_text(
        "stages:\n  - placeholder: {clear_inputs: true, keep_recent: 0, threshold: 50}\n"
    )
    assert invoke("compress", str(source), "--config", str(config)).exit_code == 0
    out = read_jsonl(tmp_path / "a.compressed.jsonl")[0]
    assert "ctxcli_placeholder" in out["messages"][1]["function_call"]["arguments"]
    back = tmp_path / "back.jsonl"
    store = tmp_path / "a.compressed.store.jsonl"
    result = invoke(
        "restore", str(tmp_path / "a.compressed.jsonl"), "--store", str(store), "-o", str(back)
    )
    assert result.exit_code == 0, result.output
    assert read_jsonl(back)[0] == record


@pytest.mark.parametrize(
    "tools",
    [
        pytest.param(
            [{"type": "function", "function": {"name": "f", "parameters": "not a schema"}}],
            id="string-parameters",
        ),
        pytest.param(
            [{"type": "function", "function": {"name": "f", "parameters": {"properties": [1, 2]}}}],
            id="list-properties",
        ),
    ],
)
def test_odd_tool_definitions_are_counted_not_fatal(tmp_path: Path, tools: Any) -> None:
    record = {**chat(2), "tools": tools}
    source = write_jsonl(tmp_path / "a.jsonl", [record])
    assert invoke("compress", str(source)).exit_code == 0
    assert invoke("validate", str(source)).exit_code == 0


def test_a_lone_surrogate_in_tool_input_is_no_crash(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text(
        '{"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": '
        '[{"type": "tool_use", "id": "t1", "name": "f", "input": {"q": "\\ud83d"}}]}, '
        '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}\n'
    )
    result = invoke("compress", str(source))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.compressed.jsonl").read_bytes() == source.read_bytes()


def test_an_unwritable_stats_path_leaves_no_output(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(30)])
    result = invoke("compress", str(source), "--max-tokens", "300", "--stats", "/proc/none/s.json")
    assert result.exit_code == 1
    assert "Error: /proc/none/s.json: cannot write" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_stdin_splits_lines_as_files_do() -> None:
    text = '{"messages":\r[{"role": "user", "content": "a"}]}\n'  # "\r" as JSON white space
    result = CliRunner().invoke(cli, ["validate", "-"], input=text)
    assert result.exit_code == 0, result.output


def test_the_parsed_tokenizer_is_kept_in_the_user_cache_unless_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_jsonl(tmp_path / "logs.jsonl", [chat(40)])
    monkeypatch.setattr(tokens, "_LOADED", {})  # none built earlier in this process
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "off"))
    result = invoke("compress", str(source), "-o", "-", "--max-tokens", "300", "--no-cache", "-q")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "off").exists()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "on"))
    first = invoke("compress", str(source), "-o", "-", "--max-tokens", "300", "-q")
    assert first.exit_code == 0, first.output
    assert [p.suffix for p in (tmp_path / "on/ctxcli").iterdir()] == [".marshal"]
    second = invoke("compress", str(source), "-o", "-", "--max-tokens", "300", "-q")
    assert second.stdout == first.stdout == result.stdout


def test_crlf_line_ends_and_a_byte_order_mark_are_kept(tmp_path: Path) -> None:
    """An unchanged line comes back as the bytes read; changed lines and the restored
    file keep the input's line ends and byte order mark too."""
    lines = [json.dumps(chat(2)).encode(), json.dumps(chat(40)).encode()]
    source = tmp_path / "crlf.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + b"".join(line + b"\r\n" for line in lines))
    same = tmp_path / "same.jsonl"
    args = ["--stages", "summary,priority", "--max-tokens", "100000", "-q"]
    result = invoke("compress", str(source), "-o", str(same), *args)
    assert result.exit_code == 0, result.output
    assert same.read_bytes() == source.read_bytes()
    out = tmp_path / "out.jsonl"
    args = ["--stages", "placeholder,window", "--keep-last", "10", "-q"]
    result = invoke("compress", str(source), "-o", str(out), *args)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data.count(b"\r\n") == data.count(b"\n") == 2
    assert data.split(b"\r\n")[0] == source.read_bytes().split(b"\r\n")[0]  # unchanged line
    tool = {"id": "t1", "messages": [{"role": "user", "content": "ls"}]}
    tool["messages"] += [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "file.txt\n" * 400},
        {"role": "assistant", "content": "Done."},
    ]
    source.write_bytes(b"\xef\xbb\xbf" + json.dumps(tool).encode() + b"\r\n" + lines[0] + b"\r\n")
    args = PLACEHOLDERS_ONLY
    result = invoke("compress", str(source), "-o", str(out), *args, "-q")
    assert result.exit_code == 0, result.output
    back = tmp_path / "back.jsonl"
    store = str(out).replace(".jsonl", ".store.jsonl")
    result = invoke("restore", str(out), "--store", store, "-o", str(back))
    assert result.exit_code == 0, result.output
    assert "restored 1 placeholder" in result.output
    assert read_jsonl(back) == read_jsonl(source)
    restored = back.read_bytes()
    assert restored.startswith(b"\xef\xbb\xbf") and restored.count(b"\r\n") == 2


def test_an_input_that_already_breaks_its_format_is_reported(tmp_path: Path) -> None:
    """ctxcli does not repair inputs, but never passes a broken one on in silence."""
    orphan = {"role": "tool", "tool_call_id": "zz", "content": "orphan"}
    broken = {"id": "b", "messages": [{"role": "user", "content": "hi"}, orphan]}
    records = [chat(1), broken, {**chat(30), "id": "b2"}]
    records[2]["messages"].insert(2, orphan)
    source = write_jsonl(tmp_path / "in.jsonl", records)
    result = invoke("compress", str(source), "--stages", "window", "--keep-last", "4")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "already breaks" in line]
    assert len(warned) == 2 and warned[0].startswith(f"warning: {source}:2: conversation b ")
    assert "tool result 'zz' without its call" in warned[0]
    stats = json.loads((tmp_path / "in.compressed.stats.json").read_text())
    assert [(p["id"], p["line"]) for p in stats["input_problems"]] == [("b", 2), ("b2", 3)]
    source.with_suffix(".json").write_text(json.dumps(records))
    result = invoke("compress", str(source.with_suffix(".json")), "--stages", "window", "-q")
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "in.compressed.json.stats.json").read_text())
    assert [(p["id"], p["record"]) for p in stats["input_problems"]] == [("b", 1), ("b2", 2)]


def test_output_to_stdout_adds_to_the_store_of_the_run_that_wrote_the_input(
    tmp_path: Path,
) -> None:
    """Compressing an output again to stdout names its store after the input, which is
    the earlier run's store. The run refused ("give --store PATH"), so the README's
    ``ctxcli compress runs.json … -o - | jq .`` failed when run twice; now it adds to
    that store, which keeps the earlier originals, and the output restores whole."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    for n in range(4):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"file{n}.txt\n" * 60})
    messages.append({"role": "assistant", "content": "Done."})
    source = write_jsonl(tmp_path / "run.jsonl", [{"id": "r", "messages": messages}])
    args = ["--stages", "placeholder", "--placeholder-keep-recent", "0", "-q"]
    first = invoke("compress", str(source), *args, "--placeholder-threshold", "100")
    assert first.exit_code == 0, first.output
    output, store = tmp_path / "run.compressed.jsonl", tmp_path / "run.compressed.store.jsonl"
    kept = store.read_bytes()
    assert kept
    sizes = []
    for _ in range(2):  # the same command again, as a user reruns it
        again = invoke("compress", str(output), "-o", "-", *args, "--placeholder-threshold", "5")
        assert again.exit_code == 0, again.stderr
        assert store.read_bytes().startswith(kept)
        sizes.append(len(store.read_bytes()))
    assert sizes[0] == sizes[1]  # nothing added twice
    stats = tmp_path / "again.stats.json"
    invoke("compress", str(output), "-o", "-", "--stats", str(stats), *args)
    assert json.loads(stats.read_text())["store"]["path"] == str(store)  # not its temporary
    piped = tmp_path / "piped.jsonl"
    piped.write_text(again.stdout)
    restored = tmp_path / "restored.jsonl"
    done = invoke("restore", str(piped), "--store", str(store), "-o", str(restored))
    assert done.exit_code == 0, done.output
    assert read_jsonl(restored) == read_jsonl(source)


def test_outputs_of_one_stem_keep_their_own_stats_and_store(tmp_path: Path) -> None:
    """run.jsonl and run.json compress to run.compressed.jsonl and .json, whose stats
    and stores were both run.compressed.stats.json and .store.jsonl: the second run
    replaced the first's, whose placeholders then restored from nothing. A .jsonl
    output's side files are named after its stem, any other's after its whole name;
    restore still finds a store an earlier version named after the stem."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    for n in range(4):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"file{n}.txt\n" * 60})
    record = {"id": "r", "messages": messages}
    source = write_jsonl(tmp_path / "run.jsonl", [record])
    (tmp_path / "run.json").write_text(json.dumps([record, record]))
    args = ["--stages", "placeholder", "--placeholder-keep-recent", "0", "-q"]
    args += ["--placeholder-threshold", "100"]
    assert invoke("compress", str(source), *args).exit_code == 0
    assert invoke("compress", str(tmp_path / "run.json"), *args).exit_code == 0
    stats = json.loads((tmp_path / "run.compressed.stats.json").read_text())
    assert stats["conversations"] == 1
    assert (
        json.loads((tmp_path / "run.compressed.json.stats.json").read_text())["conversations"] == 2
    )
    assert (tmp_path / "run.compressed.json.store.jsonl").is_file()
    assert invoke("restore", str(tmp_path / "run.compressed.jsonl")).exit_code == 0
    (tmp_path / "run.compressed.json.store.jsonl").rename(tmp_path / "run.compressed.store.jsonl")
    back = invoke("restore", str(tmp_path / "run.compressed.json"), "-o", str(tmp_path / "b.json"))
    assert back.exit_code == 0, back.output
    assert json.loads((tmp_path / "b.json").read_text()) == [record, record]


def test_workers_end_when_the_run_is_killed(tmp_path: Path) -> None:
    """With --jobs, a run killed with SIGKILL (a CI timeout, the OOM killer) leaves no
    worker processes behind."""
    import signal
    import time

    source = write_jsonl(tmp_path / "big.jsonl", [chat(300, words=40) for _ in range(200)])
    script = "import os, sys\nfrom ctxcli.cli import cli\ncli(sys.argv[1:])\n"
    run = subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            "compress",
            str(source),
            "-o",
            str(tmp_path / "o.jsonl"),
            "--jobs",
            "2",
            "--max-tokens",
            "300",
            "-q",
        ],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        found = subprocess.run(["pgrep", "-P", str(run.pid)], capture_output=True, text=True)
        workers = [int(p) for p in found.stdout.split()]
        time.sleep(0.05)
    assert len(workers) >= 2, "the run ended before its workers could be seen"
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        time.sleep(0.1)
    assert not alive, f"workers still running: {alive}"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_an_unknown_model_is_named_with_the_encoding_used_instead(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", [chat(2)])
    result = invoke("compress", str(source), "--model", "claude-3-5-sonnet", "-q")
    assert result.exit_code == 0, result.output
    assert "does not know the model 'claude-3-5-sonnet': counting tokens with o200k_base" in (
        result.stderr
    )
    known = invoke("compress", str(source), "--model", "gpt-4o-mini", "-q")
    assert known.exit_code == 0 and known.stderr == ""


def test_a_json_array_cut_short_is_reported_as_such(tmp_path: Path) -> None:
    source = tmp_path / "cut.json"
    whole = json.dumps([chat(1), chat(2)], indent=1)
    source.write_text(whole[: len(whole) // 2])
    result = invoke("compress", str(source), "-o", "-", "--on-error", "keep")
    assert result.exit_code == 1
    assert f"{source}: not a JSON array: invalid JSON: unexpected end of data: line " in (
        result.stderr
    )
    assert result.stdout == ""


def test_output_to_dev_null_keeps_no_store(tmp_path: Path) -> None:
    """A run whose output is thrown away (a timing run, say) throws its originals away
    too, and can be run again."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages += [{"role": "assistant", "content": None, "tool_calls": [call]}]
    messages += [{"role": "tool", "tool_call_id": "c1", "content": "file.txt\n" * 300}]
    messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "ok"}]
    source = write_jsonl(tmp_path / "run.jsonl", [{"id": "r", "messages": messages}])
    args = PLACEHOLDERS_ONLY
    for _ in range(2):
        result = invoke("compress", str(source), "-o", os.devnull, *args)
        assert result.exit_code == 0, result.output
        assert "1 placeholder" in result.stderr
        assert f"threw away 1 original (the store is {os.devnull})" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]


def test_a_warning_clears_the_progress_bar_line_first() -> None:
    import io

    from tqdm import tqdm

    from ctxcli import drivers

    screen = io.StringIO()
    bar = tqdm(total=10, file=screen, ncols=40)
    warn = drivers.Shown(lambda text: screen.write(f"warning: {text}\n"), bar)
    bar.update(5)
    bar.refresh()
    warn("over budget")
    before = screen.getvalue().split("warning: over budget")[0]
    assert "50%" in before and before.endswith("\r")
    bar.close()


def test_stats_lists_stop_at_a_bound_and_count_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays bounded with millions of bad or over-budget records."""
    from ctxcli import pool
    from ctxcli import stats as stats_module

    monkeypatch.setattr(stats_module, "LISTED_MAX", 3)
    monkeypatch.setattr(pool, "CHUNK_BYTES", 2000)
    lines = [json.dumps(chat(2)) for _ in range(8)] + ["{bad"] * 5
    source = tmp_path / "a.jsonl"
    source.write_text("\n".join(lines) + "\n")
    for run in each_jobs(source, "--max-tokens", "5", "--on-error", "keep", "--check").values():
        assert run.result.exit_code == 3, run.result.output
        assert "8 conversation(s) over budget" in run.result.output
        stats = run.stats
        assert [e["line"] for e in stats["over_budget"]] == [1, 2, 3]
        assert [e["line"] for e in stats["errors"]] == [9, 10, 11]
        assert stats["not_listed"] == {"over_budget": 5, "errors": 2}


def test_numbers_json_does_not_allow_are_bad_lines(tmp_path: Path) -> None:
    source = tmp_path / "logs.jsonl"
    good = json.dumps(chat(30))
    bad = '{"id": "x", "score": NaN, "messages": [{"role": "user", "content": "hi"}]}'
    huge = '{"id": "y", "score": 1e999, "messages": [{"role": "user", "content": "hi"}]}'
    source.write_text("\n".join([good, bad, huge]) + "\n")
    result = invoke("compress", str(source), "--max-tokens", "300")
    assert result.exit_code == 1
    assert f"Error: {source}:2: NaN is not a JSON number (column 22)" in result.stderr
    assert not (tmp_path / "logs.compressed.jsonl").exists()
    kept = invoke("compress", str(source), "--max-tokens", "300", "--on-error", "keep")
    assert kept.exit_code == 0, kept.output
    lines = (tmp_path / "logs.compressed.jsonl").read_text().splitlines()
    assert lines[1:] == [bad, huge]  # passed through unchanged
    stats = json.loads((tmp_path / "logs.compressed.stats.json").read_text())
    assert [e["line"] for e in stats["errors"]] == [2, 3]
    checked = invoke("validate", str(source))
    assert checked.exit_code == 1
    assert f"{source}:3: number 1e999 is too large for a double (column 22)" in checked.stdout


def test_stdout_gets_nothing_when_a_later_line_is_bad(tmp_path: Path) -> None:
    source = tmp_path / "logs.jsonl"
    source.write_text(json.dumps(chat(2)) + "\n" + json.dumps(chat(30)) + "\n{broken\n")
    result = invoke("compress", str(source), "-o", "-", "--max-tokens", "300")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{source}:3: invalid JSON" in result.stderr


def test_stdin_keeps_its_byte_order_mark_and_line_ends() -> None:
    records = [chat(2), chat(30)]
    text = b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\r\n" for r in records)
    result = CliRunner().invoke(cli, ["compress", "-", "--max-tokens", "300", "-q"], input=text)
    assert result.exit_code == 0, result.output
    out = result.stdout_bytes
    assert out.startswith(b"\xef\xbb\xbf") and out.count(b"\r\n") == 2 and out.endswith(b"\r\n")
    assert out.split(b"\r\n")[0] == text.split(b"\r\n")[0]  # the unchanged line, BOM and all
    assert json.loads(out.split(b"\r\n")[1])["messages"] != records[1]["messages"]


def test_the_placeholder_line_counts_the_summary_stages_too() -> None:
    """A new user read "5 placeholders saved 8,107 tokens, 7 left after later stages":
    more left than written, as the summary stage's own placeholders went unsaid."""
    from collections import Counter

    from ctxcli.batch import _notes
    from ctxcli.stats import FileStats

    stats = FileStats(input="s.json", output="o.json", encoding="o200k_base", max_tokens=9,
                      stages=["placeholder", "summary"])  # fmt: skip
    stats.stage_events["placeholder"] = Counter(
        placeholders_written=5, tokens_saved=8107, placeholders_kept=7
    )
    stats.stage_events["summary"] = Counter(results_compacted=3)
    assert _notes(stats) == [
        "s.json: 5 placeholders saved 8,107 tokens, the summary stage made 3 more, 7 in the output"
    ]
    stats.stage_events["placeholder"]["placeholders_kept"] = 8
    assert _notes(stats)[0].endswith("tokens, the summary stage made 3 more")
    # "27 placeholders saved 28,285 tokens, 0 in the output" read as savings kept
    stats.stage_events["placeholder"]["placeholders_kept"] = 0
    assert _notes(stats)[0].endswith(", none in the output (folded into summaries or dropped)")


def test_placeholders_in_the_output_are_counted_one_by_one(tmp_path: Path) -> None:
    # Four cleared arguments of one message read "4 placeholders saved …, 1 in the
    # output": the messages holding a placeholder were counted.
    calls = [
        {
            "id": f"c{k}",
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": json.dumps({"path": f"src/f{k}.py", "content": "x = 1\n" * 150}),
            },
        }
        for k in range(4)
    ]
    messages = [
        {"role": "user", "content": "Write the four files."},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{k}", "content": "ok"} for k in range(4)),
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Thanks, now run the tests."},
    ]
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps({"messages": messages}) + "\n")
    config = tmp_path / "c.yaml"
    config.write_text(
        "stages:\n  - placeholder: {threshold: 50, keep_recent: 0, clear_inputs: true}\n"
    )
    args = ["compress", str(source), "--config", str(config), "--max-tokens", "0"]
    result = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.output
    assert re.search(r"4 placeholders saved [\d,]+ tokens\n", result.output), result.output
