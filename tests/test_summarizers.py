"""The extractive summarizer: language-aware, fact-keeping, bounded, mergeable."""

from __future__ import annotations

from ctxcli.summarizers.extractive import (
    Extractive,
    facts,
    language,
    parse_summary,
    sentences,
    short_request,
)
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")
SUMMARIZER = Extractive()


def test_chinese_sentences_end_at_cjk_marks_not_full_stops() -> None:
    text = "我之前买的订单号12345。能帮我查一下物流吗？价格是3.5元！好的"
    assert sentences(text) == [
        "我之前买的订单号12345。",
        "能帮我查一下物流吗？",
        "价格是3.5元！",
        "好的",
    ]


def test_latin_sentences_keep_decimals_and_drop_list_markers() -> None:
    assert sentences("It costs 3.50 dollars. Fine!\n1. First item\n- second") == [
        "It costs 3.50 dollars.",
        "Fine!",
        "First item",
        "second",
    ]


def test_language_follows_the_share_of_cjk_letters() -> None:
    assert language(["你好，我想退货。"]) == "zh"
    assert language(["Hello, order 12345 please"]) == "en"


def test_facts_find_ids_dates_amounts_and_quantities() -> None:
    found = facts(
        "Order ORD-88231 for mia_li_3668 on 2024-05-15 cost $1,234.50; use 250 g flour. Call +1 555-123-4567 or mail a@b.com"
    )
    for fact in (
        "ORD-88231",
        "mia_li_3668",
        "2024-05-15",
        "$1,234.50",
        "250 g flour",
        "a@b.com",
        "555-123-4567",
    ):
        assert any(fact in f for f in found), (fact, found)
    assert "12 月 6 日" in facts("活动截止到 12 月 6 日 24 点，售价 4999 元")
    assert "4999 元" in facts("活动截止到 12 月 6 日 24 点，售价 4999 元")


def test_long_requests_are_shortened_to_their_first_sentence_and_question() -> None:
    text = "I bought a phone last week. " + "It was fine at first. " * 10 + "Can I return it?"
    assert short_request(text) == "I bought a phone last week. Can I return it?"


def test_summary_keeps_requests_and_json_facts_within_its_bound() -> None:
    messages = [
        {"role": "user", "content": "Please cancel reservation ZFA04Y."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {
                        "name": "get_reservation_details",
                        "arguments": '{"reservation_id": "ZFA04Y"}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c",
            "content": '{"reservation_id": "ZFA04Y", "origin": "SFO", "destination": "JFK", "flights": [{"flight_number": "HAT001", "date": "2024-05-20", "price": 150}]}',
        },
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=200, counter=COUNTER)
    assert "- Please cancel reservation ZFA04Y." in body
    for fact in ("origin=SFO", "destination=JFK", "flight_number=HAT001", "date=2024-05-20"):
        assert fact in body
    assert "Tools used: get_reservation_details" in body
    small = SUMMARIZER.summarize(messages, previous=None, max_tokens=15, counter=COUNTER)
    assert COUNTER.text(small) <= 15


def test_a_previous_summary_is_merged_not_stacked() -> None:
    first = SUMMARIZER.summarize(
        [{"role": "user", "content": "Order 4471 is late."}],
        previous=None,
        max_tokens=100,
        counter=COUNTER,
    )
    second = SUMMARIZER.summarize(
        [{"role": "user", "content": "Refund to card ending 9921."}],
        previous=first,
        max_tokens=100,
        counter=COUNTER,
    )
    sections = parse_summary(second)
    assert sections["requests"] == ["Order 4471 is late.", "Refund to card ending 9921."]
    assert second.count("User requests:") == 1


def test_summaries_are_deterministic() -> None:
    messages = [
        {"role": "user", "content": f"Question {i} about order {1000 + i}?"} for i in range(30)
    ]
    runs = {
        SUMMARIZER.summarize(messages, previous=None, max_tokens=120, counter=COUNTER)
        for _ in range(3)
    }
    assert len(runs) == 1
