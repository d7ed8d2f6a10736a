"""Gemini CLI chat recordings: one session a file, compressed as the CLI replays it to
the API on resume, written back in the recording's own shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_gemini import api_errors

from ctxcli.cli import cli
from ctxcli.formats import detect, gemini_cli
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")
REAL = Path(__file__).resolve().parents[2] / "shared/data/gemini"


def stamp(n: int) -> str:
    return f"2025-12-01T21:{n // 60:02d}:{n % 60:02d}.000Z"


def user(n: int, text: str) -> dict[str, Any]:
    return {"id": f"u{n}", "timestamp": stamp(n), "type": "user", "content": text}


def tool_call(n: int, k: int, size: int = 200) -> dict[str, Any]:
    output = f"contents of file {n}/{k}: " + " ".join(f"line{n}x{i}" for i in range(size))
    call_id = f"read_file-{n}-{k}"
    return {
        "id": call_id,
        "name": "read_file",
        "args": {"file_path": f"src/file_{n}_{k}.py"},
        "result": [
            {
                "functionResponse": {
                    "id": call_id,
                    "name": "read_file",
                    "response": {"output": output},
                }
            }
        ],
        "status": "success",
        "timestamp": stamp(n),
        "resultDisplay": "",
        "displayName": "ReadFile",
    }


def gemini(n: int, text: str = "", calls: int = 0) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": f"g{n}",
        "timestamp": stamp(n),
        "type": "gemini",
        "content": text,
        "thoughts": [
            {
                "subject": "Planning",
                "description": f"Step {n}: read the files.",
                "timestamp": stamp(n),
            }
        ],
        "tokens": {
            "input": 1000 + n,
            "output": 30,
            "cached": 0,
            "thoughts": 20,
            "tool": 0,
            "total": 1050,
        },
        "model": "gemini-2.5-pro",
    }
    if calls:
        message["toolCalls"] = [tool_call(n, k) for k in range(calls)]
    return message


def recording(steps: int = 10) -> dict[str, Any]:
    messages = [
        user(0, "hi"),
        gemini(1, "Hello! What would you like to do?"),
        {"id": "i2", "timestamp": stamp(2), "type": "info", "content": "Switched model."},
        user(3, "/stats"),
        user(4, "Explain the code in src/ and fix the failing test."),
    ]
    messages += [gemini(5 + n, calls=1 + n % 2) for n in range(steps)]
    messages.append(gemini(5 + steps, "Fixed: the test passes now."))
    messages.append(user(6 + steps, "Thanks. Now run the linter."))
    return {
        "sessionId": "5b959dae-8655-4cd1-b10f-720b8c336ea2",
        "projectHash": "fb8e24",
        "startTime": stamp(0),
        "lastUpdated": stamp(6 + steps),
        "messages": messages,
    }


def replay(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The contents Gemini CLI sends on resume (``convertSessionToClientHistory``)."""
    contents = []
    for m in messages:
        content = m["content"] if isinstance(m["content"], list) else [m["content"]]
        parts = [{"text": p} if isinstance(p, str) else p for p in content]  # ensurePartArray
        if m["type"] == "user" and not parts[0]["text"].startswith(("/", "?")):
            contents.append({"role": "user", "parts": parts})
        elif m["type"] == "gemini":
            calls = m.get("toolCalls", [])
            parts = [{"text": m["content"]}] if m["content"] else []
            parts += [
                {"functionCall": {"name": c["name"], "args": c["args"], "id": c["id"]}}
                for c in calls
            ]
            contents.append({"role": "model", "parts": parts})
            answers = [p for c in calls for p in c.get("result") or ()]
            if answers:
                contents.append({"role": "user", "parts": answers})
    return contents


def compress(tmp_path: Path, record: dict[str, Any], *args: str) -> dict[str, Any]:
    source = tmp_path / "session-1.json"
    source.write_text(json.dumps(record, indent=2))
    result = CliRunner().invoke(cli, ["compress", str(source), *args])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads((tmp_path / "session-1.compressed.json").read_text())
    return out


