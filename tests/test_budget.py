"""The default pipeline aims at the budget (see :mod:`ctxcli.stages.plan`): within the
budget nothing changes, over it the output fills most of it, and a larger budget never
keeps fewer facts (:mod:`ctxcli.score`'s definition), on random conversations and on
the real data (skipped without ../shared)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.config import resolve
from ctxcli.model import SEAL_DIGITS, SUMMARY_MARKER, Conversation, make_conversation
from ctxcli.pipeline import Context, run
from ctxcli.placeholders import PLACEHOLDER_START
from ctxcli.score import conversation_facts, facts_of, message_text
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


#: ctxcli's own marks in an output: a summary's header line (the count of messages it
#: folded and its seal, ``#299193843``), a placeholder's header line (its id and its
#: ``tokens=``/``chars=``/``head=``/``tail=`` numbers; the tool's name, which the input
#: holds, stays) and the count on its omitted line (``[... 501 characters omitted``;
#: the facts it names after "they hold:" stay).
_MARKS = re.compile(
    rf"{re.escape(SUMMARY_MARKER)} (?:\d+ earlier messages? folded\.|已折叠较早的 \d+ 条消息。)"
    rf" #\d{{{SEAL_DIGITS}}}"
    rf"|{re.escape(PLACEHOLDER_START)}id=[0-9a-f]+ tool=(?P<tool>.*?)"
    r" tokens=\d+ chars=\d+ head=\d+ tail=\d+\]"
    r"|(?<=\[\.\.\. )\d+ characters omitted"
)


def unmarked_text(conversation: Conversation) -> str:
    """The text :func:`ctxcli.score.conversation_text` reads (every message's
    :func:`ctxcli.score.message_text`, whitespace runs as one space), less ctxcli's own
    marks (:data:`_MARKS`). Their numbers are ctxcli's, not the input's: a 3-digit fact
    found in a seal (``193`` in ``#299193843``) or in "501 characters omitted" is a
    chance match, which comes and goes with the budget (a seal is a hash of the
    summary), so a fact-by-fact comparison of two budgets must not count it kept."""
    texts = (
        _MARKS.sub(lambda m: m["tool"] or "", message_text(m.data)) for m in conversation.messages
    )
    return re.sub(r"\s+", " ", "\n".join(texts))


def kept(before: Conversation, after: Conversation) -> set[str]:
    """The facts of ``before`` (:func:`ctxcli.score.conversation_facts`) found in
    ``after`` as :func:`ctxcli.score.score` looks for them (a substring), but not in
    ctxcli's own marks (:func:`unmarked_text`)."""
    text = unmarked_text(after)
    facts = conversation_facts(before)
    return {f for values in facts.values() for f in values if f in text}


def test_ctxclis_own_numbers_are_no_facts_kept() -> None:
    """A seal (``#299193843`` holds ``193``) and a placeholder's frame (its id, tokens,
    characters, preview lengths, "2669 characters omitted") are ctxcli's; what the
    placeholder shows and names (after "they hold:") and its tool's name are kept."""
    before = make_conversation(
        [
            {"role": "user", "content": "Orders 193, 812 and 2669 of get_v2_orders: AB123, CD456"},
            {"role": "assistant", "content": "ok"},
        ],
        COUNTER,
    )
    header = f"{SUMMARY_MARKER} 193 earlier messages folded. #299193843"
    frame = f'{PLACEHOLDER_START}id=1938122669ab0000 tool="get_v2_orders" tokens=812'
    placeholder = f"{frame} chars=2669 head=9 tail=0]\nAB123 row\n[... 2669 characters omitted"
    after = make_conversation(
        [
            {"role": "user", "content": f"{header}\nUser requests: none"},
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": f"{placeholder}; they hold: CD456 ...]",
            },
        ],
        COUNTER,
    )
    assert kept(before, after) == {"AB123", "CD456", "get_v2_orders"}


