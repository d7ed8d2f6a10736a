"""The format adapters (ctxcli/formats), input shapes and block counting, on small
hand-written records; the shared real data at the end (skipped when absent)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxcli import formats, jsonio
from ctxcli.cli import cli
from ctxcli.config import resolve
from ctxcli.errors import ConfigError, InputError
from ctxcli.formats import anthropic, claude_code, openai, sharegpt
from ctxcli.inputs import default_stats
from ctxcli.model import SUMMARY_MARKER, Message, latest_turn, seal, summary_header, units
from ctxcli.tokens import DOCUMENT_TOKENS, IMAGE_TOKENS, TokenCounter
from ctxcli.validate import validate_file

COUNTER = TokenCounter("o200k_base")
SIG = "EqQBCkYIARgCKkA"  # a thinking signature; its value does not matter here


def read(module: Any, record: Any) -> Any:
    return module.read(record, COUNTER, path="x.jsonl", line=1)


def keep(conversation: Any, positions: list[int], *extra: Message) -> Any:
    """The conversation with only ``positions`` kept, then ``extra`` new messages first."""
    kept = [conversation.messages[i] for i in positions]
    return conversation.with_messages([*extra, *kept])


def summary(role: str = "user") -> Message:
    data = {"role": role, "content": f"{SUMMARY_MARKER} 2 earlier messages folded.\nfacts"}
    return Message(data, COUNTER.message(data), None, True)


# --- Anthropic ------------------------------------------------------------------------

ANTHROPIC: dict[str, Any] = {
    "id": "a1",
    "model": "claude-x",
    "system": [{"type": "text", "text": "You are terse."}],
    "messages": [
        {"role": "user", "content": "Weather in Oslo and Lima?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two calls.", "signature": SIG},
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "t2", "name": "weather", "input": {"city": "Lima"}},
            ],
            "x_unknown": 1,
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "snow"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "mild"}],
                    "is_error": False,
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
            "cache": "keep me",
        },
        {"role": "assistant", "content": "Same."},
    ],
}


def test_anthropic_maps_blocks_to_neutral_messages() -> None:
    conversation = read(anthropic, ANTHROPIC)
    roles = [m.role for m in conversation.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    assistant = conversation.messages[2].data
    assert [c["id"] for c in assistant["tool_calls"]] == ["t1", "t2"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text"]
    assert conversation.messages[4].data["tool_call_id"] == "t2"
    assert conversation.user_first
    assert anthropic.problems(ANTHROPIC, conversation) == []


def test_anthropic_tool_use_ids_used_twice_are_a_problem() -> None:
    # validate said "ok" of two calls with one id; the API wants them unique.
    call = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}
    twice = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [call, call]}]
    again = [*twice[:1], {"role": "assistant", "content": [call]}, result]
    for turns in ([*twice, result], [*again, *again[1:]]):
        record = {"messages": turns}
        found = anthropic.problems(record, read(anthropic, record))
        assert [(p.rule, p.message) for p in found] == [("call-id-twice", len(turns) - 2)]
        assert "tool_use id 't1' is used twice" in found[0].detail


def test_a_record_that_reuses_ids_is_still_compressed(tmp_path: Path) -> None:
    # With only the first reused id of a message named, folding the message of 'a'
    # made 'b' look newly broken: the record was written as read, "a ctxcli bug".
    def use(i: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": i, "name": "read", "input": {"path": f"/x/{i}"}}

    def result(i: str, text: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": i, "content": text}

    turns = [
        {"role": "user", "content": "Please inspect the repository and fix the parser."},
        {"role": "assistant", "content": [use("a")]},
        {"role": "user", "content": [result("a", "A " + " ".join(f"w{k}" for k in range(1500)))]},
        {"role": "assistant", "content": [use("b")]},
        {"role": "user", "content": [result("b", "B short")]},
        {"role": "assistant", "content": [use("a"), use("b")]},
        {"role": "user", "content": [result("a", "again a"), result("b", "again b")]},
        {"role": "assistant", "content": "Done; the parser is fixed."},
        {"role": "user", "content": "Thanks, now run the tests."},
    ]
    record = {"messages": turns}
    found = anthropic.problems(record, read(anthropic, record))
    assert [(p.rule, p.message) for p in found] == [("call-id-twice", 5)] * 2
    out = run_compress(tmp_path, [record], "--max-tokens 400 --check")[0]
    assert len(json.dumps(out)) < len(json.dumps(record)) // 4


def test_anthropic_untouched_record_is_written_back_as_read() -> None:
    conversation = read(anthropic, ANTHROPIC)
    out = anthropic.write(ANTHROPIC, conversation)
    assert out == ANTHROPIC
    assert all(a is b for a, b in zip(out["messages"], ANTHROPIC["messages"]))


def test_anthropic_a_partly_kept_entry_keeps_only_its_surviving_blocks() -> None:
    # The tool call unit (assistant + both results) goes; the user's text stays.
    conversation = read(anthropic, ANTHROPIC)
    out = anthropic.write(ANTHROPIC, keep(conversation, [0, 1, 5, 6]))
    third = ANTHROPIC["messages"][2]
    assert out["messages"][1] == {**third, "content": [third["content"][2]]}
    assert out["messages"][1]["cache"] == "keep me"
    assert out["system"] is ANTHROPIC["system"]
    assert out["messages"][0] is ANTHROPIC["messages"][0]


def test_anthropic_results_kept_without_the_text_keep_their_entry_order() -> None:
    conversation = read(anthropic, ANTHROPIC)
    out = anthropic.write(ANTHROPIC, keep(conversation, [0, 1, 2, 3, 4]))
    third = ANTHROPIC["messages"][2]
    assert out["messages"][2]["content"] == third["content"][:2]


@pytest.mark.parametrize("role", ["user", "system"])
def test_anthropic_a_summary_is_a_user_message_with_a_text_block(role: str) -> None:
    conversation = read(anthropic, ANTHROPIC)
    out = anthropic.write(ANTHROPIC, keep(conversation, [0, 5, 6], summary(role)))
    first = out["messages"][0]
    assert first["role"] == "user" and first["content"][0]["type"] == "text"
    assert first["content"][0]["text"].startswith(SUMMARY_MARKER)


def test_anthropic_is_detected_and_plain_records_stay_openai() -> None:
    assert formats.detect(ANTHROPIC) is anthropic
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert formats.detect(plain) is openai
    assert (
        formats.detect({"system": "s", "messages": [{"role": "user", "content": "hi"}]})
        is anthropic
    )


def test_anthropic_unknown_role_and_bad_block_are_errors() -> None:
    with pytest.raises(InputError, match=r"x.jsonl:1: message 0 has unknown role 'tool'"):
        read(anthropic, {"messages": [{"role": "tool", "content": "x"}]})
    with pytest.raises(InputError, match="message 0 block 1 is a string, not an object"):
        read(
            anthropic,
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}]},
        )


def test_anthropic_compression_keeps_user_first_and_the_last_thinking_turn(
    tmp_path: Path,
) -> None:
    turns: list[dict[str, Any]] = []
    for n in range(6):
        turns.append({"role": "user", "content": f"Question {n}: " + "words " * 60})
        turns.append({"role": "assistant", "content": [{"type": "text", "text": "answer " * 60}]})
    turns += [
        {"role": "user", "content": "Look it up."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should search.", "signature": SIG},
                {"type": "tool_use", "id": "s1", "name": "search", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "s1", "content": "found " * 50}],
        },
    ]
    record = {"system": "Be brief. " * 30, "messages": turns}
    out = run_compress(tmp_path, [record], "--max-tokens 400 --stages priority")[0]
    assert out["system"] == record["system"]
    assert out["messages"][0]["role"] == "user"
    assert out["messages"][-2:] == turns[-2:]  # the tool loop, thinking block and all
    assert len(out["messages"]) < len(turns)
    assert anthropic.problems(out, read(anthropic, out)) == []


# --- ShareGPT -------------------------------------------------------------------------

SHAREGPT: dict[str, Any] = {
    "system": "You convert units.",
    "conversations": [
        {"from": "human", "value": "3 miles in km?"},
        {"from": "function_call", "value": '{"name": "convert", "arguments": {"v": 3}}'},
        {"from": "observation", "value": '{"result": 4.828}'},
        {"from": "gpt", "value": "About 4.83 km."},
        {"from": "user", "value": "Thanks."},
    ],
    "tools": '[{"name": "convert"}]',
}


def test_sharegpt_maps_turns_and_pairs_calls_by_adjacency() -> None:
    conversation = read(sharegpt, SHAREGPT)
    roles = [m.role for m in conversation.messages]
    assert roles == ["system", "user", "assistant", "function", "assistant", "user"]
    call = conversation.messages[2]
    assert call.calls_function and call.data["function_call"]["name"] == "convert"
    assert conversation.extra_tokens > 0
    assert sharegpt.write(SHAREGPT, conversation) == SHAREGPT
    assert sharegpt.problems(SHAREGPT, conversation) == []


def test_sharegpt_a_summary_is_a_human_turn_and_the_system_column_stays() -> None:
    conversation = read(sharegpt, SHAREGPT)
    out = sharegpt.write(SHAREGPT, keep(conversation, [0, 4, 5], summary()))
    assert out["system"] == SHAREGPT["system"]
    assert out["conversations"][0]["from"] == "human"
    assert out["conversations"][1:] == SHAREGPT["conversations"][3:]
    out = sharegpt.write(SHAREGPT, keep(conversation, [0, 5], summary("system")))
    assert out["conversations"][0]["from"] == "system"


def test_sharegpt_summaries_go_by_the_records_names_and_join_the_human_turn_they_meet() -> None:
    conversation = read(sharegpt, SHAREGPT)  # its human turns are "human", then "user"
    out = sharegpt.write(SHAREGPT, keep(conversation, [0, 4, 5], summary()))
    assert out["conversations"][0] == {"from": "human", "value": summary().data["content"]}
    named = {
        **SHAREGPT,
        "conversations": [
            {**t, "from": "user"} if t["from"] == "human" else t for t in SHAREGPT["conversations"]
        ],
    }
    out = sharegpt.write(named, keep(read(sharegpt, named), [0, 4, 5], summary()))
    assert out["conversations"][0]["from"] == "user"  # a "human" turn: another dialect
    # Met by a human turn, a summary is joined to its text, and read back apart.
    text = seal(summary_header(4), "Facts: 4.828")
    data = {"role": "user", "content": text}
    out = sharegpt.write(SHAREGPT, keep(conversation, [0, 5], Message(data, 9, None, True)))
    assert out["conversations"] == [{"from": "user", "value": text + "\n\nThanks."}]
    again = read(sharegpt, out)
    assert [(m.role, m.data["content"]) for m in again.messages[1:]] == [
        ("user", text),
        ("user", "Thanks."),
    ]
    assert sharegpt.write(out, again) == out
    # A human turn with no text takes none: the record's summaries then stand apart.
    listed = {
        **SHAREGPT,
        "conversations": [
            *SHAREGPT["conversations"][:4],
            {"from": "user", "value": [{"text": "Thanks."}]},
        ],
    }
    assert read(sharegpt, SHAREGPT).joins_user and not read(sharegpt, listed).joins_user


def test_sharegpt_bad_turns_are_all_named() -> None:
    record = {
        "conversations": [{"from": "human", "value": "a"}, {"from": "bing", "value": "b"}, "c"]
    }
    with pytest.raises(InputError) as info:
        read(sharegpt, record)
    assert "turn 1 has unknown 'from' 'bing'" in str(info.value)
    assert "turn 2 is a string, not an object" in str(info.value)


@pytest.mark.parametrize(
    ("calls", "kind"), [(5, "a number"), ("c1", "a string"), ({}, "an object")]
)
def test_openai_tool_calls_that_are_not_a_list_are_an_input_error(calls: Any, kind: str) -> None:
    record = {
        "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": calls}]
    }
    with pytest.raises(InputError, match=f"message 1: tool_calls is {kind}, not a list"):
        read(openai, record)


def test_a_custom_tool_call_is_a_call_with_its_input_for_arguments(tmp_path: Path) -> None:
    # {"type": "custom", "custom": {"name", "input"}} (ChatCompletionMessageCustomToolCall,
    # GPT-5's free-text tools) was "a tool call has no function name": validate failed
    # a valid log, compress warned it broke the rules, and placeholders said tool="".
    patch = "*** Begin Patch\n*** Update File: billing/invoice.py\n*** End Patch"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix billing/invoice.py."}]
    for k in range(4):
        custom = {"name": "apply_patch", "input": f"{patch} {k}"}
        call = {"id": f"call_{k}", "type": "custom", "custom": custom}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        result = f"Applied patch {k}. " + "ok line\n" * 400
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": result})
    messages.append({"role": "user", "content": "Thanks, run the tests."})
    record = {"messages": messages}
    conversation = read(openai, record)
    assert openai.problems(record, conversation) == []
    named = {"id": "c", "type": "function", "function": {"name": "apply_patch"}}
    named["function"]["arguments"] = f"{patch} 0"
    assert conversation.messages[1].tokens == COUNTER.message(
        {**messages[1], "tool_calls": [named]}
    )
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps(record) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["compress", str(source), "-o", str(out), "--max-tokens", "400"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    text = out.read_text()
    assert 'tool=\\"apply_patch\\"' in text and "Actions: apply_patch(" in text
    assert list(validate_file(str(out))) == []


# --- OpenAI relatives ----------------------------------------------------------------


def test_llama_factory_tool_call_parts_pair_with_the_tool_messages_after_them() -> None:
    record = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "value": "Two areas."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "value": "Call twice."},
                    {"type": "tool_call", "value": '{"name": "area", "arguments": {"r": 1}}'},
                    {"type": "tool_call", "value": '{"name": "area", "arguments": {"r": 2}}'},
                ],
            },
            {"role": "tool", "content": [{"type": "text", "value": "[3.14, 12.57]"}]},
            {"role": "assistant", "content": [{"type": "text", "value": "Done."}]},
        ]
    }
    conversation = read(openai, record)
    assert conversation.messages[1].call_ids == ("ctxcli-1-0", "ctxcli-1-1")
    assert conversation.messages[2].result_ids == ("ctxcli-1-0", "ctxcli-1-1")
    assert openai.problems(record, conversation) == []
    assert openai.write(record, conversation) == record
    changed = conversation.messages[1].replace(dict(conversation.messages[1].data), COUNTER)
    out = openai.write(record, conversation.with_messages([conversation.messages[0], changed]))
    assert out["messages"][1] == record["messages"][1]  # the added keys never leak out


def test_llama_factory_parts_must_alternate_sides_where_plain_openai_need_not() -> None:
    parts = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "value": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "value": "One."}]},
            {"role": "user", "content": [{"type": "text", "value": "Two."}]},
            {"role": "assistant", "content": [{"type": "text", "value": "Both."}]},
        ]
    }
    found = openai.problems(parts, read(openai, parts))
    assert [p.rule for p in found] == ["two-in-a-row"] and "message 2" in str(found[0])
    plain = {"messages": [{"role": "user", "content": "One."}, {"role": "user", "content": "Two."}]}
    assert openai.problems(plain, read(openai, plain)) == []


def test_a_summary_in_llama_factory_parts_is_one_text_part_and_read_back_as_one() -> None:
    """A summary in a record of ``{"type": "text", "value": …}`` parts was a plain
    string, the one message of another shape, which a loader of such data may reject."""

    def text(value: str) -> list[dict[str, str]]:
        return [{"type": "text", "value": value}]

    turns = [
        [
            {"role": "user", "content": text(f"Question {i}: how far is city {i}? " * 20)},
            {"role": "assistant", "content": text(f"City {i} is {i * 100} km away. " * 20)},
        ]
        for i in range(6)
    ]
    last = [{"role": "user", "content": text("And city 9?")}]
    record = {"messages": [message for turn in turns for message in turn] + last}
    once = _compressed_record(record, "400")
    summary = once["messages"][0]
    assert summary["content"][0]["value"].startswith("[ctxcli summary] ")
    assert summary["content"] == text(summary["content"][0]["value"])
    twice = _compressed_record(once, "300")
    header = twice["messages"][0]["content"][0]["value"].partition("\n")[0]
    assert (
        "folded" in header
        and "[ctxcli summary]" not in twice["messages"][0]["content"][0]["value"].partition("\n")[2]
    ), twice  # merged into the new one, not quoted as a request


def _compressed_record(record: dict[str, Any], max_tokens: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli,
        ["compress", "-", "-o", "-", "-q", "--max-tokens", max_tokens],
        input=json.dumps(record),
    )
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_swe_agent_tool_call_ids_lists_pair() -> None:
    record = {
        "history": [
            {"role": "user", "content": "Fix it."},
            {
                "role": "assistant",
                "content": "ls",
                "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{}"}}],
            },
            {"role": "tool", "content": "a b", "tool_call_ids": ["c1"]},
        ]
    }
    conversation = openai.read(record, COUNTER, path="t.traj", line=1, messages_key="history")
    assert openai.problems(record, conversation) == []
    bad = {"history": [*record["history"][:2], {**record["history"][2], "tool_call_ids": ["c9"]}]}
    conversation = openai.read(bad, COUNTER, path="t.traj", line=1, messages_key="history")
    assert "tool result 'c9' without its call" in str(openai.problems(bad, conversation)[0])


# --- Claude Code ----------------------------------------------------------------------


def event(uid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if "mid" in extra:
        message["id"] = extra.pop("mid")
    return {
        "parentUuid": parent,
        "isSidechain": extra.pop("side", False),
        "sessionId": "s1",
        "cwd": "/p",
        "type": kind,
        "message": message,
        "uuid": uid,
        "timestamp": f"t-{uid}",
        **extra,
    }


def use(call_id: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": "Read", "input": {"f": call_id}}]


def result(call_id: str, text: str = "data") -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": text}]


SESSION = [
    event("u1", None, "user", "Refactor the app."),
    event("a1", "u1", "assistant", use("k1"), mid="m1"),  # two parallel calls,
    event("a2", "a1", "assistant", use("k2"), mid="m1"),  # one streamed message
    event("r1", "a2", "user", result("k1", "long " * 200)),
    event("r2", "r1", "user", result("k2", "long " * 200)),
    event("x1", None, "user", "sub-agent task", side=True),
    event("a3", "r2", "assistant", use("k3"), mid="m2"),
    event("r3", "a3", "user", result("k3")),
    event("a4", "r3", "assistant", [{"type": "text", "text": "Done."}], mid="m3"),
    {"type": "summary", "summary": "Refactor", "leafUuid": "a4"},
]


def test_claude_code_merges_a_streamed_message_and_passes_other_events() -> None:
    conversation = claude_code.read(SESSION, COUNTER, path="s.jsonl", line=1)
    roles = [m.role for m in conversation.messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    assert conversation.messages[1].call_ids == ("k1", "k2")
    assert claude_code.write(SESSION, conversation) == SESSION
    assert claude_code.problems(SESSION, conversation) == []


def test_claude_code_drops_relink_to_the_nearest_kept_ancestor() -> None:
    conversation = claude_code.read(SESSION, COUNTER, path="s.jsonl", line=1)
    out = claude_code.write(SESSION, keep(conversation, [0, 4, 5, 6]))
    assert [e.get("uuid") for e in out] == ["u1", "x1", "a3", "r3", "a4", None]
    assert out[2]["parentUuid"] == "u1"
    assert out[0] is SESSION[0] and out[3] is SESSION[7]
    relinked = claude_code.read(out, COUNTER, path="s.jsonl", line=1)
    assert claude_code.problems(out, relinked) == []


def test_claude_code_a_summary_is_a_new_event_linked_into_the_chain() -> None:
    conversation = claude_code.read(SESSION, COUNTER, path="s.jsonl", line=1)
    out = claude_code.write(SESSION, keep(conversation, [4, 5, 6], summary()))
    assert [e.get("uuid") for e in out][:2] == ["x1", out[1]["uuid"]]  # before a3
    new, nxt = out[1], out[2]
    assert new["type"] == "user" and new["message"]["content"].startswith(SUMMARY_MARKER)
    assert new["parentUuid"] is None and new["sessionId"] == "s1" and new["cwd"] == "/p"
    assert new["uuid"] not in {e.get("uuid") for e in SESSION}
    assert nxt["uuid"] == "a3" and nxt["parentUuid"] == new["uuid"]
    again = claude_code.write(SESSION, keep(conversation, [4, 5, 6], summary()))
    assert again[1]["uuid"] == new["uuid"]  # reproducible
    assert claude_code.problems(out, claude_code.read(out, COUNTER, path="s", line=1)) == []


def test_claude_code_session_file_compresses_and_validates(tmp_path: Path) -> None:
    source = tmp_path / "session.jsonl"
    lines = [json.dumps(e) for e in SESSION]
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(out), "-q", "--max-tokens", "300"]
    )
    assert result.exit_code == 0, result.output
    written = out.read_text().splitlines()
    assert written[0] == lines[0]  # untouched events: the very bytes
    assert lines[5] in written and lines[9] in written  # sidechain and summary events
    assert list(validate_file(str(out))) == []
    stats = json.loads((tmp_path / "out.stats.json").read_text())
    assert stats["conversations"] == 1 and stats["tokens"]["after"] <= 300


def test_a_slash_commands_expansion_keeps_the_request_that_ran_it(tmp_path: Path) -> None:
    # The expansion (isMeta) was the latest user message, kept; the user's own words,
    # in the command's <command-args>, were folded away at a small budget.
    typed = (
        "<command-name>/orchestrator</command-name>\n<command-args>update CLAUDE.md</command-args>"
    )
    expansion = [{"type": "text", "text": "Split complex tasks into subtasks."}]
    session = [
        event("u0", None, "user", typed),
        event("u1", "u0", "user", expansion, isMeta=True),
        *SESSION[1:5],
        event("a3", "r2", "assistant", use("k3"), mid="m2"),
        event("r3", "a3", "user", result("k3", "more " * 200)),
        event("a4", "r3", "assistant", [{"type": "text", "text": "Done."}], mid="m3"),
    ]
    conversation = claude_code.read(session, COUNTER, path="s.jsonl", line=1)
    assert latest_turn(conversation.messages, units(conversation.messages)) == [0, 1]
    source = tmp_path / "session.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in session))
    out = tmp_path / "out.jsonl"
    args = ["compress", str(source), "-o", str(out), "-q", "--max-tokens", "150"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert "<command-args>update CLAUDE.md</command-args>" in out.read_text()
    assert list(validate_file(str(out))) == []


# --- counting -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "tokens"),
    [
        pytest.param(
            {"type": "text", "text": "hello world"}, COUNTER.text("hello world"), id="text"
        ),
        pytest.param(
            {"type": "image", "source": {"type": "base64", "data": "A" * 9999}},
            IMAGE_TOKENS,
            id="image",
        ),
        pytest.param(
            {"type": "document", "source": {"type": "base64", "data": "J" * 9999}},
            DOCUMENT_TOKENS,
            id="document",
        ),
        pytest.param(
            {"type": "document", "source": {"type": "text", "data": "plain words"}},
            COUNTER.text("plain words"),
            id="text-document",
        ),
        pytest.param(
            {"type": "tool_use", "id": "t", "name": "go", "input": {"a": 1}},
            COUNTER.text("go") + COUNTER.text('{"a":1}'),
            id="tool_use",
        ),
        pytest.param(
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [{"type": "text", "text": "ok then"}, {"type": "image", "source": {}}],
            },
            COUNTER.text("ok then") + IMAGE_TOKENS,
            id="tool_result",
        ),
        pytest.param(
            {"type": "thinking", "thinking": "hmm, so", "signature": SIG * 50},
            COUNTER.text("hmm, so"),
            id="thinking",
        ),
        pytest.param(
            {"type": "redacted_thinking", "data": "xyz"}, COUNTER.text("xyz"), id="redacted"
        ),
        pytest.param(
            {"type": "mystery", "n": [1, 2]},
            COUNTER.text('{"type":"mystery","n":[1,2]}'),
            id="unknown",
        ),
    ],
)
def test_every_block_type_counts(block: dict[str, Any], tokens: int) -> None:
    assert COUNTER.content([block]) == tokens


# --- input shapes, errors, the CLI ---------------------------------------------------


def run_compress(tmp_path: Path, records: Any, args: str, *, shape: str = "jsonl") -> Any:
    source = tmp_path / ("in.jsonl" if shape == "jsonl" else "in.json")
    if shape == "jsonl":
        source.write_text("".join(json.dumps(r) + "\n" for r in records))
    else:
        source.write_text(json.dumps(records, indent=2))
    out = tmp_path / ("out.jsonl" if shape == "jsonl" else "out.json")
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(out), "-q", *shlex.split(args)]
    )
    assert result.exit_code == 0, result.output
    if shape == "jsonl":
        return [json.loads(line) for line in out.read_text().splitlines()]
    return json.loads(out.read_text())


def long_chat(n: int) -> dict[str, Any]:
    messages = [{"role": "system", "content": "Be kind."}]
    for i in range(n):
        messages.append({"role": "user", "content": f"q{i} " + "word " * 40})
        messages.append({"role": "assistant", "content": "reply " * 40})
    return {"id": f"c{n}", "messages": messages}


def test_a_json_array_keeps_its_shape_and_its_untouched_records(tmp_path: Path) -> None:
    records = [long_chat(1), long_chat(8), SHAREGPT]
    out = run_compress(tmp_path, records, "--max-tokens 300", shape="array")
    assert isinstance(out, list) and len(out) == 3
    assert out[0] == records[0] and out[2] == records[2]
    assert len(out[1]["messages"]) < len(records[1]["messages"])


def test_a_no_op_run_gives_back_the_very_file(tmp_path: Path) -> None:
    records = [long_chat(3), ANTHROPIC, SHAREGPT]
    run_compress(tmp_path, records, "--max-tokens 10000000", shape="array")
    assert (tmp_path / "out.json").read_bytes() == (tmp_path / "in.json").read_bytes()


def test_one_record_file_with_a_messages_key(tmp_path: Path) -> None:
    record = {"info": {"k": 1}, "traj": long_chat(8)["messages"]}
    out = run_compress(tmp_path, record, "--max-tokens 300 --messages-key traj", shape="object")
    assert out["info"] == {"k": 1} and len(out["traj"]) < len(record["traj"])


def test_errors_name_the_array_record_and_keep_passes_it_through(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps([long_chat(1), {"prompt": "no messages"}]))
    result = CliRunner().invoke(cli, ["compress", str(source), "-o", str(tmp_path / "o.json")])
    assert result.exit_code == 1
    assert f"{source}[record 1]: no format fits this record" in result.output
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(tmp_path / "o.json"), "--on-error", "keep"]
    )
    assert result.exit_code == 0
    assert json.loads((tmp_path / "o.json").read_text())[1] == {"prompt": "no messages"}
    stats = json.loads(Path(default_stats(str(tmp_path / "o.json"))).read_text())
    assert stats["errors"][0]["record"] == 1


def test_an_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError,
        match="known formats: claude-code, codex, gemini-checkpoint, responses-items, sharegpt, anthropic, "
        "gemini, gemini-cli, responses, openai",
    ):
        formats.get("bard")
    result = CliRunner().invoke(cli, ["compress", "-", "--format", "bard"], input="{}")
    assert result.exit_code == 1 and "unknown format 'bard'" in result.output
    assert "report formats" not in result.output
    # count's and score's --format is their report's: given to compress, it says so
    result = CliRunner().invoke(cli, ["compress", "-", "--format", "json"], input="{}")
    assert result.exit_code == 1 and result.output.rstrip().endswith(
        "(here --format names the transcripts' format; json, csv and table are the report "
        "formats of count and score)"
    )


def test_format_and_messages_key_come_from_a_config_file_too() -> None:
    settings = resolve({"format": "sharegpt", "messages_key": "turns"})
    assert (settings.format, settings.messages_key) == ("sharegpt", "turns")


# --- the shared cases and real data --------------------------------------------------


def test_19_sharegpt_role_variants(cases: Path, tmp_path: Path) -> None:
    case = cases / "19-sharegpt-role-variants.jsonl"
    before = [json.loads(line) for line in case.read_text().splitlines()]
    result = CliRunner().invoke(cli, ["compress", str(case), "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1
    assert f"{case}:3: turn 1 has unknown 'from' 'bing'" in result.output
    assert "turn 2 is a string, not an object" in result.output
    args = ["--on-error", "keep", "--stages", "window", "-q"]
    for keep_last, pair_kept in (("1", False), ("4", True)):
        out_path = tmp_path / f"o{keep_last}.jsonl"
        result = CliRunner().invoke(
            cli, ["compress", str(case), "-o", str(out_path), "--keep-last", keep_last, *args]
        )
        assert result.exit_code == 0, result.output
        out = [json.loads(line) for line in out_path.read_text().splitlines()]
        c19a = read(sharegpt, before[0])
        assert [m.role for m in c19a.messages] == [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
        turns = [t["from"] for t in out[1]["conversations"]]
        assert ("function_call" in turns) is pair_kept and ("observation" in turns) is pair_kept
        assert all(set(t) == {"from", "value"} for r in out[:2] for t in r["conversations"])
        assert out[2] == before[2]
        problems = list(validate_file(str(out_path)))
        assert [(p.line, p.reason[:22]) for p in problems] == [(3, "turn 1 has unknown 'fr")]
        stats = json.loads(out_path.with_name(f"o{keep_last}.stats.json").read_text())
        assert stats["errors"][0]["line"] == 3
    assert [str(p).split(": ", 1)[1] for p in validate_file(str(case))][0].startswith("turn 1")


DATA_FILES = [
    pytest.param("tau-bench/gpt-4o-airline.json", ["--messages-key", "traj"], id="tau-bench"),
    pytest.param("llama-factory/glaive_toolcall_zh_demo.json", [], id="glaive-sharegpt"),
    pytest.param("llama-factory/reason_tool_use_demo_50.jsonl", [], id="llama-reason"),
    pytest.param("claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", [], id="claude-code"),
    pytest.param(
        "swe-agent/marshmallow-code__marshmallow-1867.traj",
        ["--messages-key", "history"],
        id="swe-agent",
    ),
]


@pytest.mark.parametrize(("name", "args"), DATA_FILES)
def test_real_data_compresses_validates_and_round_trips(
    data: Path, tmp_path: Path, name: str, args: list[str]
) -> None:
    source = data / name
    key = args[1] if args else None
    known = [(p.line, p.record, p.reason) for p in validate_file(str(source), messages_key=key)]
    # The default pipeline at 2000 tokens; at a budget nothing exceeds, the budget-driven
    # stages only, which then change nothing.
    for budget, stages in (("2000", []), ("10000000", ["--stages", "summary,priority"])):
        out = tmp_path / f"{budget}{source.suffix}"
        result = CliRunner().invoke(
            cli,
            ["compress", str(source), "-o", str(out), "-q", "--max-tokens", budget, *stages, *args],
        )
        assert result.exit_code == 0, result.output
        stats = json.loads(Path(default_stats(str(out))).read_text())
        assert stats["errors"] == []
        found = [(p.line, p.record, p.reason) for p in validate_file(str(out), messages_key=key)]
        assert found == known  # only what the input already had (two glaive records)
        if budget == "10000000":
            assert out.read_bytes() == source.read_bytes()
        else:
            assert stats["tokens"]["after"] < stats["tokens"]["before"]
            over = len(stats["over_budget"])
            assert over == 0 or all(o["tokens"] > 2000 for o in stats["over_budget"])


def test_the_latest_anthropic_turn_keeps_its_tool_results_beside_its_text(tmp_path: Path) -> None:
    big = "row ok " * 300
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Task: find the bug."}]
    for n in range(1, 4):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {n}"},
                    {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"cmd": "ls"}},
                ],
            }
        )
        tail = [{"type": "text", "text": "user says: hurry"}] if n == 3 else []
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": big}, *tail],
            }
        )
    record = {"id": "midloop", "messages": messages}
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps(record) + "\n")
    for stages in ("priority", "window", "summary,priority"):
        out = tmp_path / "out.jsonl"
        result = CliRunner().invoke(
            cli,
            ["compress", str(source), "-o", str(out), "--stages", stages, "--max-tokens", "900"],
        )
        assert result.exit_code == 0, result.output
        kept = json.loads(out.read_text())["messages"]
        assert kept[-1] == messages[-1], stages  # the whole latest user turn
        assert kept[-2] == messages[-2], stages  # with the call its results answer
        assert kept[0]["role"] == "user"
        assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


def test_a_session_whose_dropped_events_lack_uuids_still_finishes(tmp_path: Path) -> None:
    events = [{"type": "user", "message": {"role": "user", "content": "start " * 200}}]
    parent = None
    for n in range(6):
        uid = f"u{n}"
        events.append(
            {
                "type": "user" if n % 2 else "assistant",
                "uuid": uid,
                "parentUuid": parent,
                "message": {"role": "user" if n % 2 else "assistant", "content": f"turn {n} " * 50},
            }
        )
        parent = uid
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "compress",
            str(source),
            "-o",
            str(out),
            "--stages",
            "window",
            "--keep-last",
            "1",
            "--format",
            "claude-code",
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.exists()


def toolbench(n: int = 30) -> dict[str, Any]:
    """A ToolBench-shaped record: the messages are the last of a list of snapshots."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are AutoGPT."}]
    for i in range(n):
        messages.append({"role": "user", "content": f"step {i}: " + "detail " * 40})
        messages.append({"role": "assistant", "content": f"done {i}: " + "result " * 40})
    messages.append({"role": "user", "content": "Finish."})
    return {
        "query": "find hotels",
        "answer_generation": {"valid_data": True, "train_messages": [messages[:3], messages]},
    }


