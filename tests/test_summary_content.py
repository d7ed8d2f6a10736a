"""What the extractive summary keeps: a prefix of a fixed ranking (more room or fewer
messages never lose a fact), requests without greetings, Chinese facts whole, and what
an agent run needs next (the real runs of ../shared/data; skipped without it)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.compress import Compressor
from ctxcli.config import resolve
from ctxcli.formats import openai
from ctxcli.model import make_conversation
from ctxcli.score import conversation_facts, facts_of
from ctxcli.score import message_text as score_text
from ctxcli.summarizers.extractive import (
    ACTED,
    EXTRACTIVE,
    REST,
    Item,
    _cut_call,
    _cut_item,
    _cut_says,
    _later_answer,
    _render,
    parse_summary,
)
from ctxcli.summarizers.facts import FACT_SCAN_CHARS, facts
from ctxcli.summarizers.records import answer, difference, found, made, parse_json, records
from ctxcli.summarizers.text import is_filler, own_sentences
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")
SAMPLES = Path(__file__).resolve().parents[1] / "samples"
Messages = list[dict[str, Any]]


def _summary(messages: Messages, bound: int, previous: str | None = None) -> str:
    return EXTRACTIVE.summarize(messages, previous=previous, max_tokens=bound, counter=COUNTER)


def _facts(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every fact (:mod:`ctxcli.score`'s definition) of ``messages``."""
    found: set[str] = set()
    for kinds in conversation_facts(make_conversation(list(messages), COUNTER)).values():
        found |= kinds
    return found


def _kept(facts: set[str], text: str) -> set[str]:
    flat = " ".join(text.split())
    return {fact for fact in facts if fact in flat}


# --- the prefix property -------------------------------------------------------------

WORDS = ["book", "cancel", "flight", "refund", "hello", "thanks", "card", "seat", "bag"]


@st.composite
def conversations(draw: Any) -> Messages:
    """Chats and agent runs with ids, amounts, dates and paths in every kind of message:
    user text, assistant text, tool calls and JSON or plain tool results."""
    fact = st.one_of(
        st.from_regex(r"[A-Z]{3}[0-9]{3}", fullmatch=True),
        st.from_regex(r"\$[1-9][0-9]{2}", fullmatch=True),
        st.from_regex(r"2024-0[1-9]-[12][0-9]", fullmatch=True),
        st.from_regex(r"src/[a-z]{2,6}/[a-z]{2,6}\.py", fullmatch=True),
    )
    sentence = st.builds(
        lambda words, facts: " ".join(words + facts) + ".",
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
        st.lists(fact, max_size=3),
    )
    messages: Messages = []
    for n in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "call"]))
        text = " ".join(draw(st.lists(sentence, min_size=1, max_size=4)))
        if kind != "call":
            messages.append({"role": kind, "content": text})
            continue
        name = draw(st.sampled_from(["get_order", "update_order", "bash", "search"]))
        arguments = json.dumps({"id": draw(fact), "note": draw(st.sampled_from(WORDS))})
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        if draw(st.booleans()):
            result = json.dumps({"order_id": draw(fact), "total": draw(fact), "status": "ok"})
        else:
            result = text if draw(st.booleans()) else f"Error: {text}"
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
    return messages


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), small=st.integers(1, 300), more=st.integers(0, 400))
def test_more_room_never_keeps_fewer_facts(messages: Messages, small: int, more: int) -> None:
    """What the summary keeps at a bound is a prefix of one ranking: a larger bound
    keeps every fact a smaller one kept, and each bound holds."""
    facts = _facts(messages)
    less, larger = _summary(messages, small), _summary(messages, small + more)
    assert COUNTER.text(less) <= small and COUNTER.text(larger) <= small + more
    assert _kept(facts, less) <= _kept(facts, larger)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), bound=st.integers(1, 400), cut=st.integers(0, 14))
def test_folding_fewer_messages_never_loses_a_fact_of_theirs(
    messages: Messages, bound: int, cut: int
) -> None:
    """The older messages alone (what a larger budget folds, the newer ones then kept
    whole) keep every fact of theirs that the summary of all of them kept, but those
    the newer messages say themselves."""
    older = messages[: max(1, len(messages) - cut)]
    if older[-1].get("tool_calls"):
        older = older[:-1] or older  # a call's result goes with it
    facts = _facts(older) - _facts(messages[len(older) :])
    assert _kept(facts, _summary(messages, bound)) <= _kept(facts, _summary(older, bound))


def test_the_property_holds_on_tau_bench_runs(data: Path) -> None:
    runs = json.loads((data / "tau-bench/gpt-4o-airline.json").read_text())[:12]
    first = last = 0
    for run in runs:
        messages = [m for m in run["traj"] if m["role"] != "system"][:-4]
        facts = _facts(messages)
        kept = [_kept(facts, _summary(messages, bound)) for bound in (100, 250, 500, 900, 1500)]
        assert all(a <= b for a, b in zip(kept, kept[1:]))
        first, last = first + len(kept[0]), last + len(kept[-1])
    assert last > 3 * first


# --- requests --------------------------------------------------------------------------

#: Lines that are a greeting, thanks or filler alone: never a request.
GREETINGS = [
    "Hello!",
    "Hi!",
    "Hi! Can you help me with this?",
    "Thanks!",
    "Thank you so much!",
    "Thanks! I'll definitely be in touch.",
    "Great, thank you.",
    "That's all, thanks.",
    "Okay, sounds good.",
    "Have a nice day!",
    "Bye!",
    "Thanks, you too!",
    "You too! I'll reach out soon.",
    "Have a great day too.",
    "Thank you for your help so far!",
    "I'll get back to you.",
    "I'll be back once I've got it. Take care!",
    # promises to come back with what was asked, thanks for the way (tau-bench)
    "Alright, I'll check my emails and get back to you.",
    "I'll make sure to find it first.",
    "Thank you, I’ll get those IDs and contact you again soon.",
    "Got it, I'll make sure to have that information ready next time.",
    "Alright, I'm still searching for it.",
    "I appreciate your patience.",
    "Thank you for guiding me through this process.",
    # a summary reader found these two as tau-bench 9-0's requests at 2000
    "I'll get back to you if I need further help.",
    "Got it, I'll work on getting the reservation ID.",
    "你好",
    "谢谢！",
    "好的，谢谢您",
    # the Chinese sample's one request at 375 tokens, a summary reader found
    "那我先下单，后续有问题再联系你。",
    "好的，我考虑一下，有需要再找您",
]


@pytest.mark.parametrize("line", GREETINGS)
def test_greetings_and_thanks_are_filler(line: str) -> None:
    assert is_filler(line)


@pytest.mark.parametrize(
    "line",
    [
        "Hi, I want to cancel my trip.",
        "Thanks, use card 7447.",
        "好的，我决定买黑色的",
        "那我先下单，帮我用优惠码 XC2026VIP",
        "有问题再联系你，先帮我查物流",
        # a go-ahead, and words a reviewer found taken for a sign-off
        "好的，下单吧",
        "那就下单吧",
        "好的，再试试",
        "问你",
        "I'll look for a cheaper flight.",
        "I'll check my email, and please cancel HAT123.",
        "Thanks for checking, but I need a refund.",
        "Thank you for explaining, please provide my reservation details.",
        "Thanks for the details, let me know my reservation number.",
        "Thanks for checking, then do it.",
        "I'll need help with the refund for the cancelled flight.",
        "I'll work on the upgrade to business class.",
    ],
)
def test_a_request_beside_a_greeting_is_no_filler(line: str) -> None:
    assert not is_filler(line)


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("Hi there, I noticed my insurance is missing.", "I noticed my insurance is missing."),
        ("Bonjour! I would like to cancel my flights.", "I would like to cancel my flights."),
        ("Good morning, I need a refund.", "I need a refund."),
        ("Hello again! Cancel PEP4E0.", "Cancel PEP4E0."),
    ],
)
def test_a_greeting_before_a_request_is_dropped_whole(line: str, kept: str) -> None:
    assert own_sentences(line) == [kept]


@pytest.mark.parametrize("budget", [1500, 2000, 3000])
def test_no_request_line_on_tau_bench_is_a_greeting_or_thanks_alone(
    data: Path, budget: int
) -> None:
    runs = json.loads((data / "tau-bench/gpt-4o-airline.json").read_text())
    compressor = Compressor(resolve(max_tokens=budget))
    lines = 0
    for run in runs:
        result = compressor.conversation({"messages": run["traj"]})
        for message in result.after.messages:
            if message.is_summary:
                requests = parse_summary(message.data["content"].split("\n", 1)[1])["requests"]
                assert not [r for r in requests if is_filler(r)], requests
                assert not [r for r in requests if r.rstrip("!.?") in ("Hello", "Hi", "Thanks")]
                lines += len(requests)
    assert lines > 200


def test_the_task_is_kept_in_its_own_words_without_its_greeting() -> None:
    task = (
        "Hi! I'd like to change my recent reservation to the cheapest business round trip "
        "from ATL to SFO, reservation JG7FMM. Thanks so much!"
    )
    body = _summary([{"role": "user", "content": task}], 200)
    assert body == (
        "User requests:\n- I'd like to change my recent reservation to the cheapest business "
        "round trip from ATL to SFO, reservation JG7FMM."
    )


# --- dense records and actions --------------------------------------------------------

FLIGHTS = [
    {
        "flight_number": number,
        "origin": "JFK",
        "destination": "SEA",
        "scheduled_departure_time_est": "06:00:00",
        "status": "available",
        "available_seats": {"economy": 12, "business": 3},
        "prices": {"economy": price, "business": 239},
    }
    for number, price in (("HAT069", 121), ("HAT083", 100))
]


def test_records_keep_ids_times_and_prices_not_seat_counts_or_a_shared_state() -> None:
    assert records(FLIGHTS, "result") == [
        "flight HAT069: JFK→SEA, 06:00, prices economy 121 business 239",
        "flight HAT083: JFK→SEA, 06:00, prices economy 100 business 239",
    ]
    # a state that tells objects apart is kept
    told = [dict(FLIGHTS[0], status="cancelled"), FLIGHTS[1]]
    assert "available" in records(told, "result")[1]