ids = st.from_regex(r"[A-Z]{2}[0-9]{3,5}", fullmatch=True)
prose = st.lists(st.sampled_from(["please", "check", "the", "order", "flight", "ok"]), max_size=12)
amounts = st.integers(10, 5000).map(lambda n: f"${n}")
dates = st.dates().map(lambda d: d.isoformat())


@st.composite
def steps(draw: Any, call_id: str) -> list[dict[str, Any]]:
    """A tool call whose arguments carry an id, its result (rows, or a JSON record
    with an amount, a date and more ids), and at times the assistant's note of an
    amount."""
    key = draw(ids)
    name = draw(st.sampled_from(["look", "get_order", "search_orders"]))
    arguments = json.dumps({"order_id": key, "limit": draw(st.integers(1, 50))})
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    if draw(st.booleans()):
        rows = draw(st.lists(ids, min_size=1, max_size=60))
        content = "\n".join(f"row {r} status ok" for r in rows)
    else:
        record = {
            "order_id": key,
            "status": draw(st.sampled_from(["paid", "open", "cancelled"])),
            "total": draw(st.integers(100, 99999)),
            "placed": draw(dates),
            "items": draw(st.lists(ids, max_size=20)),
        }
        content = json.dumps(record)
    out = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": content},
    ]
    if draw(st.booleans()):
        note = f"Order {key} comes to {draw(amounts)}, {draw(amounts)} of it refunded."
        out.append({"role": "assistant", "content": note})
    return out


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """A system prompt, then one to four user requests (a chat, an agent run, or a run
    with a second request), each with up to five tool steps (:func:`steps`) and an
    answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You help with orders."}]
    for n in range(draw(st.integers(1, 4))):
        words = draw(prose) + draw(st.lists(ids, max_size=4))
        messages.append({"role": "user", "content": " ".join(words) or "hi"})
        for k in range(draw(st.integers(0, 5))):
            messages += draw(steps(f"c{n}_{k}"))
        messages.append({"role": "assistant", "content": " ".join(draw(prose)) + " done."})
    return messages


@pytest.mark.parametrize(
    "summarizer", [pytest.param(None, id="extractive"), pytest.param(PrefixFacts(), id="stub")]
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), budget=st.integers(150, 2500), more=st.integers(1, 800))
def test_a_larger_budget_never_keeps_fewer_facts(
    summarizer: Summarizer | None, messages: list[dict[str, Any]], budget: int, more: int
) -> None:
    """With the default pipeline and its extractive summarizer, and with a stub that
    keeps the summarizers' contract (:class:`PrefixFacts`), which pins the stages'."""
    conversation = make_conversation(messages, COUNTER)
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


@st.composite
def chains(draw: st.DrawFn) -> list[plan.Cut]:
    """Cuts as :func:`ctxcli.stages.plan.chain` makes them: each keeps fewer tokens."""
    kept = sorted(draw(st.lists(st.integers(0, 6000), min_size=1, max_size=8)), reverse=True)
    sides = st.tuples(st.booleans(), st.booleans())
    return [plan.Cut(k, k, k, tokens, draw(sides)) for k, tokens in enumerate(kept)]


@settings(max_examples=400, deadline=None)
@given(cuts=chains(), budget=st.integers(1, 8000), over=st.integers(0, 5000))
def test_a_cap_past_the_telling_one_plans_as_no_cap(
    cuts: list[plan.Cut], budget: int, over: int
) -> None:
    cap = plan.telling(cuts, budget) + over
    weights = [3, 5]
    taken = plan.first_fit(cuts, budget, None)
    assert plan.first_fit(cuts, budget, cap) == taken
    assert plan.rooms(cuts, taken, budget, cap, weights) == plan.rooms(
        cuts, taken, budget, None, weights
    )


def _tau(count: int = 25) -> list[Conversation]:
    """The first ``count`` of tau-bench's 200 airline runs (skips without them)."""
    path = DATA / "tau-bench" / "gpt-4o-airline.json"
    if not path.exists():
        pytest.skip("no ../shared/data")
    runs = json.loads(path.read_text())[:count]
    return [make_conversation(r["traj"], COUNTER) for r in runs]


