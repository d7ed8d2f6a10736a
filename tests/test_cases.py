"""The shared cases (../shared/cases): each right result from its .md, as a test.

Counts there follow the cookbook rule, which counts tool calls by function name and
arguments only; ctxcli adds TOOL_CALL_OVERHEAD (3) per call, so a count of a
conversation with tool calls is higher here by 3 per call. No expected result
changes because of it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl

from ctxcli.cli import cli
from ctxcli.model import SUMMARY_MARKER
from ctxcli.tokens import TOOL_CALL_OVERHEAD, TokenCounter


def compress(case: Path, args: str, tmp_path: Path, *, exit_code: int = 0) -> list[dict[str, Any]]:
    """Run ``ctxcli compress`` on one case file and return its output records, after
    checking every invariant on each of them."""
    out = tmp_path / f"{case.stem}.out.jsonl"
    result = CliRunner().invoke(
        cli, ["compress", str(case), "-o", str(out), "-q", *shlex.split(args)]
    )
    assert result.exit_code == exit_code, result.output
    before, after = read_jsonl(case), read_jsonl(out)
    assert len(before) == len(after)
    stats = json.loads((tmp_path / f"{case.stem}.out.stats.json").read_text())
    over = {item["id"] for item in stats["over_budget"]}
    budget = stats["max_tokens"]
    counter = TokenCounter(stats["encoding"])
    for b, a in zip(before, after):
        assert_valid(b, a, counter, max_tokens=budget, over_budget_ok=a.get("id") in over)
    return after


def contents(record: dict[str, Any]) -> list[Any]:
    return [m.get("content") for m in record["messages"]]


def by_id(records: list[dict[str, Any]], record_id: str) -> dict[str, Any]:
    return next(r for r in records if r["id"] == record_id)


def test_01_window_never_starts_on_a_tool_result(cases: Path, tmp_path: Path) -> None:
    case = cases / "01-orphan-tool-after-window.jsonl"
    out = compress(case, "--stages window --max-tokens 65 --encoding cl100k_base", tmp_path)
    assert contents(by_id(out, "c01a-no-system")) == [
        "I see.",
        "Is there anything else you would like to know?",
        "No, that is all.",
        "Have a good day.",
    ]
    out = compress(case, "--stages window --keep-last 4 --encoding cl100k_base", tmp_path)
    c01b = by_id(out, "c01b-system-at-index-0")
    assert [m["role"] for m in c01b["messages"]] == ["system", "assistant", "user", "assistant"]
    assert contents(c01b)[1:] == [
        "It is overcast and 15 C in Shelbyville.",
        "Thanks.",
        "You are welcome.",
    ]
    assert not any(m["role"] == "tool" for m in c01b["messages"])


def test_02_a_trailing_tool_group_is_kept_whole(cases: Path, tmp_path: Path) -> None:
    case = cases / "02-trailing-tool-results-dropped.jsonl"
    out = compress(case, "--stages window --max-tokens 200 --encoding cl100k_base", tmp_path)
    raw_in = case.read_text().splitlines()
    raw_out = (tmp_path / f"{case.stem}.out.jsonl").read_text().splitlines()
    assert raw_out[0] == raw_in[0]  # under budget: the very bytes
    out = compress(case, "--stages window --max-tokens 100 --encoding cl100k_base", tmp_path)
    c02b = by_id(out, "c02b-over-budget-ends-with-tool")
    assert [m["role"] for m in c02b["messages"]] == ["system", "user", "assistant", "tool"]
    assert c02b["messages"][1]["content"] == "Where is order 4471?"
    assert c02b["messages"][3]["tool_call_id"] == "call_o1"
    counter = TokenCounter("cl100k_base")
    assert counter.messages(c02b["messages"]) == 81 + TOOL_CALL_OVERHEAD


def test_03_parallel_calls_go_whole(cases: Path, tmp_path: Path) -> None:
    case = cases / "03-parallel-tool-calls-partial.jsonl"
    counter = TokenCounter("cl100k_base")
    record = read_jsonl(case)[0]
    assert counter.messages(record["messages"]) == 589 + 2 * TOOL_CALL_OVERHEAD
    out = compress(case, "--stages priority --max-tokens 300 --encoding cl100k_base", tmp_path)
    assert contents(out[0]) == [
        "You are a travel assistant with a weather tool.",
        "Compare the weather in Oslo and Lima today.",
        "Oslo is cold with light snow; Lima is mild and cloudy all day.",
        "And which one should I pack a coat for?",
    ]
    assert counter.messages(out[0]["messages"]) == 64
    out = compress(case, "--stages window --keep-last 4", tmp_path)
    assert contents(out[0]) == [
        "You are a travel assistant with a weather tool.",
        "Oslo is cold with light snow; Lima is mild and cloudy all day.",
        "And which one should I pack a coat for?",
    ]


def test_07_null_and_missing_content_and_legacy_calls(cases: Path, tmp_path: Path) -> None:
    case = cases / "07-content-none-tool-calls.jsonl"
    record = read_jsonl(case)[0]
    counter = TokenCounter("cl100k_base")
    assert counter.messages(record["messages"]) == 114 + TOOL_CALL_OVERHEAD
    out = compress(case, "--stages window --max-tokens 85 --encoding cl100k_base", tmp_path)
    messages = out[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "assistant", "tool", "assistant", "user"]
    assert messages[1]["tool_calls"][0]["id"] == "call_fx"
    assert messages[1] == record["messages"][4]  # a missing content key stays missing
    assert "content" not in messages[1]
    assert messages[-1]["content"] == "Thanks!"
    assert counter.messages(messages) == 73 + TOOL_CALL_OVERHEAD
    # The legacy pair went whole: no function result without its function_call.
    assert not any(m["role"] == "function" for m in messages)


def test_07_legacy_function_pair_is_kept_together(cases: Path, tmp_path: Path) -> None:
    case = cases / "07-content-none-tool-calls.jsonl"
    out = compress(case, "--stages window --max-tokens 110 --encoding cl100k_base", tmp_path)
    roles = [m["role"] for m in out[0]["messages"]]
    assert roles == ["system", "assistant", "function", "assistant", "tool", "assistant", "user"]
    assert out[0]["messages"][1]["content"] is None  # null stays null


@pytest.mark.parametrize(("encoding", "total"), [("cl100k_base", 170), ("o200k_base", 173)])
def test_09_special_token_literals_count_as_text(cases: Path, encoding: str, total: int) -> None:
    record = read_jsonl(cases / "09-special-token-text.jsonl")[0]
    assert TokenCounter(encoding).messages(record["messages"]) == total + TOOL_CALL_OVERHEAD


def test_09_special_token_literals_are_written_back(cases: Path, tmp_path: Path) -> None:
    case = cases / "09-special-token-text.jsonl"
    out = compress(case, "--stages window --max-tokens 120 --encoding cl100k_base", tmp_path)
    messages = out[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "assistant", "tool", "user"]
    assert messages[-1]["content"] == "Thanks. <|endoftext|>"
    original = read_jsonl(case)[0]["messages"]
    assert messages[2] == original[5]
    assert "<|fim_prefix|>" in (tmp_path / f"{case.stem}.out.jsonl").read_text()


def test_10_names_are_counted_and_kept(cases: Path, tmp_path: Path) -> None:
    case = cases / "10-name-field-count.jsonl"
    record = read_jsonl(case)[0]
    counter = TokenCounter("cl100k_base")
    assert counter.messages(record["messages"]) == 148
    out = compress(case, "--stages window --max-tokens 120 --encoding cl100k_base", tmp_path)
    messages = out[0]["messages"]
    assert messages == [record["messages"][0]] + record["messages"][-5:]
    assert contents(out[0])[1] == "Which is more likely?"
    assert counter.messages(messages) == 109


def test_12_a_system_prompt_over_budget_is_reported_not_cut(cases: Path, tmp_path: Path) -> None:
    case = cases / "12-system-alone-over-budget.jsonl"
    args = "--stages window,summary,priority --max-tokens 200 --encoding cl100k_base"
    out = compress(case, args, tmp_path)
    before = read_jsonl(case)
    assert out[0]["messages"] == before[0]["messages"]
    assert out[1] == before[1]
    stats = json.loads((tmp_path / f"{case.stem}.out.stats.json").read_text())
    assert stats["over_budget"] == [{"id": "c12a-system-too-big", "line": 1, "tokens": 444}]
    result = CliRunner().invoke(
        cli, ["compress", str(case), "-o", str(tmp_path / "x.jsonl"), *shlex.split(args), "--check"]
    )
    assert result.exit_code == 3
    assert "c12a-system-too-big is over budget: 444 tokens > 200" in result.output


def test_14_the_task_message_stays_in_an_agent_loop(cases: Path, tmp_path: Path) -> None:
    case = cases / "14-last-user-dropped.jsonl"
    out = compress(case, "--stages window --max-tokens 300 --encoding cl100k_base", tmp_path)
    c14a = by_id(out, "c14a-agent-loop-task-message")
    roles = [m["role"] for m in c14a["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert c14a["messages"][1]["content"].startswith("TASK:")
    assert c14a["messages"][3]["tool_call_id"] == "call_r3"
    assert TokenCounter("cl100k_base").messages(c14a["messages"]) == 275 + TOOL_CALL_OVERHEAD


def test_14_a_window_opens_on_a_user_message(cases: Path, tmp_path: Path) -> None:
    case = cases / "14-last-user-dropped.jsonl"
    out = compress(case, "--stages window --keep-last 4", tmp_path)
    assert contents(by_id(out, "c14b-window-starts-on-assistant")) == [
        "Six adults.",
        "Plan for about three kilograms of food and four litres of drinks.",
        "What about shade?",
    ]


def test_15_a_user_summary_never_meets_another_user_message(cases: Path, tmp_path: Path) -> None:
    case = cases / "15-summary-as-mid-system.jsonl"
    args = (
        "--stages summary --keep-last 3 --max-tokens 100 --encoding cl100k_base --summary-role user"
    )
    out = compress(case, args, tmp_path)
    messages = by_id(out, "c15a-with-system")["messages"]
    assert [m["role"] for m in messages].count("system") == 1
    assert messages[0]["role"] == "system"
    summary = messages[1]["content"]
    assert messages[1]["role"] == "user" and summary.startswith(SUMMARY_MARKER)
    # The summary's seal (5 tokens) leaves no room at 100 tokens for the second request
    # ("Pancakes please, for four people"); the facts the answers gave all fit.
    for fact in ("eggs, flour and milk", "2 eggs", "250 g flour", "500 ml milk"):
        assert fact in summary
    roles = [m["role"] for m in messages]
    assert all(not (a == b == "user") for a, b in zip(roles, roles[1:]))
    assert messages[-1]["content"] == "How long should I rest the batter?"


def test_15_a_system_summary_follows_the_system_prompt(cases: Path, tmp_path: Path) -> None:
    case = cases / "15-summary-as-mid-system.jsonl"
    args = "--stages summary --keep-last 3 --max-tokens 100 --encoding cl100k_base"
    args += " --summary-role system"
    out = compress(case, args, tmp_path)
    messages = by_id(out, "c15a-with-system")["messages"]
    assert [m["role"] for m in messages[:2]] == ["system", "system"]
    assert messages[1]["content"].startswith(SUMMARY_MARKER)
    assert "250 g flour" in messages[1]["content"]
    assert messages[-1]["content"] == "How long should I rest the batter?"


@pytest.mark.parametrize("role", ["user", "system"])
def test_15_without_a_system_prompt_the_summary_comes_first(
    cases: Path, tmp_path: Path, role: str
) -> None:
    # c15b is 96 tokens: under the case's budget of 100 the summary stage leaves it be
    # ("when a conversation is over budget"); at 90 it must fold.
    case = cases / "15-summary-as-mid-system.jsonl"
    base = "--stages summary --keep-last 3 --encoding cl100k_base --summary-role"
    out = compress(case, f"{base} {role} --max-tokens 100", tmp_path)
    assert by_id(out, "c15b-without-system") == read_jsonl(case)[1]
    out = compress(case, f"{base} {role} --max-tokens 90", tmp_path)
    messages = by_id(out, "c15b-without-system")["messages"]
    assert messages[0]["role"] == role and messages[0]["content"].startswith(SUMMARY_MARKER)
    assert not any(m["role"] == "system" for m in messages[1:])
    roles = [m["role"] for m in messages]
    assert all(not (a == b == "user") for a, b in zip(roles, roles[1:]))
    assert messages[-1]["content"] == "How long should I rest the batter?"


def test_16_an_image_costs_a_fixed_amount(cases: Path, tmp_path: Path) -> None:
    case = cases / "16-base64-image-overcount.jsonl"
    record = read_jsonl(case)[0]
    assert TokenCounter("cl100k_base").messages(record["messages"]) == 132
    compress(case, "--stages window --max-tokens 1000 --encoding cl100k_base", tmp_path)
    assert (tmp_path / f"{case.stem}.out.jsonl").read_bytes() == case.read_bytes()