@pytest.mark.parametrize(
    ("earlier", "later", "expected"),
    [
        pytest.param(
            {"a": 1, "b": 2, "c": [{"amount": 5}, 3]},
            {"a": 1, "b": 2, "c": [{"amount": 55}, 3]},
            "amount 5",
            id="one",
        ),
        pytest.param(
            {"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 1, "b": 2, "c": 3, "d": 4}, None, id="same"
        ),
        pytest.param(
            {"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 9, "b": 9, "c": 9, "d": 4}, None, id="many"
        ),
        pytest.param({"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 1, "b": 2, "c": 3}, None, id="shape"),
        pytest.param({"a": 1, "b": 2}, {"a": 1, "b": 3}, None, id="few"),
    ],
)
def test_difference_says_the_few_arguments_that_changed(
    earlier: dict[str, Any], later: dict[str, Any], expected: str | None
) -> None:
    assert difference(json.dumps(earlier), json.dumps(later)) == expected


def test_a_call_repeated_with_one_argument_changed_says_only_that() -> None:
    booking = {"user_id": "mia_li_3668", "flight": "HAT136", "date": "2024-05-20"}
    messages: Messages = []
    for n, (amount, result) in enumerate(((5, "Error: paid 255, total 305"), (55, "{}"))):
        arguments = json.dumps(
            {**booking, "payment": {"id": "certificate_7504069", "amount": amount}}
        )
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "book_reservation", "arguments": arguments},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": result},
        ]
    body = _summary(messages, 400)
    assert body.startswith(
        "Actions: book_reservation(as the next, but amount 5) → Error: paid 255, total 305; "
        "book_reservation(mia_li_3668, HAT136, 2024-05-20, certificate_7504069, 55) → ok"
    )


def test_a_look_up_says_the_ids_it_found() -> None:
    assert found(json.dumps(FLIGHTS)) == "HAT069, HAT083"
    assert found(json.dumps(FLIGHTS[:1])) == "HAT069"  # a search's one find
    assert found("[]") == "none"  # a search that found nothing
    assert found("{}") == "" and found("ok") == "" and found('[{"a": 1}, {"b": 2}]') == ""


def test_a_call_that_changed_state_names_what_it_made() -> None:
    booked = json.dumps({"reservation_id": "HATHAT", "user_id": "mia_li_3668", "status": "ok"})
    assert made(booked) == "reservation HATHAT"
    assert made(json.dumps({"status": "cancelled"})) == "" and made("[]") == "" and made("ok") == ""
    cancelled = json.dumps({"reservation_id": "NQNU5R", "status": "cancelled"})
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Book it, then cancel NQNU5R."}]
    for k, (name, arguments, result) in enumerate(
        [
            ("book_reservation", '{"user_id": "mia_li_3668"}', booked),
            ("cancel_reservation", '{"reservation_id": "NQNU5R"}', cancelled),
        ]
    ):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": result},
        ]
    body = EXTRACTIVE.summarize(messages, previous=None, max_tokens=200, counter=COUNTER)
    assert "book_reservation(mia_li_3668) → ok, reservation HATHAT" in body, body
    assert "cancel_reservation(NQNU5R) → ok" in body and "ok, reservation NQNU5R" not in body
    many = [dict(FLIGHTS[0], flight_number=f"HAT{n:03}") for n in range(10)]
    assert found(json.dumps(many)).endswith("HAT007 +2")


def test_a_reused_call_id_pairs_each_call_with_the_result_after_it() -> None:
    messages: Messages = []
    for name, flights in (("search_direct_flight", FLIGHTS[:1] * 2), ("search_onestop", FLIGHTS)):
        function = {"name": name, "arguments": "{}"}
        call = {"id": "same", "type": "function", "function": function}
        flights = [dict(f, flight_number=f"{f['flight_number']}{name[7]}") for f in flights]
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "same", "content": json.dumps(flights)},
        ]
    assert _summary(messages, 400).startswith(
        "Actions: search_direct_flight() → ok; search_onestop() → HAT069o, HAT083o"
    )


def test_a_look_up_of_what_the_user_named_ranks_before_later_look_ups() -> None:
    profile = {"user_id": "mia_li_3668", "reservations": ["NO6JO3", "AIXC49"]}
    lookups = [("get_user_details", {"user_id": "mia_li_3668"}, profile)]
    lookups += [("search_direct_flight", {"origin": "JFK", "destination": "SEA"}, FLIGHTS)]
    messages: Messages = [{"role": "user", "content": "My user id is mia_li_3668."}]
    for n, (name, arguments, result) in enumerate(lookups):
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"c{n}", "type": "function", "function": function}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps(result)},
        ]
    body = _summary(messages, 60)
    # The record of the look-up the user named is told once, under its own label (its
    # action says ok), and before the later look-up.
    assert "get_user_details(mia_li_3668) → ok" in body
    assert "user mia_li_3668: reservations NO6JO3 AIXC49" in body
    assert body.count("NO6JO3") == 1 and "flight HAT069" not in body


def test_a_bare_fact_goes_when_a_longer_fact_taken_after_it_says_it() -> None:
    # tau-bench run 14 at 1500: "Facts: cost $1,200; $600; cost $600".
    messages: Messages = [
        {"role": "user", "content": "Please change my booking."},
        {"role": "user", "content": "I can pay $600."},
        {"role": "assistant", "content": "The total cost is $600."},
    ]
    assert parse_summary(_summary(messages, 20))["facts"] == ["total cost $600"]


def test_a_bare_fact_stays_beside_a_longer_id_that_holds_it() -> None:
    # "7091239" is not said by "voucher 7091239-3", nor "24" by "2024-05-24".
    said = "Your old voucher 7091239-2 expired; the refund goes to voucher 7091239-3."
    messages: Messages = [
        {"role": "user", "content": "I want to return an item."},
        {"role": "assistant", "content": said},
        {"role": "user", "content": "ok " + "blah words " * 40 + " my card is 7091239"},
        {"role": "assistant", "content": "Ok."},
    ]
    for bound in (120, 200, 400):
        body = _summary(messages, bound)
        assert re.search(r"(?<![\w-])7091239(?![\w-])", body), (bound, body)


def test_the_ids_and_dates_of_a_prose_argument_are_whole_words() -> None:
    # tau-bench: think(XEHM4B 24 59 XX6W) and think(2024 05 02 24 10).
    said = (
        "Reservation 59XX6W is an economy ticket with insurance, booked on 2024-05-12,"
        " within 24 hours of booking, so it costs $1,200.50 to change."
    )
    function = {"name": "transfer_to_human_agents", "arguments": json.dumps({"summary": said})}
    messages: Messages = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "function": function}]},
        {"role": "tool", "tool_call_id": "c0", "content": "{}"},
    ]
    body = _summary(messages, 400)
    assert "transfer_to_human_agents(59XX6W 2024-05-12 24 $1,200.50) → ok" in body


def test_a_thought_is_read_as_what_the_assistant_said_not_as_an_action() -> None:
    # tau-bench's think tool (Anthropic's too): 184 calls, each "think(24 NQNU5R) → ok".
    thought = (
        "The reservation IFOYYZ is a basic economy ticket and was created more than 24"
        " hours ago without travel insurance, so it cannot be canceled. The total for"
        " the three passengers is $413."
    )
    function = {"name": "think", "arguments": json.dumps({"thought": thought})}
    messages: Messages = [
        {"role": "user", "content": "Please cancel IFOYYZ."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "function": function}]},
        {"role": "tool", "tool_call_id": "c0", "content": ""},
    ]
    for legacy in (False, True):  # a legacy function_call (ShareGPT's) thinks alike
        if legacy:
            messages[1] = {"role": "assistant", "content": None, "function_call": function}
            messages[2] = {"role": "function", "name": "think", "content": ""}
        said = parse_summary(_summary(messages, 400))
        assert not said["actions"], said
        notes = said["notes"]
        assert any("IFOYYZ" in note and "cannot be canceled" in note for note in notes), said
        assert "$413" in " ".join(said["notes"] + said["facts"]), said


def test_a_note_that_says_what_a_note_before_it_said_is_left_out() -> None:
    # tau-bench run 34: the answer repeats the thought before it, word for word but two.
    thought = "XEHM4B: It cannot be canceled for a refund unless the airline cancels the flight."
    function = {"name": "think", "arguments": json.dumps({"thought": thought})}
    answer = (
        "XEHM4B: Unfortunately, it cannot be canceled for a refund unless the airline"
        " cancels the flight. I cannot remove a passenger from reservation 59XX6W."
    )
    messages: Messages = [
        {"role": "user", "content": "Cancel XEHM4B."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "function": function}]},
        {"role": "tool", "tool_call_id": "c0", "content": ""},
        {"role": "assistant", "content": answer},
        {"role": "assistant", "content": "I cannot remove a passenger from reservation 8C8K4E."},
    ]
    notes = parse_summary(_summary(messages, 400))["notes"]
    assert sum("cannot be canceled for a refund" in note for note in notes) == 1, notes
    # alike in words, but not in facts: both stay
    assert sum("cannot remove a passenger" in note for note in notes) == 2, notes


def test_an_action_leaves_out_small_values_but_counts_and_the_prose_of_a_thought() -> None:
    calls = [
        ("think", {"thought": "The total is $152 + $103 = $255, so the user pays $255 now."}),
        ("think", {"thought": "I should ask the user which flight they want to keep."}),
        ("book_reservation", {"user_id": "mia_li_3668", "bags": 3, "free": 1, "insurance": "no"}),
    ]
    messages: Messages = []
    for n, (name, arguments) in enumerate(calls):
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"c{n}", "type": "function", "function": function}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "{}"},
        ]
    body = _summary(messages, 400)
    assert "Actions: book_reservation(mia_li_3668, bags 3) → ok" in body
    # The thought that was think($152 $103 $255) is said as such (a thought with no
    # fact in it is not even a note).
    assert "Assistant notes:\n- The total is $152 + $103 = $255" in body, body
    assert "which flight" not in body


def _calls(calls: list[tuple[str, dict[str, Any], Any]]) -> Messages:
    """An agent run of ``(name, arguments, result)`` calls, each result JSON or text."""
    messages: Messages = []
    for n, (name, arguments, result) in enumerate(calls):
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"c{n}", "type": "function", "function": function}
        content = result if isinstance(result, str) else json.dumps(result)
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": content},
        ]
    return messages


def test_calls_alike_but_for_one_value_are_one_action_with_a_count() -> None:
    lookups = [("get_reservation_details", {"reservation_id": r}, {}) for r in ("LQ940Q", "2FBBAH")]
    booking = {"reservation_id": "JG7FMM", "cabin": "economy", "a": 1, "b": 2}
    tries = [
        ("update", {**booking, "payment_id": card}, "Error: gift card balance is not enough")
        for card in ("gift_card_1", "gift_card_2")
    ]
    body = _summary(
        _calls([*lookups, *tries, ("update", {**booking, "payment_id": "c_3"}, {})]), 400
    )
    assert "get_reservation_details(LQ940Q | 2FBBAH) ×2 → ok" in body
    assert (
        "update(as the next, but payment_id gift_card_1 | gift_card_2) ×2"
        " → Error: gift card balance is not enough" in body
    )


