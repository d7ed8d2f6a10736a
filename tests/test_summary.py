"""The ``summary`` stage on single-task agent runs: one user message, then many tool
calls. The steps after the task are folded into one summary right after it, in every
format, with every invariant kept (ctxcli/stages/summary.py)."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.cli import cli
from ctxcli.config import resolve
from ctxcli.formats import openai, sharegpt
from ctxcli.model import SUMMARY_MARKER, make_conversation, seal, summary_header
from ctxcli.pipeline import Context, build_stage, run
from ctxcli.placeholders import ARGUMENTS_KEY, render
from ctxcli.stages.placeholder import settle_store
from ctxcli.summarizers.extractive import Extractive
from ctxcli.tokens import TokenCounter
from ctxcli.validate import validate_file

COUNTER = TokenCounter("o200k_base")
TASK = "Fix the failing refund test in billing/refunds.py and report the order ids."


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def agent_run(steps: int = 30, *, parallel_every: int = 7) -> list[dict[str, Any]]:
    """System prompt, the user's task, then ``steps`` assistant tool calls with their
    results (every ``parallel_every``-th step makes two parallel calls), then an answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": TASK},
    ]
    for i in range(steps):
        ids = (
            [f"call_{i}a", f"call_{i}b"]
            if i % parallel_every == parallel_every - 1
            else [f"call_{i}"]
        )
        name = "run_tests" if i % 3 == 0 else "read_file"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}: checking order ORD-{1000 + i}.",
                "tool_calls": [call(c, name, {"path": f"billing/mod_{i}.py"}) for c in ids],
            }
        )
        for c in ids:
            text = f"order ORD-{1000 + i} status=open amount=$" + f"{i}.50 " + "line " * 40
            if i == 4:
                text = "Error: AssertionError: refund total 12.50 != 12.00\n" + text
            messages.append({"role": "tool", "tool_call_id": c, "content": text})
    messages.append({"role": "assistant", "content": "Fixed: refunds round half up now."})
    return messages


def compress_file(path: Path, out: Path, args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli, ["compress", str(path), "-o", str(out), "-q", *shlex.split(args)]
    )
    assert result.exit_code == 0, result.output
    assert list(validate_file(str(out))) == []
    stats: dict[str, Any] = json.loads(out.with_suffix(".stats.json").read_text())
    return stats


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def is_summary(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, list):  # an Anthropic text block
        content = content[0].get("text") if content else ""
    return isinstance(content, str) and content.startswith(SUMMARY_MARKER)


# --- OpenAI ---------------------------------------------------------------------------


def test_an_agent_run_folds_its_earlier_steps_after_the_task(tmp_path: Path) -> None:
    before = {"id": "run", "messages": agent_run()}
    source = write_jsonl(tmp_path / "run.jsonl", [before])
    stats = compress_file(
        source, tmp_path / "out.jsonl", "--stages summary,priority --max-tokens 1500"
    )
    events = stats["stage_events"]["summary"]
    assert events["summaries_written"] == 1 and events["steps_summarized"] > 20
    assert stats["stage_events"]["priority"] == {}  # the summary made it fit
    after = read_jsonl(tmp_path / "out.jsonl")[0]
    assert_valid(before, after, COUNTER, max_tokens=1500)
    messages = after["messages"]
    assert messages[:2] == before["messages"][:2]
    summary = messages[2]
    assert summary["role"] == "user" and is_summary(summary)
    assert messages[3]["role"] == "assistant"  # the kept tail opens with a whole unit
    assert messages[-1] == before["messages"][-1]
    # What the agent learned survives: the calls with their arguments (those that change
    # state and those that failed first, then the latest look-ups), the error.
    content = summary["content"]
    # (look-ups alike but for one value are one action: ``run_tests(a.py | b.py) ×2 → ok``)
    assert re.search(r"run_tests\(billing/mod_0\.py \|[^)]*\) ×\d+ → ok", content)
    assert "read_file(billing/mod_4.py) → Error: AssertionError: refund total" in content
    # The latest look-ups: in the summary, or kept as they were after it.
    kept = json.dumps(messages[3:])
    assert "read_file(billing/mod_22.py) → ok" in content or "billing/mod_22.py" in kept
    assert "billing/mod_20.py" in content + kept


def test_no_step_is_folded_when_keep_last_messages_or_fewer_follow_the_task() -> None:
    messages = agent_run(steps=3, parallel_every=99)  # 7 messages after the task
    # With 6 the tail moves back to a whole unit, the first step: nothing to fold.
    for keep_last, folded in ((7, False), (6, False), (5, True)):
        stage = build_stage("summary", {"keep_last": keep_last})
        result = run(make_conversation(messages, COUNTER), [stage], Context(300, COUNTER))
        assert ("steps_summarized" in result.events["summary"]) == folded


def test_the_kept_tail_never_opens_inside_parallel_calls() -> None:
    messages = agent_run(steps=8, parallel_every=4)
    # Step 3 makes two parallel calls: message 8 calls, 9 and 10 answer.
    assert [m["role"] for m in messages[8:11]] == ["assistant", "tool", "tool"]
    for keep_last in range(0, 14):
        stage = build_stage("summary", {"keep_last": keep_last, "max_tokens": 60})
        result = run(make_conversation(messages, COUNTER), [stage], Context(500, COUNTER))
        out = [m.data for m in result.after.messages]
        assert_valid({"messages": messages}, {"messages": out}, COUNTER, max_tokens=None)
        if "steps_summarized" in result.events["summary"]:
            assert out[1]["content"] == TASK and is_summary(out[2])
            assert out[3]["role"] == "assistant"
            assert out[-1] == messages[-1]  # keep_last 0 still keeps the last unit


EARLIER = [
    {"role": "user", "content": "What does billing do? Invoice INV-77 is wrong."},
    {"role": "assistant", "content": "It computes refunds for 3 regions; INV-77 is in the EU."},
    {"role": "user", "content": "Is the EU VAT rate 20%?"},
    {"role": "assistant", "content": "Yes, 20%. Shall I fix the failing refund test?"},
]


def mixed_run(steps: int = 12) -> list[dict[str, Any]]:
    """A chat that leads to the task (:data:`EARLIER`), then an agent run on it."""
    messages = agent_run(steps=steps)
    messages[1:1] = EARLIER
    return messages