def test_a_recording_is_read_as_the_cli_replays_it() -> None:
    record = recording(steps=2)
    assert detect(record) is gemini_cli
    conversation = gemini_cli.read(record, COUNTER, path="s.json", line=1)
    assert conversation.id == "5b959dae-8655-4cd1-b10f-720b8c336ea2"
    roles = [m.role for m in conversation.messages]
    # the info message and the /stats command are not replayed
    assert roles == ["user", "assistant", "user", "assistant", "tool"] + [
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    answer = conversation.messages[1].data["content"]
    assert answer[0] == {"text": "**Planning** Step 1: read the files.", "thought": True}
    step = conversation.messages[3]
    assert [c["id"] for c in step.data["tool_calls"]] == ["read_file-5-0"]
    assert conversation.messages[4].data["tool_call_id"] == "read_file-5-0"
    assert conversation.messages[4].data["content"].startswith("contents of file 5/0")
    assert gemini_cli.problems(record, conversation) == []


@pytest.mark.parametrize("budget", [500, 2000, 100_000])
@pytest.mark.parametrize("stages", ["placeholder,summary,priority", "window", "priority"])
def test_compressed_recordings_keep_their_shape_and_meet_no_api_error(
    tmp_path: Path, budget: int, stages: str
) -> None:
    record = recording()
    out = compress(tmp_path, record, "--max-tokens", str(budget), "--stages", stages)
    assert {k: v for k, v in out.items() if k != "messages"} == {
        k: v for k, v in record.items() if k != "messages"
    }
    assert api_errors(replay(record["messages"]), replay(out["messages"])) == []
    messages = out["messages"]
    passing = [m for m in record["messages"] if m["type"] == "info" or m["id"] == "u3"]
    assert [m for m in messages if m in passing] == passing  # never dropped
    assert messages[-1] == record["messages"][-1]
    for message in messages:
        if message not in record["messages"]:  # a summary, or a result a stage changed
            assert set(message) >= {"id", "timestamp", "type", "content"}
            assert message["type"] in ("user", "gemini")
    if budget == 100_000 and stages == "priority":
        assert out == record
    elif budget < 100_000:
        assert len(messages) < len(record["messages"])
    checked = CliRunner().invoke(cli, ["validate", str(tmp_path / "session-1.compressed.json")])
    assert checked.exit_code == 0, checked.output


def test_a_summary_of_the_steps_joins_the_latest_user_message(tmp_path: Path) -> None:
    record = recording(steps=12)
    record["messages"] = record["messages"][:-2]  # the task is the latest user message
    out = compress(tmp_path, record, "--max-tokens", "3000")
    assert api_errors(replay(record["messages"]), replay(out["messages"])) == []
    (task,) = [m for m in out["messages"] if m["id"] == "u4"]
    own, summary = task["content"]  # the user's string as it was, then the summary
    assert own == "Explain the code in src/ and fix the failing test."
    assert summary.startswith("[ctxcli summary]")
    assert "read_file(src/file_5_0.py" in summary
    assert out["messages"][-1] == record["messages"][-1]


def test_a_joined_summary_keeps_the_users_parts_as_written(tmp_path: Path) -> None:
    record = recording(steps=12)
    record["messages"] = record["messages"][:-2]
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo" * 40}}
    task = record["messages"][4]
    task["content"] = ["Explain the code in src/ and fix the failing test.", image]
    out = compress(tmp_path, record, "--max-tokens", "3000")
    (written,) = [m for m in out["messages"] if m["id"] == "u4"]
    assert written["content"][:2] == task["content"]  # a bare string stays one
    assert written["content"][2].startswith("[ctxcli summary]")


def test_what_the_cli_does_not_replay_passes_through() -> None:
    # isIgnoredUserContent: empty, a command, or context the session or a hook injected
    record = recording(steps=2)
    skipped = [
        user(30, "<session_context>cwd: /repo</session_context>"),
        user(31, "   "),
        {**user(32, ""), "content": [{"text": "?help"}]},
    ]
    record["messages"][4:4] = skipped
    conversation = gemini_cli.read(record, COUNTER, path="s.json", line=1)
    texts = [str(m.data.get("content")) for m in conversation.messages]
    assert not any("session_context" in t or "?help" in t for t in texts)
    _, origin = gemini_cli.replayed(record["messages"])
    assert not {4, 5, 6} & set(origin)


def test_a_chat_log_forced_as_a_recording_is_a_bad_line_not_an_empty_one(
    tmp_path: Path,
) -> None:
    # An OpenAI chat record has ``messages`` too, of roles, not types: read as a
    # recording it had held no message, and was written back with exit 0 and no word.
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    result = CliRunner().invoke(
        cli, ["compress", str(chat), "--format", "gemini-cli", "-o", str(tmp_path / "o.jsonl")]
    )
    assert result.exit_code == 1
    assert f"{chat}:1: message 0 has no 'type' (known: compression_marker" in result.output
    newer = recording(steps=1)
    newer["messages"].insert(1, {**user(40, "x"), "type": "a_newer_kind"})
    conversation = gemini_cli.read(newer, COUNTER, path="s.json", line=1)
    assert [m.role for m in conversation.messages][:2] == ["user", "assistant"]


def test_a_joined_summary_is_merged_when_compressed_again(tmp_path: Path) -> None:
    record = recording(steps=16)
    record["messages"] = record["messages"][:-2]
    first = compress(tmp_path, record, "--max-tokens", "4000")
    again = compress(tmp_path, first, "--max-tokens", "3000")
    assert api_errors(replay(record["messages"]), replay(again["messages"])) == []
    (task,) = [m for m in again["messages"] if m["id"] == "u4"]
    own, summary = task["content"]  # the old summary folded into the new one
    assert own == "Explain the code in src/ and fix the failing test."
    (before,) = [m for m in first["messages"] if m["id"] == "u4"]
    old = int(before["content"][1].split()[2])
    assert summary.startswith(f"[ctxcli summary] {old + 1} earlier messages folded.")


def test_no_change_gives_back_the_file_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "session-1.json"
    source.write_text(json.dumps(recording(), indent=2))
    result = CliRunner().invoke(
        cli, ["compress", str(source), "--max-tokens", "0", "--stages", "priority"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "session-1.compressed.json").read_bytes() == source.read_bytes()


def test_placeholders_rewrite_the_function_response_and_restore(tmp_path: Path) -> None:
    record = recording(steps=3)
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo" * 400}}
    picture = record["messages"][5]["toolCalls"][0]
    picture["result"].append(image)  # read_file of an image: the response, then the file
    picture["result"][0]["functionResponse"]["response"]["output"] += " (and the image)"
    args = ["--stages", "placeholder", "--placeholder-threshold", "50"]
    out = compress(tmp_path, record, *args, "--placeholder-keep-recent", "0")
    calls = [c for m in out["messages"] for c in m.get("toolCalls", ())]
    for call in calls:
        (part,) = call["result"]
        assert part["functionResponse"]["response"]["output"].startswith("[ctxcli placeholder")
        assert call["id"] == part["functionResponse"]["id"]
        assert call["resultDisplay"] == ""  # what the terminal showed stays
    restored = CliRunner().invoke(cli, ["restore", str(tmp_path / "session-1.compressed.json")])
    assert restored.exit_code == 0, restored.output
    assert json.loads(restored.stdout) == record


def test_problems_name_the_message_with_the_api_error_texts() -> None:
    record = recording(steps=2)
    del record["messages"][5]["toolCalls"][0]["result"]  # a call never answered
    record["messages"].insert(5, gemini(40, "Let me look."))  # a model turn before a call
    conversation = gemini_cli.read(record, COUNTER, path="s.json", line=1)
    assert [str(p) for p in gemini_cli.problems(record, conversation)] == [
        "message 6: Please ensure that function call turn comes immediately after a user "
        "turn or after a function response turn.",
        "message 6: Please ensure that the number of function response parts is equal to the "
        "number of function call parts of the function call turn (1 calls, 0 responses).",
        "message 7: Please ensure that function call turn comes immediately after a user "
        "turn or after a function response turn.",
    ]


def real_files() -> list[Path]:
    return sorted(REAL.glob("*.json")) if REAL.is_dir() else []


@pytest.mark.skipif(not real_files(), reason="../shared/data is not here")
@pytest.mark.parametrize("path", real_files(), ids=lambda p: p.name[:40])
def test_the_real_recording_compresses_validates_and_comes_back_unchanged(
    tmp_path: Path, path: Path
) -> None:
    record = json.loads(path.read_text())
    tokens = gemini_cli.read(record, COUNTER, path=str(path), line=1).tokens
    out_path = tmp_path / "out.json"
    for budget in (2000, tokens // 4):
        result = CliRunner().invoke(
            cli, ["compress", str(path), "-o", str(out_path), "--max-tokens", str(budget)]
        )
        assert result.exit_code == 0, result.output
        out = json.loads(out_path.read_text())
        assert api_errors(replay(record["messages"]), replay(out["messages"])) == []
        assert gemini_cli.read(out, COUNTER, path="o", line=1).tokens <= budget
        checked = CliRunner().invoke(cli, ["validate", str(out_path)])
        assert checked.exit_code == 0, checked.output
    same = CliRunner().invoke(
        cli,
        ["compress", str(path), "-o", str(out_path), "--max-tokens", "0", "--stages", "priority"],
    )
    assert same.exit_code == 0, same.output
    assert out_path.read_bytes() == path.read_bytes()


def test_a_call_the_cli_recorded_as_failed_is_an_error_result() -> None:
    # Its result need not say it failed (the status does): the summary said "→ ok".
    record = recording(steps=2)
    call = record["messages"][5]["toolCalls"][0]
    call["status"] = "error"
    conversation = gemini_cli.read(record, COUNTER, path="s.json", line=1)
    results = [m for m in conversation.messages if m.role == "tool"]
    assert [m.data.get("is_error", False) for m in results] == [True, False, False]
    assert gemini_cli.write(record, conversation) == record  # written back as read
