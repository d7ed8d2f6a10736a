"""The extractive summarizer: language-aware, fact-keeping, bounded, mergeable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli.summarizers.extractive import (
    REQUEST_CHARS,
    Extractive,
    _notes,
    _what_yuan,
    error_lines,
    facts,
    json_facts,
    language,
    parse_summary,
    sentences,
    short_request,
)
from ctxcli.summarizers.text import own_sentences
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


def test_sentences_collapse_every_unicode_space_within_them() -> None:
    # No-break, em and ideographic spaces and a tab are whitespace as \s is.
    text = "Seat\u00a0 12A\t is\u2003free.\u3000 Thanks  a lot!"
    assert sentences(text) == ["Seat 12A is free.", "Thanks a lot!"]


def test_a_chinese_request_is_cut_after_a_pause_mark() -> None:
    """A Chinese request has no spaces, and a cut was made only before one: an earlier
    summary of one long request could not be written again smaller, and was dropped."""
    previous = (
        "用户请求：\n- 考虑这两个物体的特征，并决定哪一个更有可能在图书馆而不是在建筑工地被发现。"
    )
    previous += "一个通常与书籍和安静的空间有关，而另一个则与重型机械和嘈杂的环境有关。"
    body = SUMMARIZER.summarize([], previous=previous, max_tokens=40, counter=COUNTER)
    assert body.startswith("用户请求：\n- 考虑这两个物体的特征，") and body.endswith("。 …"), body
    assert COUNTER.text(body) <= 40


def test_a_request_says_a_repeated_sentence_once() -> None:
    """A pasted function repeated 25 times gave the request "return x*2; return x*2; …"
    (a new user's code-only message)."""
    code = "```python\n" + "def foo(x):\n    return x*2\n\n" * 25 + "```"
    assert own_sentences(code).count("return x*2") <= 1
    assert own_sentences("Cancel it. Cancel it. Then rebook.") == ["Cancel it.", "Then rebook."]


def test_language_follows_the_share_of_cjk_letters() -> None:
    assert language(["你好，我想退货。"]) == "zh"
    assert language(["Hello, order 12345 please"]) == "en"
    # Code says nothing of the language: a Chinese question on a Ruby snippet.
    code = "require 'opencv'\ndef contrast_detection(image_path, x1, y1)\n" * 4
    assert language([f"如何用Ruby代码检测图像中特定区域的对比度？\n\n```ruby\n{code}```"]) == "zh"
    assert language(["`x = 1`", "12345"], default="") == ""


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


def test_a_chinese_amount_keeps_the_word_that_says_what_it_is() -> None:
    """ "199 元" was both the charger's price and the screen insurance's: the amounts in
    元 had no label. A label is a whole word, never the tail of a clause cut mid-word
    ("统会自动减去 200 元"), and no operator: 减去 (minus) says only that the amount is
    taken off, which the 立减 200 元 of the sample said already."""
    answer = (
        "无线充电器需要单独购买，官方款售价 199 元。下单后系统会自动减去 200 元优惠，"
        "实付 4799 元。如果购买了 199 元碎屏险，可以免费换屏。"
    )
    messages = [
        {"role": "user", "content": "无线充电器多少钱？下单后实付多少？"},
        {"role": "assistant", "content": answer},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=300, counter=COUNTER)
    facts, notes = parse_summary(body)["facts"], parse_summary(body)["notes"]
    for label in ("官方款售价 199 元", "200 元", "实付 4799 元"):
        assert label in facts or any(label in note for note in notes), body
    assert not [fact for fact in facts if "统会" in fact or "减去" in fact], body


def test_a_chinese_price_keeps_the_model_or_spec_its_clause_names() -> None:
    """The Chinese sample at 800 tokens said ``售价 4999 元; 16GB+512GB; 售价 5999 元``:
    which configuration costs 4999 was gone, and it read as the next spec's price."""
    text = "标准版 12GB+256GB 售价 4999 元，顶配 16GB+512GB 售价 5999 元。"
    assert _what_yuan(text, "4999 元") == "标准版 12GB+256GB 售价 4999 元"
    assert _what_yuan(text, "5999 元") == "顶配 16GB+512GB 售价 5999 元"
    assert _what_yuan("旗舰 X-Pro 2026 售价 4999 元", "4999 元") == "旗舰 X-Pro 2026 售价 4999 元"
    assert _what_yuan("官方款售价 199 元", "199 元") == "官方款售价 199 元"  # as before
    assert _what_yuan("减去 200 元优惠，实付 4799 元", "4799 元") == "实付 4799 元"
    # two things of 199 元 in the sample: the charger's price, and the screen insurance
    # said after it with 的 (a summary reader found the second bare at 400 tokens)
    assert (
        _what_yuan("如果购买了 199 元的碎屏险，一年内可以免费换屏一次。", "199 元")
        == "碎屏险 199 元"
    )


def test_a_chinese_unit_is_the_longest_that_follows_the_number() -> None:
    """A new user's chat gave ``5000日`` (days) for 5000日元 (yen), ``12个`` for 12个月,
    ``2448`` for 2448.5 公里 and ``0686`` for 7.0686 平方米; 300英镑 gave nothing."""
    text = (
        "5000日元约合240元，保修期为12个月，3 个工作日内到账。距离约 2448.5 公里，"
        "面积是 7.0686 平方米。费用是300英镑，或者200港币。"
    )
    assert facts(text) == [
        "5000日元", "240元", "12个月", "3 个工作日", "2448.5 公里", "7.0686 平方米",
        "300英镑", "200港币",
    ]  # fmt: skip


def test_a_number_keeps_its_decimal_fraction() -> None:
    """glaive's "2448.5英里" (miles, no unit known) gave ``2448``, and a balance of
    1234.5 gave ``1234``: a number cut at its point is a wrong number. A dotted run
    (an IP address, a date) still gives its first number alone, no made-up decimal."""
    assert facts("距离是2448.5英里。") == ["2448.5英里"]
    assert facts("余额 1234.5，身高 180.5 厘米，航程 300 海里") == [
        "1234.5", "180.5 厘米", "300 海里"
    ]  # fmt: skip
    assert facts("The balance is 1234.5 now.") == ["1234.5"]
    assert facts("ip 192.168.1.1, on 2024.05.20") == ["2024"]


def test_an_answers_headings_plans_and_code_examples_are_no_notes_nor_facts() -> None:
    """A Claude Code session's notes were "**Corrected Phase 4.1 Proposal**:" and a
    Gemini CLI one's "I will then move on to examining lead_memory_v1.txt" (read
    already); the facts "proj_xyz789; conv-f47ac10b…" came from an example JSON."""
    answer = (
        "**Corrected Phase 4.1 Proposal** (matches metrics):\n"
        '```json\n{"conversationId": "conv-f47ac10b", "project": "proj_xyz789"}\n```\n'
        "I will then move on to examining lead_memory_v1.txt. "
        "The sync threshold is 90 percent now, set in src/config_v2.ts."
    )
    messages = [
        {"role": "user", "content": "Set the sync threshold."},
        {"role": "assistant", "content": answer},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=300, counter=COUNTER)
    sections = parse_summary(body)
    assert sections["notes"] == [
        "The sync threshold is 90 percent now, set in src/config_v2.ts."
    ], body
    assert "proj_xyz789" not in body and "f47ac10b" not in body, body


def test_a_month_and_its_year_is_no_day() -> None:
    """A Gemini CLI summary listed "June 20" of "written in June 2024": no such day."""
    found = facts("Written in June 2024, updated on June 20, 2024 and on May 3 2025.")
    assert found == ["June 2024", "June 20, 2024", "May 3 2025"], found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("奶酪起源于公元前700年的希腊。", ["公元前700年"]),
        ("该城建于公元1200年。", ["公元1200年"]),
        ("Cheese dates to 700 BC in Greece.", ["700 BC", "Greece"]),
        ("Rome was founded in 753 BCE; the wall in AD 122.", ["753 BCE", "AD 122"]),
        ("Our CEO met 5 CEOs in 2024年.", ["2024年"]),
        ("公元前 700 年", ["公元前 700 年"]),
        ("Caesar died in 44 BC.", ["44 BC"]),
        ("10 AD units, 2 CE marks, 500 CE-certified, 5 BCE-certified, Gate 7 BC", []),
        ("a 1999 AD/DC conversion", ["1999"]),
        # the short era (221 BC was 221年), a century; 前 of a word, or a count, is none
        ("秦始建于前221年，长城始于公元前3世纪、前3世纪。", ["前221年", "公元前3世纪", "前3世纪"]),
        ("前3年的收入；之前221年；目前2024年", ["3年", "221年", "2024年"]),
    ],
)
def test_a_year_keeps_its_era(text: str, expected: list[str]) -> None:
    """A glaive summary said ``700年`` of 公元前700年 (700 BC): the year turned round;
    a breaker's ``前221年`` said ``221年`` and ``公元前3世纪`` nothing."""
    assert facts(text) == expected


def test_an_english_range_or_count_keeps_its_ends_and_its_noun() -> None:
    """A range is one fact ("5 to 7 business days"; it was "7 business", a seat
    count?), and a count keeps its noun ("3 free checked bags", not "3 free")."""
    assert facts("Refunds take 5 to 7 business days.") == ["5 to 7 business days"]
    assert facts("It takes 5-7 business days.") == ["5-7 business days"]
    assert facts("You have 3 free checked bags.") == ["3 free checked bags"]
    assert facts("The trip is 2 to 3 hours long, 10-20 kg.") == ["2 to 3 hours", "10-20 kg"]