def test_messages_key_is_a_dotted_path_with_list_positions(tmp_path: Path) -> None:
    record = toolbench()
    source = tmp_path / "tb.jsonl"
    source.write_text(json.dumps(record) + "\n")
    args = ["compress", str(source), "--max-tokens", "300", "-o", "-", "-q"]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 1
    assert "try --messages-key answer_generation" not in plain.stderr  # not a list of messages
    assert "no format fits this record (tried sharegpt, anthropic, " in plain.stderr
    result = CliRunner().invoke(
        cli, [*args, "--messages-key", "answer_generation.train_messages.-1"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    snapshots = out["answer_generation"]["train_messages"]
    assert snapshots[0] == record["answer_generation"]["train_messages"][0]  # untouched
    assert len(snapshots[1]) < len(record["answer_generation"]["train_messages"][1])
    assert snapshots[1][0] == {"role": "system", "content": "You are AutoGPT."}
    assert snapshots[1][-1] == {"role": "user", "content": "Finish."}
    assert out["query"] == "find hotels" and out["answer_generation"]["valid_data"] is True
    nowhere = CliRunner().invoke(cli, [*args, "--messages-key", "answer_generation.nope.0"])
    assert nowhere.exit_code == 1
    assert "'answer_generation.nope.0' holds no list of messages of any format" in nowhere.stderr


@pytest.mark.parametrize(
    ("key", "record"),
    [
        pytest.param(
            "history", {"history": [{"role": "user", "content": "hi"}], "info": {}}, id="swe-agent"
        ),
        pytest.param(
            "traj", {"task_id": 1, "traj": [{"role": "user", "content": "hi"}]}, id="tau-bench"
        ),
        pytest.param(
            "conversations",
            {
                "conversations": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                ]
            },
            id="hf-chat-is-openai",
        ),
    ],
)
def test_well_known_keys_are_found_and_named_in_the_stats(
    tmp_path: Path, key: str, record: dict[str, Any]
) -> None:
    found = formats.find(record)
    assert found is not None and found.format is formats.FORMATS["openai"] and found.key == key
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps(record) + "\n")
    result = CliRunner().invoke(cli, ["compress", str(source), "-q"])
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "a.compressed.stats.json").read_text())
    assert stats["messages_keys"] == {key: 1}