def summaries(messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Positions of the summaries before and after the user's latest message."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user" and not is_summary(m))
    found = [i for i, m in enumerate(messages) if is_summary(m)]
    return [i for i in found if i < last_user], [i for i in found if i > last_user]


def folded_count(message: dict[str, Any]) -> int:
    return int(message["content"].split("]")[1].split()[0])


def test_a_mixed_run_gets_two_summaries_each_where_its_messages_were() -> None:
    """What led to the task is summarized before it, the steps it led to after it:
    the output reads in the order things happened."""
    messages = mixed_run()
    stage = build_stage("summary", {"keep_last": 4})
    result = run(make_conversation(messages, COUNTER), [stage], Context(600, COUNTER))
    out = [m.data for m in result.after.messages]
    assert_valid({"messages": messages}, {"messages": out}, COUNTER, max_tokens=600)
    assert result.events["summary"] == {
        "messages_summarized": 3 + 21,
        "summaries_written": 2,
        "steps_summarized": 21,
    }
    assert out[0] == messages[0]
    assert is_summary(out[1]) and folded_count(out[1]) == 3
    assert "INV-77" in out[1]["content"] and "ORD-" not in out[1]["content"]
    # The message the task answers is kept while it fits (a chat keeps it too).
    assert out[2] == EARLIER[-1] and out[3]["content"] == TASK
    assert is_summary(out[4]) and folded_count(out[4]) == 21
    assert "ORD-1000" in out[4]["content"] and "INV-77" not in out[4]["content"]
    assert out[5]["role"] == "assistant" and out[-1] == messages[-1]


def test_a_mixed_run_with_system_summaries_folds_all_that_led_to_the_task() -> None:
    messages = mixed_run()
    stage = build_stage("summary", {"keep_last": 4, "role": "system"})
    result = run(make_conversation(messages, COUNTER), [stage], Context(600, COUNTER))
    out = [m.data for m in result.after.messages]
    assert_valid({"messages": messages}, {"messages": out}, COUNTER, max_tokens=600)
    assert [m["role"] for m in out[:4]] == ["system", "system", "user", "system"]
    assert is_summary(out[1]) and folded_count(out[1]) == 4 and out[2]["content"] == TASK
    assert is_summary(out[3]) and result.events["summary"]["summaries_written"] == 2


def test_no_summary_before_the_task_when_nothing_came_before_it() -> None:
    stage = build_stage("summary", {"keep_last": 4})
    result = run(make_conversation(agent_run(), COUNTER), [stage], Context(600, COUNTER))
    out = [m.data for m in result.after.messages]
    assert summaries(out) == ([], [2])
    assert result.events["summary"]["summaries_written"] == 1


@pytest.mark.parametrize("role", ["user", "system"])
def test_both_summaries_with_their_frames_fit_the_budget(role: str) -> None:
    messages = mixed_run(steps=20)
    for budget in range(200, 1400, 40):
        stage = build_stage("summary", {"keep_last": 4, "role": role})
        result = run(make_conversation(messages, COUNTER), [stage], Context(budget, COUNTER))
        assert result.events["summary"]["summaries_written"] == 2, budget
        assert result.after.tokens <= budget, budget
        out = [m.data for m in result.after.messages]
        assert_valid({"messages": messages}, {"messages": out}, COUNTER, max_tokens=budget)


class Recorder:
    """The extractive summarizer, recording each call's bound; it writes nothing for
    folded messages that mention ``empty_for``."""

    def __init__(self, empty_for: str | None = None) -> None:
        self.bounds: list[int] = []
        self.empty_for = empty_for

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        self.bounds.append(max_tokens)
        if self.empty_for and any(self.empty_for in str(m.get("content")) for m in messages):
            return ""
        return Extractive().summarize(
            messages, previous=previous, max_tokens=max_tokens, counter=counter
        )


def test_the_summary_bound_is_shared_in_proportion_to_what_each_side_folds() -> None:
    messages = mixed_run(steps=20)
    recorder = Recorder()
    stage = build_stage("summary", {"keep_last": 4, "max_tokens": 200})
    context = Context(1200, COUNTER, summarizer=recorder)
    result = run(make_conversation(messages, COUNTER), [stage], context)
    # Body bounds (the header's and seal's cost taken off): the chat before the task
    # folds a few percent of the tokens the steps after it fold, yet gets a quarter.
    before, after = recorder.bounds
    assert 200 // 4 - 20 <= before < 200 // 4 < after
    written = [m for m in result.after.messages if m.is_summary]
    frame = COUNTER.message({"role": "user", "content": ""})
    assert len(written) == 2 and sum(m.tokens - frame for m in written) <= 200


def test_a_summary_whose_body_comes_out_empty_is_skipped_and_its_messages_stay() -> None:
    messages = mixed_run()
    context = Context(600, COUNTER, summarizer=Recorder(empty_for="INV-77"))
    stage = build_stage("summary", {"keep_last": 4})
    result = run(make_conversation(messages, COUNTER), [stage], context)
    events = result.events["summary"]
    assert events["summaries_skipped"] == 1 and events["summaries_written"] == 1
    out = [m.data for m in result.after.messages]
    assert_valid({"messages": messages}, {"messages": out}, COUNTER, max_tokens=None)
    assert out[1:6] == messages[1:6]  # the chat before the task, as it was
    assert summaries(out) == ([], [6])


@pytest.mark.parametrize("role", ["user", "system"])
def test_later_runs_merge_each_summary_into_its_own_side(tmp_path: Path, role: str) -> None:
    """Run 1 writes two summaries. The user then asks for more and the agent goes on:
    run 2 merges both earlier summaries (now before the latest user message) into the
    new summary before it. The agent goes on: run 3 merges the summary after it."""
    args = f"--stages summary,priority --max-tokens 800 --keep-last 4 --summary-role {role}"

    def run(n: int, messages: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, Any]]:
        """Run ``n``: its summary events and its valid output."""
        record = {"id": "r", "messages": messages}
        path = write_jsonl(tmp_path / f"{n}-in.jsonl", [record])
        stats = compress_file(path, tmp_path / f"{n}.jsonl", args)
        out = read_jsonl(tmp_path / f"{n}.jsonl")[0]
        assert_valid(record, out, COUNTER, max_tokens=800)
        return stats["stage_events"]["summary"], out

    events, first = run(1, mixed_run())
    assert events["summaries_written"] == 2
    assert [len(side) for side in summaries(first["messages"])] == [1, 1]

    more = {"role": "user", "content": "Now do the same for invoices."}
    events, second = run(2, [*first["messages"], more, *agent_run()[2:]])
    assert events["summaries_written"] == 2 and events["summaries_merged"] == 2
    (before,), (after,) = summaries(second["messages"])
    assert second["messages"][after - 1] == more
    assert "INV-77" in second["messages"][before]["content"]
    assert folded_count(second["messages"][before]) > sum(
        folded_count(first["messages"][i]) for i in sum(summaries(first["messages"]), [])
    )

    events, third = run(3, [*second["messages"], *agent_run()[2:]])
    assert events["summaries_written"] == 1 and events["summaries_merged"] == 1
    (before3,), (after3,) = summaries(third["messages"])
    assert third["messages"][before3] == second["messages"][before]  # nothing new there
    assert folded_count(third["messages"][after3]) > folded_count(second["messages"][after])