def test_a_spec_of_quantities_joined_by_plus_is_one_fact() -> None:
    """The Chinese sample's "顶配 16GB+512GB" was "16GB; 512GB" beside "12GB; 256GB"
    of the other model: which goes with which, and which is memory, was lost."""
    text = "标准版 12GB+256GB 售价 4999 元，顶配 16GB+512GB 售价 5999 元。"
    assert facts(text) == ["12GB+256GB", "4999 元", "16GB+512GB", "5999 元"]
    assert facts("Pick 8 GB + 1 TB, or 16GB.") == ["8 GB", "1 TB", "16GB"]  # spaced: apart
    # what it is of stays with the last (a breaker's: "8GB+8GB" lost "RAM"), a sum apart
    assert facts("Add 8GB+8GB RAM kits") == ["8GB", "8GB RAM"]
    assert facts("2GB+2GB=4GB") == ["2GB", "2GB", "4GB"]


def test_a_hash_is_a_fact_whole_past_the_length_a_fact_is_cut_at() -> None:
    """A Docker container's id (64 hex digits, ``docker run -d``) came out cut at 60
    characters with "…": no later command could be matched to it."""
    container = "3f4e9a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3"
    assert facts(f"Started {container} on port 8080") == [container, "port 8080"]
    assert facts("see https://example.com/" + "a" * 80)[0].endswith("…")  # others are cut


def test_a_word_that_labels_an_id_is_no_name_and_a_clock_time_no_quantity() -> None:
    """ "go with Flight HAT072" gave the fact "Flight" beside HAT072 (tau-bench runs
    listed "Flight" and "Reservation" among their facts), and "at 10:00 flight" gave
    "00 flight"; names before other words, or before a date, stay."""
    assert facts("Yes, let's go with Flight HAT072 departing at 9 am.") == ["HAT072"]
    assert facts("Please look for Reservation ZFA04Y, from Newark at 10:00 flight") == [
        "ZFA04Y",
        "Newark",
    ]
    assert facts("Book a flight from New York to Seattle on May 20.") == [
        "New York",
        "Seattle",
        "May 20",
    ]
    assert "Ivan Martin" in facts("add my friend Ivan Martin 1973-08-20 to it")


def test_long_requests_are_shortened_to_their_first_sentence_and_question() -> None:
    text = "I bought a phone last week. " + "It was fine at first. " * 10 + "Can I return it?"
    assert short_request(text) == "I bought a phone last week. Can I return it?"


def test_the_status_of_a_list_item_is_no_fact_but_a_record_status_is() -> None:
    todos = {
        "todos": [
            {"id": "1", "content": "Read CLAUDE.md", "status": "completed"},
            {"id": "2", "content": "Update CLAUDE.md", "status": "in_progress"},
        ]
    }
    assert json_facts(todos) == ["id=1", "id=2"]
    assert json_facts({"reservation_id": "ZFA04Y", "status": "cancelled"}) == [
        "reservation_id=ZFA04Y",
        "status=cancelled",
    ]


def test_a_bound_too_small_for_the_task_and_a_fact_keeps_the_task() -> None:
    messages = [
        {"role": "user", "content": "Get the earnings information for Tesla Inc."},
        {"role": "assistant", "content": "Looking up Tesla Inc (TSLA) on 2024-04-17."},
    ]
    task_alone = SUMMARIZER.summarize(messages[:1], previous=None, max_tokens=100, counter=COUNTER)
    bound = COUNTER.text(task_alone) + 2  # room for the task, not for it and all facts
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=bound, counter=COUNTER)
    assert "- Get the earnings information for Tesla Inc." in body
    assert COUNTER.text(body) <= bound


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
    # Each object's values under its own label, never mixed with another's.
    # The record of a look-up of what the user named is told once, under its label.
    assert "Actions: get_reservation_details(ZFA04Y) → ok" in body
    assert "reservation ZFA04Y: SFO→JFK" in body
    assert "flight HAT001: 2024-05-20, price 150" in body and body.count("SFO→JFK") == 1
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


# --- lists: items on their own lines or numbered in one line ------------------------

AIRLINE_ANSWERS = (  # a user's reply in tau-bench airline, task 0
    "1. One-way\n2. Economy\n3. It's just me traveling.\n4. I want to use my certificates "
    "first, and if there's any balance, I'll use my 7447 card.\n5. No, I do not want travel "
    "insurance."
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "Answers:\n1. One-way\n2) Economy\n- just me\n* no insurance\n• card 7447",
            ["Answers:", "One-way", "Economy", "just me", "no insurance", "card 7447"],
            id="markers-en",
        ),
        pytest.param(
            "我的回答：\n1、单程\n2、经济舱\n（3）就我一个人\n④先用代金券",
            ["我的回答：", "单程", "经济舱", "就我一个人", "先用代金券"],
            id="markers-zh",
        ),
        pytest.param(
            "Answers: 1. One-way 2. Economy 3. Just me.",
            ["Answers:", "One-way", "Economy", "Just me."],
            id="numbered-in-a-line",
        ),
        pytest.param(
            "我的回答：1、单程 2、经济舱", ["我的回答：", "单程", "经济舱"], id="zh-in-a-line"
        ),
        pytest.param(
            "Upgrade to version 2. Then restart it.",
            ["Upgrade to version 2.", "Then restart it."],
            id="a-number-ending-a-sentence",
        ),
        pytest.param("1.5 kg of flour", ["1.5 kg of flour"], id="a-decimal-is-no-marker"),
        pytest.param("我买了2、3个", ["我买了2、3个"], id="zh-2-or-3-is-no-list"),
    ],
)
def test_list_items_are_sentences_without_their_markers(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            AIRLINE_ANSWERS,
            "One-way; Economy; It's just me traveling; I want to use my certificates first, "
            "and if there's any balance, I'll use my 7447…; No, I do not want travel insurance",
            id="tau-bench-answers",
        ),
        pytest.param(
            "1、单程\n2、经济舱\n3、就我一个人\n4、先用我的代金券，余额用尾号7447的卡支付",
            "单程；经济舱；就我一个人；先用我的代金券，余额用尾号7447的卡支付",
            id="zh-lines",
        ),
        pytest.param(
            "我的回答：1、单程 2、经济舱 3、就我一个人",
            "我的回答：单程；经济舱；就我一个人",
            id="zh-in-a-line",
        ),
        pytest.param(
            "Sure, here are my answers\n- one-way\n- economy.\nThanks!",
            "Sure, here are my answers: one-way; economy. Thanks!",
            id="bullets-between-prose",
        ),
        pytest.param(
            "1. Economy\n   the cheapest fare\n2. One passenger",
            "Economy the cheapest fare; One passenger",
            id="an-item-over-two-lines",
        ),
        pytest.param(
            "Please upgrade to version 2. Then restart the server and tell me whether it "
            "works, because last time it failed and I lost the work of a whole morning, "
            "which I would rather not do again.",
            "Please upgrade to version 2.",
            id="no-list",
        ),
    ],
)
def test_a_request_holding_a_list_keeps_every_item(text: str, expected: str) -> None:
    assert short_request(text) == expected
    assert len(short_request(text)) <= REQUEST_CHARS


def test_a_long_list_keeps_a_fair_share_of_each_item_and_ends_in_an_ellipsis() -> None:
    details = "Here are the details:\n" + "\n".join(
        f"{i}. Passenger {i}: first name Emily, last name Smith, born 1988-04-1{i}"
        for i in range(1, 4)
    )
    short = short_request(details)
    assert len(short) <= REQUEST_CHARS
    assert short.startswith("Here are the details: Passenger 1: ")
    assert short.count("; ") == 2 and "Passenger 3" in short
    many = "\n".join(f"{i}. item number {i} with a few words" for i in range(1, 31))
    short = short_request(many)
    assert len(short) <= REQUEST_CHARS and short.startswith("item number 1 ")
    assert short.endswith("; …") and "item number 30" not in short


@settings(max_examples=200, deadline=None)
@given(
    lead=st.text(max_size=80),
    items=st.lists(st.text(min_size=1, max_size=120), min_size=1, max_size=25),
    marker=st.sampled_from(["{}. ", "{}) ", "{}、", "- ", "* ", "• "]),
    limit=st.integers(min_value=20, max_value=300),
)
def test_a_short_request_never_passes_its_limit(
    lead: str, items: list[str], marker: str, limit: int
) -> None:
    lines = [marker.format(i) + item for i, item in enumerate(items, 1)]
    text = "\n".join([lead, *lines])
    short = short_request(text, limit)
    assert len(short) <= limit
    assert text.strip() == "" or short  # something is always said


def test_the_tau_bench_answers_reach_the_summary_whole() -> None:
    messages = [
        {"role": "user", "content": "Hi! I want to book a flight from New York to Seattle."},
        {"role": "assistant", "content": "Trip type, cabin, passengers, payment, insurance?"},
        {"role": "user", "content": AIRLINE_ANSWERS},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=200, counter=COUNTER)
    assert "- One-way; Economy; It's just me traveling. I want to use my certificates" in body
    assert "- One-way 2." not in body


# --- the actions line ----------------------------------------------------------------

TOOL_NAMES = (  # 6 tools, 8 calls: the folded run of tau-bench airline task 0
    "get_user_details",
    "search_direct_flight",
    "search_onestop_flight",
    "calculate",
    "calculate",
    "book_reservation",
    "think",
    "book_reservation",
)


REQUESTS = {
    "en": "Book me a flight from New York to Seattle on May 20, user mia_li_3668.",
    "zh": "帮我订一张5月20日从纽约到西雅图的机票，用户名是mia_li_3668。",
}
ACTIONS_LABELS = {"en": "Actions:", "zh": "操作："}