def test_two_well_known_keys_with_messages_are_not_guessed() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert formats.find({"history": messages, "traj": messages}) is None
    assert "try --messages-key history" in formats.no_fit({"history": messages, "traj": messages})


def test_a_session_line_read_as_a_record_suggests_the_format() -> None:
    event = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s"}
    assert (
        "try --format claude-code (--input-format for count and score; a whole file is one session)"
        in (formats.no_fit(event))
    )


def test_a_json_array_keeps_the_text_of_every_record_no_stage_changed(tmp_path: Path) -> None:
    records = [
        {"id": f"r{i}", "messages": [{"role": "user", "content": "short"}]} for i in range(5)
    ]
    long = {"role": "assistant", "content": "word " * 400}
    records[2] = {
        "id": "r2",
        "messages": [{"role": "user", "content": "q"}, long] * 5
        + [{"role": "user", "content": "last"}],
    }
    text = (
        "[\n" + ",\n".join(json.dumps(r, indent=4, ensure_ascii=False) for r in records) + "\n]\n"
    )
    text = text.replace('"r0"', '"r0"   ')  # odd spacing a re-serializer would lose
    source = tmp_path / "a.json"
    source.write_text(text)
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "300", "-q"])
    assert result.exit_code == 0, result.output
    out = (tmp_path / "a.compressed.json").read_text()
    before, after = jsonio.array_spans(text.encode()), jsonio.array_spans(out.encode())
    pieces = [(text.encode()[a:b], out.encode()[c:d]) for (a, b), (c, d) in zip(before, after)]
    assert [old == new for old, new in pieces] == [True, True, False, True, True]
    changed = pieces[2][1].decode()
    assert changed.startswith('{\n    "id": "r2",\n    "messages": [\n        {')  # 4-space style
    assert json.loads(out)[2]["messages"][-1] == {"role": "user", "content": "last"}
    assert out.startswith("[\n{") and out.endswith("\n]\n")