def test_a_second_run_merges_into_the_summary_after_the_task(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "run.jsonl", [{"id": "r", "messages": agent_run()}])
    first = tmp_path / "first.jsonl"
    compress_file(source, first, "--stages summary,priority --max-tokens 1500")
    record = read_jsonl(first)[0]
    folded_first = int(record["messages"][2]["content"].split("]")[1].split()[0])
    record["messages"] += agent_run(steps=12)[2:]  # the run goes on, then is compressed again
    longer = write_jsonl(tmp_path / "longer.jsonl", [record])
    stats = compress_file(
        longer, tmp_path / "second.jsonl", "--stages summary,priority --max-tokens 1500"
    )
    assert stats["stage_events"]["summary"]["summaries_merged"] == 1
    after = read_jsonl(tmp_path / "second.jsonl")[0]
    assert_valid(record, after, COUNTER, max_tokens=1500)
    messages = after["messages"]
    assert [is_summary(m) for m in messages].count(True) == 1
    assert messages[1]["content"] == TASK and is_summary(messages[2])
    assert int(messages[2]["content"].split("]")[1].split()[0]) > folded_first


def test_a_system_role_summary_follows_the_task_and_is_merged_later(tmp_path: Path) -> None:
    args = "--stages summary,priority --max-tokens 1500 --summary-role system"
    source = write_jsonl(tmp_path / "run.jsonl", [{"id": "r", "messages": agent_run()}])
    compress_file(source, tmp_path / "first.jsonl", args)
    record = read_jsonl(tmp_path / "first.jsonl")[0]
    assert record["messages"][2]["role"] == "system" and is_summary(record["messages"][2])
    record["messages"] += agent_run(steps=12)[2:]
    longer = write_jsonl(tmp_path / "longer.jsonl", [record])
    stats = compress_file(longer, tmp_path / "second.jsonl", args)
    assert stats["stage_events"]["summary"]["summaries_merged"] == 1
    after = read_jsonl(tmp_path / "second.jsonl")[0]
    assert_valid(record, after, COUNTER, max_tokens=1500)
    assert [is_summary(m) for m in after["messages"]].count(True) == 1


# --- Anthropic, ShareGPT, Claude Code ---------------------------------------------------


