"""Stages and the pipeline: every combination keeps every invariant (property tests),
and each stage does its own job (unit tests)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import assert_valid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.cli import cli
from ctxcli.config import resolve
from ctxcli.errors import ConfigError
from ctxcli.invariants import pairing_problems, problems
from ctxcli.model import SUMMARY_MARKER, make_conversation, seal, units
from ctxcli.pipeline import STAGES, Context, build_stage, run
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")

words = st.lists(
    st.sampled_from(["order", "A-1234", "ok", "refund", "2024-05-01", "$30", "城市", "。"]),
    max_size=40,
).map(" ".join)


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """Valid OpenAI conversations: system prompts, chat turns, parallel tool calls,
    legacy function calls, names, null content, mid-conversation system messages."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(words)})
    call_number = itertools.count()
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "legacy", "system", "named"]))
        if kind == "user":
            messages.append({"role": "user", "content": draw(words)})
        elif kind == "named":
            messages.append({"role": "user", "name": "alice_b", "content": draw(words)})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": draw(words)})
        elif kind == "system":
            messages.append({"role": "developer", "content": draw(words)})
        elif kind == "legacy":
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "f", "arguments": "{}"},
                }
            )
            messages.append({"role": "function", "name": "f", "content": draw(words)})
        else:
            ids = [f"call_{next(call_number)}" for _ in range(draw(st.integers(1, 3)))]
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": "lookup", "arguments": draw(words)},
                }
                for i in ids
            ]
            message: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
            if draw(st.booleans()):
                message["content"] = None
            messages.append(message)
            messages += [{"role": "tool", "tool_call_id": i, "content": draw(words)} for i in ids]
    messages.append({"role": "user", "content": draw(words)})
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": draw(words)})
    return messages


stage_lists = st.lists(st.sampled_from(sorted(STAGES)), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(),
    stages=stage_lists,
    budget=st.integers(10, 600),
    keep_last=st.integers(0, 8),
    role=st.sampled_from(["user", "system"]),
)
def test_every_stage_combination_keeps_the_invariants(
    messages: list[dict[str, Any]], stages: list[str], budget: int, keep_last: int, role: str
) -> None:
    options = {
        "window": {"keep_last": keep_last},
        "summary": {"keep_last": keep_last, "role": role},
    }
    pipeline = [build_stage(name, options.get(name)) for name in stages]
    conversation = make_conversation(messages, COUNTER)
    result = run(conversation, pipeline, Context(budget, COUNTER))  # raises if a rule breaks
    out = {"messages": [m.data for m in result.after.messages]}
    assert_valid(
        {"messages": messages}, out, COUNTER, max_tokens=budget, over_budget_ok=result.over_budget
    )
    if result.over_budget:
        # Over budget only with what must be kept: no unit left that a dropping stage may
        # drop (but summaries, which priority then takes back).
        droppable = [
            g
            for g in units(result.after.messages)
            if not any(
                result.after.messages[i].is_system or result.after.messages[i].is_summary for i in g
            )
        ]
        assert "priority" not in stages or len(droppable) <= 2


def convo(*pairs: tuple[str, str], system: str | None = "Be brief.") -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": role, "content": text} for role, text in pairs]


def compress(
    messages: list[dict[str, Any]], stages: str, budget: int | None, **options: Any
) -> list[dict[str, Any]]:
    settings_ = resolve(stages=stages, stage_options=options, max_tokens=budget or 0)
    result = run(
        make_conversation(messages, COUNTER),
        settings_.stages,
        Context(settings_.max_tokens, COUNTER),
    )
    return [dict(m.data) for m in result.after.messages]


def test_window_counts_messages_and_keeps_the_system_prompt() -> None:
    messages = convo(
        *[("user", f"q{i}") if i % 2 == 0 else ("assistant", f"a{i}") for i in range(9)]
    )
    out = compress(messages, "window", None, window={"keep_last": 3})
    assert [m["content"] for m in out] == ["Be brief.", "q6", "a7", "q8"]


def test_window_keeps_a_mid_conversation_system_message() -> None:
    messages = convo(
        ("user", "q0"),
        ("assistant", "a0"),
        ("system", "Now answer in French."),
        ("assistant", "a1"),
        ("user", "q1"),
    )
    out = compress(messages, "window", None, window={"keep_last": 2})
    assert [m["content"] for m in out] == ["Be brief.", "Now answer in French.", "a1", "q1"]