def _agent_run(lang: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": REQUESTS[lang]}]
    for i, name in enumerate(TOOL_NAMES):
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        if lang == "en":
            result = f'{{"status": "ok", "reservation_id": "HAT{i:03d}", "price": {100 + i}}}'
        else:
            result = f"已查询，订单号HAT{i:03d}，价格{100 + i}元。"
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return messages


def _actions_line(body: str, label: str) -> list[str] | None:
    """The actions shown, or ``None`` without a line."""
    line = next((line for line in body.splitlines() if line.startswith(label)), None)
    return None if line is None else line[len(label) :].strip().split("; ")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_actions_line_lists_every_call_with_its_outcome_identical_ones_counted(
    lang: str,
) -> None:
    messages, label = _agent_run(lang), ACTIONS_LABELS[lang]
    whole = SUMMARIZER.summarize(messages, previous=None, max_tokens=400, counter=COUNTER)
    if lang == "en":  # JSON results: "ok", identical calls counted at their last place;
        # a call that changed state names what it made
        assert _actions_line(whole, label) == [
            "get_user_details() → ok",
            "search_direct_flight() → ok",
            "search_onestop_flight() → ok",
            "calculate() ×2 → ok",
            "book_reservation() → ok, reservation HAT005",
            "think() → ok",
            "book_reservation() → ok, reservation HAT007",
        ]
    else:  # short results are their own outcome, so no two calls are alike
        shown = _actions_line(whole, label)
        assert shown == [
            f"{name}() → 已查询，订单号HAT{i:03d}，价格{100 + i}元。"
            for i, name in enumerate(TOOL_NAMES)
        ]


def test_a_greeting_alone_is_no_task_the_next_request_is() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello! What would you like to do?"},
        {"role": "user", "content": "Explain what this is"},
        {
            "role": "assistant",
            "content": " ".join(
                f"Version v{n} of lead.txt dates from 2024-06-{n:02d}." for n in range(1, 20)
            ),
        },
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=12, counter=COUNTER)
    assert parse_summary(body)["requests"] == ["Explain what this is"]


def _continued(compact: str, answer: str) -> str:
    """The summary (within 400 tokens) of a session continued from Claude Code's
    ``compact`` summary, then the assistant's ``answer``."""
    messages = [{"role": "user", "content": compact}, {"role": "assistant", "content": answer}]
    return SUMMARIZER.summarize(messages, previous=None, max_tokens=400, counter=COUNTER)


def test_a_compact_summary_gives_the_task_its_request_section() -> None:
    compact = (
        "This session is being continued from a previous conversation that ran out of "
        "context. The conversation is summarized below:\nAnalysis:\nLet me analyze the "
        "conversation chronologically: 1. **Initial Request**: the user asked for a review."
        "\n\nSummary:\n## 1. Primary Request and Intent:\n- Review the sync of session "
        "metrics in src/sync.ts so that it tracks changes incrementally\n- Keep it "
        "minimal\n\n## 2. Key Technical Concepts:\n- **Delta tracking**: syncStatus per "
        "delta\n\n## 3. Files and Code Sections:\n- src/sync.ts: the sync loop"
    )
    body = _continued(compact, "I'll continue with the review of src/sync.ts.")
    task = parse_summary(body)["requests"][0]
    assert task.startswith("Review the sync of session metrics in src/sync.ts")
    assert "Keep it minimal" in task
    assert "continued from a previous conversation" not in body
    assert "Delta tracking" not in task  # the next section is not the request


def test_a_compact_summary_keeps_the_users_corrections_and_the_pending_tasks() -> None:
    """Claude Code's compact summary of 3k tokens came out as its request alone: the
    user's nine corrections ("not JSONL, a JSON file") and the tasks left were lost."""
    compact = (
        "Summary:\n## 1. Primary Request and Intent:\n- Review the sync of session metrics"
        "\n\n## 2. Key Technical Concepts:\n- syncState"
        "\n\n## 5. Problem Solving:\n- **Root cause**: the sync marks the whole session done"
        '\n\n## 6. All User Messages:\n1. "review the sync"\n2. "it\'s not a jsonl file, '
        "it's json with syncState\"\n\n## 7. Pending Tasks:\n- Update ARCHITECTURE.md "
        "with the simplified approach\n\n## 8. Current Work:\nReading ARCHITECTURE.md"
    )
    body = _continued(compact, "I'll continue with ARCHITECTURE.md.")
    requests = parse_summary(body)["requests"]
    assert requests[0] == "Review the sync of session metrics", body
    # as of the compaction: the steps after it may have done it (624a4a58's next Edit)
    pending = "Pending at the compaction: Update ARCHITECTURE.md with the simplified approach"
    assert pending in requests, body
    assert "it's not a jsonl file, it's json with syncState" in requests, body
    assert "review the sync" not in requests  # the first is the request itself
    # where the session it continues stood is a note, not a request
    notes = parse_summary(body)["notes"]
    assert "Current work: Reading ARCHITECTURE.md" in notes, body
    assert "**Root cause**: the sync marks the whole session done" in notes, body


def test_an_edit_shows_the_line_it_wrote() -> None:
    """Claude Code's Edit came out as its file alone: what it changed was lost."""
    edit = {
        "file_path": "/repo/CLAUDE.md",
        "old_string": "# Rules\n",
        "new_string": "# Rules\nUse pnpm, not npm.\n",
    }
    removal = {"file_path": "/repo/a.py", "old_string": "x = 1\ny = 2\n", "new_string": "x = 1\n"}
    body = _ran([("Edit", edit, "The file has been updated."), ("Edit", removal, "Updated.")])
    assert "Edit(/repo/CLAUDE.md, Use pnpm, not npm.) → The file" in body, body
    assert "Edit(/repo/a.py) → Updated." in body, body  # a deletion writes no line


def test_an_observation_is_told_by_its_output_and_an_edit_by_the_file_it_changed() -> None:
    # SWE-agent: every observation ends with its shell's state; an edit's arguments are
    # the text replaced, and only its result says which file it changed.
    state = "\n(Open file: /testbed/reproduce.py)\n(Current directory: /testbed)\nbash-$"
    steps = [
        ("bash", {"command": "python reproduce.py"}, "344" + state),
        (
            "edit",
            {
                "search": "return int(value.total_seconds() / base_unit.total_seconds())",
                "replace": "return int(round(value.total_seconds() / base_unit.total_seconds()))",
            },
            "Text replaced. Please review the changes.\r\n"
            "[File: /testbed/src/marshmallow/fields.py (1998 lines total)]\r\n1458: x" + state,
        ),
        ("bash", {"command": "python reproduce.py"}, "345" + state),
        ("bash", {"command": "ls -F"}, "AUTHORS.rst\tsetup.py\r\nsrc/\ttests/" + state),
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the rounding of TimeDelta."}]
    for i, (name, arguments, result) in enumerate(steps):
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"c{i}", "type": "function", "function": function}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=400, counter=COUNTER)
    assert _actions_line(body, "Actions:") == [
        "bash(python reproduce.py) → 344",
        # the line the edit wrote, not only the file (the fix itself was lost)
        "edit(return int(round(value.total_seconds() / base_unit.total_se…) → ok, "
        "/testbed/src/marshmallow/fields.py",
        "bash(python reproduce.py) → 345",
        "bash(ls -F) → ok",  # a command's output names no file it changed
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_bound_holds_and_no_look_up_is_kept_before_a_state_change(lang: str) -> None:
    messages = _agent_run(lang)
    for bound in range(1, 160):
        body = SUMMARIZER.summarize(messages, previous=None, max_tokens=bound, counter=COUNTER)
        assert COUNTER.text(body) <= bound, bound
        shown = _actions_line(body, ACTIONS_LABELS[lang]) or []
        if any(not a.startswith("book_reservation(") for a in shown):
            assert sum(a.startswith("book_reservation(") for a in shown) == 2
            assert all(("→ ok" in a or a.endswith("元。")) for a in shown if "book" in a), body


def test_the_actions_of_a_previous_summary_are_merged() -> None:
    first = SUMMARIZER.summarize(_agent_run("en"), previous=None, max_tokens=400, counter=COUNTER)
    shown = _actions_line(first, "Actions:")
    assert shown
    call = {"id": "d", "type": "function", "function": {"name": "cancel", "arguments": '"X1"'}}
    later: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "d", "content": "Error: no such reservation"},
    ]
    second = SUMMARIZER.summarize(later, previous=first, max_tokens=400, counter=COUNTER)
    assert _actions_line(second, "Actions:") == [
        *shown,
        'cancel("X1") → Error: no such reservation',
    ]


@pytest.mark.parametrize(
    ("text", "found", "not_found"),
    [
        (
            "Installed pytest-8.3.2 and pluggy-1.5.0.",
            ["pytest-8.3.2", "pluggy-1.5.0"],
            ["pytest-8"],
        ),
        (
            "I have 2 eggs and 1 with milk; card 0199 please.",
            ["2 eggs", "0199"],
            ["1 with", "0199 please"],
        ),
        ("It cost $30, then $1,250.50 in all.", ["$30", "$1,250.50"], ["$30,"]),
        # a file name keeps its extension, a version its pre-release (the Gemini CLI
        # session's lead_memor_v2 and SWE-agent's 0rc4 of 3.0.0rc4), an amount in
        # dollars its decimals
        (
            "Compare lead_memor_v2.txt with v3.0.0rc4, 3.0.0rc4 and 1.2.3b1: 3.5 dollars.",
            ["lead_memor_v2.txt", "v3.0.0rc4", "3.0.0rc4", "1.2.3b1", "3.5 dollars"],
            ["lead_memor_v2", "0rc4", "3b1"],
        ),
        # a product's model is one fact, no year; 万 takes the unit after it (the
        # Chinese sample's X-Pro 2026 came out as 2026, 5000 万像素 as 5000 万)
        (
            "最新的旗舰是 X-Pro 2026，后置 5000 万像素三摄；iPhone 15 and MacBook 14.",
            ["X-Pro 2026", "5000 万像素", "iPhone 15", "MacBook 14"],
            ["2026", "5000 万"],
        ),
        # a UUID whose first group is all digits (a Claude Code log's parentUuid)
        (
            '{"parentUuid":"21466058-39d5-4a90-ad67-fdb08ce315a4"}',
            ["21466058-39d5-4a90-ad67-fdb08ce315a4"],
            ["21466058", "39d5-4a90-ad67-fdb08ce315a4"],
        ),
        # a preposition or "more" after a number counts nothing (a new user's summary
        # read "Facts: 2 about; 3 about; ORD-1003; …", crowding out the order ids)
        (
            "I have question 2 about order ORD-1002; I need 3 more, 1 within the hour.",
            ["ORD-1002"],
            ["2 about", "3 more", "1 within"],
        ),
    ],
)
def test_facts_keep_versions_whole_and_skip_a_number_before_a_filler_word(
    text: str, found: list[str], not_found: list[str]
) -> None:
    got = facts(text)
    assert all(f in got for f in found), got
    assert not any(f in got for f in not_found), got