def anthropic_run(steps: int = 20) -> dict[str, Any]:
    """The OpenAI run above as an Anthropic record (parallel calls: two tool_use blocks
    answered by one user message with two tool_result blocks)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(steps):
        ids = [f"t{i}a", f"t{i}b"] if i % 5 == 4 else [f"t{i}"]
        uses = [
            {"type": "tool_use", "id": c, "name": "read_file", "input": {"path": f"m{i}.py"}}
            for c in ids
        ]
        messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"Step {i}."}, *uses]}
        )
        results = [
            {"type": "tool_result", "tool_use_id": c, "content": f"ORD-{1000 + i} " + "x " * 60}
            for c in ids
        ]
        messages.append({"role": "user", "content": results})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]})
    return {"id": "a", "system": "You are a coding agent.", "messages": messages}


def test_anthropic_the_summary_is_a_user_turn_after_the_task(tmp_path: Path) -> None:
    record = anthropic_run()
    source = write_jsonl(tmp_path / "run.jsonl", [record])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--stages summary,priority --max-tokens 1200")
    assert stats["stage_events"]["summary"]["steps_summarized"] > 20
    messages = read_jsonl(out)[0]["messages"]
    assert messages[0] == record["messages"][0]
    # Two user turns in a row: the API merges them into one; the tool results that
    # follow the kept calls still open the user turn after each call.
    assert messages[1]["role"] == "user" and is_summary(messages[1])
    assert messages[1]["content"][0]["type"] == "text"
    assert messages[2]["role"] == "assistant"
    assert messages[-1] == record["messages"][-1]


def test_anthropic_the_header_counts_the_files_messages_not_its_blocks(tmp_path: Path) -> None:
    """A user message answering two parallel calls is one message folded, not two."""
    record = anthropic_run()
    source = write_jsonl(tmp_path / "run.jsonl", [record])
    out = tmp_path / "out.jsonl"
    compress_file(source, out, "--stages summary,priority --max-tokens 1200")
    messages = read_jsonl(out)[0]["messages"]
    summary = next(m for m in messages if is_summary(m))
    folded = len(record["messages"]) - (len(messages) - 1)
    assert any("t4b" in json.dumps(m) for m in record["messages"][: folded + 1])  # a pair
    assert summary["content"][0]["text"].startswith(f"{SUMMARY_MARKER} {folded} earlier")


def test_anthropic_a_mixed_run_gets_two_user_summaries(tmp_path: Path) -> None:
    record = anthropic_run()
    earlier = [
        {"role": "user", "content": "Invoice INV-77 is wrong."},
        {"role": "assistant", "content": [{"type": "text", "text": "It is in the EU."}]},
        {"role": "user", "content": "Is the EU VAT rate 20%? " + "Tell me. " * 30},
        {"role": "assistant", "content": [{"type": "text", "text": "Yes. Shall I fix it?"}]},
    ]
    record["messages"][0:0] = earlier
    source = write_jsonl(tmp_path / "run.jsonl", [record])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--stages summary,priority --max-tokens 1200")
    assert stats["stage_events"]["summary"]["summaries_written"] == 2
    messages = read_jsonl(out)[0]["messages"]
    # What led to the task is folded before the task's own steps, the answer the task
    # replies to included (ctxcli.stages.plan.chain).
    assert [is_summary(m) for m in messages[:4]] == [True, False, True, False]
    assert messages[1] == record["messages"][4]  # the task
    assert "INV-77" in messages[0]["content"][0]["text"]
    assert messages[-1] == record["messages"][-1]


def test_anthropic_a_latest_turn_opening_with_tool_results_is_not_left_first(
    tmp_path: Path,
) -> None:
    record = anthropic_run()
    # The user speaks beside the results of step 1: that is now the latest user turn,
    # and it opens with step 1's call, which must not open the output.
    record["messages"][4]["content"].append({"type": "text", "text": "Also check ORD-9."})
    source = write_jsonl(tmp_path / "run.jsonl", [record])
    out = tmp_path / "out.jsonl"
    compress_file(source, out, "--stages summary,priority --max-tokens 1200")
    messages = read_jsonl(out)[0]["messages"]
    assert messages[0]["role"] == "user"
    assert any(m == record["messages"][4] for m in messages)


def sharegpt_run(task: str, answer: str) -> list[dict[str, Any]]:
    """A ShareGPT agent run: the ``task``, 20 calls and their results (about 1,500
    tokens), and the ``answer``."""
    turns = [{"from": "human", "value": task}]
    for i in range(20):
        call_value = json.dumps({"name": "read_file", "arguments": {"path": f"m{i}.py"}})
        turns.append({"from": "function_call", "value": call_value})
        turns.append({"from": "observation", "value": f"ORD-{1000 + i} " + "x " * 60})
    return [*turns, {"from": "gpt", "value": answer}]


def test_sharegpt_turns_still_alternate(tmp_path: Path) -> None:
    turns = sharegpt_run(TASK, "Fixed.")
    source = write_jsonl(tmp_path / "run.jsonl", [{"conversations": turns}])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--stages summary,priority --max-tokens 800")
    written = read_jsonl(out)[0]["conversations"]
    sides = ["user" if t["from"] in ("human", "observation") else "assistant" for t in written]
    assert all(a != b for a, b in itertools.pairwise(sides))
    assert written[-1] == turns[-1]
    # The steps' summary joins the task's turn (a second human turn would break the
    # dialogue; they used to be dropped with no summary), and reads back as one.
    assert stats["stage_events"]["summary"]["steps_summarized"] > 0
    task, joiner, summary = written[0]["value"].partition("\n\n" + SUMMARY_MARKER)
    assert written[0]["from"] == "human" and task == TASK and "ORD-1000" in summary
    again = sharegpt.read(read_jsonl(out)[0], COUNTER, path="out.jsonl", line=1)
    assert [m.is_summary for m in again.messages[:2]] == [False, True]
    assert again.messages[0].data["content"] == TASK
    assert sharegpt.write(read_jsonl(out)[0], again) == read_jsonl(out)[0]


def llama_factory_run(task: str, answer: str) -> list[dict[str, Any]]:
    """:func:`sharegpt_run` in LLaMA-Factory's OpenAI-style parts: the calls are
    ``tool_call`` parts of the assistant messages, the results ``tool`` messages."""

    def text(value: str) -> list[dict[str, str]]:
        return [{"type": "text", "value": value}]

    messages = [{"role": "user", "content": text(task)}]
    for i in range(20):
        call_value = json.dumps({"name": "read_file", "arguments": {"path": f"m{i}.py"}})
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_call", "value": call_value}]}
        )
        messages.append({"role": "tool", "content": text(f"ORD-{1000 + i} " + "x " * 60)})
    return [*messages, {"role": "assistant", "content": text(answer)}]


def test_llama_factory_parts_turns_alternate_and_a_joined_summary_reads_back(
    tmp_path: Path,
) -> None:
    """A summary of the steps after the task was a second user message in a row, which
    the chat templates LLaMA-Factory renders with (Llama 2's, Mistral's, Gemma's)
    reject ("Conversation roles must alternate"); 6 of the 50 reason_tool_use runs at
    1500 tokens. It is now one more text part of the task's message."""
    messages = llama_factory_run(TASK, "Fixed.")
    source = write_jsonl(tmp_path / "run.jsonl", [{"messages": messages}])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--stages summary,priority --max-tokens 800")
    written = read_jsonl(out)[0]["messages"]
    sides = ["assistant" if m["role"] == "assistant" else "user" for m in written]
    assert all(a != b for a, b in itertools.pairwise(sides)), sides
    assert stats["stage_events"]["summary"]["steps_summarized"] > 0
    task, summary = written[0]["content"]
    assert task == messages[0]["content"][0] and summary["type"] == "text"
    assert summary["value"].startswith("\n\n" + SUMMARY_MARKER) and "ORD-1000" in summary["value"]
    again = openai.read(read_jsonl(out)[0], COUNTER, path="out.jsonl", line=1)
    assert [m.is_summary for m in again.messages[:2]] == [False, True]
    assert openai.write(read_jsonl(out)[0], again) == read_jsonl(out)[0]
    twice = tmp_path / "twice.jsonl"
    compress_file(out, twice, "--stages summary,priority --max-tokens 600")
    head = read_jsonl(twice)[0]["messages"][0]["content"]
    assert [p["value"].count(SUMMARY_MARKER) for p in head] == [0, 1]  # merged, not quoted


def _parts_record(*messages: tuple[str, Any]) -> dict[str, Any]:
    """A record of LLaMA-Factory parts: each ``(role, text or parts)``; an assistant's
    ``"call"`` is a ``tool_call`` part; a string stays a string for a ``"user:str"``."""
    out = []
    for role, content in messages:
        if content == "call":
            value = json.dumps({"name": "lookup", "arguments": {"q": "x"}})
            content = [{"type": "tool_call", "value": value}]
        elif role == "user:str":
            role = "user"
        elif isinstance(content, str):
            content = [{"type": "text", "value": content}]
        out.append({"role": role, "content": content})
    return {"messages": out}


SEALED = seal(summary_header(2), "User requests:\n- pasted old note")
ROWS = " ".join(f"row {i}: ORD-{7000 + i}" for i in range(80))


@pytest.mark.parametrize(
    ("record", "args"),
    [
        pytest.param(  # the summary joins a user message of a string as a text part
            _parts_record(
                ("user:str", "q"), *[("assistant", "call"), ("tool", ROWS)] * 2, ("assistant", "a")
            ),
            "--max-tokens 200",
            id="string-user",
        ),
        pytest.param(  # a system message mid-record parted the summary from the user's
            _parts_record(
                ("system", "S"),
                ("user", "q1"),
                ("assistant", "call"),
                ("tool", "r1 " * 300),
                ("assistant", "a1"),
                ("system", "mid"),
                ("user", "q2"),
                ("assistant", "a2"),
            ),
            "--max-tokens 200 --keep-last 0",
            id="mid-system",
        ),
        pytest.param(  # a sealed text the user pasted is the user's, where it stands
            _parts_record(
                ("user", "a"),
                ("assistant", "a done"),
                ("user", [{"type": "text", "value": v} for v in ("Look:", SEALED + "\n\n", "?")]),
                *[("assistant", "call"), ("tool", ROWS)] * 2,
                ("assistant", "x done"),
            ),
            "--max-tokens 300",
            id="sealed-in-the-middle",
        ),
        pytest.param(
            _parts_record(
                ("user", [{"type": "text", "value": v} for v in (SEALED + "\n\n", "?")]),
                *[("assistant", "call"), ("tool", ROWS)] * 2,
                ("assistant", "x done"),
            ),
            "--max-tokens 300",
            id="sealed-opening-the-latest",
        ),
    ],
)
def test_a_summary_joins_the_user_message_it_meets_in_any_llama_factory_record(
    tmp_path: Path, record: dict[str, Any], args: str
) -> None:
    """A breaker's records: each was written with a safer plan (exit 5, the steps
    dropped with no summary) or kept as read. The latest user message's text and
    parts stay; sides alternate."""
    source = write_jsonl(tmp_path / "in.jsonl", [record])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, args)
    assert not stats["fallbacks"] and stats["stage_events"]["summary"], stats
    written = read_jsonl(out)[0]["messages"]
    sides = [m["role"] == "assistant" for m in written if m["role"] != "system"]
    assert all(a != b for a, b in itertools.pairwise(sides)), written
    latest = [m for m in record["messages"] if m["role"] == "user"][-1]["content"]
    own = latest if isinstance(latest, list) else [{"type": "text", "value": latest}]
    assert all(part in written_part for part in own for written_part in [_user_parts(written)])


def _user_parts(messages: list[dict[str, Any]]) -> list[Any]:
    return [p for m in messages if m["role"] == "user" for p in m["content"]]


