"""``ctxcli validate`` and the format rules behind it (ctxcli/validate.py, the
``problems`` of each format), one hand-written record per rule."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from ctxcli.cli import cli
from ctxcli.compress import Compressor
from ctxcli.config import Settings
from ctxcli.model import Conversation

SIG = "EqQBCkYIARgCKkA"


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}


def result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


USER = {"role": "user", "content": "go"}
SYSTEM = "Be brief."

RULES = [
    # OpenAI
    pytest.param(
        {"messages": [USER, {"role": "tool", "tool_call_id": "c1", "content": "x"}]},
        ["openai: message 1: tool result 'c1' without its call"],
        id="openai-result-without-call",
    ),
    pytest.param(
        {
            "messages": [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "assistant", "content": "done"},
            ]
        },
        ["openai: message 1: tool calls ['c2'] have no result"],
        id="openai-parallel-call-half-answered",
    ),
    pytest.param(
        {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [call("c1")]}]},
        [],
        id="openai-trailing-call-is-pending",
    ),
    # Anthropic
    pytest.param(
        {"system": SYSTEM, "messages": [{"role": "assistant", "content": "hi"}, USER]},
        ["anthropic: message 0: the first message is assistant, not user"],
        id="anthropic-first-message",
    ),
    pytest.param(
        {
            "system": SYSTEM,
            "messages": [
                USER,
                {"role": "assistant", "content": [use("t1")]},
                {"role": "assistant", "content": "wait"},
                {"role": "user", "content": [result("t1")]},
            ],
        },
        [
            "anthropic: message 1: tool_use ['t1'] has no tool_result in the next message",
            "anthropic: message 3: tool_result ['t1'] without a tool_use just before",
        ],
        id="anthropic-result-not-in-the-next-message",
    ),
    pytest.param(
        {
            "system": SYSTEM,
            "messages": [
                USER,
                {"role": "assistant", "content": [use("t1"), use("t2")]},
                {
                    "role": "user",
                    "content": [result("t1"), {"type": "text", "text": "hm"}, result("t2")],
                },
            ],
        },
        ["anthropic: message 2: tool_result blocks must come before other blocks"],
        id="anthropic-results-first",
    ),
    pytest.param(
        {
            "system": SYSTEM,
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "thinking", "thinking": "b"},
                        {"type": "redacted_thinking"},
                    ],
                },
            ],
        },
        [
            "anthropic: message 1 block 1: thinking block without thinking and signature",
            "anthropic: message 1 block 2: redacted_thinking block without data",
            "anthropic: message 1: thinking blocks must open the message",
        ],
        id="anthropic-thinking-blocks",
    ),
    # ShareGPT
    pytest.param(
        {"conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "x"}]},
        ["sharegpt: turn 0: the first turn is 'gpt', not a human turn"],
        id="sharegpt-first-turn",
    ),
    pytest.param(
        {
            "conversations": [
                {"from": "human", "value": "x"},
                {"from": "function_call", "value": "{}"},
                {"from": "gpt", "value": "y"},
                {"from": "observation", "value": "z"},
            ]
        },
        [
            "sharegpt: turn 2: two assistant turns in a row",
            "sharegpt: turn 1: function_call without an observation right after it",
            "sharegpt: turn 3: observation without a function_call right before it",
        ],
        id="sharegpt-adjacency",
    ),
]


@pytest.mark.parametrize(("record", "expected"), RULES)
def test_each_rule_is_reported_with_file_and_line(
    tmp_path: Path, record: dict[str, Any], expected: list[str]
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"messages": [USER]}) + "\n" + json.dumps(record) + "\n")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.stdout.splitlines() == [f"{path}:2: {reason}" for reason in expected]
    assert result.exit_code == (1 if expected else 0)


def test_validate_checks_several_files_and_json_arrays(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps([{"messages": [USER]}, {"conversations": [{"from": "human", "value": "x"}]}])
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"messages": [USER]}, {"prompt": "?"}], indent=1))
    result = CliRunner().invoke(cli, ["validate", str(good)])
    assert result.exit_code == 0 and "ok: 1 file(s), no problems" in result.output
    result = CliRunner().invoke(cli, ["validate", str(good), str(bad)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{bad}[record 1]: no format fits this record")


def test_a_folder_of_compressed_outputs_is_validated_file_by_file(tmp_path: Path) -> None:
    # `validate OUT` of what `compress --out-dir OUT` wrote had found "no *.jsonl …
    # files in this folder" (its outputs are left out of a folder input), and a
    # folder of two files was "ok: 1 file(s)".
    source = tmp_path / "src"
    source.mkdir()
    for name in ("a", "b"):
        record = {"messages": [USER, {"role": "assistant", "content": f"{name} " * 400}, USER]}
        (source / f"{name}.jsonl").write_text(json.dumps(record) + "\n")
    out = tmp_path / "OUT"
    args = ["compress", str(source), "--out-dir", str(out), "--max-tokens", "100", "-q"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    result = CliRunner().invoke(cli, ["validate", str(out)])
    assert result.exit_code == 0, result.output
    assert "ok: 2 file(s), no problems" in result.output  # not the stats files
    result = CliRunner().invoke(cli, ["count", str(out)])
    assert result.exit_code == 1
    assert "no *.jsonl, *.json, *.traj, *.parquet files in this folder (4 of ctxcli's" in (
        result.output
    )


def test_validate_forced_format_and_messages_key(tmp_path: Path) -> None:
    path = tmp_path / "t.traj"
    path.write_text(json.dumps({"history": [{"role": "assistant", "content": "x"}]}, indent=2))
    result = CliRunner().invoke(cli, ["validate", str(path)])  # a well-known key: found
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["validate", str(path), "--messages-key", "history"])
    assert result.exit_code == 0, result.output
    args = ["validate", str(path), "--messages-key", "history", "--format", "anthropic"]
    result = CliRunner().invoke(cli, args)
    assert "the first message is assistant, not user" in result.stdout


def test_a_claude_code_session_is_checked_as_a_whole(tmp_path: Path) -> None:
    events = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "message": USER},
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "gone",
            "sessionId": "s",
            "message": {"role": "assistant", "content": [use("t1")]},
        },
        {"type": "user", "uuid": "a1", "parentUuid": "a1", "sessionId": "s", "message": USER},
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{path}: claude-code: line 2: parentUuid 'gone' names no earlier event",
        f"{path}: claude-code: line 3: uuid 'a1' is used twice",
        f"{path}: claude-code: line 2: tool calls ['t1'] have no result",
    ]


@dataclass(frozen=True)
class AlterLastAssistant:
    """A broken stage: rewrites the last assistant message (its thinking block)."""

    name: ClassVar[str] = "alter"

    def apply(
        self, conversation: Conversation, context: Any
    ) -> tuple[Conversation, Mapping[str, int]]:
        messages = list(conversation.messages)
        at = max(i for i, m in enumerate(messages) if m.role == "assistant")
        data = dict(messages[at].data)
        data["content"] = [{"type": "thinking", "thinking": "edited", "signature": SIG}]
        messages[at] = messages[at].replace(data, context.counter)
        return conversation.with_messages(messages), {}


def test_compress_never_writes_output_that_breaks_its_format(tmp_path: Path) -> None:
    record = {
        "system": SYSTEM,
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "plan", "signature": SIG}, use("t1")],
            },
            {"role": "user", "content": [result("t1")]},
        ],
    }
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record) + "\n")
    target = tmp_path / "out.jsonl"
    compressor = Compressor(Settings(stages=[AlterLastAssistant()], encoding="o200k_base"))
    stats = compressor.file(str(source), str(target))
    assert target.read_bytes() == source.read_bytes()  # the conversation as read
    (fallback,) = stats.fallbacks
    assert fallback["stage"] == "alter" and fallback["written"] == "without alter"
    assert "the last assistant turn (message 2) was not kept" in fallback["rule"]


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_sharegpt_turns_must_alternate(tmp_path: Path) -> None:
    turns = [
        {"from": "human", "value": "a"},
        {"from": "human", "value": "b"},
        {"from": "gpt", "value": "c"},
    ]
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"conversations": turns}) + "\n")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:1: sharegpt: turn 1: two user turns in a row" in result.output


def test_dropping_sharegpt_turns_keeps_them_alternating(tmp_path: Path) -> None:
    turns = [{"from": "system", "value": "Be brief."}]
    for n in range(8):
        turns += [
            {"from": "human", "value": f"question {n} " * 20},
            {"from": "gpt", "value": f"answer {n} " * 30},
        ]
    turns.append({"from": "human", "value": "last question"})
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"conversations": turns}) + "\n")
    for stages in ("priority", "window", "summary,priority"):
        out = tmp_path / "out.jsonl"
        result = CliRunner().invoke(
            cli, ["compress", str(path), "-o", str(out), "--stages", stages, "--max-tokens", "300"]
        )
        assert result.exit_code == 0, result.output
        senders = [t["from"] for t in json.loads(out.read_text())["conversations"]]
        chat = [s for s in senders if s != "system"]
        assert all(a != b for a, b in zip(chat, chat[1:])), (stages, senders)
        assert chat[-1] == "human"
        assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        pytest.param(
            [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                {"role": "user", "content": "x"},
            ],
            "message 1: a tool call has no id",
            id="call-without-id",
        ),
        pytest.param(
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [CALL, CALL]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            "message 1: tool call id 'c1' is used twice",
            id="duplicate-id",
        ),
        pytest.param(
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "content": "r"},
            ],
            "message 2: tool result without a tool_call_id",
            id="result-without-id",
        ),
        pytest.param(
            [{"role": "user", "content": 123}],
            "message 0: content is a number",
            id="content-number",
        ),
    ],
)
def test_openai_shape_rules(tmp_path: Path, messages: list[Any], reason: str) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"messages": messages}) + "\n")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:1: openai: {reason}" in result.output


def test_a_number_json_refuses_on_line_1_is_listed_and_the_next_file_checked(
    tmp_path: Path,
) -> None:
    nan = tmp_path / "nan.jsonl"
    nan.write_text(
        '{"messages": [{"role": "user", "content": NaN}]}\n'
        + json.dumps({"messages": [USER]})
        + "\n"
    )
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"messages": [USER]}, {"prompt": "?"}]))
    result = CliRunner().invoke(cli, ["validate", str(nan), str(other)])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"{nan}:1: NaN is not a JSON number (column 43)"
    assert result.stdout.splitlines()[1].startswith(f"{other}[record 1]: no format fits")


def test_validate_reads_a_folder_as_compress_does(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    (folder / "deep").mkdir(parents=True)
    (folder / "a.jsonl").write_text(json.dumps({"messages": [USER]}) + "\n")
    (folder / "deep" / "b.json").write_text(json.dumps([{"prompt": "?"}]))
    (folder / "notes.txt").write_text("not a transcript")
    result = CliRunner().invoke(cli, ["validate", str(folder)])
    assert result.exit_code == 1, result.output
    assert "Is a directory" not in result.output
    assert result.stdout.startswith(f"{folder / 'deep' / 'b.json'}[record 0]: no format fits")