def test_a_bare_fact_an_action_taken_after_it_says_goes_with_it() -> None:
    # tau-bench run 3 at 1500 tokens: "Facts: 6276644; 7091239" beside the failed call
    # that named gift_card_6276644 and gift_card_7091239.
    task = {"role": "user", "content": "I need to change my flight back to Houston."}
    asked = {"role": "user", "content": "Please use Gift Card 6276644 and then 7091239."}
    tries = [
        ("update_reservation_flights", {"reservation_id": "OBUT9V", "payment_id": card}, error)
        for card, error in (
            ("gift_card_6276644", "Error: gift card balance is not enough"),
            ("gift_card_7091239", "Error: gift card balance is not enough"),
        )
    ]
    messages = [task, asked, *_calls(tries)]
    body = _summary(messages, 400)
    assert "gift_card_6276644" in body and "gift_card_7091239" in body
    assert "Facts:" not in body, body
    # Measured as written: the room a summary needs is what it takes.
    need = EXTRACTIVE.measure(messages, previous=None, counter=COUNTER)
    assert abs(need - COUNTER.text(body)) <= 2
    # A bound too small for the action keeps the facts.
    assert "6276644" in _summary(messages, 25)


def test_a_value_a_run_of_objects_shares_is_said_once() -> None:
    flights = [("HAT080", "2024-05-28"), ("HAT076", "2024-05-28"), ("HAT255", "2024-05-30")]
    arguments = {"flights": [{"flight_number": f, "date": d} for f, d in flights], "id": "X1"}
    body = _summary(_calls([("update_reservation_flights", arguments, {})]), 400)
    assert body == (
        "Actions: update_reservation_flights(HAT080, HAT076 (each date 2024-05-28), HAT255, "
        "2024-05-30, X1) → ok"
    )


def test_a_record_writes_times_to_the_minute() -> None:
    made = {"reservation_id": "JG7FMM", "created_at": "2024-05-11T08:28:51", "at": "07:00:00"}
    assert records(made, "result") == ["reservation JG7FMM: created_at 2024-05-11T08:28, 07:00"]


def test_objects_of_one_label_in_a_row_are_one_record_within_its_bound() -> None:
    """tau-bench 15-0 at 1500 tokens: a payment and its refund (one ``payment_id``)
    were two records, and the one cut to fit was the refund's: ``payment
    gift_card_1642017: amount 5700`` said the money was still paid."""
    history = [
        {"payment_id": "gift_card_1642017", "amount": 5700},
        {"payment_id": "gift_card_1642017", "amount": -5700},
    ]
    assert records({"payment_history": history}, "result") == [
        "payment gift_card_1642017: amount 5700, amount -5700"
    ]
    long = [{"payment_id": "card_1", "amount": 100 + n, "fee": 10**60} for n in range(3)]
    assert len(records({"payment_history": long}, "result")) == 2  # each within 200
    # a breaker's: a shared owner's id labels two orders, whose bare values would run
    # together once joined (which status, which total?)
    orders = [
        {"user_id": "u1", "order_id": "o1", "status": "delivered", "total": 30},
        {"user_id": "u1", "order_id": "o2", "status": "pending", "total": 40},
    ]
    assert records(orders, "result") == [
        "user u1: o1, delivered, total 30",
        "user u1: o2, pending, total 40",
    ]


def test_a_record_leaves_out_a_count_of_none_but_not_a_zero_amount() -> None:
    made = {"reservation_id": "JG7FMM", "total_baggages": 2, "nonfree_baggages": 0}
    assert records(made, "result") == ["reservation JG7FMM: total_baggages 2"]
    card = {"id": "gift_card_8", "balance": 0, "passengers": 0}
    assert records(card, "result") == ["result gift_card_8: balance 0"]


def test_a_record_leaves_out_how_the_call_ran() -> None:
    """Exa's answer to a web search gave about 400 of an 850-token summary to its
    ``requestTags`` (feature flags, moderation settings, providers' timeouts)."""
    answer = {
        "results": [{"url": "https://example.org/a", "title": "Mamdani wins, 50.4%"}],
        "requestTags": {"flags": "a,b", "sierra": {"numResultsRequested": 10}},
        "costDollars": {"total": 0.005},
        "_meta": {"progressToken": 7},
        "tags": ["election", "nyc"],
    }
    said = records(answer, "result")
    assert said == [
        "result: tags election nyc",
        "results: https://example.org/a Mamdani wins, 50.4%",
    ]
    # What a result is, under names a wider pattern took for how the call ran: an
    # Elasticsearch hit's _source, a get_config's config, a VM's tags, a usage report.
    hit = {"_id": "ord-7781", "_source": {"customer": "c-2291", "amount": 1190}}
    assert "c-2291" in " ".join(records({"hits": [hit]}, "result"))
    for key in ("config", "Config", "flags", "tags", "usage", "_embedded", "headers"):
        held = " ".join(records({key: {"region": "eu-west-4", "seats": 1200}}, "result"))
        assert "eu-west-4" in held, key


def test_a_call_that_differs_in_one_arguments_shape_says_that_argument() -> None:
    one = {
        "user_id": "ivan_7015",
        "flight": "HAT097",
        "payment": [{"id": "certificate_1", "a": 299}],
    }
    two = {**one, "payment": [{"id": "gift_card_8", "a": 128}, {"id": "credit_card_3", "a": 247}]}
    assert difference(json.dumps(one), json.dumps(two)) == "payment certificate_1, 299"
    assert difference(json.dumps(one), json.dumps({**two, "flight": "HAT251"})) is None


def test_a_cut_item_keeps_whole_values_and_a_record_said_before_tells_the_rest() -> None:
    found = [{"flight_number": f"HAT{n:03}", "date": "2024-05-20"} for n in range(1, 9)]
    messages = _calls([("search_direct_flight", {"origin": "JFK", "destination": "SEA"}, found)])
    bodies = [_summary(messages, bound) for bound in range(8, 40)]
    assert all(len(id_) == 6 for body in bodies for id_ in re.findall(r"HAT\d*", body))
    assert "Actions: search_direct_flight(JFK→SEA) → HAT001, HAT002 …" in bodies
    reservation = {"reservation_id": "GV1N64", "user_id": "james_9828", "cabin": "business"}
    messages = [{"role": "user", "content": "Cancel GV1N64 please."}]
    messages += _calls(
        [
            ("get_reservation_details", {"reservation_id": "GV1N64"}, reservation),
            (
                "cancel_reservation",
                {"reservation_id": "GV1N64"},
                {**reservation, "status": "cancelled"},
            ),
        ]
    )
    body = _summary(messages, 400)  # the final state, whole; the look-up's gist is in it
    assert "get_reservation_details(GV1N64) → ok" in body
    assert "reservation GV1N64: james_9828, business, cancelled" in body
    assert body.count("james_9828") == 1


def test_a_record_leaves_out_the_values_a_line_naming_its_object_gave() -> None:
    arguments = {
        "reservation_id": "JG7FMM",
        "flights": [{"flight_number": "HAT028", "date": "2024-05-21"}],
    }
    flight = {"flight_number": "HAT028", "date": "2024-05-21", "price": 105}
    messages = [{"role": "user", "content": "Move JG7FMM please."}]
    messages += _calls([("update_reservation_flights", arguments, {"flights": [flight]})])
    body = _summary(messages, 400)
    assert "update_reservation_flights(JG7FMM, HAT028, 2024-05-21) → ok" in body
    assert "flight HAT028: price 105" in body  # its date the action gave with it
    said = {**flight, "price": "2024-05-21"}  # every value given: no record at all
    messages[-1]["content"] = json.dumps({"flights": [said]})
    assert "flight HAT028" not in _summary(messages, 400).partition("Facts:")[2]


def test_a_record_value_the_call_passed_for_the_same_object_is_not_said_again() -> None:
    arguments = {"reservation_id": "JG7FMM", "payment_id": "certificate_7504069", "amount": 250}
    payment = {"payment_id": "certificate_7504069", "amount": 250}
    result = {"reservation_id": "JG7FMM", "payment_history": [payment]}
    messages = [{"role": "user", "content": "Pay JG7FMM with my certificate."}]
    messages += _calls([("book_reservation", arguments, result)])
    body = _summary(messages, 400)
    assert "book_reservation(JG7FMM, certificate_7504069, 250)" in body
    assert "payment certificate_7504069" not in body  # "amount 250": the call gave it


def test_a_path_is_kept_whole_and_heading_words_are_no_facts() -> None:
    path = "/Users/user/repo/src/providers/plugins/sso/ARCHITECTURE-REFACTORING-PLAN.md"
    text = f"## Technical Concepts\n**Design Proposal**: see #1.\nI edited {path} today."
    body = _summary(
        [{"role": "user", "content": "Fix it."}, {"role": "user", "content": text}], 400
    )
    assert path in body and "…" not in body.partition("Facts:")[2]
    assert "Technical Concepts" not in body.partition("Facts:")[2]
    assert "#1" not in body.partition("Facts:")[2]


def test_a_path_in_code_quotes_keeps_its_spaces() -> None:
    """The Codex session's summary listed ``~/Library/Application; Support/opencode/``:
    two facts, neither a path that exists."""
    text = "- macOS: `~/Library/Application Support/opencode/storage/`\n- Linux: `~/.local/x/`"
    body = _summary([{"role": "user", "content": "Where?"}, {"role": "user", "content": text}], 400)
    facts = body.partition("Facts:")[2]
    assert "~/Library/Application Support/opencode/storage/" in body, body
    assert "; Support/" not in facts and "Support/opencode" not in facts, body


def test_the_fact_scan_ends_at_a_word_end() -> None:
    """The Codex session's summary listed ``src/agents/plugins/openc``: the scan of a
    long tool output stopped inside that path, at :data:`FACT_SCAN_CHARS`."""
    path = "src/agents/plugins/opencode/opencode-dynamic-models.ts"
    head = "x" * (FACT_SCAN_CHARS - 24) + " "
    assert facts(head + path + ":72: if (id)", strict=True) == [path]


# --- Chinese ---------------------------------------------------------------------------


#: The room the summary gets: the default stage's, and all the budget leaves beside a
#: tail of 2.
ROOMS = [
    pytest.param(None, id="default-stage"),
    pytest.param({"summary": {"max_tokens": 100_000, "keep_last": 2}}, id="budget-room"),
]


@pytest.mark.parametrize("room", ROOMS)
def test_the_chinese_sample_at_800_tokens_keeps_its_facts_whole(
    room: dict[str, Any] | None,
) -> None:
    record = json.loads((SAMPLES / "customer_service_zh.jsonl").read_text(encoding="utf-8"))
    result = Compressor(resolve(max_tokens=800, stage_options=room)).conversation(record)
    assert result.after.tokens <= 800
    text = "\n".join(str(m.data.get("content")) for m in result.after.messages)
    # its ranges, the order number, the amounts, the courier's phone with whose it is,
    # where the goods go: each whole
    wholes = ["3 到 5 天", "1 到 3 个工作日", "8 到 12 元", "12345", "SF1402938476"]
    wholes += ["4999 元", "5999 元", "4799 元", "399.92 元", "1299 元", "199 元", "200 元"]
    wholes += ["快递员张师傅 138-0000-1234", "发货到北京"]
    assert [fact for fact in wholes if fact not in text] == []