def test_llama_factory_parallel_results_and_a_developer_message_keep_sides() -> None:
    """The results of parallel calls are two tool messages in a row, which LLaMA-Factory
    reads as one observation; a developer message stands apart as a system one. Both
    were reported as two user messages in a row."""
    parallel = _parts_record(
        ("user", "Two areas."), ("assistant", "call"), ("tool", "3.14"), ("tool", "12.57")
    )
    parallel["messages"][1]["content"] *= 2
    developer = _parts_record(
        ("system", "S"), ("developer", "D"), ("user", "q"), ("assistant", "a")
    )
    for record in (parallel, developer):
        assert openai.problems(record, openai.read(record, COUNTER, path="x", line=1)) == []


def test_two_summaries_that_are_all_there_is_to_fold_share_the_room(tmp_path: Path) -> None:
    """With a summary before the latest turn and one of the steps after it, only the
    first was tried, and when it could not take all of the overflow both were dropped
    (a breaker's run: 46 of 300 tokens kept). Each now gets a share by its size, at
    most ``--summary-max-tokens``."""
    facts = "; ".join(f"ORD-{7000 + i} {i + 2} lamps" for i in range(40))
    steps = "; ".join(f"lookup(SKU-{500 + i}) → stock {i}" for i in range(30))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": seal(summary_header(30), f"Facts: {facts}")},
        {"role": "user", "content": "Check stock for all of them and reply."},
        {"role": "user", "content": seal(summary_header(12), f"Actions: {steps}")},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c1", "lookup", {"sku": "SKU-999"})],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "stock 7"},
    ]
    source = write_jsonl(tmp_path / "two.jsonl", [{"messages": messages}])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--max-tokens 300")
    written = read_jsonl(out)[0]["messages"]
    assert stats["stage_events"]["summary"] == {"summaries_shrunk": 2}
    assert stats["tokens"]["after"] <= 300 and written[2] == messages[2]
    assert "ORD-7000" in written[1]["content"] and "SKU-500" in written[3]["content"]
    capped = tmp_path / "capped.jsonl"
    compress_file(source, capped, "--max-tokens 300 --summary-max-tokens 40")
    for message in read_jsonl(capped)[0]["messages"][1:4:2]:
        assert COUNTER.message(message) <= 40 + COUNTER.message({"role": "user", "content": ""})


def test_a_placeholder_an_earlier_run_wrote_is_summarized_from_what_it_shows(
    tmp_path: Path,
) -> None:
    """A new user compressed the agent sample's output again: the summary said
    ``execute_bash(python -m pytest tests/test_invoice.py -q) → ok`` with no error, as
    the placeholder (whose original is in the first run's store) read as nothing."""
    sample = Path(__file__).parent.parent / "samples" / "agent_run.jsonl"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    compress_file(sample, first, "--max-tokens 3000")
    assert "[ctxcli placeholder" in first.read_text()
    compress_file(first, second, "--max-tokens 1500")
    texts = [str(m.get("content")) for m in read_jsonl(second)[0]["messages"]]
    summary = next(t for t in texts if t.startswith(SUMMARY_MARKER))
    assert "test_invoice.py -q) → E NameError" in " ".join(summary.split()), summary
    assert "FAILED tests/test_invoice.py::test_rounding_cents" in summary


def test_call_arguments_an_earlier_run_cleared_are_summarized_from_what_they_show(
    tmp_path: Path,
) -> None:
    """A Claude Code session compressed twice summarized an edit whose arguments the
    first run had replaced as ``Edit() → ok``: it said nothing of the file."""
    arguments = json.dumps({"file_path": "/repo/src/app.py", "new_string": "x = 1\n" * 400})
    cleared = render(arguments, tool="Edit", tokens=900, head=60, tail=0, facts=True)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix app.py, then run it."}]
    messages.append({"role": "assistant", "content": None, "tool_calls": [call("c1", "Edit", {})]})
    messages[-1]["tool_calls"][0]["function"]["arguments"] = json.dumps({ARGUMENTS_KEY: cleared})
    messages += [{"role": "tool", "tool_call_id": "c1", "content": "ok " * 300}]
    messages += [
        {"role": "assistant", "content": "Done. " * 100},
        {"role": "user", "content": "Run it."},
    ]
    source = write_jsonl(tmp_path / "again.jsonl", [{"messages": messages}])
    out = tmp_path / "out.jsonl"
    compress_file(source, out, "--max-tokens 300")
    texts = [str(m.get("content")) for m in read_jsonl(out)[0]["messages"]]
    summary = next(t for t in texts if t.startswith(SUMMARY_MARKER))
    assert "Edit(" in summary and "/repo/src/app.py" in summary, summary