def test_array_spans_skip_brackets_and_commas_inside_strings() -> None:
    data = b' [ {"a": "],[{"} , "x\\"]" ,[1,[2]], 3 ] '
    assert [data[a:b] for a, b in jsonio.array_spans(data)] == [
        b'{"a": "],[{"}',
        b'"x\\"]"',
        b"[1,[2]]",
        b"3",
    ]
    assert jsonio.array_spans(b'{"a": [1, 2]}') == []


def test_a_claude_code_session_is_found_whatever_its_first_lines(tmp_path: Path) -> None:
    events = [
        {"type": "summary", "summary": "Earlier work", "leafUuid": "x"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "s",
            "message": {"role": "user", "content": "hi " * 50},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "s",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "yo " * 50}]},
        },
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "sessionId": "s",
            "message": {"role": "user", "content": "last"},
        },
    ]
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert formats.detect_file(events[:2]) is None  # no session event among them
    assert formats.detect_file(events) is claude_code
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "60", "-q"])
    assert result.exit_code == 0, result.output
    out = (tmp_path / "s.compressed.jsonl").read_text().splitlines()
    assert out[:2] == source.read_text().splitlines()[:2]  # written back as they were
    stats = json.loads((tmp_path / "s.compressed.stats.json").read_text())
    assert stats["conversations"] == 1 and stats["messages"]["before"] == 3
    # A broken line among the first ones decides nothing: it is named, or with keep
    # copied alone. It had made line 1 "no format fits this record", and keep copy all.
    lines = source.read_text().splitlines()
    source.write_text("\n".join([*lines[:3], "{broken", *lines[3:]]) + "\n")
    assert formats.detect_file([*events[:3], None, *events[3:]]) is claude_code
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "60"])
    assert result.exit_code == 1
    assert f"Error: {source}:4: invalid JSON" in result.output
    args = ["compress", str(source), "--max-tokens", "60", "--on-error", "keep", "-q"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    stats = json.loads((tmp_path / "s.compressed.stats.json").read_text())
    assert stats["conversations"] == 1 and stats["messages"]["before"] == 3
    assert (tmp_path / "s.compressed.jsonl").read_text().splitlines()[3] == "{broken"
    # A chat record pasted among the events passes through, as any unknown line does.
    # It had made line 1 "no format fits this record", with a snapshot's keys.
    pasted = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    source.write_text("\n".join([*lines[:3], pasted, *lines[3:]]) + "\n")
    assert formats.detect_file([*events[:3], json.loads(pasted), *events[3:]]) is claude_code
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "60", "-q"])
    assert result.exit_code == 0, result.output
    out = (tmp_path / "s.compressed.jsonl").read_text().splitlines()
    assert pasted in out  # written back as it was
    stats = json.loads((tmp_path / "s.compressed.stats.json").read_text())
    assert stats["conversations"] == 1 and stats["messages"]["before"] == 3