# --- agent runs ------------------------------------------------------------------------


def test_parallel_results_in_one_message_are_each_calls_outcome() -> None:
    # LLaMA-Factory's reason_tool_use: one tool message answers both calls, a JSON list
    # of entries whose content is a Python dict's str(); each call read "→ ok".
    entries = [
        {"tool_call_id": f"call_{r}", "name": "circle_area", "content": str(area)}
        for r, area in (
            ("a", {"area": 7.0686, "radius": 1.5, "unit": "square meters"}),
            ("b", {"area": 28.2743, "radius": 3, "unit": "square meters"}),
        )
    ]
    calls = [
        {
            "type": "tool_call",
            "value": json.dumps({"name": "circle_area", "arguments": {"radius": r}}),
        }
        for r in (1.5, 3)
    ]
    record = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "value": "Areas for 1.5 m and 3 m?"}]},
            {"role": "assistant", "content": [{"type": "reasoning", "value": "Twice."}, *calls]},
            {"role": "tool", "content": [{"type": "text", "value": json.dumps(entries)}]},
        ]
    }
    conversation = openai.read(record, COUNTER, path="x.jsonl", line=1)
    actions = parse_summary(_summary([m.data for m in conversation.messages], 300))["actions"]
    assert len(actions) == 2, actions
    assert actions[0].endswith("→ area 7.0686, radius 1.5, square meters"), actions
    assert actions[1].endswith("→ area 28.2743, radius 3, square meters"), actions


def test_a_sub_agents_result_is_told_by_what_its_report_found() -> None:
    """Claude Code's ``Task`` runs a sub-agent whose result is its report; the action
    read ``→ ok`` and, at a quarter of the session, no finding fitted beside it."""
    report = (
        "## Package.json Analysis Summary\n\n**Current Tech Stack Versions:**\n"
        "- **Next.js**: 15.5.2 (upgraded from documented v14)\n- React: 19.1.0\n\n"
        "The project uses modern versions but lacks some documented tools.\n\n"
        "agentId: a693a87 (for resuming to continue this agent's work if needed)"
    )
    arguments = {"subagent_type": "general-purpose", "description": "Check packages"}
    function = {"name": "Task", "arguments": json.dumps(arguments)}
    task = {"id": "t1", "type": "function", "function": function}
    messages = [
        {"role": "user", "content": "Update CLAUDE.md to match the project."},
        {"role": "assistant", "content": None, "tool_calls": [task]},
        {"role": "tool", "tool_call_id": "t1", "content": report},
    ]
    actions = parse_summary(_summary(messages, 300))["actions"]
    assert actions[0].endswith("→ Next.js: 15.5.2 (upgraded from documented v14)"), actions


def test_a_note_that_repeats_a_sub_agents_outcome_is_said_once() -> None:
    """Claude Code session 9eda1058: the Explore call's outcome and the first
    assistant note were the same sentence ("CodeMie CLI (v0.0.28) is a professional,
    unified command-line interface …"), the note with its bold."""
    finding = "CodeMie CLI (v0.0.28) is a unified command-line interface for 5 agents."
    arguments = json.dumps({"subagent_type": "Explore", "description": "Explore the repo"})
    task = {"id": "t1", "type": "function", "function": {"name": "Task", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "Explore the repository."},
        {"role": "assistant", "content": None, "tool_calls": [task]},
        {"role": "tool", "tool_call_id": "t1", "content": finding + " It has 3 layers."},
        {"role": "assistant", "content": finding.replace("CodeMie CLI", "**CodeMie CLI**")},
    ]
    body = _summary(messages, 400)
    assert body.count("(v0.0.28) is a unified") == 1, body


@pytest.mark.parametrize(
    ("said", "outcome"),
    [
        pytest.param(  # the verdict, not the sentence of most numbers
            "No vulnerabilities were found. I checked 12 files and 4 hard-coded keys.",
            "No vulnerabilities were found.",
            id="verdict-first",
        ),
        ("Uses **kwargs and O(n**2) loops in src/pkg/__init__.py.", None),  # no bold there
        ("| Package | Old |\n|---|---|\n| next | 15.5.2 |\n\nThe upgrade is safe.", None),
        ("```python\ndef foo(x):\n    pass\n```\nfoo is unused.", "foo is unused."),
        pytest.param(  # Claude Code's Explore agent, codemie session 9eda1058
            "Now I have a comprehensive understanding of the codebase. Let me compile "
            "this into a detailed overview.\n# Overview\n**CodeMie CLI** (v0.0.28) is a "
            "unified command-line interface.",
            "CodeMie CLI (v0.0.28) is a unified command-line interface.",
            id="its-own-steps-are-no-finding",
        ),
        pytest.param(
            "No errors were found in the 12 modules; 0 tests failed.", "ok", id="reads-as-error"
        ),
        pytest.param('{"id": "task_8812", "status": "open"}', "ok", id="json-is-no-report"),
    ],
)
def test_a_report_outcome_is_its_first_statement(said: str, outcome: str | None) -> None:
    """A breaker's reports: the outcome was the sentence of most digits (the verdict
    lost), ``**kwargs`` lost its stars, a table or code was the outcome, a report of no
    errors ranked as a failed call, and a ``Task`` tool of a to-do app dumped JSON."""
    last = said.rpartition("\n")[2] if outcome is None else outcome
    arguments = json.dumps({"subagent_type": "Explore", "description": "Audit"})
    task = {"id": "t1", "type": "function", "function": {"name": "Task", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "Audit the repository."},
        {"role": "assistant", "content": None, "tool_calls": [task]},
        {"role": "tool", "tool_call_id": "t1", "content": said},
    ]
    actions = parse_summary(_summary(messages, 300))["actions"]
    assert actions[0] == f"Task(Explore, Audit) → {last}", actions


def test_a_long_list_of_ids_is_one_record() -> None:
    # tau-bench's get_user_details: "reservations: 82K959; reservations: 790JYN; …"
    ids = ["82K959", "790JYN", "BE2L57", "CXBB4L", "TAMSDK", "3RK2T9", "VAOW1B", "Q4MCUF"]
    ids += ["JMO1MG", "H8Q05L", "WUNA5K", "S61CZX"]  # too many to write inline
    user = {"name": "Anya Garcia", "membership": "silver", "reservations": ids}
    assert records(user, "user")[-1] == "reservations: " + ", ".join(ids)


def test_parallel_results_go_to_their_calls_by_id_and_a_thought_takes_its_place() -> None:
    # The entries name their calls in another order; a think call answered in the same
    # list takes its entry, so the others keep theirs.
    think = {"name": "think", "arguments": json.dumps({"thought": "Book it, then convert."})}
    book = {"name": "book_seat", "arguments": json.dumps({"seat": "12A"})}
    convert = {"name": "convert", "arguments": json.dumps({"amount": 100})}
    calls = [
        {"id": n, "type": "function", "function": f} for n, f in zip("tab", (think, book, convert))
    ]
    entries = [
        {"tool_call_id": "t", "name": "think", "content": "Thought logged."},
        {"tool_call_id": "b", "name": "convert", "content": {"converted_amount": 92.5}},
        {"tool_call_id": "a", "name": "book_seat", "content": {"seat": "12A", "price": 45}},
    ]
    messages: Messages = [
        {"role": "user", "content": "Book seat 12A and convert 100 USD."},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_ids": ["t", "a", "b"], "content": json.dumps(entries)},
    ]
    actions = parse_summary(_summary(messages, 300))["actions"]
    assert actions == ["book_seat(12A) → 12A, price 45", "convert(100) → converted_amount 92.5"]
    del entries[0]["tool_call_id"], entries[1]["tool_call_id"], entries[2]["tool_call_id"]
    entries[1:] = entries[:0:-1]  # by place, with no ids to go by
    messages[-1] = {**messages[-1], "content": json.dumps(entries)}
    actions = parse_summary(_summary(messages, 300))["actions"]
    assert actions == ["book_seat(12A) → 12A, price 45", "convert(100) → converted_amount 92.5"]


def test_a_python_literal_result_is_read_as_json_holds_and_no_further() -> None:
    assert parse_json("{'ok': True, 'ids': ['a1', None], 'n': 2.5}") == {
        "ok": True,
        "ids": ["a1", None],
        "n": 2.5,
    }
    assert parse_json("{'a': (1, 2)}") is None and parse_json("{'a': {1, 2}}") is None
    assert parse_json("{'a': __import__('os')}") is None  # no code runs
    # what orjson could not write back: str() of 0xfff… refuses past 4,300 digits
    assert parse_json("{'n': 0x" + "f" * 3600 + "}") is None
    assert parse_json("{'n': 18446744073709551616}") is None
    assert parse_json("{'n': 1e400}") is None
    # A small object with no id is its call's answer; one with an id is no answer.
    assert answer('[{"converted_amount": 850.5, "from": "USD", "to": "EUR"}]') == (
        "converted_amount 850.5, USD, EUR"
    )
    assert answer('{"reservation_id": "HATHAT", "status": "ok"}') == ""
    assert facts("It is 5/9 equals Celsius, 3 bags plus 2 equals 5.") == ["3 bags"]


def _compress(path: Path, budget: int, **options: Any) -> tuple[Messages, Messages]:
    settings_ = resolve(max_tokens=budget, **options)
    compressor = Compressor(settings_)
    if path.suffix == ".traj":
        record = json.loads(path.read_text())
        messages = record["history"]
        result = compressor.conversation({"messages": messages})
        return messages, [dict(m.data) for m in result.after.messages]
    raise AssertionError(path)