def test_a_summary_that_is_all_there_is_to_fold_shrinks_to_fit(tmp_path: Path) -> None:
    """An output compressed again at a smaller budget, where the earlier summary is all
    that may be folded, lost it whole to the priority stage (16 of 20 tau-bench runs
    compressed at 1800, then at 1500): it is now written again into the room left."""
    facts = "; ".join(f"ORD-{7000 + i} {i + 2} lamps" for i in range(40))
    summary = {"role": "user", "content": seal(summary_header(30), f"Facts: {facts}")}
    latest = {"role": "user", "content": "Which of them shipped?"}
    record = {"messages": [{"role": "system", "content": "Be brief."}, summary, latest]}
    source = write_jsonl(tmp_path / "again.jsonl", [record])
    kept = []
    for budget in (260, 200, 120):
        out = tmp_path / f"out{budget}.jsonl"
        stats = compress_file(source, out, f"--max-tokens {budget}")
        messages = read_jsonl(out)[0]["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "user"]
        assert messages[-1] == latest and stats["tokens"]["after"] <= budget
        assert "30 earlier messages folded" in messages[1]["content"]
        assert stats["stage_events"]["summary"] == {"summaries_shrunk": 1}
        kept.append(set(re.findall(r"ORD-\d+", messages[1]["content"])))
    assert kept[0] > kept[1] > kept[2] > set()  # a larger budget keeps more


def test_a_summary_of_steps_alone_is_in_the_users_language(tmp_path: Path) -> None:
    """A Chinese record's steps (calls and JSON results, no word of Chinese) were
    summarized in English ("2 earlier messages folded", "Actions:"): the language
    came from the folded text alone. It now falls back to the user's."""
    turns = sharegpt_run(
        "请帮我查一下这些文件里的订单号，然后告诉我哪个订单已经发货。", "订单已发货。"
    )
    source = write_jsonl(tmp_path / "run.jsonl", [{"conversations": turns}])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--stages summary,priority --max-tokens 800")
    assert stats["stage_events"]["summary"]["steps_summarized"] > 0
    summary = read_jsonl(out)[0]["conversations"][0]["value"].partition(SUMMARY_MARKER)[2]
    assert "已折叠较早的" in summary and "操作" in summary and "Actions" not in summary


def test_a_sharegpt_chat_gets_a_summary_joined_to_the_latest_human_turn(tmp_path: Path) -> None:
    """Turns alternate, so a chat's summary cannot stand before a human turn: one that
    meets one joins its text (glaive records at 300 tokens: 126 of 300 dropped turns
    with no summary). A later run reads the joined turn as the summary and the user's
    text, and merges the summary, never stacks it."""
    turns = []
    for i in range(4):
        turns.append({"from": "human", "value": f"What does order ORD-{7100 + i} hold?"})
        turns.append({"from": "gpt", "value": f"Order ORD-{7100 + i} holds {i + 2} lamps. " * 12})
    latest = {"from": "human", "value": "Which of them shipped?"}
    turns += [latest, {"from": "gpt", "value": "All but one. " * 20}]
    source = write_jsonl(tmp_path / "chat.jsonl", [{"conversations": turns}])
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--max-tokens 200")
    written = read_jsonl(out)[0]["conversations"]
    assert [t["from"] for t in written] == ["human", "gpt"]
    summary, joiner, own = written[0]["value"].rpartition("\n\n")
    assert summary.startswith(SUMMARY_MARKER) and own == latest["value"]
    assert "ORD-7100" in summary and stats["tokens"]["after"] <= 200
    # Two more turns, and a later run: the joined turn reads as the summary and the
    # user's text, the summary is merged into the new one.
    more = [{"from": "human", "value": "And ORD-7103?"}, {"from": "gpt", "value": "Monday."}]
    longer = write_jsonl(tmp_path / "longer.jsonl", [{"conversations": written + more}])
    again = tmp_path / "again.jsonl"
    compress_file(longer, again, "--max-tokens 200")
    twice = read_jsonl(again)[0]["conversations"]
    assert twice[-2:] == more and twice[0]["value"].startswith(SUMMARY_MARKER)
    text = "".join(t["value"] for t in twice)
    assert text.count(SUMMARY_MARKER) == 1 and "9 earlier messages folded" in text
    assert "- Which of them shipped?" in twice[0]["value"]  # now an earlier request


SEALED = seal(summary_header(2), "User requests:\n- hi")


def order_chat(n: int) -> list[dict[str, Any]]:
    """A human question on order ORD-778``n`` and the answer, each about 80 tokens."""
    said = f"Order ORD-778{n} shipped. " * 12
    return [{"from": "human", "value": f"Q{n} {said}"}, {"from": "gpt", "value": f"A{n} {said}"}]


#: A chat's last exchange, short.
LAST_EXCHANGE = [
    {"from": "human", "value": "Last question?"},
    {"from": "gpt", "value": "Final answer."},
]


@pytest.mark.parametrize(
    ("turns", "budget"),
    [
        # A summary amid a human turn's text is the user's own (pasted): the turn is not
        # cut into pieces, and is kept whole, in place (it came out as two human turns).
        pytest.param(
            [
                {"from": "human", "value": f"Notes:\n\n{SEALED}\n\nPlease go on."},
                {"from": "function_call", "value": '{"name": "dump", "arguments": {}}'},
                {"from": "observation", "value": "row 1234 ok; " * 400},
                {"from": "gpt", "value": "Done."},
            ],
            1000,
            id="pasted-summary",
        ),
        # A system turn the fold keeps stands between its summary and a human turn: the
        # fold may not end there (the summary stage fell back: two user turns in a row).
        pytest.param(
            [
                *order_chat(1),
                {"from": "system", "value": "Be brief."},
                *order_chat(2),
                *LAST_EXCHANGE,
            ],
            150,
            id="system-turn-between",
        ),
        # The same where the system turn stands right before the latest human turn,
        # and where it stands right after it, before steps the stage would fold.
        pytest.param(
            [*order_chat(1), *order_chat(2), {"from": "system", "value": ""}, *LAST_EXCHANGE],
            150,
            id="system-turn-before-the-latest",
        ),
        pytest.param(
            [
                {"from": "human", "value": TASK},
                {"from": "system", "value": "Tools are slow today."},
                *[
                    turn
                    for i in range(6)
                    for turn in (
                        {
                            "from": "function_call",
                            "value": f'{{"name": "f", "arguments": {{"q": "{i}"}}}}',
                        },
                        {"from": "observation", "value": f"ORD-{1000 + i} " + "x " * 60},
                    )
                ],
                {"from": "gpt", "value": "Fixed."},
            ],
            300,
            id="system-turn-after-the-latest",
        ),
        # A human turn with no text is joined by no summary (its value became the repr
        # of the list or None); the record gets its summary elsewhere, or none.
        pytest.param(
            [
                *order_chat(1),
                {"from": "human", "value": [{"type": "text", "text": "describe"}]},
                {"from": "gpt", "value": "ok"},
            ],
            120,
            id="list-value",
        ),
    ],
)
def test_sharegpt_summaries_join_only_where_the_writer_can(
    tmp_path: Path, turns: list[dict[str, Any]], budget: int
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"conversations": turns}])
    result = CliRunner().invoke(
        cli,
        ["compress", str(source), "-o", str(tmp_path / "out.jsonl"), "--max-tokens", str(budget)],
    )
    assert result.exit_code == 0 and "broke a rule" not in result.output, result.output
    assert list(validate_file(str(tmp_path / "out.jsonl"))) == []
    written = read_jsonl(tmp_path / "out.jsonl")[0]["conversations"]
    latest, kept = ([t["value"] for t in ts if t["from"] == "human"][-1] for ts in (turns, written))
    assert kept == latest or (isinstance(latest, str) and kept.endswith("\n\n" + latest))


def session_event(
    n: int, parent: str | None, role: str, content: Any, **extra: Any
) -> dict[str, Any]:
    return {
        "type": role,
        "uuid": f"e{n}",
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s1",
        "cwd": "/repo",
        "message": {"role": role, "content": content, **extra},
    }


def claude_code_session(steps: int = 20) -> list[dict[str, Any]]:
    """A Claude Code session: the task, then streamed tool calls (step 3 makes two
    parallel calls, written as two events of one message) and their results."""
    events = [session_event(0, None, "user", TASK)]
    for i in range(steps):
        ids = [f"k{i}a", f"k{i}b"] if i == 3 else [f"k{i}"]
        for c in ids:
            use = {"type": "tool_use", "id": c, "name": "Bash", "input": {"command": f"ls {i}"}}
            events.append(
                session_event(len(events), events[-1]["uuid"], "assistant", [use], id=f"m{i}")
            )
        for c in ids:
            done = {
                "type": "tool_result",
                "tool_use_id": c,
                "content": f"ORD-{1000 + i} " + "x " * 60,
            }
            events.append(session_event(len(events), events[-1]["uuid"], "user", [done]))
    answer = [{"type": "text", "text": "Fixed."}]
    events.append(session_event(len(events), events[-1]["uuid"], "assistant", answer, id="end"))
    return events