@pytest.mark.parametrize(
    ("text", "found", "not_found"),
    [
        # a package at a version is no e-mail address (it read "node@20.11.5")
        (
            "Installed @types/node@20.11.5 and pytest==8.3.2.",
            ["@types/node@20.11.5", "pytest==8.3.2"],
            ["node@20.11.5"],
        ),
        ("write to bob@example.co.uk today.", ["bob@example.co.uk"], []),
        # a version keeps its pre-release after a hyphen (it read "v2.10.4" and "rc1")
        ("Released v2.10.4-rc1, then 1.0.0-beta.2.", ["v2.10.4-rc1", "1.0.0-beta.2"], ["rc1"]),
        # a path or URL ends before the sentence's full stop
        (
            "Edit /home/u/src/main.py. See https://x.com/a/b. Then ./foo/bar/baz...",
            ["/home/u/src/main.py", "https://x.com/a/b", "./foo/bar/baz"],
            ["/home/u/src/main.py.", "https://x.com/a/b."],
        ),
        # a quantity takes the adjectives before its noun (it read "4 key")
        (
            "Found 4 key files, 3 new and 2 failed checks.",
            ["4 key files", "3 new", "2 failed checks"],
            ["4 key", "3 new and"],
        ),
        # a step's or a part's number and the next word are no quantity
        (
            "Step 1 write the test, Phase 4 proposal, Option 3 offers less.",
            [],
            ["1 write", "4 proposal", "3 offers"],
        ),
    ],
)
def test_facts_keep_packages_versions_and_paths_whole(
    text: str, found: list[str], not_found: list[str]
) -> None:
    got = facts(text)
    assert all(f in got for f in found) and not any(f in got for f in not_found), got


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # a Claude Code report's "Facts: v3; v4; v15.5.2; v19.1.0; 3000; 3001"
        (
            "Next.js upgraded to v15.5.2, React to v19.1.0, Tailwind to v4",
            ["Next.js v15.5.2", "React v19.1.0", "Tailwind v4"],
        ),
        ("Default port (3000) differs from documented port 3001", ["port 3000", "port 3001"]),
        ("Use Node v20.11.1, then see line 1474.", ["Node v20.11.1", "line 1474"]),
        ("Bump to v3.0.0rc4 now.", ["v3.0.0rc4"]),
        # a number a step's word would have given no fact at all (``[]``)
        ("TypeError at line 1474 column 12", ["line 1474"]),
        ("Reopened issue 9876 because tests failed", ["issue 9876"]),
        # no label a word that names nothing gives (``I v2.1.0``, ``Smith v1.2.3``)
        ("I upgraded to v2.1.0; If v1.2.3 fails", ["v2.1.0", "v1.2.3"]),
        ("Error: v1.2.3 not found, we met Smith at v1.3.0", ["v1.2.3", "v1.3.0"]),
        ("write to dev@corp.internal1 now", ["dev@corp.internal1"]),
    ],
)
def test_a_version_or_number_keeps_what_it_is_of(text: str, found: list[str]) -> None:
    assert facts(text) == found


def test_package_pins_in_tool_output_are_no_facts() -> None:
    """A dump of pins (setup.py's extras) would crowd out the paths of tool output."""
    got = facts("extras: flake8==4.0.1, mypy==0.910 in /testbed/setup.py", strict=True)
    assert "/testbed/setup.py" in got and "flake8==4.0.1" not in got, got


def test_error_lines_skip_code_that_only_names_an_error() -> None:
    view = (
        "36:        raise RuntimeError(msg)\n"
        "37:    except ValueError:\n"
        "src/app.py:12:class ParseError(Exception):\n"
        "+    raise KeyError(k)\n"
        "25:    Raises RuntimeError if not found.\n"
        "    85→- `error`: Error messages\n"
        "Traceback (most recent call last):\n"
        "ValueError: invalid literal for int()\n"
    )
    assert error_lines(view) == [
        "Traceback (most recent call last):",
        "ValueError: invalid literal for int()",
    ]
    assert error_lines("src/app.py:12: error: Incompatible types") == [
        "src/app.py:12: error: Incompatible types"
    ]
    # Code shown in a tool's output that throws or builds an error (Codex, reading a test).
    assert error_lines("if (attempts < 3) throw new Error('fail');") == []
    assert error_lines("  .mockRejectedValueOnce(new Error());") == []
    # A document's heading or a tree's entry (Claude Code's Task report of a codebase).
    assert error_lines("### Error Handling\n├── AgentNotFoundError\n│   └── KeyError") == []
    assert error_lines("**NpmError Codes**:\n  error: {\n") == []


@pytest.mark.parametrize(
    ("text", "found", "not_found"),
    [
        ("It has 49,000 lines of TypeScript.", ["49,000 lines"], ["000 lines"]),
        ("Read the Phase 4.1 section, then 10 scenarios.", ["10 scenarios"], ["4.1 section"]),
        ("It weighs 2.5 kg and takes 1.5 hours.", ["2.5 kg", "1.5 hours"], []),
        ("It has 1 non-free bag.", [], ["1 non"]),
    ],
)
def test_a_number_is_read_whole_and_a_decimal_before_a_word_is_no_quantity(
    text: str, found: list[str], not_found: list[str]
) -> None:
    got = facts(text)
    assert all(f in got for f in found) and not any(f in got for f in not_found), got


def _run(calls: list[tuple[str, dict[str, Any]]], answer: str = "") -> str:
    """The summary of an agent run making ``calls`` (each answered ``done``)."""
    return _ran([(name, arguments, "done") for name, arguments in calls], answer, 400)


def test_an_action_shows_the_command_run_not_the_numbers_of_what_was_written() -> None:
    body = _run(
        [
            ("Write", {"file_path": "/r/notes.md", "content": "# Notes\n2000 lines, 15 files\n"}),
            ("exec_command", {"cmd": "rg -n compact src", "workdir": "/r", "yield_time_ms": 1000}),
            (
                "exec_command",
                {"cmd": "git status --short", "workdir": "/r", "max_output_tokens": 12000},
            ),
        ]
    )
    assert "Write(/r/notes.md) → done" in body, body
    # the working directory both share is said once, on the newest
    assert "exec_command(rg -n compact src) → done" in body, body
    assert "exec_command(git status --short, /r) → done" in body, body
    assert "2000" not in body and "12000" not in body and "as the next" not in body, body


def test_a_field_label_is_no_fact() -> None:
    answer = "Here it is:\n- Flight Number: HAT136\n- Travel Class: economy, from New York"
    body = _run([("Read", {"file_path": "/r/a.py"})], answer)
    line = next(line for line in body.splitlines() if line.startswith("Facts:"))
    assert "HAT136" in line and "Flight Number" not in line and "Travel Class" not in line, body


def test_assistant_notes_are_statements_not_code_json_or_headings() -> None:
    answer = (
        "I found 3 failing tests in tests/test_a.py.\n"
        "## Phase 4.1 Design\n"
        '"sessionId": "20260107-abc123",\n'
        "```ts\nconst retries = 3; // at most 3 tries\n```\n"
    )
    body = _run([("Read", {"file_path": "/r/a.py"})], answer + "Done.")
    notes = body.partition("Assistant notes:")[2]
    assert "3 failing tests" in notes, body
    assert "Phase 4.1" not in notes and "sessionId" not in notes and "retries" not in notes, body


def test_assistant_notes_keep_what_cannot_be_done() -> None:
    """A limit the agent stated is what the next turn must keep to, digits or not."""
    messages = [
        {"role": "user", "content": "Please change my flight to a nonstop one."},
        {
            "role": "assistant",
            "content": "Unfortunately, basic economy flights cannot be modified. Anything else?",
        },
        {"role": "user", "content": "Then cancel it."},
        {"role": "assistant", "content": "我们无法退还经济舱机票的费用。"},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=300, counter=COUNTER)
    notes = body.partition("Assistant notes:")[2]
    assert "basic economy flights cannot be modified" in notes, body
    assert "我们无法退还经济舱机票的费用" in notes and "Anything else" not in notes, body


def test_an_error_named_as_a_topic_is_no_error_line() -> None:
    """A report's "Error handling" or "error messages" names a topic; "Error handling
    failed: TypeError" still reports one."""
    assert error_lines("5. **errors.ts** - Error handling (merged error-context.ts)") == []
    assert error_lines("Error messages are shown in the status bar.") == []
    assert error_lines("- Custom error classes (`CodeMieError`, `NpmError`)") == []
    failed = "Error handling failed: TypeError: x is undefined"
    assert error_lines(failed) == [failed]
    assert error_lines("error: cannot open file") == ["error: cannot open file"]


