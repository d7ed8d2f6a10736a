"""The default pipeline aims at the budget (see :mod:`ctxcli.stages.plan`): within the
budget nothing changes, over it the output fills most of it, and a larger budget never
keeps fewer facts (:mod:`ctxcli.score`'s definition), on random conversations and on
the real data (skipped without ../shared)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.config import resolve
from ctxcli.model import Conversation, make_conversation
from ctxcli.pipeline import Context, run
from ctxcli.score import conversation_facts, conversation_text, facts_of, message_text
from ctxcli.stages import plan
from ctxcli.summarizers import Summarizer
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


class PrefixFacts:
    """A summarizer that keeps the contract of :mod:`ctxcli.summarizers`: the facts of
    the messages in a fixed ranking (message order, then position), as many as fit
    ``max_tokens``, so a larger room or a subset of the messages never loses one
    the smaller room kept."""

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        ranking: list[str] = []
        for data in messages:
            text = message_text(data)
            found = set().union(*facts_of(text, str(data.get("role"))).values())
            ranking += sorted(found - set(ranking), key=text.find)
        kept: list[str] = []
        for fact in ranking:
            if counter.text(", ".join([*kept, fact])) > max_tokens:
                break
            kept.append(fact)
        return ", ".join(kept)


class Filling:
    """A summarizer whose body fills its room: what the budget planning gives the
    summaries is then what the output uses."""

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        return " ".join(["fact"] * max(0, max_tokens - 2))


def compress(
    conversation: Conversation, budget: int, summarizer: Summarizer | None = None
) -> Conversation:
    stages = resolve(max_tokens=budget).stages
    return run(conversation, stages, Context(budget, COUNTER, summarizer)).after


def kept(before: Conversation, after: Conversation) -> set[str]:
    """The facts of ``before`` found in ``after``, as :func:`ctxcli.score.score` looks."""
    text = conversation_text(after)
    facts = conversation_facts(before)
    return {f for values in facts.values() for f in values if f in text}


ids = st.from_regex(r"[A-Z]{2}[0-9]{3,5}", fullmatch=True)
prose = st.lists(st.sampled_from(["please", "check", "the", "order", "flight", "ok"]), max_size=12)


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You help with orders."}]
    for n in range(draw(st.integers(2, 10))):
        words = draw(prose) + draw(st.lists(ids, max_size=4))
        messages.append({"role": "user", "content": " ".join(words) or "hi"})
        if draw(st.booleans()):
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "look", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            rows = draw(st.lists(ids, min_size=1, max_size=60))
            content = "\n".join(f"row {r} status ok" for r in rows)
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": content})
        messages.append({"role": "assistant", "content": " ".join(draw(prose)) + " done."})
    return messages


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(150, 1500), st.integers(1, 600))
def test_a_larger_budget_never_keeps_fewer_facts(
    messages: list[dict[str, Any]], budget: int, more: int
) -> None:
    conversation = make_conversation(messages, COUNTER)
    summarizer = PrefixFacts()
    small = kept(conversation, compress(conversation, budget, summarizer))
    large = kept(conversation, compress(conversation, budget + more, summarizer))
    assert small <= large, sorted(small - large)


@settings(max_examples=30, deadline=None)
@given(conversations())
def test_a_conversation_within_budget_is_not_touched(messages: list[dict[str, Any]]) -> None:
    conversation = make_conversation(messages, COUNTER)
    assert compress(conversation, conversation.tokens).messages == conversation.messages


def test_the_reserve_leaves_the_tail_more_as_the_budget_grows() -> None:
    for cap in (None, 300):
        frees = [b - plan.reserve(b, cap) for b in range(0, 20000, 7)]
        rooms = [plan.reserve(b, cap) for b in range(0, 20000, 7)]
        assert frees == sorted(frees) and rooms == sorted(rooms)


def _tau() -> list[Conversation]:
    path = DATA / "tau-bench" / "gpt-4o-airline.json"
    if not path.exists():
        pytest.skip("no ../shared/data")
    runs = json.loads(path.read_text())[:25]
    return [make_conversation(r["traj"], COUNTER) for r in runs]


@pytest.mark.parametrize("summarizer", [None, Filling()], ids=["extractive", "filling"])
def test_tau_bench_fills_the_budget(summarizer: Summarizer | None) -> None:
    """Over budget, the output uses nearly all of it (median)."""
    uses = []
    for conversation in _tau():
        for budget in (1500, 2000, 3000):
            if conversation.tokens > budget:
                uses.append(compress(conversation, budget, summarizer).tokens / budget)
    uses.sort()
    assert uses[len(uses) // 2] >= 0.95


def test_tau_bench_never_keeps_fewer_facts_with_a_larger_budget() -> None:
    """With a summarizer that keeps the contract (:class:`PrefixFacts`)."""
    for conversation in _tau():
        previous: set[str] = set()
        for budget in (1000, 1500, 2000, 2500, 3000, 4000):
            facts = kept(conversation, compress(conversation, budget, PrefixFacts()))
            assert previous <= facts, (budget, sorted(previous - facts))
            previous = facts


def test_a_large_recent_result_becomes_a_placeholder_not_a_lost_unit() -> None:
    """The Claude Code session whose last tool result (6,360 tokens) the priority
    stage used to drop, leaving about 1,000 tokens at every budget."""
    path = DATA / "claude-code" / "codemie_session-9eda1058.jsonl"
    if not path.exists():
        pytest.skip("no ../shared/data")
    from ctxcli.formats import claude_code

    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = list(range(1, len(events) + 1))
    conversation = claude_code.read(events, COUNTER, path=str(path), line=1, lines=lines)
    for budget in range(2000, 8001, 500):
        after = compress(conversation, budget, Filling())
        assert 0.95 * budget <= after.tokens <= budget, (budget, after.tokens)