def test_after_a_compact_boundary_only_what_the_model_sees_is_compressed(tmp_path: Path) -> None:
    def chat(uuid: str, parent: str | None, role: str, text: str, **extra: Any) -> dict[str, Any]:
        return {
            "type": role,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "s",
            "message": {"role": role, "content": text},
            **extra,
        }

    before = [
        chat(
            f"b{i}",
            f"b{i - 1}" if i else None,
            "user" if i % 2 == 0 else "assistant",
            f"old turn {i} " + "words " * 60,
        )
        for i in range(10)
    ]
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "cb",
        "parentUuid": None,
        "logicalParentUuid": "b9",
        "sessionId": "s",
        "compactMetadata": {"trigger": "auto"},
    }
    summary = chat(
        "cs",
        "cb",
        "user",
        "This session is being continued. " + "summary " * 40,
        isCompactSummary=True,
        isVisibleInTranscriptOnly=True,
    )
    after = [
        chat(
            f"a{i}",
            "cs" if i == 0 else f"a{i - 1}",
            "assistant" if i % 2 == 0 else "user",
            f"new turn {i} " + "words " * 60,
        )
        for i in range(9)
    ]
    events = [
        {"type": "summary", "summary": "s", "leafUuid": "b9"},
        *before,
        boundary,
        summary,
        *after,
    ]
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in events))
    checked = CliRunner().invoke(cli, ["validate", str(source)])
    assert checked.exit_code == 0, checked.output  # no false problem for lines without uuid
    conversation = claude_code.read(events, TokenCounter("o200k_base"), path="s", line=1)
    assert len(conversation.messages) == 1 + len(after)  # the compact summary and what follows
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "300", "-q"])
    assert result.exit_code == 0, result.output
    out = (tmp_path / "s.compressed.jsonl").read_text().splitlines()
    assert out[: 2 + len(before)] == source.read_text().splitlines()[: 2 + len(before)]
    stats = json.loads((tmp_path / "s.compressed.stats.json").read_text())
    assert stats["out_of_context"] == len(before)
    assert stats["messages"]["before"] == 1 + len(after) > stats["messages"]["after"]
    # The summary that folded the compact summary stands in for it, marks and all: Claude
    # Code shows it as the compact summary, not as a prompt the user typed.
    (written,) = (json.loads(line) for line in out if json.loads(line).get("parentUuid") == "cb")
    assert written["message"]["content"].startswith(SUMMARY_MARKER)
    assert written["isCompactSummary"] is written["isVisibleInTranscriptOnly"] is True
    assert sum(bool(json.loads(line).get("isCompactSummary")) for line in out) == 1