def test_a_summary_names_the_tool_whose_result_reported_an_error() -> None:
    call = {
        "id": "b1",
        "type": "function",
        "function": {"name": "book_reservation", "arguments": "{}"},
    }
    messages = [
        {"role": "user", "content": "Book the flight."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "b1", "content": "Error: payment amount does not add up"},
        {"role": "function", "name": "pay", "content": "Error: card declined"},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=200, counter=COUNTER)
    # The call's error is its outcome on the actions line (said once, not again below);
    # a result with no call of its own is an error line under its name.
    assert "Actions: book_reservation() → Error: payment amount does not add up" in body
    assert body.count("payment amount does not add up") == 1
    assert "- pay: Error: card declined" in body
    flagged = {"role": "tool", "tool_call_id": "b1", "is_error": True, "content": "No such file\nx"}
    body = SUMMARIZER.summarize(
        [*messages[:2], flagged], previous=None, max_tokens=200, counter=COUNTER
    )
    assert "book_reservation() → No such file" in body  # flagged failed, in its own words


def test_error_lines_read_claude_codes_tool_use_errors_with_what_follows_a_colon() -> None:
    failed = (
        "<tool_use_error>InputValidationError: Task failed due to the following issue:\n"
        "The required parameter `prompt` is missing</tool_use_error>"
    )
    assert error_lines(failed) == [
        "InputValidationError: Task failed due to the following issue: "
        "The required parameter `prompt` is missing"
    ]
    unread = "<tool_use_error>File has not been read yet. Read it first.</tool_use_error>"
    assert error_lines(unread) == ["File has not been read yet. Read it first."]
    assert error_lines("Build failed with error:\nValueError: bad input\n") == [
        "Build failed with error:",
        "ValueError: bad input",
    ]  # the next line is an error of its own, listed once


def test_a_summary_after_a_measure_of_the_same_messages_is_the_same() -> None:
    """:meth:`Extractive.summarize` reuses the ranking :meth:`Extractive.measure` just
    found for equal messages; its body is what a fresh summarizer writes."""
    messages = [
        {"role": "user", "content": "Book flight HAT136 on 2024-05-20 for user mia_li_3668."},
        {"role": "assistant", "content": "Booked: reservation JG7FMM, total $480."},
    ]
    fresh = Extractive().summarize(messages, previous=None, max_tokens=30, counter=COUNTER)
    assert SUMMARIZER.measure(messages, previous=None, counter=COUNTER) > 30
    copies = [dict(m) for m in messages]
    assert SUMMARIZER.summarize(copies, previous=None, max_tokens=30, counter=COUNTER) == fresh
    other = [*messages, {"role": "user", "content": "And seat 12A?"}]
    assert "12A" in SUMMARIZER.summarize(other, previous=None, max_tokens=200, counter=COUNTER)


def test_a_bounded_measure_stops_past_its_bound_and_a_summary_reads_on() -> None:
    """With a bound, :meth:`Extractive.measure` stops at the first item past it (the
    count returned is more than the bound, no more than the whole); a summary of the
    same messages with more room than that reads the rest of the ranking."""
    messages = [
        {"role": "user", "content": "Book flight HAT136 on 2024-05-20 for user mia_li_3668."},
        {"role": "assistant", "content": "Booked: reservation JG7FMM, total $480."},
        {"role": "user", "content": "Also add 2 bags and seat 12A; my card is card_7447."},
        {"role": "assistant", "content": "Added bags to JG7FMM for $50 on card_7447, seat 12A."},
    ]
    # before any measure of them: the ranking a measure keeps is the thread's
    fresh = SUMMARIZER.summarize(messages, previous=None, max_tokens=1000, counter=COUNTER)
    whole = SUMMARIZER.measure(messages, previous=None, counter=COUNTER)
    bounded = SUMMARIZER.measure(messages, previous=None, counter=COUNTER, bound=10)
    assert 10 < bounded < whole < 1000
    read_on = SUMMARIZER.summarize(messages, previous=None, max_tokens=1000, counter=COUNTER)
    assert read_on == fresh and "12A" in fresh and "JG7FMM" in fresh