def test_claude_code_the_summary_event_follows_the_task(tmp_path: Path) -> None:
    events = claude_code_session()
    source = write_jsonl(tmp_path / "session.jsonl", events)
    out = tmp_path / "out.jsonl"
    stats = compress_file(source, out, "--stages summary,priority --max-tokens 700")
    assert stats["stage_events"]["summary"]["steps_summarized"] > 20
    written = read_jsonl(out)
    assert written[0] == events[0]
    new, nxt = written[1], written[2]
    assert new["type"] == "user" and new["message"]["content"].startswith(SUMMARY_MARKER)
    assert new["parentUuid"] == "e0" and nxt["parentUuid"] == new["uuid"]
    assert nxt["type"] == "assistant" and written[-1] == events[-1]
    assert "Bash(ls 0) → ok; Bash(ls 1) → ok; Bash(ls 2)" in new["message"]["content"]  # each call


# --- every invariant, on generated agent runs -------------------------------------------


@st.composite
def agent_runs(draw: Any) -> list[dict[str, Any]]:
    """Valid OpenAI agent runs: maybe a system prompt and earlier chat, one task, then
    tool steps (parallel calls, legacy function calls, a mid-run developer message)."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": "Agent."})
    for i in range(draw(st.integers(0, 2))):
        messages += [
            {"role": "user", "content": f"q{i} ORD-{i}"},
            {"role": "assistant", "content": "a"},
        ]
    messages.append({"role": "user", "content": TASK})
    number = itertools.count()
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["tools", "tools", "legacy", "developer", "text"]))
        size = "x " * draw(st.integers(0, 60))
        if kind == "tools":
            ids = [f"c{next(number)}" for _ in range(draw(st.integers(1, 3)))]
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call(c, "f", {}) for c in ids],
                }
            )
            messages += [{"role": "tool", "tool_call_id": c, "content": size} for c in ids]
        elif kind == "legacy":
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "g", "arguments": "{}"},
                }
            )
            messages.append({"role": "function", "name": "g", "content": size})
        elif kind == "developer":
            messages.append({"role": "developer", "content": "Hurry."})
        else:
            messages.append({"role": "assistant", "content": size})
    return messages


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=agent_runs(),
    budget=st.integers(20, 900),
    keep_last=st.integers(0, 8),
    role=st.sampled_from(["user", "system"]),
    stages=st.sampled_from(
        [["summary"], ["summary", "priority"], ["placeholder", "summary", "priority"]]
    ),
)
def test_folding_steps_keeps_every_invariant(
    messages: list[dict[str, Any]], budget: int, keep_last: int, role: str, stages: list[str]
) -> None:
    options = {"summary": {"keep_last": keep_last, "role": role}}
    pipeline = [build_stage(name, options.get(name)) for name in stages]
    result = run(make_conversation(messages, COUNTER), pipeline, Context(budget, COUNTER))
    out = [m.data for m in result.after.messages]
    assert_valid(
        {"messages": messages},
        {"messages": out},
        COUNTER,
        max_tokens=budget,
        over_budget_ok=result.over_budget,
    )
    before, after = summaries(out)
    assert len(before) <= 1 and len(after) <= 1
    if "steps_summarized" in result.events["summary"] and "priority" not in stages:
        task = next(i for i, m in enumerate(out) if m.get("content") == TASK)
        first_step = next(i for i in range(task + 1, len(out)) if out[i]["role"] != "developer")
        assert after == [first_step]
    # The summary of what came before the task follows the leading system messages.
    assert before in ([], [1 if messages[0]["role"] == "system" else 0])
    # Compressing the output again never stacks a summary on either side.
    again = run(make_conversation(out, COUNTER), pipeline, Context(budget, COUNTER))
    before, after = summaries([m.data for m in again.after.messages])
    assert len(before) <= 1 and len(after) <= 1


def test_a_summary_reads_the_originals_of_results_the_placeholder_stage_replaced() -> None:
    """With the default stages the placeholder stage runs first: the summary folds
    what it replaced, and reads the tool's own output, not the placeholder's head and
    tail (an order number in the middle of a long result stays known)."""
    lines = [f"row {i}: nothing to see" for i in range(200)]
    lines[100] = "row 100: refund issued for order #W4471 on 2024-06-02"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Find the refunded order in the log."},
    ]
    for n in range(8):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "read_log", "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        content = "\n".join(lines) if n == 0 else f"page {n}: " + "empty " * 40
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": content})
    messages.append({"role": "assistant", "content": "Still looking."})
    settings_ = resolve(max_tokens=300)  # the default stages: placeholder, summary, priority
    conversation = make_conversation(messages, COUNTER)
    result = settle_store(run(conversation, settings_.stages, Context(300, COUNTER)))
    (summary,) = [m.data["content"] for m in result.after.messages if m.is_summary]
    assert "#W4471" in summary and "2024-06-02" in summary
    assert result.events["placeholder"]["placeholders_written"] >= 1
    assert not result.stored  # the folded placeholder needs no original in the store


@pytest.mark.parametrize("budgets", [(1200, 450), (1200, 700, 500)])
def test_anthropic_summaries_merge_when_compressed_again(
    tmp_path: Path, budgets: tuple[int, ...]
) -> None:
    """ctxcli writes an Anthropic summary as a text block: a later run must know it for
    a summary (merge it, never stack it) and keep the task as the latest user turn."""
    record = anthropic_run()
    record["messages"][0:0] = [
        {"role": "user", "content": "Invoice INV-77 is wrong."},
        {"role": "assistant", "content": [{"type": "text", "text": "It is in the EU. " * 20}]},
    ]
    source = write_jsonl(tmp_path / "run0.jsonl", [record])
    for n, budget in enumerate(budgets, start=1):
        out = tmp_path / f"run{n}.jsonl"
        stats = compress_file(source, out, f"--stages summary,priority --max-tokens {budget}")
        after = read_jsonl(out)[0]["messages"]
        summaries = [m for m in after if is_summary(m)]
        assert len(summaries) <= 2, [m["content"] for m in after]
        assert {"role": "user", "content": TASK} in after  # the task: the latest user turn
        if n > 1:  # over budget again: the earlier summaries merge into the new ones
            assert stats["tokens"]["before"] > budget
            assert stats["stage_events"]["summary"].get("summaries_merged", 0) >= 1
        source = out


@pytest.mark.parametrize("bound", [12, 24, 60])
def test_summary_max_tokens_is_not_lifted_by_the_floor(bound: int) -> None:
    """The few tokens a summary is given when the budget is all but spent never exceed
    what ``--summary-max-tokens`` grants (a header line may still come whole)."""
    conversation = make_conversation(agent_run(), COUNTER)
    stage = build_stage("summary", {"max_tokens": bound, "keep_last": 2})
    after, _ = stage.apply(conversation, Context(1500, COUNTER))
    for message in after.messages:
        if message.is_summary:
            text = message.data["content"]
            header, _, body = text.partition("\n")
            assert COUNTER.text(text) <= max(bound, COUNTER.text(header) + 2), text


def test_a_chinese_run_quoting_english_tool_names_gets_a_chinese_header() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "你是客服助手。"},
        {"role": "user", "content": "请帮我查一下5月20日从北京到上海的航班。"},
    ]
    for n in range(10):
        name = f"search_flights_with_a_long_english_name_{n}"
        call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append(
            {"role": "assistant", "content": f"正在查询第{n}步。", "tool_calls": [call]}
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{n}",
                "content": f"航班 CA15{n:02d} 票价 8{n:02d} 元，状态：可订。" * 3,
            }
        )
    messages.append({"role": "assistant", "content": "已为您找到航班。"})
    conversation = make_conversation(messages, COUNTER)
    after, _ = build_stage("summary", {"keep_last": 2}).apply(conversation, Context(250, COUNTER))
    (summary,) = [m.data["content"] for m in after.messages if m.is_summary]
    assert summary.startswith(f"{SUMMARY_MARKER} 已折叠较早的 ")


# --- issue 13: outputs that aborted the file, and text that looks like a summary --------


def test_anthropic_a_system_summary_before_tool_results_beside_text_is_a_user_turn(
    tmp_path: Path,
) -> None:
    """The latest user entry answers a call and adds text: the call stays with it, so
    the summary opens the output. Anthropic has no system role inside ``messages``:
    the summary is a user turn whatever --summary-role says (the file aborted: 'output
    starts with a assistant message')."""
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "line " * 400}
    use = {"type": "tool_use", "id": "t1", "name": "read", "input": {"p": "a"}}
    record = {
        "id": "a",
        "system": "You are an agent.",
        "messages": [
            {"role": "user", "content": "Fix the build. " + "The linker step fails on main. " * 14},
            {"role": "assistant", "content": [{"type": "text", "text": "Looking. " * 30}]},
            {"role": "user", "content": "Also the tests. " + "more " * 60},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading."}, use]},
            {"role": "user", "content": [result, {"type": "text", "text": "Then push it."}]},
        ],
    }
    source = write_jsonl(tmp_path / "in.jsonl", [record])
    for stages in ("placeholder,summary,priority", "summary,priority"):
        args = f"--stages {stages} --max-tokens 300 --summary-role system"
        compress_file(source, tmp_path / "out.jsonl", args)
        messages = read_jsonl(tmp_path / "out.jsonl")[0]["messages"]
        assert messages[0]["role"] == "user"
        assert messages[0]["content"][0]["text"].startswith(SUMMARY_MARKER)
        assert messages[-2:] == record["messages"][-2:]


