"""``ctxcli count``: tokens per file, conversation and role, as compress counts them."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ctxcli.cli import cli
from ctxcli.config import resolve
from ctxcli.count import OVERHEAD, Counting
from ctxcli.tokens import TokenCounter

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
#: The settings each folder of ../shared/data needs, as its README says.
SETTINGS = {"tau-bench": ["--messages-key", "traj"], "swe-agent": ["--messages-key", "history"]}


def invoke(*args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def record(*contents: str, id: str = "c", tools: Any = None) -> dict[str, Any]:
    roles = ["system", "user", "assistant", "user"]
    messages = [{"role": roles[i % 4], "content": c} for i, c in enumerate(contents)]
    return {"id": id, "messages": messages, **({"tools": tools} if tools else {})}


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_conversation_counts_by_the_cookbook_rule_and_its_roles_sum_to_it(
    tmp_path: Path,
) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [record("Be brief.", "Hi there", "Hello!", "Bye")])
    [item] = list(Counting(resolve(encoding="o200k_base")).conversations(str(path)))
    counter = TokenCounter("o200k_base")
    # 3 per message + role + content, and 3 for the reply priming (the cookbook's rule)
    expected = {
        "system": 3 + counter.text("system") + counter.text("Be brief."),
        "user": 6 + 2 * counter.text("user") + counter.text("Hi there") + counter.text("Bye"),
        "assistant": 3 + counter.text("assistant") + counter.text("Hello!"),
        OVERHEAD: 3,
    }
    assert item.by_role == expected
    assert item.tokens == sum(expected.values())
    assert (item.id, item.line, item.messages) == ("c", 1, 4)


def test_the_table_has_a_row_per_file_and_a_total(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [record("x", "y"), record("z", "w")])
    b = write_jsonl(tmp_path / "b.jsonl", [record("q")])
    counting = Counting(resolve(encoding="o200k_base"))
    tokens = [counting.file(str(p)).tokens for p in (a, b)]
    result = invoke("count", str(a), str(b), "--encoding", "o200k_base")
    assert result.exit_code == 0, result.output
    width = len(str(a))
    assert result.stdout.splitlines() == [
        f"{'file':<{width}}  convs  msgs  tokens",
        f"{str(a):<{width}}      2     4  {tokens[0]:>6,}",
        f"{str(b):<{width}}      1     1  {tokens[1]:>6,}",
        f"{'total':<{width}}      3     5  {sum(tokens):>6,}",
    ]


def test_per_conversation_and_by_role_as_csv_and_json(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "description": "d"}}]
    a = write_jsonl(
        tmp_path / "a.jsonl", [record("s", "u", id="one"), record("s", id="two", tools=tools)]
    )
    args = ["count", str(a), "--per-conversation", "--by", "role"]
    rows = list(csv.reader(io.StringIO(invoke(*args, "--format", "csv").stdout)))
    assert rows[0] == ["file", "conversation", "id", "msgs", "tokens", "system", "user", OVERHEAD]
    assert [r[:3] for r in rows[1:]] == [
        [str(a), "line 1", "one"],
        [str(a), "line 2", "two"],
        ["total", "2 conversations", ""],
    ]
    for row in rows[1:]:
        assert int(row[4]) == sum(int(v) for v in row[5:])  # the roles make the total
    assert int(rows[2][-1]) > 3  # the tools definitions are overhead
    report = json.loads(invoke(*args, "--format", "json").stdout)
    [entry] = report["files"]
    assert [i["id"] for i in entry["items"]] == ["one", "two"]
    assert report["total"]["tokens"] == int(rows[3][4]) == entry["tokens"]
    assert report["total"]["by_role"] == {
        "overhead": int(rows[3][7]),
        "system": int(rows[3][5]),
        "user": int(rows[3][6]),
    }


def test_stdin_arrays_and_one_record_files(tmp_path: Path) -> None:
    records = [record("a", "b"), record("c")]
    array = tmp_path / "runs.json"
    array.write_text(json.dumps(records))
    one = tmp_path / "run.traj"
    one.write_text(json.dumps(records[0], indent=2))
    lines = "".join(json.dumps(r) + "\n" for r in records)
    got = {
        name: json.loads(invoke("count", *args, "--format", "json", input=data).stdout)["total"]
        for name, args, data in [
            ("stdin", ["-"], lines),
            ("array", [str(array)], None),
            ("one", [str(one)], None),
        ]
    }
    assert got["stdin"] == got["array"]
    assert got["one"]["conversations"] == 1 and got["one"]["messages"] == 2
    shown = invoke("count", str(array), "--per-conversation").stdout
    assert "record 0" in shown and "record 1" in shown


def test_a_bad_line_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(record("a")) + "\n{broken\n")
    result = invoke("count", str(path))
    assert result.exit_code == 1
    assert f"Error: {path}:2: invalid JSON" in result.output


@pytest.mark.parametrize("out_format", ["json", "csv"])
def test_no_file_counted_still_gives_a_machine_report(tmp_path: Path, out_format: str) -> None:
    # `count bad.jsonl --format json | jq` read nothing at all: the report was left out.
    path = tmp_path / "a.jsonl"
    path.write_text("{broken\n")
    result = CliRunner().invoke(cli, ["count", str(path), "--format", out_format])
    assert result.exit_code == 1
    assert f"{path}:1: invalid JSON" in result.stderr
    if out_format == "json":
        assert json.loads(result.stdout) == {
            "files": [],
            "total": {"conversations": 0, "messages": 0, "tokens": 0},
        }
    else:
        assert list(csv.reader(io.StringIO(result.stdout)))[-1] == ["total", "0", "0", "0"]


def test_a_bad_line_costs_its_file_alone_or_with_keep_only_itself(tmp_path: Path) -> None:
    # A bad line in one file had stopped `ctxcli count` of a whole folder.
    bad = tmp_path / "a.jsonl"
    bad.write_text(json.dumps(record("a", "b")) + "\n{broken\n" + json.dumps(record("c")) + "\n")
    good = write_jsonl(tmp_path / "b.jsonl", [record("x", "y")])
    result = invoke("count", str(tmp_path), "--format", "json")
    assert result.exit_code == 1
    assert "error: 1 of 2 files not counted:" in result.output
    assert f"Error: {bad}:2: invalid JSON" in result.output
    (counted,) = json.loads(result.stdout)["files"]
    assert counted["file"] == str(good)
    result = invoke("count", str(bad), "--on-error", "keep", "--format", "json")
    assert result.exit_code == 0
    assert f"warning: {bad}:2: invalid JSON" in result.output
    assert "left out of the counts" in result.output
    assert json.loads(result.stdout)["total"]["conversations"] == 2


def test_a_bad_line_of_a_session_is_left_out_with_keep(tmp_path: Path) -> None:
    events = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "fix the bug"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]}},
    ]  # fmt: skip
    path = tmp_path / "s.jsonl"
    lines = [json.dumps(events[0]), "{broken", json.dumps(events[1])]
    path.write_text("\n".join(lines) + "\n")
    assert invoke("count", str(path), "--input-format", "claude-code").exit_code == 1
    result = invoke("count", str(path), "--input-format", "claude-code", "--on-error", "keep")
    assert result.exit_code == 0, result.output
    assert f"warning: {path}:2: invalid JSON" in result.output
    assert "  1     2 " in result.stdout  # one conversation, both messages


def test_a_session_format_forced_on_a_chat_log_warns(tmp_path: Path) -> None:
    # It counted "0 msgs, 3 tokens" with exit 0 and no word; compress warns (02b1c1d).
    path = write_jsonl(tmp_path / "a.jsonl", [record("sys", "hi", "yo", "bye")])
    for name in ("codex", "claude-code"):
        result = invoke("count", str(path), "--input-format", name)
        assert result.exit_code == 0
        assert f"warning: {path}: no message read as {name} (is --input-format right?)" in (
            result.output
        )


def test_count_equals_compress_tokens_before_on_the_samples(tmp_path: Path) -> None:
    for sample in sorted(SAMPLES.glob("*.jsonl")):
        assert_agree(sample, [], tmp_path)


def assert_agree(path: Path, extra: list[str], tmp_path: Path) -> None:
    """count's total for ``path`` is compress's tokens before (or both refuse it alike).
    Each call writes in a folder of its own: ``out.json`` beside ``out.jsonl``'s store
    would be refused (that store is another output's)."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    out = work / f"out{path.suffix}"
    stats = work / "stats.json"
    compressed = invoke("compress", str(path), "-o", str(out), "--stats", str(stats), "-q", *extra)
    counted = invoke("count", str(path), "--format", "json", *extra)
    if compressed.exit_code not in (0, 3):
        assert counted.exit_code == 1
        assert counted.output.splitlines()[-1] == compressed.output.splitlines()[-1]
        return
    assert counted.exit_code == 0, counted.output
    before = json.loads(stats.read_text())["tokens"]["before"]
    assert json.loads(counted.stdout)["total"]["tokens"] == before, path


def test_count_equals_compress_tokens_before_on_every_shared_file(
    data: Path, tmp_path: Path
) -> None:
    files = sorted(p for p in data.rglob("*") if p.suffix in (".jsonl", ".json", ".traj"))
    assert len(files) >= 10
    for path in files:
        for encoding in (["--encoding", "o200k_base"], ["--model", "gpt-4"]):
            assert_agree(path, [*SETTINGS.get(path.parent.name, []), *encoding], tmp_path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--input-format", "bard"], "unknown format 'bard'", id="format"),
        pytest.param(["--encoding", "nope"], "unknown encoding 'nope'", id="encoding"),
    ],
)
def test_settings_errors_name_what_is_known(tmp_path: Path, args: list[str], message: str) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [record("a")])
    result = invoke("count", str(path), *args)
    assert result.exit_code == 1
    assert message in result.output


def test_the_api_counts_a_file(tmp_path: Path) -> None:
    import ctxcli

    path = write_jsonl(tmp_path / "a.jsonl", [record("x", "y"), record("z")])
    counted = ctxcli.Counting(ctxcli.resolve(encoding="o200k_base")).file(str(path))
    assert (counted.conversations, counted.messages) == (2, 3)
    assert counted.tokens == sum(counted.by_role.values())