def _session(name: str) -> Conversation:
    """A Claude Code session (``claude-code/<name>``) or the SWE-agent trajectory
    (``swe-agent/<name>``, its ``history``) of ../shared/data (skips without it)."""
    path = DATA / name
    if not path.exists():
        pytest.skip("no ../shared/data")
    if path.suffix == ".traj":
        return make_conversation(json.loads(path.read_text())["history"], COUNTER)
    from ctxcli.formats import claude_code

    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = list(range(1, len(events) + 1))
    return claude_code.read(events, COUNTER, path=str(path), line=1, lines=lines)


def _losses(
    conversation: Conversation, budgets: Sequence[int], summarizer: Summarizer | None = None
) -> list[tuple[int, list[str]]]:
    """Each budget (tokens, in the order given) whose output lacks facts the budget
    before it kept, with those facts."""
    losses = []
    previous: set[str] = set()
    for budget in budgets:
        facts = kept(conversation, compress(conversation, budget, summarizer))
        if previous - facts:
            losses.append((budget, sorted(previous - facts)))
        previous = facts
    return losses


@pytest.mark.parametrize("summarizer", [None, Filling()], ids=["extractive", "filling"])
def test_tau_bench_fills_the_budget(summarizer: Summarizer | None) -> None:
    """Over budget, the output uses nearly all of it (median), at each budget: at 3000
    the extractive summaries needed less than the most folded cut's and left a median
    0.946 unused, once placeholders no longer cost more than their results."""
    for budget in (1500, 2000, 3000):
        uses = sorted(
            compress(conversation, budget, summarizer).tokens / budget
            for conversation in _tau()
            if conversation.tokens > budget
        )
        assert uses[len(uses) // 2] >= 0.95, budget


TAU_BUDGETS = (1000, 1500, 2000, 2500, 3000, 4000)


def test_tau_bench_never_keeps_fewer_facts_with_a_larger_budget() -> None:
    """With a summarizer that keeps the contract (:class:`PrefixFacts`)."""
    for conversation in _tau():
        assert _losses(conversation, TAU_BUDGETS, PrefixFacts()) == [], conversation.label


def test_tau_bench_never_keeps_fewer_facts_with_a_larger_budget_by_default() -> None:
    """The default pipeline on all 200 runs. Run 169 lost a birth date and two
    reservations at 3000 that 2500 kept, when placeholders named facts for only a sixth
    of their result's characters (see :func:`ctxcli.placeholders.omitted_facts`)."""
    losses = {k: lost for k, c in enumerate(_tau(200)) if (lost := _losses(c, TAU_BUDGETS))}
    assert losses == {}


def test_tau_bench_runs_that_lost_facts_between_close_budgets_no_longer_do() -> None:
    """Every 50 tokens from 1200 to 1650, the runs that lost what a budget 50 or 100
    tokens smaller kept: 125 the ``$628`` and ``7334`` the user typed (at 1400, to a
    booking that filled the room; at 1550, to the card's record, taken off when the
    joined body counted over), 100 the flights the user chose (a booking cut before
    them), 50 its profile (cut, then left out for two tokens). Run 58 still loses a date
    at 1600: its booking, cut, keeps its outcome ("→ Error: payment amount does not add
    up") in place of its last arguments."""
    runs = _tau(126)
    losses = {k: lost for k in (50, 100, 125) if (lost := _losses(runs[k], range(1200, 1700, 50)))}
    assert losses == {}


@pytest.mark.parametrize(
    "name",
    [
        "swe-agent/marshmallow-code__marshmallow-1867.traj",
        "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        "claude-code/codemie_session-624a4a58.jsonl",
        "claude-code/codemie_session-9eda1058.jsonl",
    ],
    ids=lambda name: name.split("/")[0] + "-" + name.split("/")[1][:15],
)
def test_agent_sessions_never_keep_fewer_facts_with_a_larger_budget(name: str) -> None:
    """The default pipeline on the SWE-agent trajectory and the Claude Code sessions at
    1/8, 2/8 ... 7/8 of their own tokens. The SWE-agent run (at 5/8 and 4/8) and
    the large session (at 4/8 and 3/8) lost line numbers of a numbered file view that
    the smaller budget's widened preview showed, when the placeholder stage's
    placeholders named facts for only a sixth of their result's characters; the
    session 9eda1058 (at 2/8) the headings of a Task's report ("### Error Handling")
    that the summary at 1/8 listed as error lines."""
    conversation = _session(name)
    budgets = [conversation.tokens * k // 8 for k in range(1, 8)]
    assert _losses(conversation, budgets) == []


def test_the_swe_agent_run_never_keeps_fewer_facts_every_250_tokens() -> None:
    """Placeholders that left out a file view's line numbers (a series that counts
    nothing) kept 56 facts at 2750 and 45 at 3000, 73 at 3500 and 72 at 4000: at the
    larger budget the planner kept one more message and widened the edit's preview
    less, and the numbers its list no longer named went with the lines. Named in the
    list, every one is kept whatever the preview shows (126 / 126 / 128 / 128)."""
    conversation = _session("swe-agent/marshmallow-code__marshmallow-1867.traj")
    assert _losses(conversation, range(2000, 4501, 250)) == []


def test_a_large_recent_result_becomes_a_placeholder_not_a_lost_unit() -> None:
    """The Claude Code session whose last tool result (6,360 tokens) the priority
    stage used to drop, leaving about 1,000 tokens at every budget: now each budget
    is at least nine tenths used, and the median 0.95."""
    path = DATA / "claude-code" / "codemie_session-9eda1058.jsonl"
    if not path.exists():
        pytest.skip("no ../shared/data")
    from ctxcli.formats import claude_code

    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = list(range(1, len(events) + 1))
    conversation = claude_code.read(events, COUNTER, path=str(path), line=1, lines=lines)
    uses = []
    for budget in range(2000, 8001, 500):
        after = compress(conversation, budget, Filling())
        assert 0.9 * budget <= after.tokens <= budget, (budget, after.tokens)
        uses.append(after.tokens / budget)
    assert sorted(uses)[len(uses) // 2] >= 0.95, uses  # the goal is a median


def test_one_summary_to_write_is_reserved_only_what_it_needs() -> None:
    """The same Claude Code session kept the same 1,405 tokens at every budget from
    1500 to 3000: at 3000 the tail before its last steps (2,571 tokens, one summary
    to write) missed the reserve of the most folded cut's two summaries (448) by 19
    tokens, though its one summary needed far less."""
    conversation = _session("claude-code/codemie_session-9eda1058.jsonl")
    after = compress(conversation, 3000)
    assert 0.95 * 3000 <= after.tokens <= 3000, after.tokens
    assert sum(m.is_summary for m in after.messages) == 1
    assert _losses(conversation, range(2500, 3301, 100)) == []


@pytest.mark.parametrize(
    ("name", "share", "use"),
    [
        ("claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", 3 / 4, 0.95),
        ("swe-agent/marshmallow-code__marshmallow-1867.traj", 3 / 8, 0.9),
    ],
    ids=["claude-code", "swe-agent"],
)
def test_a_summary_with_little_to_say_leaves_the_budget_to_the_tail(
    name: str, share: float, use: float
) -> None:
    """The summaries' room is capped at what they take with no bound, so the tail
    gets the rest: these came out at 0.38 and 0.65 of the budget when two fifths of it
    were reserved for summaries that needed a few hundred tokens."""
    conversation = _session(name)
    budget = int(conversation.tokens * share)
    after = compress(conversation, budget)
    assert use * budget <= after.tokens <= budget, (budget, after.tokens)


def test_a_large_call_in_the_kept_tail_has_its_arguments_cleared_not_its_unit_folded() -> None:
    """The Claude Code session at half its tokens: the next unit of the tail holds a
    MultiEdit call of 1,431 tokens of arguments, which the tail could not take, so 19
    more messages were folded and the output ended at 1,745 of 3,094 tokens. Its
    arguments now become a placeholder (restorable, naming the facts it omits) and
    the budget is used."""
    conversation = _session("claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl")
    budget = conversation.tokens // 2
    result = run(conversation, resolve(max_tokens=budget).stages, Context(budget, COUNTER))
    after = result.after
    assert 0.95 * budget <= after.tokens <= budget, (budget, after.tokens)
    calls = [c for m in after.messages for c in m.data.get("tool_calls") or []]
    cleared = [c for c in calls if "ctxcli_placeholder" in c["function"]["arguments"]]
    assert [c["function"]["name"] for c in cleared] == ["MultiEdit"]
    originals = [
        c["function"]["arguments"]
        for m in conversation.messages
        for c in m.data.get("tool_calls") or []
        if c["function"]["name"] == "MultiEdit"
    ]
    stored = list(result.stored.values())
    assert originals and all(a in stored for a in originals)  # what restore puts back


def _reading_run(steps: int) -> dict[str, Any]:
    """A task, then ``steps`` calls alternating between ``read_file`` and ``grep``,
    each result about 700 tokens of distinct text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find where config.py parses the timeout and fix it."},
    ]
    for k in range(steps):
        name = "read_file" if k % 2 == 0 else "grep"
        call = {"id": f"c{k}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps({"path": f"src/m{k}.py"})}
        lines = "\n".join(f"line {k}-{j}: value_{k}_{j} = {k * j}" for j in range(60))
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": lines})
    messages.append({"role": "assistant", "content": "The timeout is parsed in src/m3.py."})
    return {"messages": messages}


def test_the_kept_tail_keeps_the_results_of_excluded_tools_whole() -> None:
    """``placeholder: {exclude_tools: [read_file]}`` is a promise that no read_file
    result becomes a placeholder: the summary stage's compaction of the kept tail
    keeps it too (it used to turn them into placeholders all the same)."""
    from ctxcli.compress import Compressor

    record = _reading_run(20)

    def placeheld(options: Mapping[str, Any]) -> list[str]:
        settings = resolve(max_tokens=5000, stage_options={"placeholder": options})
        after = Compressor(settings).conversation(record).after.messages
        names = {
            c["id"]: c["function"]["name"] for m in after for c in m.data.get("tool_calls") or []
        }
        return [
            names[m.data["tool_call_id"]]
            for m in after
            if m.role == "tool" and str(m.data["content"]).startswith(PLACEHOLDER_START)
        ]

    assert "read_file" in placeheld({})  # else this test shows nothing
    excluded = placeheld({"exclude_tools": ["read_file"]})
    assert "read_file" not in excluded


def _record(order: str, total: int, placed: str, items: list[str]) -> str:
    fields = {"order_id": order, "status": "paid", "total": total, "placed": placed}
    return json.dumps({**fields, "items": items})


def _rows(*ids: str) -> str:
    return "\n".join(f"row {i} status ok" for i in ids)


#: CI's random conversation (hypothesis) where the priority stage, taking back what fit
#: after its last drop, kept fewer facts at 151 tokens than at 150: (call id, order id,
#: limit, result) of each step of its second turn, then of its third.
_STEPS = (
    [
        (
            "c1_0",
            "GD986",
            18,
            _record(
                "GD986",
                70202,
                "0548-06-19",
                [
                    "HF8816",
                    "CL63697",
                    "LY32474",
                    "GE806",
                    "HG597",
                    "BF47999",
                    "BV78709",
                    "PG586",
                    "EZ01087",
                    "IU3025",
                ],
            ),
        ),
        (
            "c1_1",
            "OY267",
            32,
            _rows(
                "XF544",
                "WW54210",
                "RA254",
                "FM421",
                "XQ166",
                "GQ656",
                "MW0068",
                "NS00000",
                "AA000",
                "AA000",
                "AA000",
                "AA000",
            ),
        ),
        ("c1_2", "PZ0000", 1, _rows("AA00000", "AA0000")),
        ("c1_3", "AA000", 1, _record("AA000", 100, "2000-01-01", [])),
        ("c1_4", "AA00000", 1, _record("AA00000", 100, "2000-01-01", [])),
    ],
    [
        ("c2_0", "AA000", 1, _rows("AA000")),
        ("c2_1", "AA00000", 1, _rows("AA000", "AA000", "AA000")),
    ],
)


def _steps_of(steps: list[tuple[str, str, int, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call_id, order, limit, result in steps:
        arguments = json.dumps({"order_id": order, "limit": limit})
        call = {"id": call_id, "type": "function"}
        call["function"] = {"name": "look", "arguments": arguments}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return out


def test_a_budget_one_token_larger_keeps_what_the_smaller_kept() -> None:
    """At 150 tokens the priority stage took back units of 19 and 7 tokens after its
    last drop, at 151 one of 41 tokens that left no room for them: the larger budget
    lost an order (GD986) and its two amounts. (At 162 a summary first fits, and with
    its 20 tokens of room keeps fewer of the user's ids than the message it folds:
    not mended, see benchmarks/RESULTS.md.)"""
    note = "Order GD986 comes to $1147, $392 of it refunded."
    first, second = _steps_of(_STEPS[0]), _steps_of(_STEPS[1])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You help with orders."},
        {"role": "user", "content": " ".join(["please"] * 12 + ["NF190", "IW990", "SM4050"])},
        {"role": "assistant", "content": "please done."},
        {"role": "user", "content": "hi"},
        *first[:2],
        {"role": "assistant", "content": note},
        *first[2:],
        {"role": "assistant", "content": "please please please done."},
        {"role": "user", "content": "hi"},
        *second,
        {"role": "assistant", "content": "Order AA00000 comes to $10, $10 of it refunded."},
        {"role": "assistant", "content": "please done."},
    ]
    conversation = make_conversation(messages, COUNTER)
    facts = [kept(conversation, compress(conversation, b)) for b in range(140, 162)]
    assert all(a <= b for a, b in zip(facts, facts[1:]))


def test_a_larger_budget_keeps_no_fewer_facts_where_what_must_be_kept_is_over() -> None:
    """The priority stage took the summaries back when what must be kept was over the
    budget by itself: 77 tokens with a summary at a budget of 40, 45 without one at 60,
    so the smaller budget kept more facts, and its warning's "with only what must be
    kept" was not so. Over there, only what must be kept is left."""
    call = {"id": "c1", "type": "function", "function": {"name": "get_order"}}
    call["function"]["arguments"] = json.dumps({"id": "ORD-1001"})
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Get order ORD-1001"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "status shipped tracking TRK-55501 weight 1200g carrier DHL eta 2024-06-18",
        },
        {"role": "assistant", "content": "Order ORD-1001 shipped, tracking TRK-55501."},
    ]
    conversation = make_conversation(messages, COUNTER)
    facts = [kept(conversation, compress(conversation, budget)) for budget in range(10, 130, 5)]
    assert all(a <= b for a, b in zip(facts, facts[1:])), facts
    tokens = [compress(conversation, budget).tokens for budget in range(10, 130, 5)]
    least = min(tokens)
    over = [t for b, t in zip(range(10, 130, 5), tokens) if t > b]
    assert over and all(t == least for t in over), tokens  # only what must be kept