def test_the_swe_agent_run_at_a_quarter_keeps_task_errors_and_paths(data: Path) -> None:
    (path,) = sorted((data / "swe-agent").glob("*.traj"))
    messages = json.loads(path.read_text())["history"]
    tokens = make_conversation(messages, COUNTER).tokens
    before, after = _compress(path, tokens // 4)
    text = " ".join("\n".join(score_text(m) for m in after).split())
    task = next(m["content"] for m in before if m["role"] == "user")
    first_paragraph = " ".join(task.split("\n\n")[0].split())
    assert first_paragraph in text
    errors: set[str] = set()
    paths: set[str] = set()
    for message in before[1:]:
        found = facts_of(score_text(message), message["role"])
        errors |= found["errors"]
        paths |= found["paths"]
        for call in message.get("tool_calls") or []:
            paths |= facts_of(call["function"]["arguments"])["paths"]
    assert {e for e in errors if e not in text} == set()  # (this run logs none)
    kept = {p for p in paths if p in text}
    assert len(kept) >= 0.9 * len(paths), sorted(paths - kept)


def _claude_code_task_and_paths(path: Path) -> tuple[str, set[str]]:
    """The user's first message of their own words, and every path a tool was given."""
    task = ""
    paths: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        content = (event.get("message") or {}).get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for part in parts:
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            if event.get("type") == "user" and not task and isinstance(text, str):
                own = text.strip()
                given = re.search(r"<command-args>(.+?)</command-args>", own, re.DOTALL)
                if given:  # a command the user ran: its arguments are their words
                    task = given.group(1).strip()
                elif own and not own.startswith(("<", "Caveat:", "[Request interrupted")):
                    task = own
            if part.get("type") == "tool_use":
                given = part.get("input") or {}
                paths |= {given[k] for k in ("file_path", "path", "notebook_path") if k in given}
    return task, paths


def test_a_claude_code_summary_of_a_quarter_keeps_the_task_and_every_path(data: Path) -> None:
    """The summarizer's part: each session's messages but the last two, in a quarter of
    the session's tokens."""
    from ctxcli.formats import claude_code

    for path in sorted((data / "claude-code").glob("*.jsonl")):
        events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        conversation = claude_code.read(events, COUNTER, path=str(path), line=1)
        messages = [dict(m.data) for m in conversation.messages if not m.is_system][:-2]
        body = _summary(messages, conversation.tokens // 4)
        paths = set()  # of the calls in the conversation (a subagent's are not)
        for message in messages:
            for call in message.get("tool_calls") or []:
                given = json.loads(call["function"]["arguments"] or "{}")
                paths |= {given[k] for k in ("file_path", "path", "notebook_path") if k in given}
        # The task, the first user message read (after Claude Code's own compaction, its
        # summary), leads the requests in its own words.
        task = " ".join(score_text(next(m for m in messages if m["role"] == "user")).split())
        requests = parse_summary(body)["requests"]
        assert requests and requests[0][:60].rstrip("…") in task, (path.name, requests[:1])
        assert [p for p in paths if p not in body] == [], path.name


#: The whole pipeline's part, at the default stage's room and at all the budget leaves.
CLAUDE_ROOMS = [pytest.param(*p.values, id=p.id) for p in ROOMS]


@pytest.mark.parametrize("room", CLAUDE_ROOMS)
def test_claude_code_sessions_at_a_quarter_keep_the_task_and_every_path(
    data: Path, tmp_path: Path, room: dict[str, Any] | None
) -> None:
    from click.testing import CliRunner

    from ctxcli.cli import cli

    runner = CliRunner()
    for path in sorted((data / "claude-code").glob("*.jsonl")):
        counted = json.loads(runner.invoke(cli, ["count", str(path), "--format", "json"]).output)
        quarter = counted["total"]["tokens"] // 4
        args = ["compress", str(path), "-o", str(tmp_path / path.name), "-q"]
        args += ["--max-tokens", str(quarter)]
        if room:
            args += ["--summary-max-tokens", "100000", "--keep-last", "2"]
        assert runner.invoke(cli, args).exit_code == 0
        text = (tmp_path / path.name).read_text(encoding="utf-8")
        flat = " ".join(json.loads(json.dumps(text)).split())
        task, paths = _claude_code_task_and_paths(path)
        first = " ".join(task.split("\n")[0].split())[:80]
        assert first in flat or json.dumps(first)[1:-1] in flat, (path.name, first)
        missing = [p for p in paths if p not in text and json.dumps(p)[1:-1] not in text]
        assert missing == [], path.name


def test_a_request_cut_before_its_value_is_left_out() -> None:
    """The first item that does not fit is cut to the room left, but a request (or
    note) cut before every id or number it gave says nothing a model can use."""
    request = Item("requests", "Yes, please use the credit card ending 7447.", REST, 3, 0, 0)
    assert not _cut_says("Yes, please use the credit card ending …", request)
    assert _cut_says("Yes, please use the credit card ending 7447 …", request)
    assert not _cut_says("Yes, please …", request)  # filler
    error = Item("errors", "Error: total price is 305, but paid 255", REST, 3, 0, 0)
    assert _cut_says("Error: total price is …", error)  # an error's kind says something


def test_a_request_cut_to_a_fragment_is_left_out() -> None:
    """Reading tau-bench 13-0 at 2000 and the Chinese sample at 600: ``- If changing
    requires an …`` (the condition without what it was of) and ``- 好的， …`` (the
    choice of black cut off) stood as requests. A head of no number keeps at least
    three content words, or it goes; a fragment with a number stays, as above."""
    condition = "If changing requires an upgrade to economy class, I'm willing to do that."
    assert not _cut_says("If changing requires an …", Item("requests", condition, REST, 3, 0, 0))
    assert _cut_says(
        "If changing requires an upgrade …", Item("requests", condition, REST, 3, 0, 0)
    )
    decision = Item("requests", "好的，那我决定买黑色的，怎么下单？", REST, 3, 0, 0)
    assert not _cut_says("好的， …", decision)
    assert _cut_says("好的，那我决定买黑色的， …", decision)
    note = Item("notes", "Unfortunately, I cannot modify a basic economy booking.", REST, 3, 0, 0)
    assert not _cut_says("Unfortunately, I cannot …", note)
    task = Item("requests", "Fix the build. The linker step fails on main.", REST, 3, 0, 0)
    assert _cut_says("Fix the build. …", task)  # a whole sentence, however short


def test_an_action_cut_to_fit_keeps_its_outcome() -> None:
    """The action that does not fit is cut in its arguments, its outcome whole: cut at
    its end (tau-bench run 8-1 at 2000: ``book_reservation(…, credit_card_2198526…) ×3
    → Error: payment amount does not add up …``), it said neither whether it was done
    nor by how much the payment was off."""
    error = "Error: payment amount does not add up, total price is 1203, but paid 833"
    text = (
        f"book_reservation(mia_li_3668, JFK→SFO, economy, HAT023, gift_card_7091239) ×3 → {error}"
    )
    cut = _cut_call(text, 44, COUNTER, "Actions: ")
    assert cut == f"book_reservation(mia_li_3668, JFK→SFO, economy …) ×3 → {error}"
    assert COUNTER.text("Actions: " + cut) <= 44
    # With no room for an argument the call keeps its outcome: at 1500 run 8-1 read
    # ``book_reservation(mohamed_silva_9265 …``, as if the booking had been made.
    bare = _cut_call(text, 34, COUNTER, "Actions: ")
    assert bare == f"book_reservation(…) ×3 → {error}"
    assert _cut_call(text, 24, COUNTER, "Actions: ") == (
        "book_reservation(…) ×3 → Error: payment amount does not add up …"
    )
    assert _cut_call(text, 12, COUNTER, "Actions: ") == ""
    action = Item("actions", text, ACTED, 1, 0, 0)
    assert _cut_item(action, 12, "Actions: ", COUNTER) is None  # not a head of the call
    done = Item("actions", "cancel_reservation(K1NW8N, booking_error) → ok", ACTED, 1, 0, 0)
    assert _cut_call(done.text, 10, COUNTER) == ""
    assert _cut_item(done, 10, "", COUNTER) == replace(done, text="cancel_reservation(K1NW8N …")
    assert _cut_call("get_user_details(mia_li_3668, 12)", 40, COUNTER) == ""  # no outcome
    first = Item("requests", "Please rebook me and pay with my gift card.", REST, 0, 0, 0)
    action = Item("actions", text, ACTED, 1, 0, 0)
    body = _render(
        [first, action], {"requests": "User requests:", "actions": "Actions:"}, 62, COUNTER
    )
    assert body.endswith(f" …) ×3 → {error}") and COUNTER.text(body) <= 62


def test_a_balance_stated_again_is_kept_as_last_stated() -> None:
    # tau-bench 0-0 at 2000 kept "Remaining balance $5" beside the newer "$55", and
    # which was current could not be told; two options' totals are both kept.
    messages: Messages = [
        {"role": "user", "content": "Book it with my certificates, card 7447 for the rest."},
        {"role": "assistant", "content": "Total Price: $207 for option 1.\nRemaining balance: $5"},
        {"role": "user", "content": "Add a checked bag, please."},
        {"role": "assistant", "content": "Total Price: $216 for option 2.\nRemaining balance: $55"},
    ]
    facts = parse_summary(_summary(messages, 300))["facts"]
    assert "Remaining balance $55" in facts and "Remaining balance $5" not in facts, facts
    assert {"Total Price $207", "Total Price $216"} <= set(facts), facts
    # Two cards' balances, each in a message that names its card, are two states.
    cards: Messages = [
        {"role": "user", "content": "Check gift_card_111 and gift_card_222, please."},
        {
            "role": "assistant",
            "content": "Gift card gift_card_111 checked.\nRemaining balance: $40",
        },
        {"role": "user", "content": "And the other one?"},
        {
            "role": "assistant",
            "content": "Gift card gift_card_222 checked.\nRemaining balance: $75",
        },
    ]
    facts = parse_summary(_summary(cards, 300))["facts"]
    assert {"Remaining balance $40", "Remaining balance $75"} <= set(facts), facts


@pytest.mark.parametrize(
    ("sentence", "fact"),
    [
        ("The total cost for the selected flights is actually $305.", "total cost $305"),
        (
            "Remaining balance: $55 (to be charged to your Visa card ending in 7447).",
            "Remaining balance $55",
        ),
        ("Use certificate 7504069: $250 of it.", "certificate 7504069 $250"),
        ("Refund: $6,594 has been processed.", "Refund $6,594"),
        ("I can apply a $500 certificate.", "$500 certificate"),
        ("退款金额为¥299，请查收。", "退款金额 ¥299"),
        ("I can offer $100.", "$100"),
        ("The fare is $305 in all; the bag fee is $30.", "bag fee $30"),
        # A field of a list item is of the id its item, or the field above, names
        # (tau-bench run 7-0 at 1500: "Facts: Price $122; Price $121; Price $115; …").
        (
            "Options:\n1. **Option 1:**\n   - Flight Number: HAT004\n"
            "   - Departure: 14:00 EST\n   - Price: $122",
            "HAT004 price $122",
        ),
        (
            "Flights:\n1. **JFK to SFO**: HAT023 on 2024-05-26\n   - Price: $364",
            "HAT023 price $364",
        ),
        ("Pairs:\n- HAT069 & HAT274 (JFK to SFO)\n  - Price: $321", "HAT069 & HAT274 price $321"),
        ("Yours:\n1. **Flight 1**: JFK to SFO\n   - Price: $364", "Price $364"),  # no id
    ],
)
def test_an_amount_the_assistant_stated_keeps_what_it_is(sentence: str, fact: str) -> None:
    messages: Messages = [
        {"role": "user", "content": "Please change my booking."},
        {"role": "assistant", "content": sentence},
    ]
    said = parse_summary(_summary(messages, 200))
    # Whole as a fact, or in the note that states it (which then says it: no bare
    # fact repeats a line of the summary).
    facts, notes = said["facts"], said["notes"]
    assert any(f.endswith(fact) for f in facts) or any(fact in note for note in notes), said


def test_two_things_of_one_amount_stay_two_facts() -> None:
    """A summary reader found tau-bench 8-1 at 1600 with ``Certificate $500;
    Certificate $250; Total $1,000``: the answer listed three certificates, two of
    $250, and both were labelled where the first $250 stood, so they were one fact and
    the certificates no longer added up to their total."""
    listed = (
        "You can use these certificates:\n- Certificate 1: $500\n- Certificate 2: $250\n"
        "- Certificate 3: $250\nTotal from Certificates: $1,000"
    )
    messages: Messages = [
        {"role": "user", "content": "Please change my booking."},
        {"role": "assistant", "content": listed},
    ]
    assert parse_summary(_summary(messages, 200))["facts"] == [
        "Certificate 1 $500", "Certificate 2 $250", "Certificate 3 $250", "Total $1,000"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        # tau-bench 11-1: the later $76 in a sentence took "certificate" from near it
        (
            "This means there are additional fees or taxes amounting to $76.\n\nWould you "
            "like to proceed with using the certificate for $299 and cover the remaining "
            "$76 with your gift card?",
            ["additional fees $76", "certificate $299"],
        ),
        # tau-bench 23-1: "within your $200 limit" is no cost
        (
            "Within a fee of $200 we can do it.\n- **Total Cost Difference:** $105\n\n"
            "This option keeps the cost within your $200 limit.",
            ["fee $200", "Cost Difference $105"],
        ),
        # an end of a range is not the amount's first statement, and each field is its own
        (
            "Budget range $250-$300. Refund: $250. Balance: $250.",
            ["Budget $250-$300", "Refund $250", "Balance $250"],
        ),
        # a second breaker's: a field in an aside or after a Chinese full stop is a field
        # (tau-bench 11-2), and the word after an amount is on its line, not the next
        # line's label ("- Flight HAT002: $150⏎Refund: $50" read "$150 Refund")
        (
            "The remaining balance on your certificate will be $201.\n\n- **Payment:** "
            "Certificate (Remaining balance after booking: $201)",
            ["certificate $201", "Remaining balance $201"],
        ),
        ("费用：¥200。退款：¥200。", ["费用 ¥200", "退款 ¥200"]),
        ("- Flight HAT002: $150\nRefund: $50", ["HAT002", "$150", "Refund $50"]),
    ],
)
def test_a_later_mention_of_an_amount_takes_no_label_from_words_near_it(
    answer: str, facts: list[str]
) -> None:
    """A breaker's find in the relabelling above: only a later mention with a label of
    its own (a field's name and colon) is read where it stands; another keeps the
    label of the first, and so says nothing twice."""
    assert {t for section, t, _ in _later_answer(answer) if section == "facts"} == set(facts)


def test_an_amount_said_with_no_words_for_what_it_is_ranks_after_those_said_so() -> None:
    # tau-bench run 3 at 1500: "Facts: $112; $438; $142; $297; $170; $80; …"
    messages: Messages = [
        {"role": "user", "content": "Please change my booking."},
        {
            "role": "assistant",
            "content": "The flights cost $112, $438 and $142. The total cost is $305.",
        },
    ]
    assert parse_summary(_summary(messages, 20))["facts"] == ["cost $112", "total cost $305"]


def test_the_final_state_keeps_its_densest_facts_first_at_a_tight_bound() -> None:
    # A long record of the reservation the call changed, then an answer stating two
    # amounts: at a bound that holds only a little of the final state, the amounts
    # (the most facts per character) come before the record's prose-like values.
    record = {
        "reservation_id": "JG7FMM",
        "origin": "MCO",
        "destination": "CLT",
        "flight_type": "one_way",
        "cabin": "economy",
        "created_at": "2024-05-11T08:28:00",
        "insurance": "no",
    }
    call = {"id": "c1", "type": "function"}
    call["function"] = {
        "name": "update_reservation_flights",
        "arguments": '{"reservation_id": "JG7FMM"}',
    }
    messages: Messages = [
        {"role": "user", "content": "Downgrade reservation JG7FMM to economy."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(record)},
        {"role": "assistant", "content": "Done. Refund: $6,594 to your card; new total $241."},
    ]
    whole = _summary(messages, 400)
    assert "reservation JG7FMM:" in whole and "Refund $6,594" in whole
    head = whole.partition("\nFacts:")[0]
    # (items are costed one by one, so the joined text may need a token more)
    body = _summary(messages, COUNTER.text(head + "\nFacts: Refund $6,594; new total $241") + 2)
    assert body.endswith("Facts: Refund $6,594; new total $241")


def test_a_working_directory_every_command_shares_is_said_once_on_the_newest() -> None:
    repo = "/Users/me/repos/app"
    commands = ["git status --short", "rg -n compact src", "sed -n '1,40p' src/config.ts"]
    calls = [("exec_command", {"cmd": cmd, "workdir": repo}, "ok") for cmd in commands]
    calls.append(("exec_command", {"cmd": "ls", "workdir": "/tmp/other"}, "ok"))
    body = _summary(_calls(calls), 400)
    assert body.count(repo) == 1
    assert "exec_command(git status --short) → ok; exec_command(rg -n compact src) → ok; " in body
    assert f"exec_command(sed -n '1,40p' src/config.ts, {repo}) → ok" in body
    assert "exec_command(ls, /tmp/other) → ok" in body
    # At every bound, an older command shown without it comes with the one that says it.
    for bound in range(8, COUNTER.text(body) + 1):
        tight = _summary(_calls(calls), bound)
        assert repo in tight or not any(cmd in tight for cmd in commands[:-1]), bound


def test_an_error_an_action_shows_as_its_outcome_is_not_listed_again() -> None:
    # The outcome and the error line are cut to different lengths; both cut from the
    # same line, the error is said once, in the action.
    refused = (
        "The sandbox does not allow writes outside the workspace, so the file was not "
        "written (the new content is lost). Ask the user to widen the sandbox with "
        "--sandbox workspace-write or to approve the write, then go on."
    )
    messages = _calls([("Write", {"file_path": "/r/tools.md", "content": "x\ny\n"}, refused)])
    messages[-1]["is_error"] = True
    body = _summary(messages, 400)
    assert "Write(/r/tools.md) → The sandbox does not allow writes" in body, body
    assert body.count("The sandbox does not allow writes") == 1, body


def test_a_chat_keeps_the_users_questions_before_the_small_counts_of_the_answers() -> None:
    """The Chinese sample at 800 tokens listed "1 年; 2 年; 15 天" (a warranty, an
    extension, a return window: the summary cannot say which) and dropped the
    user's questions "物流显示已签收但我没收到货，怎么办？" and "可以申请退货吗？"."""
    path = SAMPLES / "customer_service_zh.jsonl"
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    after = Compressor(resolve(max_tokens=800)).conversation(record).after
    body = next(str(m.data["content"]) for m in after.messages if m.is_summary)
    for question in (
        "物流显示已签收但我没收到货，怎么办？",
        "可以申请退货吗？",
        "手机屏幕摔碎了保修吗？",
    ):
        assert question in body, body
    assert "15 天" not in body.partition("关键信息：")[2], body
    assert "3 到 5 天" in body and "8 到 12 元" in body, body  # ranges stay
    # each price with the configuration it is of, not "售价 4999 元; 16GB+512GB"
    assert "标准版 12GB+256GB 售价 4999 元" in body, body
    assert "顶配 16GB+512GB 售价 5999 元" in body, body


def test_a_records_lines_of_its_parts_never_come_without_it() -> None:
    """tau-bench run 9-2 at 2000 tokens listed "flight HAT023: JFK→SFO, 2024-05-26,
    price 53; … payment gift_card_6136092: amount 567" without the reservation they
    belong to: each line of the final state was ranked by its own density, and the
    reservation's own line, sparse, came last."""
    record = {
        "reservation_id": "K1NW8N",
        "user_id": "mohamed_silva_9265",
        "origin": "JFK",
        "destination": "SEA",
        "flight_type": "round_trip",
        "cabin": "business",
        "flights": [
            {"flight_number": "HAT023", "date": "2024-05-26", "price": 353},
            {"flight_number": "HAT204", "date": "2024-05-28", "price": 371},
        ],
        "payment_history": [{"payment_id": "gift_card_6136092", "amount": 724}],
        "status": "cancelled",
    }
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "cancel_reservation", "arguments": '{"reservation_id": "K1NW8N"}'}
    messages: Messages = [
        {"role": "user", "content": "Cancel my reservation K1NW8N."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(record)},
    ]
    whole = _summary(messages, 400)
    assert "reservation K1NW8N:" in whole and "flight HAT023:" in whole, whole
    for bound in range(20, COUNTER.text(whole) + 1):
        body = _summary(messages, bound)
        if "flight HAT023" in body or "payment gift_card_6136092" in body:
            assert "reservation K1NW8N:" in body, (bound, body)


