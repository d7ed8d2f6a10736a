"""One conversation's trouble never costs the file: a pipeline whose output would break
a rule, or whose stage raises, falls back to a safer plan for that conversation alone."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl
from test_compress_cli import chat, write_jsonl

from ctxcli import pipeline
from ctxcli.cli import cli
from ctxcli.model import Conversation
from ctxcli.tokens import TokenCounter


@dataclasses.dataclass(frozen=True)
class DropsSystem:
    """A buggy stage: drops the system message of a conversation with ``drop`` in its
    id (the invariant check must catch it)."""

    name: ClassVar[str] = "drops_system"
    fits_budget: ClassVar[bool] = True

    def apply(
        self, conversation: Conversation, context: Any
    ) -> tuple[Conversation, Mapping[str, int]]:
        if "drop" not in str(conversation.id):
            return conversation, {}
        kept = [m for m in conversation.messages if not m.is_system]
        return conversation.with_messages(kept), {"dropped": 1}


@dataclasses.dataclass(frozen=True)
class Raises:
    """A buggy stage: raises on a conversation with ``raise`` in its id."""

    name: ClassVar[str] = "raises"
    fits_budget: ClassVar[bool] = True

    def apply(
        self, conversation: Conversation, context: Any
    ) -> tuple[Conversation, Mapping[str, int]]:
        if "raise" in str(conversation.id):
            raise KeyError("tool_calls")
        return conversation, {}


@pytest.fixture
def buggy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(pipeline.STAGES, DropsSystem.name, DropsSystem)
    monkeypatch.setitem(pipeline.STAGES, Raises.name, Raises)


def named(record: dict[str, Any], name: str) -> dict[str, Any]:
    return {**record, "id": name}


def compress(source: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "300", *args])


@pytest.mark.usefixtures("buggy")
def test_a_stage_that_breaks_a_rule_costs_only_its_conversation(tmp_path: Path) -> None:
    records = [named(chat(30), "ok-1"), named(chat(30), "drop-me"), named(chat(30), "ok-2")]
    source = write_jsonl(tmp_path / "logs.jsonl", records)
    result = compress(source, "--stages", "drops_system,summary,priority")
    assert result.exit_code == 5, result.output
    assert (
        f"warning: {source}:2: conversation drop-me: the drops_system stage broke a rule "
        "(message 0 (system) was dropped but must be kept as is); written without drops_system"
    ) in result.output
    assert "1 conversation(s) written with a safer plan" in result.output
    out = read_jsonl(tmp_path / "logs.compressed.jsonl")
    counter = TokenCounter("o200k_base")
    for before, after in zip(records, out):
        assert_valid(before, after, counter, max_tokens=300)
    assert out[1]["messages"][0] == records[1]["messages"][0]  # the system message
    assert len(out[1]["messages"]) < len(records[1]["messages"])  # still compressed
    stats = json.loads((tmp_path / "logs.compressed.stats.json").read_text())
    assert stats["fallbacks"] == [
        {
            "id": "drop-me",
            "line": 2,
            "stage": "drops_system",
            "rule": "message 0 (system) was dropped but must be kept as is",
            "written": "without drops_system",
        }
    ]
    assert stats["conversations"] == 3


@pytest.mark.usefixtures("buggy")
def test_a_stage_that_raises_falls_back_and_the_rest_of_the_file_is_compressed(
    tmp_path: Path,
) -> None:
    records = [named(chat(30), "raise-here"), named(chat(30), "fine")]
    source = write_jsonl(tmp_path / "logs.jsonl", records)
    result = compress(source, "--stages", "summary,raises,priority", "--jobs", "1")
    assert result.exit_code == 5, result.output
    stats = json.loads((tmp_path / "logs.compressed.stats.json").read_text())
    (entry,) = stats["fallbacks"]
    assert entry["stage"] == "raises" and entry["rule"] == "KeyError: 'tool_calls'"
    assert entry["written"] == "without raises"
    assert stats["conversations_changed"] == 2


@pytest.mark.usefixtures("buggy")
def test_when_the_safer_plan_breaks_too_the_conversation_is_written_as_read(
    tmp_path: Path,
) -> None:
    record = named(chat(30), "drop-raise")
    source = write_jsonl(tmp_path / "logs.jsonl", [record])
    result = compress(source, "--stages", "drops_system,raises")
    assert result.exit_code == 5, result.output
    assert (tmp_path / "logs.compressed.jsonl").read_bytes() == source.read_bytes()
    stats = json.loads((tmp_path / "logs.compressed.stats.json").read_text())
    (entry,) = stats["fallbacks"]
    assert entry["stage"] == "drops_system" and entry["written"] == "as read"
    assert [e["id"] for e in stats["over_budget"]] == ["drop-raise"]  # what was written


@pytest.mark.usefixtures("buggy")
def test_containment_holds_in_worker_processes_and_with_check(tmp_path: Path) -> None:
    records = [named(chat(30), f"drop-{i}" if i % 50 == 7 else f"ok-{i}") for i in range(400)]
    source = write_jsonl(tmp_path / "logs.jsonl", records)
    assert source.stat().st_size > (1 << 20)  # big enough to be cut into pieces
    pooled = compress(
        source,
        "--stages",
        "drops_system,summary",
        "--jobs",
        "2",
        "--stats",
        str(tmp_path / "pooled.json"),
        "-o",
        str(tmp_path / "pooled.jsonl"),
    )
    serial = compress(source, "--stages", "drops_system,summary", "--jobs", "1")
    assert pooled.exit_code == serial.exit_code == 5, pooled.output
    assert (tmp_path / "pooled.jsonl").read_bytes() == (
        tmp_path / "logs.compressed.jsonl"
    ).read_bytes()
    stats = json.loads((tmp_path / "pooled.json").read_text())
    assert [e["line"] for e in stats["fallbacks"]] == [8 + 50 * k for k in range(8)]
    checked = compress(source, "--stages", "drops_system", "--check", "--max-tokens", "10")
    assert checked.exit_code == 3  # --check's gate comes first


@pytest.mark.usefixtures("buggy")
def test_a_claude_code_session_falls_back_too(tmp_path: Path) -> None:
    events = []
    parent = None
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        uuid = f"u{i}"
        events.append(
            {
                "type": role,
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": "s",
                "message": {"role": role, "content": f"turn {i} " + "words " * 40},
            }
        )
        parent = uuid
    source = write_jsonl(tmp_path / "session.jsonl", events)
    result = compress(source, "--stages", "summary,raises", "--format", "claude-code")
    assert result.exit_code == 0, result.output  # the session's id has no "raise"
    stats = json.loads((tmp_path / "session.compressed.stats.json").read_text())
    assert stats["fallbacks"] == []


def test_no_over_budget_warning_when_no_stage_could_fit_the_budget(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "logs.jsonl", [chat(30)])
    result = compress(source, "--stages", "placeholder")
    assert result.exit_code == 0, result.output
    assert "over budget" not in result.output
    stats = json.loads((tmp_path / "logs.compressed.stats.json").read_text())
    assert [e["id"] for e in stats["over_budget"]] == ["chat-30"]  # still listed
    windowed = compress(source, "--stages", "placeholder,window", "--max-tokens", "10")
    assert "is over budget: " in windowed.output
