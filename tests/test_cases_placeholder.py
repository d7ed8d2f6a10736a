"""The placeholder parts of the shared cases (03, 14, 18), and the tau-bench airline
runs: placeholder-only compression, every invariant, and restore gives back the input.

Counts follow ctxcli's rule (see tests/test_cases.py: +3 per tool call over the cases'
cookbook counts).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from helpers import assert_valid, read_jsonl

from ctxcli.cli import cli
from ctxcli.stages.placeholder import content_id, parse
from ctxcli.tokens import TokenCounter


def compress(source: Path, args: str, tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    """Compress ``source``, check every output record's invariants, restore the output
    and check it gives back the input; returns the output records and the output path."""
    out = tmp_path / f"{source.stem}.out.jsonl"
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(out), "-q", *shlex.split(args)]
    )
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / f"{source.stem}.out.stats.json").read_text())
    over = {item["id"] for item in stats["over_budget"]}
    counter = TokenCounter(stats["encoding"])
    before, after = read_jsonl(source), read_jsonl(out)
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert_valid(b, a, counter, max_tokens=stats["max_tokens"], over_budget_ok=a["id"] in over)
    if stats["stages"] == ["placeholder"]:
        back = tmp_path / f"{source.stem}.back.jsonl"
        store = tmp_path / f"{source.stem}.out.store.jsonl"
        result = CliRunner().invoke(
            cli, ["restore", str(out), "--store", str(store), "-o", str(back)]
        )
        assert result.exit_code == 0, result.output
        assert read_jsonl(back) == before
        raw_in, raw_out = source.read_bytes().splitlines(), out.read_bytes().splitlines()
        for line_in, line_out, line_back in zip(raw_in, raw_out, back.read_bytes().splitlines()):
            if line_out == line_in:  # untouched lines come back byte for byte
                assert line_back == line_in
    return after, out


def placeholders(record: dict[str, Any]) -> list[int]:
    return [i for i, m in enumerate(record["messages"]) if parse(m.get("content"))]


def test_03_the_large_parallel_result_becomes_a_placeholder(cases: Path, tmp_path: Path) -> None:
    case = cases / "03-parallel-tool-calls-partial.jsonl"
    args = "--stages placeholder,priority --max-tokens 300 --placeholder-threshold 200"
    out, _ = compress(case, args + " --placeholder-keep-recent 0 --encoding cl100k_base", tmp_path)
    before = read_jsonl(case)[0]["messages"]
    after = out[0]["messages"]
    assert len(after) == 7
    assert placeholders(out[0]) == [4]
    assert after[4]["tool_call_id"] == "call_b"
    assert parse(after[4]["content"])["id"] == content_id(before[4]["content"])
    for i, (b, a) in enumerate(zip(before, after)):
        assert a["role"] == b["role"]
        assert {k: v for k, v in a.items() if k != "content"} == {
            k: v for k, v in b.items() if k != "content"
        }
        if i != 4:
            assert a == b
    assert TokenCounter("cl100k_base").messages(after) <= 300


def test_14_older_results_become_placeholders_and_the_window_keeps_all(
    cases: Path, tmp_path: Path
) -> None:
    case = cases / "14-last-user-dropped.jsonl"
    args = "--stages placeholder,window --max-tokens 500 --placeholder-threshold 100"
    out, _ = compress(case, args + " --placeholder-keep-recent 1 --encoding cl100k_base", tmp_path)
    c14a = next(r for r in out if r["id"] == "c14a-agent-loop-task-message")
    messages = c14a["messages"]
    assert len(messages) == 8
    assert placeholders(c14a) == [3, 5]
    assert [messages[i]["tool_call_id"] for i in (3, 5)] == ["call_r1", "call_r2"]
    original = read_jsonl(case)[0]["messages"]
    assert messages[7] == original[7]  # call_r3's result in full
    assert messages[1]["content"].startswith("TASK:")


def test_18_previews_cut_on_characters_and_restore_exactly(cases: Path, tmp_path: Path) -> None:
    case = cases / "18-tool-output-truncate-multibyte.jsonl"
    args = "--stages placeholder --placeholder-threshold 100 --placeholder-keep-recent 0"
    out, path = compress(case, args + " --encoding cl100k_base", tmp_path)
    raw = path.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    original = read_jsonl(case)[0]["messages"][2]["content"]
    match = parse(out[0]["messages"][2]["content"])
    assert match is not None
    preview = match["preview"]
    head, tail = preview[: int(match["head"])], preview[-int(match["tail"]) :]
    assert original.startswith(head) and original.endswith(tail)
    for piece in (head, tail):
        piece.encode("utf-8")  # no half surrogate pair
        assert not piece.startswith(("\U0001f3fd", "\u200d")) and not piece.endswith("\u200d")
        assert "👍" not in piece[-1:]  # the skin tone is never cut off its thumb
    # c18b (a lone surrogate, no tool output) is untouched: its bytes are the input's.
    assert raw.splitlines()[1] == case.read_bytes().splitlines()[1]


def test_18_a_lone_surrogate_in_a_tool_result_is_stored_exactly(tmp_path: Path) -> None:
    content = "abc\ud83d def " + "🚀 résumé 漢字 " * 200
    source = tmp_path / "lone.jsonl"
    messages = [
        {"role": "user", "content": "Go."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "t", "arguments": ""}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": content},
        {"role": "assistant", "content": "Done."},
    ]
    source.write_text(json.dumps({"id": "lone", "messages": messages}) + "\n")
    args = "--stages placeholder --placeholder-threshold 100 --placeholder-keep-recent 0"
    out, path = compress(source, args, tmp_path)
    text = out[0]["messages"][2]["content"]
    assert text.startswith("[ctxcli placeholder") and "abc\ufffd def" in text
    store = (tmp_path / "lone.out.store.jsonl").read_bytes()
    assert b"abc\\ud83d def" in store  # the same JSON escape


def test_tau_bench_airline_placeholders(data: Path, tmp_path: Path) -> None:
    runs = json.loads((data / "tau-bench" / "gpt-4o-airline.json").read_text())
    source = tmp_path / "airline.jsonl"
    source.write_text(
        "".join(
            json.dumps({"id": f"{x['task_id']}-{x['trial']}", "messages": x["traj"]}) + "\n"
            for x in runs
        )
    )
    compress(source, "--stages placeholder --placeholder-threshold 300", tmp_path)
    stats = json.loads((tmp_path / "airline.out.stats.json").read_text())
    tool = stats["by_role"]["tool"]
    assert tool["messages_after"] == tool["messages_before"]
    assert tool["tokens_after"] / tool["tokens_before"] < 0.8
    assert stats["stage_events"]["placeholder"]["placeholders_written"] > 150
    assert stats["store"]["entries"] > 0