def test_a_sentence_every_request_repeats_is_said_once() -> None:
    tic = "You are the most lenient agent I have ever spoken to."
    messages = [
        {"role": "user", "content": f"Cancel reservation NQNU5R. {tic}"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": f"Also change M20IZO to a nonstop flight. {tic}"},
        {"role": "assistant", "content": "There is none."},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=300, counter=COUNTER)
    assert body.count(tic) == 1 and "M20IZO" in body, body


def _ran(steps: list[tuple[str, dict[str, Any], str]], answer: str = "", bound: int = 600) -> str:
    """The summary (within ``bound`` tokens) of an agent run making each call of
    ``steps`` with its result, then giving ``answer``."""
    import json

    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for n, (name, arguments, result) in enumerate(steps):
        call = {"id": f"c{n}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps(arguments)}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
    messages.append({"role": "assistant", "content": answer})
    return SUMMARIZER.summarize(messages, previous=None, max_tokens=bound, counter=COUNTER)


def _codex(chunk: str, status: str, output: str) -> str:
    """A Codex CLI exec tool's output, its head lines as Codex writes them."""
    return (
        f"Chunk ID: {chunk}\nWall time: 1.0037 seconds\n{status}\n"
        f"Original token count: 12\nOutput:\n{output}"
    )


def test_codex_polls_give_their_command_its_outcome_and_chunk_ids_are_no_facts() -> None:
    """A Codex session's exec_command mostly answers "running" and a write_stdin
    poll of its session gives the output: the summary listed each command "→ ok",
    one "write_stdin(as the next, but session_id 20936 | 78859 | …) ×28 → ok",
    a failing test run's error under a poll, a failed write_stdin as "ok", and the
    chunk ids of every output ("a21e41; ebd87a; …") as facts."""
    running = "Process running with session ID 20936"
    failing = (
        "FAIL src/a.test.ts\nAssertionError: expected undefined to equal 90\n"
        "TypeError: config.compaction is undefined\n"
    )
    body = _ran(
        [
            ("exec_command", {"cmd": "npm test"}, _codex("a21e41", running, "")),
            ("write_stdin", {"session_id": 20936, "chars": ""}, _codex("ebd87a", running, "")),
            (
                "write_stdin",
                {"session_id": 20936, "chars": ""},
                _codex("c9c6a1", "Process exited with code 1", failing),
            ),
            (
                "write_stdin",
                {"session_id": 20936, "chars": "\u0003"},
                "write_stdin failed: stdin is closed",
            ),
            (
                "exec_command",
                {"cmd": "rg -n compact src"},
                _codex("29c337", "Process exited with code 1", ""),
            ),
            (
                "exec_command",
                {"cmd": "make lint"},
                _codex("3f0e1d", "Process exited with code 1", ""),
            ),
            (
                "exec_command",
                {"cmd": "git diff"},
                _codex("6b22f4", running.replace("20936", "83395"), ""),
            ),
        ]
    )
    actions = next(line for line in body.splitlines() if line.startswith("Actions:"))
    assert "exec_command(npm test) → AssertionError: expected undefined to equal 90" in actions
    assert "write_stdin(20936, ^C) → write_stdin failed: stdin is closed" in actions, body
    # grep(1) and rg exit 1 when they select nothing: no failure
    assert "exec_command(rg -n compact src) → no match" in actions, body
    assert "exec_command(make lint) → exit 1" in actions, body
    assert "exec_command(git diff) → running, session 83395" in actions, body
    assert actions.count("write_stdin(") == 1, body  # the polls are their command's
    assert "- exec_command: TypeError: config.compaction is undefined" in body, body
    for chunk in ("a21e41", "ebd87a", "c9c6a1", "29c337", "3f0e1d", "6b22f4"):
        assert chunk not in body, body


def test_the_output_of_a_process_that_exited_with_code_0_holds_no_error() -> None:
    """Codex's ``sed -n`` of a test file that prints ``error: vi.fn(),`` came out
    "exec_command(sed -n …) → error: vi.fn(),", and ``strings`` of a binary as a line
    of its code: a model continuing reads them as failed commands. The process said
    it exited with code 0; with code 1 the same line is the error."""
    printed = "const mocks = {\n  warn: vi.fn(),\n  error: vi.fn(),\n};\n" * 4
    ran = [
        (
            "exec_command",
            {"cmd": "sed -n 1,20p a.test.ts"},
            _codex("a1", "Process exited with code 0", printed),
        ),
        (
            "exec_command",
            {"cmd": "node check.js"},
            _codex("b2", "Process exited with code 1", printed),
        ),
    ]
    body = _ran(ran)
    assert "exec_command(sed -n 1,20p a.test.ts) → ok" in body, body
    assert "exec_command(node check.js) → error: vi.fn()," in body, body
    assert body.count("vi.fn()") == 1, body  # no error line of the first under Errors


def test_a_plan_says_each_step_with_its_status() -> None:
    """Codex's update_plan came out "update_plan(in_progress, 90, Run focused
    verification (each status pending))": the steps' texts gone, the statuses
    scrambled. Claude Code's TodoWrite alike, with its activeForm twice."""
    plan = [
        {"step": "Add failing tests for the 90% threshold", "status": "completed"},
        {"step": "Run focused verification", "status": "in_progress"},
    ]
    todos = [{"content": "Analyze the project", "status": "pending", "activeForm": "Analyzing"}]
    body = _ran(
        [("update_plan", {"plan": plan}, "Plan updated"), ("TodoWrite", {"todos": todos}, "ok")]
    )
    assert (
        "update_plan(Add failing tests for the 90% threshold [completed], "
        "Run focused verification [in_progress]) → Plan updated"
    ) in body, body
    assert "TodoWrite(Analyze the project [pending])" in body and "Analyzing" not in body, body


def test_calls_alike_are_not_merged_across_a_state_change_so_the_order_holds() -> None:
    """A file read, written, then read again came out "read_file(a.py | b.py) ×2 →
    ok; write_file(b.py) → ok": the check after the write was lost. Look-ups alike
    with nothing changed between them are still one item."""
    body = _ran(
        [
            ("read_file", {"path": "a.py"}, "x = 1\n" * 30),
            ("write_file", {"path": "b.py", "content": "y = 2\nz = 3\n"}, "written"),
            ("read_file", {"path": "b.py"}, "y = 2\n" * 30),
            ("get_order", {"order_id": "A1234"}, "ok"),
            ("get_order", {"order_id": "B5678"}, "ok"),
        ]
    )
    actions = next(line for line in body.splitlines() if line.startswith("Actions:"))
    assert "read_file(a.py) → ok; write_file(b.py) → written; read_file(b.py) → ok" in actions
    assert "get_order(A1234 | B5678) ×2 → ok" in actions, body


def test_a_state_change_is_never_cut_before_a_look_up_of_what_the_user_named() -> None:
    """tau 26-0 at 1500 tokens: the summary showed the later look-up of M20IZO, which
    the user named, and not the cancellation of NQNU5R before it."""
    import json

    reservation = {"reservation_id": "M20IZO", "origin": "JFK", "destination": "MCO"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Please cancel NQNU5R, then tell me about M20IZO."}
    ]
    steps = [
        ("cancel_reservation", {"reservation_id": "NQNU5R"}, '{"status": "cancelled"}'),
        ("get_reservation_details", {"reservation_id": "M20IZO"}, json.dumps(reservation)),
    ]
    for n, (name, arguments, result) in enumerate(steps):
        call = {"id": f"c{n}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps(arguments)}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
    for bound in range(10, 120):
        body = SUMMARIZER.summarize(messages, previous=None, max_tokens=bound, counter=COUNTER)
        if "Actions:" in body:
            assert "cancel_reservation(NQNU5R)" in body, body
            break
    else:
        raise AssertionError("no action at any bound")


def test_a_list_of_objects_without_ids_is_one_record() -> None:
    """tau 2-0: one passenger line a passenger, each said once over all the records,
    so JG7FMM showed Fatima Patel alone: Omar Davis, its other passenger, was said
    under 2FBBAH. A reservation's passengers are one line now, whole."""
    from ctxcli.summarizers.records import records

    passengers = [
        {"first_name": "Omar", "last_name": "Davis", "dob": "1982-10-19"},
        {"first_name": "Fatima", "last_name": "Patel", "dob": "1950-05-04"},
    ]
    found = records({"reservation_id": "JG7FMM", "passengers": passengers}, "result")
    assert "passengers: Omar Davis 1982-10-19, Fatima Patel 1950-05-04" in found, found
    alone = records({"reservation_id": "2FBBAH", "passengers": passengers[:1]}, "result")
    assert "passengers: Omar Davis 1982-10-19" in alone, alone  # one reads as two do


def test_records_alike_but_for_their_id_are_each_said() -> None:
    """Two certificates of the same amount: the second, ``certificate_2765295: amount
    250``, was left out as if the first's line had said it, and the user's question
    was the total of their balances."""
    import json

    methods = {
        "certificate_9984806": {
            "source": "certificate",
            "amount": 250,
            "id": "certificate_9984806",
        },
        "certificate_2765295": {
            "source": "certificate",
            "amount": 250,
            "id": "certificate_2765295",
        },
    }
    user = {"name": {"first_name": "Mohamed", "last_name": "Silva"}, "payment_methods": methods}
    body = _ran([("get_user_details", {"user_id": "mohamed_silva_9265"}, json.dumps(user))])
    assert "certificate_9984806" in body and "certificate_2765295" in body, body


def test_folded_project_instructions_leave_a_trace() -> None:
    """Codex CLI puts a repository's AGENTS.md in a user message before the task;
    folded, it left nothing in the summary, so a model continuing never learnt the
    project had instructions to keep to, nor what they say."""
    messages = [
        {
            "role": "user",
            "content": "# AGENTS.md instructions for /work/repo\n\n<INSTRUCTIONS>\n"
            "Run npm test before every commit.\n</INSTRUCTIONS>",
        },
        {"role": "user", "content": "Set the default compaction threshold to 90."},
        {"role": "assistant", "content": "Done: the threshold is 90 now."},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=200, counter=COUNTER)
    assert body.startswith("User requests:\n- Set the default compaction threshold"), body
    # the harness's, not the user's: a section of their own (they read as a request)
    assert (
        "\nProject instructions:\n- AGENTS.md instructions for /work/repo: Run npm test "
        "before every commit.\n" in body
    ), body
    assert parse_summary(body)["instructions"] == [
        "AGENTS.md instructions for /work/repo: Run npm test before every commit."
    ]


def test_project_instructions_examples_are_no_rule() -> None:
    """Codex's AGENTS.md gave "Who calls it: `trace_path(function_name="OrderHandler",
    direction="inbound")`" as its instructions: a line of its Examples section."""
    instructions = (
        "# AGENTS.md instructions for /work/repo\n\n<INSTRUCTIONS>\n# Graph\n"
        "ALWAYS prefer MCP graph tools over grep for code discovery.\n\n## Examples\n"
        '- Who calls it: `trace_path(function_name="OrderHandler", direction="inbound")`\n'
        '- Read source: `get_code_snippet(qualified_name="pkg/orders.OrderHandler")`\n'
        "</INSTRUCTIONS>"
    )
    messages = [
        {"role": "user", "content": instructions},
        {"role": "user", "content": "Set the default compaction threshold to 90."},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=300, counter=COUNTER)
    assert "ALWAYS prefer MCP graph tools over grep" in body, body
    assert "OrderHandler" not in body, body


def test_a_refused_call_says_so_and_an_interruption_is_no_request() -> None:
    """Claude Code answers a call the user refused with a paragraph the summary gave
    as the outcome and again under Errors, and marks the turn the user stopped with
    "[Request interrupted by user for tool use]", which came out as a user request."""
    refusal = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected "
        "(eg. if it was a file edit, the new_string was NOT written to the file). STOP "
        "what you are doing and wait for the user to tell you how to proceed."
    )
    call = {"id": "w1", "type": "function"}
    call["function"] = {
        "name": "Write",
        "arguments": '{"file_path": "/r/tools.md", "content": "a\\nb"}',
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Show the tools and store them in a file."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "w1", "content": refusal, "is_error": True},
        {"role": "user", "content": "[Request interrupted by user for tool use]"},
        {"role": "user", "content": "Explore the repository instead."},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=400, counter=COUNTER)
    assert "Write(/r/tools.md) → rejected by the user" in body, body
    assert "interrupted" not in body and "Errors:" not in body and "STOP" not in body, body
    assert "Explore the repository instead." in body, body


def test_a_note_keeps_what_the_agent_concluded_not_what_it_plans() -> None:
    """The bundled agent run at an eighth of its tokens had no notes: the agent's
    diagnosis ("`invoice_total` converts the Decimal total to float, which can drop
    a cent.") holds no digit, and a sentence that opened with a backtick read as code."""
    answer = (
        "`invoice_total` converts the Decimal total to float, which can drop a cent. "
        "Let me run the tests and find every caller before changing the return type. "
        "We can use the `ls -F` command to list the files."
    )
    body = _run([("read_file", {"path": "billing/invoice.py"})], answer)
    notes = body.partition("Assistant notes:")[2]
    assert "`invoice_total` converts the Decimal total to float, which can drop a cent." in notes
    assert "Let me run" not in notes and "ls -F" not in notes, body


def test_a_limit_note_says_which_thing_it_is_of() -> None:
    """tau-bench run 26-0 kept "Unfortunately, it cannot be canceled for a refund": a
    model continuing could not tell which of the two reservations "it" was."""
    answer = (
        "1. **Reservation IFOYYZ**: This is a basic economy ticket booked 3 days ago. "
        "Unfortunately, it cannot be canceled for a refund.\n\n"
        "2. Basic economy tickets booked via LX1234 cannot be changed."
    )
    body = _run([("get_reservation_details", {"reservation_id": "IFOYYZ"})], answer)
    notes = body.partition("Assistant notes:")[2]
    assert "IFOYYZ: Unfortunately, it cannot be canceled for a refund." in notes, body
    # a limit that names an id of its own keeps to it
    assert "- Basic economy tickets booked via LX1234 cannot be changed." in notes, body
    # tau-bench 49-2 read "EHGLP3: … your current reservation (MDCLVA)"
    said = ["Reservation EHGLP3 has insurance.", "I cannot cancel your reservation (MDCLVA)."]
    assert _notes(said)[-1] == said[-1]


def test_the_sentences_before_limits_are_read_for_ids_once(monkeypatch: Any) -> None:
    """Reading back from each limit for the id it is of made an answer of 2,000 limits
    take 30 s (a breaker's input; 1.2 s before): each sentence is read once."""
    from ctxcli.summarizers import extractive

    said = ["Reservation EHGLP3 has insurance."] + ["It cannot be modified, sorry."] * 200
    reads: list[str] = []
    subject_ids = extractive._subject_ids
    monkeypatch.setattr(extractive, "_subject_ids", lambda s: reads.append(s) or subject_ids(s))
    assert _notes(said)[1:] == ["EHGLP3: It cannot be modified, sorry."] * 200
    assert len(reads) <= 2 * len(said)


@pytest.mark.parametrize(
    ("path", "answer", "kept", "plans"),
    [
        # The Gemini CLI session kept "I'm now examining … lead_memor_v2.txt" as a note:
        # the file name's digit made it read as a statement.
        (
            "lead_memor_v2.txt",
            "I'm now examining the `lead.txt` and `lead_memor_v2.txt` files. "
            "I've been comparing lead_v1.txt with the others. "
            "lead_memor_v2.txt gives the clearest workflow because it has 4 numbered steps.",
            "gives the clearest workflow",
            ["examining", "comparing"],
        ),
        # SWE-agent's notes on the marshmallow run were "Let's open the `fields.py` file
        # and navigate to line 1474 …", and Codex's "Using superpowers:brainstorming
        # briefly because …": plans, kept for a number or a "because".
        (
            "src/marshmallow/fields.py",
            "Let's open the `fields.py` file and navigate to line 1474 to see the code. "
            "Now let's run reproduce.py once more to check 345. "
            "Using `superpowers:brainstorming` briefly because this changes 2 settings. "
            "The output changed from 344 to 345 because round() now rounds to the nearest int.",
            "changed from 344 to 345",
            ["navigate", "once more", "brainstorming"],
        ),
    ],
)
def test_a_note_is_not_what_the_agent_says_it_is_doing_or_will_do(
    path: str, answer: str, kept: str, plans: list[str]
) -> None:
    body = _run([("read_file", {"path": path})], answer)
    notes = body.partition("Assistant notes:")[2]
    assert kept in notes, body
    assert not [plan for plan in plans if plan in notes], body


def test_a_call_whose_arguments_are_all_small_shows_them_by_key() -> None:
    """``circle_area(radius=4)`` read "circle_area() → ok", a call with no arguments
    (a lone small value says nothing, so it was left out)."""
    from ctxcli.summarizers.records import arguments_text

    assert arguments_text('{"radius": 4}') == "radius 4"
    assert arguments_text('{"radius": 4, "unit": "cm"}') == "cm"
    assert arguments_text("{}") == ""


def test_a_calculators_expression_keeps_its_operators() -> None:
    """tau-bench 2-1: ``calculate(1859 140 1679 101 537 …) → 23553.0``, the numbers of
    a sum of price differences with no word of what was summed."""
    from ctxcli.summarizers.records import arguments_text

    expression = "(1859 - 140) * 2 + (1679 - 101) * 2 + (537 - 107) + (996 - 141)"
    assert arguments_text(json.dumps({"expression": expression})).startswith(
        "(1859 - 140) * 2 + (1679 - 101) * 2"
    )


def test_a_call_that_writes_text_to_no_named_file_shows_its_first_line() -> None:
    """SWE-agent's ``insert`` (its text goes into the open file) read "insert() → ok":
    the script it wrote was lost."""
    from ctxcli.summarizers.records import arguments_text, names_target

    text = "\nfrom marshmallow.fields import TimeDelta\nprint(td_field.serialize())\n"
    assert arguments_text(json.dumps({"text": text})) == "from marshmallow.fields import TimeDelta"
    written = {"file_path": "/testbed/reproduce.py", "content": text}
    assert arguments_text(json.dumps(written)) == "/testbed/reproduce.py"
    # the file its result names is still said in its outcome
    assert not names_target(json.dumps({"text": text}))
    assert names_target(json.dumps(written))


def test_a_record_says_a_yes_or_no_and_when_it_was_made_by_their_keys() -> None:
    """tau-bench's reservations came out without ``insurance`` (a yes/no alone says
    nothing, so it was left out: the refund a model may grant depends on it) and
    with ``created_at`` as a bare date beside the flight's (the 24-hour rule)."""
    from ctxcli.summarizers.records import records

    value = {
        "reservation_id": "JG7FMM",
        "insurance": "yes",
        "created_at": "2024-05-15T15:00:00",
        "refundable": False,
        "status": None,
    }
    assert list(records(value, "result")) == [
        "reservation JG7FMM: insurance yes, created_at 2024-05-15T15:00, refundable false"
    ]


def test_a_small_amount_or_count_in_a_call_shows_by_its_key() -> None:
    """ "book_reservation(…, gift_card_6136092, 129, credit_card_2198526)": the 6 paid by
    card was left out as a lone small value, and so were the bags taken."""
    from ctxcli.summarizers.records import arguments_text

    arguments = (
        '{"payment_methods": [{"payment_id": "gift_card_6136092", "amount": 129},'
        ' {"payment_id": "credit_card_2198526", "amount": 6}],'
        ' "total_baggages": 2, "nonfree_baggages": 0}'
    )
    shown = arguments_text(arguments)
    assert shown == "gift_card_6136092, 129, credit_card_2198526, amount 6, total_baggages 2"


def test_a_state_change_made_is_written_whole_not_as_a_later_attempts_variant() -> None:
    """A booking that succeeded read "book_reservation(as the next, but payment_id
    certificate_4856383) → ok, reservation HATHAT", told by a later booking that failed:
    what was booked and paid with was only in the failed call."""
    booking = {
        "user_id": "mia_li_3668",
        "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
        "payment_id": "certificate_4856383",
        "cabin": "economy",
    }
    again = {**booking, "payment_id": "certificate_7504069"}
    body = _ran(
        [
            ("book_reservation", booking, '{"reservation_id": "HATHAT"}'),
            ("book_reservation", again, "Error: payment method certificate_7504069 not found"),
        ]
    )
    assert (
        "book_reservation(mia_li_3668, HAT136, 2024-05-20, certificate_4856383, economy)"
        " → ok, reservation HATHAT"
    ) in body, body


def test_an_email_in_chinese_text_ends_where_its_ascii_ends() -> None:
    """ "参会人员是john.doe@example.com和jane.doe@example.com" gave the fact
    "…john.doe@example.com和jane.doe": ``\\w`` ran on into the CJK word."""
    found = facts("参会人员是john.doe@example.com和jane.doe@example.com。")
    assert found == ["参会人员 john.doe@example.com", "jane.doe@example.com"]


def test_a_field_and_its_value_is_no_note() -> None:
    answer = (
        "Here are the details.\n**Reservation ID**: GV1N64\nDeparture: 07:00 PM EST\n"
        "The refund of $120 goes back to your card."
    )
    body = _run([("get_reservation_details", {"reservation_id": "GV1N64"})], answer)
    notes = body.partition("Assistant notes:")[2]
    assert "The refund of $120 goes back to your card." in notes, body
    assert "Reservation ID" not in notes and "Departure" not in notes, body


def test_a_limit_the_assistant_stated_ranks_with_the_final_state() -> None:
    """ "Since the reservation is in basic economy, it cannot be modified." was a note,
    ranked last, and the first thing a bound dropped: a model went on to modify it."""
    flights = [
        {"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "SFO", "price": 100 + n}
        for n in range(12)
    ]
    import json

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Change my flight on reservation ZFA04Y to May 21."},
    ]
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "search_direct_flight", "arguments": '{"date": "2024-05-21"}'}
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": "c1", "content": json.dumps(flights)})
    messages.append(
        {
            "role": "assistant",
            "content": "Since the reservation is in basic economy, it cannot be modified.",
        }
    )
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=90, counter=COUNTER)
    assert "it cannot be modified" in body, body
    assert "HAT000" in body and "HAT011: " not in body, body  # the bound is not all records


