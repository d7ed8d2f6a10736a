"""Codex CLI rollouts: one session a file, compressed as what the model sees, every
other line kept in its place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_responses import api_errors, call, output, reasoning, user

from ctxcli.cli import cli
from ctxcli.formats import codex, detect_file
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")


def line(kind: str, payload: dict[str, Any], n: int = 0) -> dict[str, Any]:
    return {
        "timestamp": f"2026-05-11T08:{n // 60:02d}:{n % 60:02d}.000Z",
        "type": kind,
        "payload": payload,
    }


def rollout(steps: int = 10, *, compacted: bool = False) -> list[dict[str, Any]]:
    lines = [
        line("session_meta", {"id": "sess-1", "cwd": "/repo", "cli_version": "0.125.0"}),
        line("turn_context", {"cwd": "/repo", "model": "gpt-5"}),
        line(
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<permissions instructions>sandboxed</permissions instructions>",
                    }
                ],
            },
        ),
        line("event_msg", {"type": "task_started", "turn_id": "t1"}),
        line("response_item", user("Make the tests pass.")),
    ]
    if compacted:
        history = [
            user("Make the tests pass."),
            user("Summary of the work so far: edited src/a.py."),
        ]
        lines.append(line("compacted", {"message": "compacted", "replacement_history": history}))
    for n in range(steps):
        lines.append(line("response_item", reasoning(n), n))
        lines += [line("response_item", call(n, k), n) for k in range(2)]
        lines.append(line("event_msg", {"type": "exec_command_end", "exit_code": 0}, n))
        lines += [line("response_item", output(n, k), n) for k in range(2)]
    lines.append(
        line(
            "response_item",
            {
                "type": "custom_tool_call",
                "call_id": "patch_1",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** Update File: src/a.py\n*** End Patch",
            },
            98,
        )
    )
    lines.append(
        line(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": "patch_1", "output": "Success."},
            98,
        )
    )
    lines.append(
        line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}],
            },
            99,
        )
    )
    lines.append(line("event_msg", {"type": "task_complete"}, 99))
    lines.append(line("response_item", user("Now update the README."), 99))
    return lines


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    # As codex writes them, with a space after separators: untouched lines stay so.
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def items(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [x["payload"] for x in lines if x["type"] == "response_item"]


def test_a_rollout_is_detected_from_its_first_line_and_read_as_what_the_model_sees() -> None:
    lines = rollout(steps=2)
    assert detect_file(lines[:1]) is codex
    conversation = codex.read(lines, COUNTER, path="r.jsonl", line=1)
    assert conversation.id == "sess-1"
    roles = [m.role for m in conversation.messages]
    assert roles == [
        "developer",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert codex.problems(lines, conversation) == []


def test_the_base_instructions_are_counted_as_a_system_prompt(tmp_path: Path) -> None:
    """Codex sends ``session_meta``'s ``base_instructions`` as every turn's
    ``instructions``: 4,376 tokens of the sample rollout went uncounted."""
    prompt = "You are Codex, a coding agent. " * 100
    lines = rollout(steps=6)
    lines[0]["payload"]["base_instructions"] = {"text": prompt}
    conversation = codex.read(lines, COUNTER, path="r.jsonl", line=1)
    first = conversation.messages[0]
    assert (first.role, first.data["content"]) == ("system", prompt)
    plain = codex.read(rollout(steps=6), COUNTER, path="r.jsonl", line=1)
    assert conversation.tokens == plain.tokens + first.tokens
    source = write(tmp_path / "rollout.jsonl", lines)
    budget = str(first.tokens + 900)
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", budget])
    assert result.exit_code == 0, result.output
    out = [json.loads(x) for x in (tmp_path / "rollout.compressed.jsonl").read_text().splitlines()]
    assert out[0] == lines[0]  # the session_meta line as it was
    assert api_errors(items(lines), items(out)) == []
    assert codex.read(out, COUNTER, path="o", line=1).tokens <= first.tokens + 900


def test_after_a_compaction_the_replacement_history_and_what_follows_are_the_context() -> None:
    lines = rollout(steps=2, compacted=True)
    conversation = codex.read(lines, COUNTER, path="r.jsonl", line=1)
    texts = [m.data["content"][0]["text"] for m in conversation.messages[:2]]
    assert texts == ["Make the tests pass.", "Summary of the work so far: edited src/a.py."]
    # the developer message and the first user message before the compaction: not counted
    assert all(m.role != "developer" for m in conversation.messages)


@pytest.mark.parametrize("budget", [1200, 2500])
def test_compressed_rollouts_keep_other_lines_in_place_and_meet_no_api_error(
    tmp_path: Path, budget: int
) -> None:
    lines = rollout()
    source = write(tmp_path / "rollout.jsonl", lines)
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", str(budget)])
    assert result.exit_code == 0, result.output
    out_text = (tmp_path / "rollout.compressed.jsonl").read_text().splitlines()
    out = [json.loads(x) for x in out_text]
    assert api_errors(items(lines), items(out)) == []
    kept = [x for x in out if x["type"] != "response_item"]
    assert kept == [x for x in lines if x["type"] != "response_item"]  # every such line, in order
    original = source.read_text().splitlines()
    untouched = [x for x in out_text if x in original]
    assert len(untouched) > len(kept)  # byte for byte
    assert len(out) < len(lines) and out[-1] == lines[-1]
    assert any("[ctxcli summary]" in json.dumps(x) for x in out)
    assert (
        CliRunner().invoke(cli, ["validate", str(tmp_path / "rollout.compressed.jsonl")]).exit_code
        == 0
    )


def test_a_compacted_rollout_keeps_what_came_before_the_compaction(tmp_path: Path) -> None:
    lines = rollout(compacted=True)
    source = write(tmp_path / "rollout.jsonl", lines)
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "2500"])
    assert result.exit_code == 0, result.output
    out = [json.loads(x) for x in (tmp_path / "rollout.compressed.jsonl").read_text().splitlines()]
    at = next(i for i, x in enumerate(lines) if x["type"] == "compacted")
    assert out[:at] == lines[:at]  # out of the model's context: as read
    assert out[at]["type"] == "compacted"


def test_no_change_gives_back_the_file_byte_for_byte(tmp_path: Path) -> None:
    source = write(tmp_path / "rollout.jsonl", rollout(compacted=True))
    result = CliRunner().invoke(
        cli, ["compress", str(source), "--max-tokens", "0", "--stages", "priority"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rollout.compressed.jsonl").read_bytes() == source.read_bytes()


def test_codex_forced_on_another_formats_file_says_it_read_no_message(tmp_path: Path) -> None:
    """``--format codex`` (or ``claude-code``) on an OpenAI chat file read no message,
    wrote the file back and exited 0 with no word of it."""
    source = tmp_path / "chat.jsonl"
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    source.write_text(json.dumps({"messages": chat}) + "\n")
    for name in ("codex", "claude-code"):
        result = CliRunner().invoke(
            cli, ["compress", str(source), "--format", name, "-o", str(tmp_path / "o.jsonl")]
        )
        assert result.exit_code == 0
        assert f"no message read as {name} (is --format right?)" in result.output