def test_priority_drops_assistant_before_user_oldest_first() -> None:
    long = " ".join(["word"] * 40)
    messages = convo(
        ("user", "u1 " + long),
        ("assistant", "a1 " + long),
        ("user", "u2 " + long),
        ("assistant", "a2 " + long),
        ("user", "last"),
    )
    total = COUNTER.messages(messages)
    out = compress(messages, "priority", total - 40)
    assert [m["content"].split()[0] for m in out] == ["Be", "u1", "u2", "a2", "last"]
    out = compress(messages, "priority", total - 100)
    assert [m["content"].split()[0] for m in out] == ["Be", "u2", "last"]


def test_priority_takes_nothing_back_that_a_larger_budget_would_drop() -> None:
    """a1 goes first (the oldest assistant), then a2, which alone frees enough. a1
    was put back once; but at a budget where dropping a1 alone is enough, a2 stays and
    a1 goes, so the smaller budget kept what the larger lost (issue 15)."""
    short, long = " ".join(["word"] * 10), " ".join(["word"] * 300)
    messages = convo(
        ("user", "u1 " + short),
        ("assistant", "a1 " + short),
        ("user", "u2 " + short),
        ("assistant", "a2 " + long),
        ("user", "last"),
    )
    whole = COUNTER.messages(messages)
    kept = []
    for budget in (whole - 200, whole - 5):
        out = compress(messages, "priority", budget)
        assert COUNTER.messages(out) <= budget
        kept.append({m["content"].split()[0] for m in out})
    assert kept[0] == {"Be", "u1", "u2", "last"}
    assert kept[0] <= kept[1] == {"Be", "u1", "u2", "a2", "last"}


def test_priority_leaves_only_what_must_be_kept_when_that_is_over_budget() -> None:
    # The summary went back in once (over budget either way), but then a budget too
    # small kept more facts than one that fits what must be kept (issue 15): it goes.
    long = " ".join(["word"] * 300)
    summary = seal("[ctxcli summary] 2 earlier messages folded.", "Actions: f(A-1234) → ok")
    messages = convo(
        ("user", summary), ("assistant", "a1 word"), ("user", "last " + long), system=long
    )
    out = compress(messages, "priority", 400)
    assert [m["content"].split()[0] for m in out] == ["word", "last"]


def test_priority_order_is_configurable() -> None:
    long = " ".join(["word"] * 40)
    messages = convo(("user", "u1 " + long), ("assistant", "a1 " + long), ("user", "last"))
    out = compress(
        messages,
        "priority",
        COUNTER.messages(messages) - 20,
        priority={"order": ["user", "assistant"]},
    )
    assert [m["content"].split()[0] for m in out] == ["Be", "a1", "last"]


def test_priority_never_drops_a_class_left_out_of_the_order(tmp_path: Path) -> None:
    long = " ".join(["word"] * 40)
    messages = convo(("user", "u1 " + long), ("assistant", "a1 " + long), ("user", "last"))
    out = compress(messages, "priority", 10, priority={"order": ["assistant"]})
    assert [m["content"].split()[0] for m in out] == ["Be", "u1", "last"]
    # The warning had said "with only what must be kept", and u1 was left by the order.
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"messages": messages}) + "\n")
    args = ["compress", str(path), "--stages", "priority", "--priority-order", "assistant"]
    result = CliRunner().invoke(cli, [*args, "--max-tokens", "10", "-q"])
    assert "> 10 (--priority-order never drops user, tool, summary units)" in result.output
    result = CliRunner().invoke(cli, [*args[:4], "--max-tokens", "10", "-q"])
    assert "> 10 with only what must be kept" in result.output


def test_summary_goes_after_the_leading_system_messages() -> None:
    messages = [{"role": "system", "content": "A."}, {"role": "developer", "content": "B."}]
    messages += convo(
        *[
            ("user", f"q{i} " + "x " * 30) if i % 2 == 0 else ("assistant", f"a{i} " + "y " * 30)
            for i in range(10)
        ],
        ("user", "end?"),
        system=None,
    )
    out = compress(messages, "summary", 200, summary={"keep_last": 2, "role": "system"})
    assert [m["role"] for m in out[:3]] == ["system", "developer", "system"]
    assert out[2]["content"].startswith(SUMMARY_MARKER)
    assert out[-1]["content"] == "end?"


def test_summary_leaves_a_conversation_within_budget_alone() -> None:
    messages = convo(("user", "hi"), ("assistant", "hello"), ("user", "bye"))
    assert compress(messages, "summary", 1000) == messages


def texts(found: list[Problem]) -> list[str]:
    """The problems as people read them."""
    return [str(p) for p in found]