def test_a_list_of_records_is_labelled_by_its_calls_name() -> None:
    # glaive at 400: "search_bookss: 哈利·波特与火焰杯 …": the generic key "results" lost
    # "result" to the call's name, and kept its "s".
    messages: Messages = [
        {"role": "user", "content": "Find books by J.K. Rowling."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search_books", "arguments": '{"author": "Rowling"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": json.dumps(
                {
                    "results": [
                        {"title": "Goblet of Fire", "year": 2000},
                        {"title": "Half-Blood Prince", "year": 2005},
                    ]
                }
            ),
        },
        {"role": "assistant", "content": "Here are two."},
    ]
    facts = parse_summary(_summary(messages, 200))["facts"]
    assert any(f.startswith("search_books: ") for f in facts), facts
    assert not any(f.startswith("search_bookss") for f in facts), facts


def test_a_later_request_with_a_constraint_ranks_before_the_rest_of_the_look_ups() -> None:
    """tau-bench 0-0 at 2000 tokens listed every flight a search found but not the
    user's "I don't want to fly before 11 AM EST": a later request was of the rest,
    newest first, so the later search results came before it. A request that says
    more than a short question now ranks after the look-ups, before the rest."""
    flights = [
        {"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "SEA", "price": 100 + n}
        for n in range(40, 70)
    ]
    call = {"id": "c1", "type": "function", "function": {"name": "search_flights"}}
    call["function"]["arguments"] = json.dumps({"origin": "JFK", "destination": "SEA"})
    messages: Messages = [
        {"role": "user", "content": "I want to book a flight from New York to Seattle."},
        {"role": "assistant", "content": "Here are two flights, both in the morning."},
        {
            "role": "user",
            "content": "Neither works as I don't want to fly before 11 AM EST. Any later ones?",
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(flights)},
    ]
    body = _summary(messages, 120)
    assert "fly before 11 AM EST" in body, body
    assert "HAT069" not in body, body  # the results are what the bound cuts


def test_a_short_instruction_ranks_with_the_later_requests_not_after_the_facts() -> None:
    """A new user's chat lost "Check the changelog of Z for breaking changes" at every
    budget while the summary listed the 60 ids of the answer after it: a short later
    request with no digit ranked after the rest, as a question does ("What about
    Berlin?" says less than its answer's facts); an instruction says what they do not."""
    checked = " ".join(f"r{i}=ID{i * 13}" for i in range(60))
    messages: Messages = [
        {"role": "user", "content": "Search the web for the X release notes"},
        {"role": "assistant", "content": "Found them."},
        {"role": "user", "content": "Check the changelog of Z for breaking changes"},
        {"role": "assistant", "content": f"Checked {checked}"},
        {"role": "user", "content": "What about Y?"},
        {"role": "assistant", "content": f"Y: {checked.replace('ID', 'YD')}"},
    ]
    body = _summary(messages, 150)
    requests = parse_summary(body)["requests"]
    assert "Check the changelog of Z for breaking changes" in requests, body
    assert "What about Y?" not in requests, body  # a question: after its answer's facts


def test_a_fact_is_said_once_whatever_its_case() -> None:
    """tau-bench 0-0 read "certificate 7504069 $250; …; Certificate 7504069 $250"."""
    messages: Messages = [
        {"role": "user", "content": "Book me the flight, please."},
        {
            "role": "assistant",
            "content": "The breakdown:\n- Use certificate 7504069: $250\n- Balance: $5 (Visa)",
        },
        {"role": "user", "content": "Good, go ahead and do that."},
        {"role": "assistant", "content": "Booked. Paid with:\n- Certificate 7504069: $250"},
    ]
    body = _summary(messages, 200)
    assert body.lower().count("certificate 7504069 $250") == 1, body


def test_the_facts_the_user_typed_come_before_the_actions_of_their_tier() -> None:
    # tau-bench run 125: "proceed with $628 using my card ending in 7334", then a
    # booking whose arguments fill the room. At 1300 tokens the priority stage kept that
    # message whole; at 1400 the summary that folded it had room for the booking alone,
    # and a larger budget kept fewer facts. Typed facts cost a few tokens each.
    call = {"id": "c1", "type": "function"}
    booking = {
        "user_id": "aarav_ahmed_6699",
        "origin": "JFK",
        "destination": "SFO",
        "flights": [{"flight_number": "HAT083", "date": "2024-05-24"}],
        "passengers": [{"first_name": "Daiki", "last_name": "Li", "dob": "1980-12-24"}],
        "payment_methods": [{"payment_id": "credit_card_9074831", "amount": 628}],
    }
    call["function"] = {"name": "book_reservation", "arguments": json.dumps(booking)}
    messages: Messages = [
        {"role": "user", "content": "Book me a flight from JFK to SFO on May 24."},
        {"role": "user", "content": "Yes, proceed with $628 using my card ending in 7334."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"reservation_id": "HATHAT"}'},
    ]
    whole = _summary(messages, 400)
    assert "$628" in whole and "7334" in whole and "book_reservation(" in whole
    head = whole.partition("\nActions:")[0]
    tight = _summary(messages, COUNTER.text(head + "\nActions: book_reservation(…) → ok") + 12)
    assert "7334" in tight and "$628" in tight, tight


def test_each_record_keeps_its_part_with_no_id_when_another_has_the_same() -> None:
    # tau-bench run 29-1 at 3000: "cancel the reservations with one passenger". Three
    # reservations had "passengers: Amelia Davis 1984-03-05"; the line was said once,
    # under the newest, so UDMOP1 read as a reservation with no passenger.
    def reservation(id_: str, flight: str) -> dict[str, Any]:
        passenger = {"first_name": "Amelia", "last_name": "Davis", "dob": "1984-03-05"}
        flights = [{"flight_number": flight, "date": "2024-05-28"}]
        return {"reservation_id": id_, "flights": flights, "passengers": [passenger]}

    lookups = [
        ("get_reservation_details", {"reservation_id": id_}, reservation(id_, flight))
        for id_, flight in (("UDMOP1", "HAT134"), ("4XGCCM", "HAT116"))
    ]
    again = ("get_reservation_details", {"reservation_id": "4XGCCM"}, lookups[1][2])
    body = _summary(_calls([*lookups, again]), 400)
    facts = body.partition("Facts: ")[2].split("; ")
    passengers = "passengers: Amelia Davis 1984-03-05"
    assert facts.count(passengers) == 2, body  # UDMOP1's and 4XGCCM's, not the same again
    assert facts.index(passengers) > facts.index("flight HAT134: 2024-05-28")
    assert facts.index(passengers) < facts.index("flight HAT116: 2024-05-28")


class _JoinCounter:
    """:data:`COUNTER`, but a text with both ``first`` and ``second`` (only the joined
    body has both) ``extra`` tokens more: a join its parts undercount."""

    def __init__(self, first: str, second: str, extra: int) -> None:
        self.first, self.second, self.extra = first, second, extra

    def text(self, text: str) -> int:
        both = self.first in text and self.second in text
        return COUNTER.text(text) + (self.extra if both else 0)


def test_an_item_taken_off_for_the_joined_count_gives_back_the_facts_it_replaced() -> None:
    # tau-bench run 125 at 1550 tokens: the card's record took the place of the bare
    # 7334 the user typed, then went itself when the joined body counted over.
    counter = cast(TokenCounter, _JoinCounter("credit_card_9074831", "HAT083", 20))
    labels = {"facts": "Facts:"}
    typed = Item("facts", "7334", ACTED, 3, 0, 0)
    flight = Item("facts", "HAT083", ACTED, 2, 0, 0)
    card = Item("facts", "credit_card_9074831: mastercard, 7334", REST, 1, 0, 0)
    room = COUNTER.text("Facts: 7334; HAT083; credit_card_9074831: mastercard, 7334")
    body = _render([typed, flight, card], labels, room, counter)
    assert body == "Facts: HAT083; 7334"


def test_a_cut_item_the_joined_count_finds_over_is_cut_shorter_not_left_out() -> None:
    # tau-bench run 50 at 1500 tokens: the label of a bare fact an action took the place
    # of was counted with it, the joined body came out two tokens over, and the profile
    # cut to the room left went whole, address and all.
    counter = cast(TokenCounter, _JoinCounter("HAT083", "get_user_details", 3))
    labels = {"facts": "Facts:"}
    flight = Item("facts", "HAT083", ACTED, 2, 0, 0)
    profile = "get_user_details: name Mia Li, address 975 Sunset Drive Suite 217 Austin TX 78750"
    record = Item("facts", profile + ", mia.li3818@example.com, 1990-04-05", REST, 1, 0, 0)
    room = COUNTER.text(f"Facts: {profile} …; HAT083")  # the address fits, but not +3
    body = _render([flight, record], labels, room, counter)
    assert body == "Facts: get_user_details: name Mia Li …; HAT083"
    assert counter.text(body) <= room


def test_a_bare_fact_the_user_typed_stays_beside_a_call_cut_before_it() -> None:
    # tau-bench run 100: "I'll go with the first option, Flight HAT136 & HAT039", then
    # the booking. At 1350 tokens the booking was cut before its flights, and the
    # flights the user chose, left out as the call showed them, were lost.
    call = {"id": "c1", "type": "function"}
    booking = {
        "user_id": "mia_li_3668",
        "origin": "JFK",
        "destination": "SEA",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT136"}, {"flight_number": "HAT039"}],
    }
    call["function"] = {"name": "book_reservation", "arguments": json.dumps(booking)}
    messages: Messages = [
        {"role": "user", "content": "Book me a flight from New York to Seattle."},
        {"role": "user", "content": "I'll go with the first option, Flight HAT136 & HAT039."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"reservation_id": "HATHAT"}'},
    ]
    whole = _summary(messages, 400)
    assert "Facts:" not in whole and "economy, HAT136, HAT039)" in whole  # said once
    task = "User requests:\n- Book me a flight from New York to Seattle."
    tight = _summary(messages, COUNTER.text(task + "\nActions: book_reservation(…) → ok") + 12)
    assert tight.startswith(task) and tight.endswith("Facts: HAT136; HAT039"), tight


def test_opaque_ids_in_a_tools_output_rank_after_its_other_facts_and_the_users_questions() -> None:
    # A Codex session's grep over fixture files: its Facts line opened with session
    # UUIDs and Anthropic tool-use ids, which name nothing the next step can use.
    grep = (
        "tests/fixtures/session-624a4a58.jsonl:3: 624a4a58-b34c-462d-a70d-13421c8125a8\n"
        "tests/fixtures/session-624a4a58.jsonl:9: toolu_bdrk_01M6PWVSrj68MBb6U3u8oDCX\n"
        "src/utils/config.ts:12: const LIMIT_2026 = 90\n"
    )
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "exec_command", "arguments": '{"cmd": "rg -n compact"}'}
    messages: Messages = [
        {"role": "user", "content": "Find where the compaction threshold is set."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": grep},
        {"role": "user", "content": "And the default?"},
    ]
    whole = _summary(messages, 400)
    assert "2 files: tests/fixtures/session-624a4a58.jsonl, src/utils/config.ts" in whole
    assert whole.endswith(
        "\nFacts: LIMIT_2026; 624a4a58-b34c-462d-a70d-13421c8125a8; "
        "toolu_bdrk_01M6PWVSrj68MBb6U3u8oDCX"
    ), whole
    tight = _summary(messages, COUNTER.text(whole.partition("; 624a4a58-")[0]) + 3)
    assert tight.endswith("\nFacts: LIMIT_2026") and "- And the default?" in tight, tight


@pytest.mark.parametrize(
    ("name", "arguments", "made"),
    [
        pytest.param("create_session", '{"region": "us-east-1"}', True, id="made"),
        pytest.param("bash", '{"command": "grep -A3 session config.ini"}', False, id="found"),
    ],
)
def test_the_opaque_id_a_state_changing_call_made_ranks_with_what_it_changed(
    name: str, arguments: str, made: bool
) -> None:
    # A UUID a look-up finds ranks last (above); the one ``create_session`` returns is
    # what the call made, the id the next step acts on: it ranks with the final state
    # (it ranked after a chat's ``web-00``, the questions and the rest). What a shell
    # command printed is what it found (a grep of a config file, no path to tell it
    # from a file's text), and stays last.
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    made_text = (
        "Session created.\nid 5d1c8e2a-9b7f-4c3d-a1e2-f3b4c5d6e7f8\nplan tier-3\nowner ops-7"
    )
    messages: Messages = [
        {"role": "user", "content": "Please create a new session for the ops team."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": made_text},
        *(
            m
            for k in range(4)
            for m in (
                {"role": "user", "content": f"What about step {k}?"},
                {"role": "assistant", "content": f"Step {k} reconfigures host web-{k}{k}."},
            )
        ),
    ]
    tight = _summary(messages, 80)  # it was left out up to 400, web-00 and the rest kept
    assert ("5d1c8e2a-9b7f-4c3d-a1e2-f3b4c5d6e7f8" in tight) is made, tight
    assert made or "- What about step 0?" in tight, tight


def _reservation(
    prices: tuple[int, int],
    payments: list[int],
    bags: int,
    *,
    reservation: str = "YAX4DR",
    cabin: str = "economy",
) -> str:
    flights = [
        {"flight_number": number, "date": date, "price": price, "origin": a, "destination": b}
        for number, date, price, a, b in (
            ("HAT235", "2024-05-18", prices[0], "BOS", "MCO"),
            ("HAT298", "2024-05-19", prices[1], "MCO", "MSP"),
        )
    ]
    paid = [{"payment_id": "credit_card_4938634", "amount": amount} for amount in payments]
    return json.dumps(
        {"reservation_id": reservation, "origin": "BOS", "destination": "MSP", "cabin": cabin}
        | {"flights": flights, "payment_history": paid, "total_baggages": bags}
    )


def _called(n: int, name: str, reservation: str, result: str) -> Messages:
    call = {"id": f"c{n}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps({"reservation_id": reservation})}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": result},
    ]


def test_an_object_a_later_result_shows_again_is_told_in_its_final_state() -> None:
    # tau-bench 14-3 at 1500 tokens: the look-up's record of the reservation ranked
    # before the update's (its facts are as dense), so the summary said the flights
    # cost 122 and 127 when the upgrade had made them 350 and 499.
    messages: Messages = [
        {"role": "user", "content": "Please upgrade reservation YAX4DR to business."},
        *_called(1, "get_reservation_details", "YAX4DR", _reservation((122, 127), [498], 0)),
        *_called(
            2,
            "update_reservation_flights",
            "YAX4DR",
            _reservation((350, 499), [498, 1200], 0, cabin="business"),
        ),
        *_called(
            3,
            "update_reservation_baggages",
            "YAX4DR",
            _reservation((350, 499), [498, 1200], 2, cabin="business"),
        ),
    ]
    whole = _summary(messages, 400)
    assert "price 350" in whole and "amount 1200" in whole, whole
    assert "price 122" not in whole and "price 127" not in whole, whole
    assert "economy" not in whole and "get_reservation_details(YAX4DR) → ok" in whole, whole


def test_a_flight_or_a_card_in_two_reservations_is_two_things() -> None:
    # A breaker's case: the final state is of one reservation; the same flight number
    # and card in another keep that one's price and payment (they were taken for one
    # object and the older reservation's were dropped).
    messages: Messages = [
        {"role": "user", "content": "What did I pay for ABC123? And cancel XYZ789."},
        *_called(1, "get_reservation_details", "ABC123", _reservation((122, 127), [498], 0)),
        *_called(
            2,
            "cancel_reservation",
            "XYZ789",
            _reservation((350, 499), [300], 0, reservation="XYZ789"),
        ),
    ]
    whole = _summary(messages, 400)
    assert "price 122" in whole and "price 350" in whole, whole
    assert "amount 498" in whole and "amount 300" in whole, whole


def test_a_call_that_changes_state_keeps_what_it_made_beside_a_record_it_names() -> None:
    # Only a look-up's gist gives way to a newer record of its object: a booking that
    # names a flight already said keeps the reservation it made.
    from ctxcli.summarizers.extractive import Item, _gist_unsaid

    said = "flight HAT235: 2024-05-18, price 350\n"
    booked = Item("actions", "book_reservation(HAT235) → ok, reservation NEW123", 1, 3, 0)
    assert _gist_unsaid(booked, said) is booked
    looked = Item("actions", "get_flight_status(HAT235) → available, price 122", 4, 1, 0)
    assert _gist_unsaid(looked, said).text == "get_flight_status(HAT235) → ok"


def test_the_flights_a_newer_result_no_longer_lists_are_not_said() -> None:
    # tau-bench 13-0 at 2000: the look-up's four flights stood beside the final
    # reservation, which held one; a status alone (no flights listed) leaves them.
    flights = json.loads(_reservation((122, 127), [498], 0))
    moved = {**flights, "flights": flights["flights"][1:]}
    messages: Messages = [
        {"role": "user", "content": "Drop the first flight of YAX4DR."},
        *_called(1, "get_reservation_details", "YAX4DR", json.dumps(flights)),
        *_called(2, "update_reservation_flights", "YAX4DR", json.dumps(moved)),
    ]
    whole = _summary(messages, 400)
    assert "HAT298" in whole and "HAT235" not in whole, whole
    cancelled = {"reservation_id": "YAX4DR", "status": "cancelled"}
    messages[-1] = {**messages[-1], "content": json.dumps(cancelled)}
    whole = _summary(messages, 400)
    assert "HAT235" in whole and "cancelled" in whole, whole


def test_what_a_read_file_says_comes_after_what_a_command_found() -> None:
    """SWE-agent's summary ranked ``setup.py``'s e-mail and URLs (its ``open``, newer)
    before what its commands found: a file can be read again."""
    setup = "author_email='sloria1@gmail.com', url='https://github.com/x/y', version='3.0.0rc4'"
    shown = "Name: marshmallow\nVersion: 3.13.0\nLocation: /opt/env/lib/python3.9/site-packages"
    messages: Messages = [{"role": "user", "content": "Fix the rounding of TimeDelta."}]
    for n, (name, arguments, text) in enumerate(
        [("get_package", {"name": "x"}, shown), ("open", {"path": "setup.py"}, setup)]
    ):
        call = {"id": f"c{n}", "type": "function", "function": {"name": name}}
        call["function"]["arguments"] = json.dumps(arguments)
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": text},
        ]
    messages.append({"role": "assistant", "content": "Found it."})
    wide = _summary(messages, 400)
    assert "sloria1@gmail.com" in wide and "site-packages" in wide, wide
    narrow = next(
        text
        for bound in range(40, 400, 5)
        if "site-packages" in (text := _summary(messages, bound))
    )
    assert "sloria1@gmail.com" not in narrow, narrow