def test_a_subtraction_is_no_range_and_operands_do_not_label_an_amount() -> None:
    """tau-bench summaries read "$833 - $500" (a range?) and "Total 198 129 $327"."""
    import ctxcli.summarizers.extractive as ex

    assert facts("That leaves $833 - $500 = $333 to pay; seats cost $20-$30.") == [
        "$833",
        "$500",
        "$333",
        "$20-$30",
    ]
    assert ex._what_amount("The total: 198 + 129 = $327.", "$327") == "total $327"
    assert ex._what_amount("Use certificate 7504069 for $250.", "$250") == (
        "certificate 7504069 $250"
    )


def test_an_amount_that_is_a_bound_keeps_its_bound() -> None:
    """tau-bench summaries read "certificate $100" for "if the remaining balance on
    the certificate is more than $100" (the user's limit, no certificate's value)
    and "additional cost $1,000" for "brings the additional cost under $1,000" (a
    budget, no cost)."""
    import ctxcli.summarizers.extractive as ex

    limit = "If the remaining balance on the certificate after the booking is more than $100"
    assert ex._what_amount(limit, "$100") == "certificate more than $100"
    budget = "That brings the additional cost under $1,000."
    assert ex._what_amount(budget, "$1,000") == "additional cost under $1,000"
    assert ex._what_amount("It is not more than $100.", "$100") == "not more than $100"
    assert ex._what_amount("The total cost is $305.", "$305") == "total cost $305"  # no bound


def test_an_operand_or_an_aside_does_not_label_an_amount() -> None:
    """tau-bench run 9-2 read ``certificate $333; certificate $583; Total $198; Total
    $129``: what was left to pay after a certificate, and two gift cards' balances."""
    import ctxcli.summarizers.extractive as ex

    sum_line = "- **Gift Card Total**: $198 + $129 = $327"
    assert ex._what_amount(sum_line, "$198") == "$198"
    assert ex._what_amount(sum_line, "$129") == "$129"
    assert ex._what_amount(sum_line, "$327") == "Total $327"  # the sum's own
    difference = "- **Reservation 1**: $833 - $500 (certificate) = $333"
    assert ex._what_amount(difference, "$333") == "$333"
    assert ex._what_amount("Seats cost $20-$30.", "$20") == "cost $20"  # a range's end


def test_a_search_is_the_last_stage_of_its_command() -> None:
    """Exit status 1 is "no match" only where a search's status is the command's."""
    from ctxcli.summarizers.records import no_match

    assert no_match('{"cmd": "rg --files node_modules | rg opencode"}')
    assert no_match('{"command": ["bash", "-lc", "git grep -n compact"]}')
    assert not no_match('{"cmd": "rg -n compact src | head -5"}')
    assert not no_match('{"cmd": "make lint"}') and not no_match("not json")