def test_sharegpt_a_system_summary_is_a_human_turn_before_a_tail_of_calls(
    tmp_path: Path,
) -> None:
    """A summary that stops inside a run of calls: LLaMA-Factory reads a system turn
    only first and wants a human turn after it, so the summary is a human turn and the
    tail opens with the calls (the file aborted: 'the first turn is gpt/function_call')."""

    def call(query: str) -> dict[str, str]:
        return {
            "from": "function_call",
            "value": json.dumps({"name": "search", "arguments": {"q": query}}),
        }

    turns = [{"from": "human", "value": "Find flights to Oslo."}]
    for i in range(4):
        # Results under what the stage turns into placeholders: whole messages fold.
        turns += [call(f"q{i}"), {"from": "observation", "value": f"result {i} " * 60}]
    turns += [{"from": "gpt", "value": "Found three."}, {"from": "human", "value": "Book one."}]
    turns += [call("book"), {"from": "observation", "value": "booked"}]
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "s", "conversations": turns}])
    for budget in (300, 700):
        args = f"--stages summary --max-tokens {budget} --summary-role system"
        compress_file(source, tmp_path / "out.jsonl", args)
        out = read_jsonl(tmp_path / "out.jsonl")[0]["conversations"]
        assert out[0]["from"] == "human" and out[0]["value"].startswith(SUMMARY_MARKER)
        assert out[1]["from"] in ("gpt", "function_call") and out[-3:] == turns[-3:]


def test_with_no_user_message_and_keep_last_0_the_last_message_stays(tmp_path: Path) -> None:
    """A run with no user message: keep_last 0 folds everything before the last unit,
    never the last message (the file aborted: 'the last message was dropped')."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Run the nightly job."}]
    for i in range(3):
        messages.append(
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}", "ls", {})]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "file " * 50})
    messages.append({"role": "assistant", "content": "All done."})
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "n", "messages": messages}])
    for budget in (60, 120):
        compress_file(source, tmp_path / "out.jsonl", f"--max-tokens {budget} --keep-last 0")
        out = read_jsonl(tmp_path / "out.jsonl")[0]["messages"]
        assert out[0] == messages[0] and out[-1] == messages[-1]


LOOK_ALIKE = (
    f"{SUMMARY_MARKER} 3 earlier messages folded.\nYou are a refund agent. " + "Be exact. " * 40
)


@pytest.mark.parametrize(
    "stages", ["placeholder,summary,priority", "priority", "summary,priority", "window,priority"]
)
def test_a_system_prompt_or_latest_user_message_that_reads_like_a_summary_is_kept(
    tmp_path: Path, stages: str
) -> None:
    """Only a summary ctxcli sealed is one: a system prompt and a latest user message
    that start with the header line are what their roles say (they were dropped)."""
    chat = [("user" if i % 2 == 0 else "assistant", f"turn {i} " + "words " * 80) for i in range(8)]
    messages = [{"role": "system", "content": LOOK_ALIKE}]
    messages += [{"role": role, "content": text} for role, text in chat]
    messages.append({"role": "user", "content": LOOK_ALIKE.replace("You are", "Please be")})
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "c", "messages": messages}])
    stats = compress_file(source, tmp_path / "out.jsonl", f"--stages {stages} --max-tokens 300")
    out = read_jsonl(tmp_path / "out.jsonl")[0]["messages"]
    assert out[0] == messages[0] and out[-1] == messages[-1]
    assert stats["tokens"]["after"] == COUNTER.messages(out)


def test_an_anthropic_system_prompt_that_reads_like_a_summary_is_counted(tmp_path: Path) -> None:
    """The top-level system prompt is never a summary: it was written back but counted
    as folded, so a 500-token output was reported as 10 tokens and not over budget."""
    record = {"id": "a", "system": LOOK_ALIKE, "messages": [{"role": "user", "content": "Hi."}]}
    source = write_jsonl(tmp_path / "in.jsonl", [record])
    stats = compress_file(source, tmp_path / "out.jsonl", "--max-tokens 50")
    assert read_jsonl(tmp_path / "out.jsonl")[0] == record
    tokens = COUNTER.messages([{"role": "system", "content": LOOK_ALIKE}, record["messages"][0]])
    assert stats["tokens"]["after"] == tokens > 50
    assert stats["over_budget"] == [{"id": "a", "line": 1, "tokens": tokens}]