def test_a_limit_is_pinned_on_one_thing_only_and_takes_the_list_it_leads_in_to() -> None:
    """tau-bench 28-3 at 3000: "I6M8JQ: Note that basic economy reservations cannot be
    canceled …" (a kind, pinned on the last of five listed, an economy booking that was
    cancelled), while the refusal itself ("the following reservations cannot be
    canceled:" and its list) came out as bare list items."""
    answer = (
        "1. **Reservation ID: I6M8JQ**\n   - **Cabin:** Economy\n\nNote that basic economy "
        "reservations cannot be canceled unless they meet specific conditions.\n\n"
        "However, the following reservations cannot be canceled due to the policy "
        "restrictions:\n\n1. **UDMOP1** (Basic Economy without insurance)\n"
        "2. **XAZ3C0** (Basic Economy without insurance)\n\nWould you like to proceed?"
    )
    body = _summary(
        [{"role": "user", "content": "Cancel them."}, {"role": "assistant", "content": answer}], 400
    )
    assert "I6M8JQ: Note" not in body, body
    assert (
        "the following reservations cannot be canceled due to the policy restrictions: UDMOP1 "
        "(Basic Economy without insurance); XAZ3C0 (Basic Economy without insurance)"
    ) in body, body
    one = "Your reservation FQ8APE is booked. However, this reservation is in basic economy, which cannot be modified."
    body = _summary(
        [{"role": "user", "content": "Book."}, {"role": "assistant", "content": one}], 400
    )
    assert "FQ8APE: However, this reservation" in body, body