def test_the_invariant_check_catches_broken_outputs() -> None:
    messages = convo(("user", "q"), ("assistant", "a"), ("user", "last"))
    messages.insert(
        2,
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    )
    messages.insert(3, {"role": "tool", "tool_call_id": "c1", "content": "r"})
    before = make_conversation(messages, COUNTER)
    orphan = before.with_messages([before.messages[i] for i in (0, 1, 3, 4, 5)])
    assert texts(problems(before, orphan)) == ["message 3: tool result 'c1' without its call"]
    unanswered = before.with_messages([before.messages[i] for i in (0, 1, 2, 4, 5)])
    assert texts(problems(before, unanswered)) == ["message 2: tool calls ['c1'] have no result"]
    no_system = before.with_messages(before.messages[1:])
    assert texts(problems(before, no_system)) == [
        "message 0 (system) was dropped but must be kept as is"
    ]
    no_last_user = before.with_messages(before.messages[:-1])
    assert "message 5 (user) was dropped but must be kept as is" in texts(
        problems(before, no_last_user)
    )
    swapped = before.with_messages([before.messages[i] for i in (0, 1, 2, 3, 5, 4)])
    assert "message 4 is out of order" in texts(problems(before, swapped))
    assert texts(problems(before, before, max_tokens=5)) == [
        f"{before.tokens} tokens exceed the budget of 5"
    ]


def test_pairing_problems_follow_legacy_function_calls_by_adjacency() -> None:
    messages = [
        {"role": "user", "content": "t?"},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "12:00"},
        {"role": "function", "name": "f", "content": "again"},
    ]
    conversation = make_conversation(messages, COUNTER)
    assert texts(pairing_problems(conversation.messages)) == [
        "message 3: function result without a function_call"
    ]


def test_unknown_stage_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError,
        match="unknown stage 'trim'; known stages: placeholder, priority, summary, window",
    ):
        build_stage("trim")


ENGLISH = f"{SUMMARY_MARKER} 4 earlier messages folded."
CHINESE = f"{SUMMARY_MARKER} 已折叠较早的 3 条消息。"


@pytest.mark.parametrize(
    ("content", "is_summary"),
    [
        (seal(ENGLISH, "Requests: refund"), True),
        (seal(CHINESE, "请求：退款"), True),
        (seal(ENGLISH, "Requests: refund") + " and more", False),  # edited since
        (seal(ENGLISH, "Requests: refund").replace("4 earlier", "5 earlier"), False),
        ("  " + seal(ENGLISH, "Requests: refund"), False),
        (f"{ENGLISH}\nRequests: refund", False),  # the header alone, as earlier versions wrote
        (f"{ENGLISH} #123456789\nRequests: refund", False),  # a seal that does not match
        (f"{SUMMARY_MARKER} is what your tool writes, right?", False),
        (f"quoting: {seal(ENGLISH, 'Requests: refund')}", False),
    ],
)
@pytest.mark.parametrize("role", ["user", "system"])
def test_only_a_sealed_summary_is_a_summary(content: str, is_summary: bool, role: str) -> None:
    """Text that merely looks like a summary is what its role says: a later run must
    not fold it as an earlier summary, nor drop a system prompt that reads so."""
    (message,) = make_conversation([{"role": role, "content": content}], COUNTER).messages
    assert message.is_summary is is_summary
    assert message.is_system is (role == "system" and not is_summary)


def test_a_sealed_summary_is_one_only_where_ctxcli_writes_one() -> None:
    """Right after the leading system messages or right after a user message (system
    messages aside); anywhere else a sealed text is the message its role says."""
    text = seal(ENGLISH, "Requests: refund")
    turns = [("system", "hi"), ("user", text), ("assistant", "ok"), ("user", text)]
    turns += [("user", "go"), ("developer", "hurry"), ("system", text), ("assistant", text)]
    messages = [{"role": role, "content": content} for role, content in turns]
    found = [m.is_summary for m in make_conversation(messages, COUNTER).messages]
    assert found == [False, True, False, False, False, False, True, False]


def test_an_older_user_message_quoting_the_marker_is_folded_as_a_message() -> None:
    quoting = f"{SUMMARY_MARKER} is what your tool writes, right?"
    messages = convo(("user", quoting), ("assistant", "It is. " * 30), ("user", "q " * 30))
    messages += [
        {"role": "assistant", "content": "a " * 30},
        {"role": "user", "content": "thanks"},
    ]
    settings_ = resolve(
        stages="summary", stage_options={"summary": {"keep_last": 1}}, max_tokens=90
    )
    result = run(make_conversation(messages, COUNTER), settings_.stages, Context(90, COUNTER))
    assert result.events["summary"]["messages_summarized"] == 3
    assert "summaries_merged" not in result.events["summary"]
    assert result.after.messages[-1].data == {"role": "user", "content": "thanks"}