def test_a_state_change_made_outranks_later_attempts_that_failed() -> None:
    """tau-bench run 8-1 at 1500 tokens kept a failed booking, cut, and lost the
    cancellation made before it: a booking refused three times changed nothing."""
    error = "Error: payment amount does not add up, total price is 4875, but paid 1625"
    booking = {"user_id": "mohamed_silva_9265", "origin": "JFK", "destination": "SFO"}
    steps = [("cancel_reservation", {"reservation_id": "K1NW8N"}, '{"status": "cancelled"}')]
    steps += [
        ("book_reservation", {**booking, "flights": [f"HAT{n:03}"] * 4, "amount": 1625}, error)
        for n in (23, 24, 25)
    ]
    for bound in (30, 60, 400):
        body = _ran(steps, bound=bound)
        assert "cancel_reservation(K1NW8N) → cancelled" in body, (bound, body)
    assert "book_reservation(" in body and "4875" in body, body  # with room, the attempts too


def test_an_older_plan_update_says_only_the_steps_it_moved() -> None:
    """Claude Code's TodoWrite wrote the whole to-do list at each update: the summary
    of one session spent most of its room on four copies of the same four steps."""

    def todos(*statuses: str) -> dict[str, Any]:
        steps = ("Discover commands", "Analyze structure", "Update CLAUDE.md")
        return {"todos": [{"content": c, "status": s} for c, s in zip(steps, statuses)]}

    body = _run(
        [
            ("TodoWrite", todos("pending", "pending", "pending")),
            ("TodoWrite", todos("in_progress", "pending", "pending")),
            ("TodoWrite", todos("in_progress", "pending", "pending")),
            ("TodoWrite", todos("completed", "in_progress", "pending")),
            ("TodoWrite", todos("completed", "completed", "completed")),
        ]
    )
    actions = body.partition("Actions: ")[2].partition("\n")[0].split("; ")
    assert actions == [
        "TodoWrite(Discover commands [pending], Analyze structure [pending], "
        "Update CLAUDE.md [pending]) → done",
        "TodoWrite(Discover commands [in_progress]) → done",
        "TodoWrite(no change) → done",
        "TodoWrite(Discover commands [completed], Analyze structure [in_progress]) → done",
        "TodoWrite(Discover commands [completed], Analyze structure [completed], "
        "Update CLAUDE.md [completed]) → done",
    ], body


def test_a_failed_call_ranks_before_the_plan_updates_a_later_one_superseded() -> None:
    """Claude Code session 5c0375b4 at a quarter of its tokens: the summary kept the
    two oldest to-do updates and cut the sub-agent call that failed with
    ``InputValidationError`` (the one thing not to do again). A superseded plan update
    ranks after the calls that failed to change state; the newest is where the run
    stands and stays with the other acts."""

    def todos(*statuses: str) -> dict[str, Any]:
        steps = ("Discover commands", "Analyze structure", "Update CLAUDE.md")
        return {"todos": [{"content": c, "status": s} for c, s in zip(steps, statuses)]}

    error = "InputValidationError: Task failed: The required parameter `prompt` is missing"
    steps = [
        ("TodoWrite", todos("pending", "pending", "pending"), "ok"),
        ("TodoWrite", todos("in_progress", "pending", "pending"), "ok"),
        ("Task", {"description": "Analyze structure"}, f"<tool_use_error>{error}</tool_use_error>"),
        ("TodoWrite", todos("completed", "completed", "completed"), "ok"),
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Update CLAUDE.md."}]
    for n, (name, arguments, result) in enumerate(steps):
        call = {"id": f"c{n}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps(arguments)}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
    messages[6]["is_error"] = True  # as the Claude Code reader marks a failed result

    def summary(bound: int) -> str:
        return SUMMARIZER.summarize(messages, previous=None, max_tokens=bound, counter=COUNTER)

    newest = "Update CLAUDE.md [completed]) → ok"
    whole = summary(400)
    assert "[pending]" in whole and error in whole and newest in whole, whole
    failed = f"Task(Analyze structure) → {error}"
    latest = whole.rpartition("; ")[2]
    # (items are costed one by one, so the parts may count a token or two more)
    body = summary(
        COUNTER.text(f"User requests:\n- Update CLAUDE.md.\nActions: {failed}; {latest}") + 3
    )
    assert failed in body and latest in body and "[pending]" not in body, body


def test_a_sub_agents_report_is_read_as_an_answer() -> None:
    """Claude Code's Task results (a sub-agent's findings: "Next.js: 15.5.2 (upgraded
    from documented v14)") came out as "Task(…) → ok" with only "v14; v3" as facts."""
    report = (
        "## Package.json Analysis Summary\n\n**Current Tech Stack Versions:**\n"
        "- Next.js: 15.5.2 (upgraded from documented v14)\n- React: 19.1.0\n\n"
        "Tailwind CSS v4 comes with PostCSS integration."
    )
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Update CLAUDE.md."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "Task", "arguments": '{"description": "Check"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": report},
        {"role": "assistant", "content": "Done."},
    ]
    body = SUMMARIZER.summarize(messages, previous=None, max_tokens=400, counter=COUNTER)
    notes = body.partition("Assistant notes:")[2]
    assert "Next.js: 15.5.2 (upgraded from documented v14)" in notes, body
    facts = body.partition("Facts: ")[2].partition("\n")[0].split("; ")
    assert "Post" not in facts and "Next" not in facts, body  # the heads of PostCSS, Next.js


def test_a_relative_import_in_shown_code_is_no_fact() -> None:
    """A Codex session's facts listed ``../../core/types.js; ./paths.js; …``: the
    imports of a TypeScript file it printed with ``sed``, no file it touched."""
    from ctxcli.summarizers.extractive import _facts

    shown = (
        "import { a } from '../../core/types.js';\n"
        'const p = require("./paths.js");\n'
        "See src/agents/plugins/opencode/index.ts and ./docs/guide.md"
    )
    assert _facts(shown, strict=True) == ["src/agents/plugins/opencode/index.ts", "./docs/guide.md"]


def test_a_search_says_where_it_found_lines_and_a_list_which_files() -> None:
    """The Codex session's searches all read "exec_command(rg -n …) → ok": a model
    continuing could not tell a search that found the code from one that did not."""
    found = "src/a.ts:12:  compact(x)\nsrc/a.ts:40: compact(y)\nsrc/b/c.py:3: compact\n"
    body = _ran(
        [
            ("exec_command", {"cmd": "rg -n compact src"}, found),
            ("exec_command", {"cmd": "rg --files src"}, "src/a.ts\nsrc/b/c.py\n"),
            ("find_file", {"file_name": "fields.py"}, "Found 1 matches in /src:\n/src/fields.py"),
            ("exec_command", {"cmd": "sed -n 1,3p src/a.ts"}, "const a = 1;\nexport a;\n"),
        ]
    )
    assert "exec_command(rg -n compact src) → 3 lines in 2 files: src/a.ts, src/b/c.py" in body
    assert "exec_command(rg --files src) → 2 files: src/a.ts, src/b/c.py" in body, body
    assert "find_file(fields.py) → /src/fields.py" in body, body
    assert "exec_command(sed -n 1,3p src/a.ts) → ok" in body, body  # a file's text
    from ctxcli.summarizers.records import hits

    assert hits("833.0") == ""  # a number (tau-bench's calculate), no path
    listing = "Directory listing for /u/assistants:\n[DIR] .vscode\nlead_v2.txt\nlead.txt"
    assert hits(listing) == "3 files: .vscode/, lead_v2.txt, lead.txt"  # Gemini CLI's


def test_a_long_command_keeps_the_names_of_the_files_it_reads() -> None:
    """The Codex session's commands were cut mid-path at 60 characters: ``sed -n
    '1,220p' /Users/Sample_User/.codex/plugins/cache/ope…`` named no file."""
    from ctxcli.summarizers.records import arguments_text

    cmd = (
        "sed -n '1,220p' /Users/Sample_User/.codex/plugins/cache/openai-curated/"
        "superpowers/skills/brainstorming/SKILL.md"
    )
    assert arguments_text(json.dumps({"cmd": cmd})) == "sed -n '1,220p' /Users/…/SKILL.md"
    short = "cat src/a/b.py"  # short enough: as it is
    assert arguments_text(json.dumps({"cmd": short})) == short


def _texts_of(value: Any) -> list[str]:
    """Every string in a parsed JSON ``value``, and each JSON object's text."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [json.dumps(value)] + [t for v in value.values() for t in _texts_of(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts_of(v)]
    return []


def test_a_later_tiers_pass_skips_only_messages_that_cannot_give_it(data: Path) -> None:
    """A later tier's pass reads only the kinds of message whose reader can give it
    (``_LATER_TIERS``): every text of the real data and the samples, read as each kind,
    gives only the tiers its kind is listed with (a result's facts of REST become
    CHANGED under a call that changes state, which REST stands for)."""
    from ctxcli.summarizers.extractive import _LATER, _LATER_TIERS, _lazy_of

    assert set(_LATER) == set(_LATER_TIERS)
    texts: set[str] = set()
    sources = [*data.rglob("*.json*"), *data.rglob("*.traj"), *Path("samples").glob("*.jsonl")]
    for path in sources:
        raw = path.read_text()
        values = [json.loads(raw)] if path.suffix in (".json", ".traj") else []
        values += [json.loads(line) for line in raw.splitlines() if path.suffix == ".jsonl"]
        texts.update(t for v in values for t in _texts_of(v) if 0 < len(t) < 4_000)
    some = sorted(texts)[:: max(1, len(texts) // 2_500)]  # a spread, in a few seconds
    assert len(some) > 2_000
    for kind, tiers in _LATER_TIERS.items():
        given = {tier for text in some for *_, tier, _ in _lazy_of(text, kind)}
        assert given <= tiers, (kind, given - tiers)