def test_a_heading_in_bold_alone_is_no_note() -> None:
    """tau-bench's answers list flights under bold headings, which read as notes:
    ``- **Flight HAT136 (JFK to ATL)**``."""
    answer = (
        "Here are the options.\n\n**Flight HAT136 (JFK to ATL)**\n- Departure: 07:00\n\n"
        "The fare for HAT136 is $189 in economy, which fits your budget."
    )
    body = _summary(
        [{"role": "user", "content": "Find one."}, {"role": "assistant", "content": answer}], 300
    )
    assert "- **Flight HAT136" not in body, body
    assert "The fare for HAT136 is $189" in body, body


@pytest.mark.parametrize(
    ("answer", "noted", "not_noted"),
    [
        pytest.param(
            "However, the following reservations cannot be canceled:\n- ABC123 (basic economy)"
            "\n- DEF456 (basic economy)\nYour reservation XYZ789 has been cancelled and $250 "
            "will be refunded.",
            ["cannot be canceled: ABC123 (basic economy); DEF456 (basic economy)\n",
             "- Your reservation XYZ789 has been cancelled"],
            ["DEF456 (basic economy); Your"],
            id="prose-after-the-list",
        ),
        pytest.param(
            "The following reservations cannot be modified:\n1. **ABC123**\n   - Route: JFK to "
            "LAX\n2. **DEF456**\n   - Route: SFO to SEA\n\nAnything else?",
            ["cannot be modified: ABC123; DEF456"], [], id="nested-list",
        ),
        pytest.param(
            "I found reservation FQ8APE for you. It is a basic economy ticket, which cannot be "
            "modified.", ["FQ8APE: It is a basic economy ticket"], [], id="it-is",
        ),
        pytest.param(
            "我查到了您的预订 FQ8APE。该预订是基本经济舱，无法修改。", ["FQ8APE: 该预订是基本经济舱"], [],
            id="zh",
        ),
        pytest.param(
            "Reservations ABC123 and DEF456 are booked. It cannot be changed now.",
            ["- It cannot be changed now."], ["DEF456: It"], id="two-named",
        ),
        pytest.param(
            "**Unfortunately, reservation DEF456 cannot be cancelled because it has no travel "
            "insurance.**", ["DEF456 cannot be cancelled"], [], id="bold-limit",
        ),
    ],
)  # fmt: skip
def test_a_limits_subject_and_list_are_its_own(
    answer: str, noted: list[str], not_noted: list[str]
) -> None:
    """A breaker's cases: a list-led limit took the prose after its list (XYZ789, which
    was cancelled, read as refused) and the first item of a nested list alone; "It is"
    and Chinese "该预订" lost the id they are of; a limit after a sentence naming two ids
    took the last; a limit in bold alone read as a heading."""
    messages: Messages = [{"role": "user", "content": "Cancel them."}]
    body = _summary([*messages, {"role": "assistant", "content": answer}], 400)
    assert all(text in body + "\n" for text in noted), body
    assert not any(text in body for text in not_noted), body