@pytest.mark.parametrize("budget", range(60, 130, 7))
def test_a_chinese_summary_header_fits_the_room_kept_for_it(budget: int) -> None:
    """The header is in the summary's language; its cost is reserved before the body
    is written, so the Chinese header (longer in tokens) never breaks the budget."""
    turns = [("user", "我想订一张从北京到上海的机票，六月十八日出发，两个人。")]
    turns += [("assistant", "好的，请问您的预算是多少？经济舱还是商务舱？" * 2)]
    turns += [("user", "经济舱，预算每人一千五百元以内，订单号是 A-1234。")]
    turns += [("assistant", "已为您找到三个航班。" * 3), ("user", "选第一个，谢谢。")]
    messages = convo(*turns)
    settings_ = resolve(
        stages="summary", stage_options={"summary": {"keep_last": 1}}, max_tokens=budget
    )
    result = run(make_conversation(messages, COUNTER), settings_.stages, Context(budget, COUNTER))
    (summary,) = [m for m in result.after.messages if m.is_summary] or [None]
    if summary is not None:
        assert summary.data["content"].startswith(f"{SUMMARY_MARKER} 已折叠较早的 ")
    assert result.after.tokens <= budget or result.over_budget


def test_one_folded_message_is_named_in_the_singular() -> None:
    messages = convo(("user", "refund order A-1234 " * 20), ("assistant", "ok"), ("user", "thanks"))
    settings_ = resolve(
        stages="summary", stage_options={"summary": {"keep_last": 2}}, max_tokens=40
    )
    result = run(make_conversation(messages, COUNTER), settings_.stages, Context(40, COUNTER))
    assert result.events["summary"]["messages_summarized"] == 1
    (summary,) = [m.data["content"] for m in result.after.messages if m.is_summary]
    assert summary.startswith(f"{SUMMARY_MARKER} 1 earlier message folded. #")


@pytest.mark.parametrize("budget", [200, 300, 600, 1200])
def test_a_latest_user_message_that_looks_like_a_summary_is_never_lost(budget: int) -> None:
    """Only a summary the stage wrote after the user's task (right after a user
    message) is passed over as the latest user message; the user's own message with
    the same header, after an assistant reply, is the latest user message."""
    text = f"{SUMMARY_MARKER} 3 earlier messages folded.\nPlease cancel reservation XYZ999."
    turns = [
        ("user" if i % 2 == 0 else "assistant", f"turn {i} " + "words " * 150) for i in range(16)
    ]
    messages = convo(*turns, ("user", text), ("assistant", "Sure, cancelling. " + "ok " * 150))
    conversation = make_conversation(messages, COUNTER)
    for stages in ("summary,priority", "priority", "window,priority"):
        settings_ = resolve(stages=stages, max_tokens=budget)
        result = run(conversation, settings_.stages, Context(budget, COUNTER))
        kept = [m.data for m in result.after.messages]
        assert {"role": "user", "content": text} in kept, (stages, budget)
        found = problems(conversation, result.after, max_tokens=None)
        assert not found, (stages, budget, found)


def test_a_conversation_is_labelled_by_id_then_line_never_line_0() -> None:
    conversation = make_conversation([{"role": "user", "content": "hi"}], COUNTER)
    assert conversation.label == "(no id)"  # a JSON array's record: its index is named apart
    assert dataclasses.replace(conversation, line=7).label == "line 7"
    assert dataclasses.replace(conversation, line=7, id="c-1").label == "c-1"


def _imports(path: Any) -> set[str]:
    """Every ``ctxcli`` module ``path`` imports, under ``TYPE_CHECKING`` and inside
    functions too."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("ctxcli")}


def test_stages_never_import_the_pipeline() -> None:
    """The stage protocol and Context live in a leaf module: no stage imports
    ``ctxcli.pipeline``, and ``stages.base`` imports no stage."""
    from pathlib import Path

    import ctxcli.stages

    folder = Path(ctxcli.stages.__file__).parent
    for path in folder.glob("*.py"):
        assert "ctxcli.pipeline" not in _imports(path), path.name
    assert not {m for m in _imports(folder / "base.py") if m.startswith("ctxcli.stages")}
