"""OpenAI Responses API item lists: read, compressed, written back, and never in a
shape the API refuses (each rule checked here by the API's own error text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_compress_cli import PLACEHOLDERS_ONLY

from ctxcli.cli import cli
from ctxcli.formats import detect, responses
from ctxcli.inputs import default_stats
from ctxcli.tokens import TokenCounter, opaque_tokens

COUNTER = TokenCounter("o200k_base")
ENCRYPTED = "gAAAAAB" + "x" * 800


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def reasoning(n: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": ENCRYPTED}


def call(n: int, k: int = 0) -> dict[str, Any]:
    arguments = json.dumps({"path": f"src/file_{n}_{k}.py"})
    return {
        "type": "function_call",
        "id": f"fc_{n}_{k}",
        "call_id": f"call_{n}_{k}",
        "name": "read_file",
        "arguments": arguments,
    }


def output(n: int, k: int = 0, size: int = 200) -> dict[str, Any]:
    text = f"contents of file {n}/{k}: " + " ".join(f"line{n}x{i}" for i in range(size))
    return {"type": "function_call_output", "call_id": f"call_{n}_{k}", "output": text}


def agent_run(steps: int = 12, parallel: int = 2) -> dict[str, Any]:
    """A task, then steps of reasoning → parallel calls → outputs, and an answer."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "You are a coding agent."},
        user("Fix the failing test in src/."),
    ]
    for n in range(steps):
        items.append(reasoning(n))
        items += [call(n, k) for k in range(parallel)]
        items += [output(n, k) for k in range(parallel)]
    items.append(reasoning(steps))
    items.append(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Fixed it."}],
        }
    )
    items.append(user("Thanks. Now run the linter."))
    return {"id": "run-1", "model": "gpt-5", "input": items}


def api_errors(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The API's errors for ``after`` (a compressed copy of ``before``), checked apart
    from ctxcli's own rules (an item without a ``type`` is a message)."""
    errors = []
    called: set[str] = set()
    answered: set[str] = set()
    reasoning_of = {}
    for i, item in enumerate(before):
        if (
            item.get("type", "message") == "function_call"
            and i
            and before[i - 1].get("type", "message") in ("reasoning",)
        ):
            reasoning_of[item["id"]] = before[i - 1]["id"]
        if (
            item.get("type", "message") == "function_call"
            and i
            and before[i - 1].get("type", "message") == "function_call"
        ):
            reasoning_of[item["id"]] = reasoning_of.get(before[i - 1]["id"])
    for i, item in enumerate(after):
        kind = item.get("type", "message")
        if kind == "reasoning":
            following = after[i + 1].get("type", "message") if i + 1 < len(after) else None
            if following not in ("function_call", "message", "reasoning", "mcp_call") or (
                following == "message" and after[i + 1]["role"] != "assistant"
            ):
                errors.append(
                    f"Item '{item['id']}' of type 'reasoning' was provided without its "
                    "required following item."
                )
        if kind == "function_call":
            called.add(item["call_id"])
            needed = reasoning_of.get(item["id"])
            if needed is not None and not any(
                x.get("id") == needed for x in after[:i] if x.get("type") == "reasoning"
            ):
                errors.append(
                    f"Item '{item['id']}' of type 'function_call' was provided without its "
                    f"required 'reasoning' item: '{needed}'."
                )
        if kind == "function_call_output":
            if item["call_id"] not in called:
                errors.append(
                    f"No tool call found for function call output with call_id {item['call_id']}."
                )
            answered.add(item["call_id"])
        if kind == "message" and called - answered:
            errors.append(f"No tool output found for function call {sorted(called - answered)[0]}.")
    for item in after:
        if item.get("type", "message") == "message" and item["role"] in ("system", "developer"):
            assert item in before  # kept as they were
    return errors


def compress(tmp_path: Path, records: list[dict[str, Any]], *args: str) -> list[dict[str, Any]]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(cli, ["compress", str(source), "-o", "-", "-q", *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_items_are_detected_and_read_into_units() -> None:
    record = agent_run(steps=2)
    assert detect(record) is responses
    conversation = responses.read(record, COUNTER, path="a", line=1)
    roles = [m.role for m in conversation.messages]
    # developer, user, (reasoning + 2 calls) + 2 outputs twice, reasoning + answer, user
    assert roles == ["developer", "user", *(["assistant", "tool", "tool"] * 2), "assistant", "user"]
    first_step = conversation.messages[2]
    assert [c["id"] for c in first_step.data["tool_calls"]] == ["call_0_0", "call_0_1"]
    assert conversation.meta["sources"][2] == (2, 3, 4)  # the reasoning goes with its calls
    assert responses.problems(record, conversation) == []


def test_messages_without_a_type_are_message_items(tmp_path: Path) -> None:
    """OpenAI's function-calling guide sends the user's question as ``{"role": "user",
    "content": …}``, no ``type`` (an ``EasyInputMessage``), before typed calls: "no
    format fits this record", and with ``--input-format responses`` "item 0 is an
    object without a type"."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for n in range(6):
        items += [call(n), output(n)]
    items += [{"role": "assistant", "content": "Fixed."}, {"role": "user", "content": "Lint."}]
    record = {"model": "gpt-4.1", "input": items}
    assert detect(record) is responses
    roles = [m.role for m in responses.read(record, COUNTER, path="a", line=1).messages]
    assert roles == ["user", *(["assistant", "tool"] * 6), "assistant", "user"]
    (after,) = compress(tmp_path, [record], "--max-tokens", "300")
    assert api_errors(items, after["input"]) == []
    assert after["input"][-1] == {"role": "user", "content": "Lint."}  # as it was: no type
    # a list of messages alone stays a chat's; an item_reference opens a list of items
    assert detect({"input": [{"role": "user", "content": "hi"}]}) is not responses
    reference = {"input": [{"type": "item_reference", "id": "msg_1"}, items[-1]]}
    assert detect(reference) is responses


@pytest.mark.parametrize("shape", ["string", "items"])
def test_instructions_are_counted_and_kept_as_a_system_prompt(tmp_path: Path, shape: str) -> None:
    """A request's ``instructions`` go into the model's context before its items: a
    6,000-token prompt counted 0, and ``--check`` passed it at a budget of 100."""
    prompt = "Follow rule 42 carefully. " * 200
    instructions: Any = prompt
    if shape == "items":  # as a Response echoes them
        instructions = [{"type": "message", "role": "developer", "content": prompt}]
    record = {**agent_run(steps=8), "instructions": instructions}
    conversation = responses.read(record, COUNTER, path="a", line=1)
    first = conversation.messages[0]
    assert (first.role, first.data["content"]) == ("system", prompt)
    assert first.tokens > 1000
    plain = responses.read(agent_run(steps=8), COUNTER, path="a", line=1)
    assert conversation.tokens == plain.tokens + first.tokens
    (after,) = compress(tmp_path, [record], "--max-tokens", str(first.tokens + 600))
    assert after["instructions"] == instructions  # written back where it was
    assert api_errors(record["input"], after["input"]) == []
    assert after["input"][0] == record["input"][0]  # no item of its own, nothing before it
    assert any("[ctxcli summary]" in json.dumps(item) for item in after["input"])
    source = tmp_path / "in.jsonl"
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", "-", "-q", "--max-tokens", "100", "--check"]
    )
    assert result.exit_code == 3  # over budget with what must be kept: no longer "fits"


def test_messages_alone_beside_instructions_are_a_request() -> None:
    """``{"instructions", "input": [{"role": "user", …}]}`` was read as a chat's messages
    under the well-known key ``input``, its instructions not counted."""
    messages = [{"role": "user", "content": "hi"}]
    assert detect({"instructions": "Be brief.", "input": messages}) is responses
    assert detect({"instructions": "Be brief.", "input": "hi"}) is responses
    assert detect({"model": "gpt-4.1", "input": messages}) is not responses  # a chat's log
    assert detect({"input": "hi"}) is None  # a dataset's field


def _computer_run(steps: int) -> list[dict[str, Any]]:
    """A computer-use run: a task, then reasoning, a click and its screenshot, each
    step; the screenshots large."""
    image = "data:image/png;base64," + "iVBORw0KGgo" * 200
    items: list[dict[str, Any]] = [{"role": "user", "content": "Book a table for 7pm."}]
    for n in range(steps):
        items.append(reasoning(n))
        action = {"type": "click", "x": 100 + n, "y": 200}
        items.append(
            {"type": "computer_call", "id": f"cu_{n}", "call_id": f"c{n}", "action": action}
        )
        screenshot = {"type": "computer_screenshot", "image_url": image}
        items.append({"type": "computer_call_output", "call_id": f"c{n}", "output": screenshot})
    return [*items, {"role": "user", "content": "Now confirm it."}]


@pytest.mark.parametrize("budget", range(1600, 12001, 800))
def test_a_computer_call_and_its_screenshot_are_never_parted(tmp_path: Path, budget: int) -> None:
    """At 1600 and 9200 tokens a computer-use run kept a ``computer_call_output``
    whose ``computer_call`` was folded: "No tool call found for computer call output
    with call_id …". And validate said nothing."""
    items = _computer_run(8)
    (after,) = compress(tmp_path, [{"input": items}], "--max-tokens", str(budget))
    answers = [i["call_id"] for i in after["input"] if i.get("type") == "computer_call_output"]
    calls = [i["call_id"] for i in after["input"] if i.get("type") == "computer_call"]
    assert answers == calls
    assert all(i in items for i in after["input"] if i.get("type", "").startswith("computer"))


def _answers_without_calls(items: list[dict[str, Any]]) -> list[str]:
    """The call ids of the answers in ``items`` with no call before them (any kind)."""
    called: set[Any] = set()
    orphans = []
    for item in items:
        kind = item.get("type", "message")
        if kind.endswith("_call"):
            called.add(item.get("call_id"))
        elif kind.endswith("_output") and item.get("call_id") not in called:
            orphans.append(item["call_id"])
    return orphans


@pytest.mark.parametrize("budget", range(900, 2601, 100))
def test_a_result_apart_from_its_call_is_folded_with_it(tmp_path: Path, budget: int) -> None:
    """A breaker's run: a ``function_call`` c1, a message, then c1's output. From 2100
    to 2500 tokens the output kept the message and c1's output and folded the call
    (the API's "No tool call found for function call output with call_id c1"), though
    it said the input was "compressed as it is, not repaired"."""
    words = " ".join(f"w{k}" for k in range(600))
    items = [
        {"role": "user", "content": "Fix the test."},
        {**call(0), "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_0_0", "output": words},
        {**call(1), "arguments": json.dumps({"text": words})},
        {"role": "assistant", "content": "Writing it."},
        {"type": "function_call_output", "call_id": "call_1_0", "output": "ok"},
        {"role": "assistant", "content": f"Done. {words}"},
        {"role": "user", "content": "Now commit."},
    ]
    (after,) = compress(tmp_path, [{"input": items}], "--max-tokens", str(budget))
    assert _answers_without_calls(after["input"]) == []


@pytest.mark.parametrize("budget", [300, 1000, 2000, 3000])
def test_parallel_hosted_calls_stay_with_their_answers(tmp_path: Path, budget: int) -> None:
    """``shell_call s1, shell_call s2, shell_call_output s1, shell_call_output s2`` was
    four messages: compress said "summary stage broke a rule (No tool call found for
    shell call output …); written as read", over budget, exit 5."""
    output = [{"stdout": " ".join(f"line{k}" for k in range(500)), "stderr": ""}]
    items: list[dict[str, Any]] = [{"role": "user", "content": "Run both checks."}]
    items += [
        {"type": "shell_call", "call_id": f"s{k}", "action": {"commands": ["ls"]}} for k in (1, 2)
    ]
    items += [{"type": "shell_call_output", "call_id": f"s{k}", "output": output} for k in (1, 2)]
    items += [{"role": "assistant", "content": "Both ran."}, {"role": "user", "content": "Thanks."}]
    (after,) = compress(tmp_path, [{"input": items}], "--max-tokens", str(budget))
    assert _answers_without_calls(after["input"]) == []
    kept = [i for i in after["input"] if i.get("type", "").startswith("shell_call")]
    assert kept in ([], items[1:5])  # all four, as they were, or none


@pytest.mark.parametrize(
    "order",
    [
        ("c", "f", "co", "fo"),
        ("c", "f", "fo", "co"),
        ("f", "c", "fo", "co"),
        ("f", "c", "co", "fo"),
    ],
)
@pytest.mark.parametrize("budget", [200, 300, 1000])
def test_a_function_call_beside_a_hosted_one_keeps_its_output(
    tmp_path: Path, order: tuple[str, ...], budget: int
) -> None:
    """A breaker's run: ``computer_call c1, function_call f1, computer_call_output c1,
    function_call_output f1`` (each output after its call: the API takes it) was read
    as the hosted message up to ``c1``'s answer, ``f1`` inside it, and ``f1``'s output
    apart: "already breaks the rules in the input", and at 300 tokens the output kept
    ``f1``'s output and folded its call. The three other orders were said to break
    the rules too. The step is now one message, whatever the order."""
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}
    step = {
        "c": {"type": "computer_call", "call_id": "c1", "action": {"type": "screenshot"}},
        "f": {"type": "function_call", "call_id": "f1", "name": "lookup", "arguments": "{}"},
        "co": {"type": "computer_call_output", "call_id": "c1", "output": screenshot},
        "fo": {"type": "function_call_output", "call_id": "f1", "output": "result " * 3000},
    }
    items = [{"role": "user", "content": "Click and look up."}, *(step[k] for k in order)]
    items.append({"role": "user", "content": "Thanks, now summarize."})
    record = {"input": items}
    conversation = responses.read(record, COUNTER, path="a", line=1)
    assert responses.problems(record, conversation) == []
    assert conversation.meta["sources"] == [(0,), (1, 2, 3, 4), (5,)]
    (after,) = compress(tmp_path, [record], "--max-tokens", str(budget))
    assert _answers_without_calls(after["input"]) == []
    assert after["input"][-1] == items[-1]


def test_a_hosted_answer_apart_from_its_call_is_in_its_message() -> None:
    """A ``computer_call``, the assistant's word while it ran, then the screenshot:
    three messages, which a cut or a drop could part (the answer then without its
    call); one message now, up to the answer, but never across a user's message."""
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Click it."},
        {"type": "computer_call", "call_id": "c0", "action": {"type": "click"}},
        {"role": "assistant", "content": "Clicking."},
        {"type": "computer_call_output", "call_id": "c0", "output": screenshot},
        {"type": "computer_call", "call_id": "c1", "action": {"type": "click"}},
        {"role": "user", "content": "Wait."},
        {"type": "computer_call_output", "call_id": "c1", "output": screenshot},
    ]
    record = {"input": items}
    conversation = responses.read(record, COUNTER, path="a", line=1)
    assert conversation.meta["sources"] == [(0,), (1, 2, 3), (4,), (5,), (6,)]
    assert [i for i, _ in responses.written_items(conversation)] == items  # as read


def test_an_answer_without_its_hosted_call_is_a_problem() -> None:
    items = _computer_run(2)
    del items[2]  # the first computer_call
    record = {"input": items}
    problems = responses.problems(record, responses.read(record, COUNTER, path="a", line=1))
    assert [(p.rule, p.detail) for p in problems] == [
        ("result-without-call", "No tool call found for computer call output with call_id c0")
    ]


def test_a_local_shell_output_may_name_its_call_by_id() -> None:
    """The API reference's ``LocalShellCallOutput`` has ``id`` ("the unique ID of the
    local shell tool call generated by the model"), no ``call_id``: such an item was
    "item 2 (local_shell_call_output) has no call_id"."""
    action = {"type": "exec", "command": ["ls"]}
    items = [
        {"role": "user", "content": "List the files."},
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_9", "action": action},
        {"type": "local_shell_call_output", "id": "call_9", "output": "a.txt"},
    ]
    record = {"input": items}
    conversation = responses.read(record, COUNTER, path="a", line=1)
    assert [m.data.get("tool_call_id") for m in conversation.messages] == [None, None, "call_9"]
    assert responses.problems(record, conversation) == []


def test_odd_but_legal_records_and_item_files_are_read(tmp_path: Path) -> None:
    """A second breaker's: "no format fits" stopped the file for a request whose input
    is a string, a failed Response with no output, and a bare item file that opens, as
    the function-calling guide's list does, with a message without a type."""
    records = [
        {"model": "gpt-5", "input": "Hello there"},
        {"object": "response", "status": "failed", "output": []},
    ]
    assert compress(tmp_path, records, "--max-tokens", "3") == records  # as they were
    items = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "14 C"},
    ]
    source = tmp_path / "items.jsonl"
    source.write_text("".join(json.dumps(i) + "\n" for i in items))
    result = CliRunner().invoke(cli, ["count", str(source), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["files"][0]["messages"] == 3


def test_a_screenshot_counts_as_an_image_not_as_its_base64() -> None:
    """A 13 KB screenshot in a ``computer_call_output`` counted 9,172 tokens, the same
    image as ``input_image`` 85."""
    image = "data:image/png;base64," + "iVBORw0KGgo" * 1200
    screenshot = {"type": "computer_screenshot", "image_url": image}
    item = {"type": "computer_call_output", "call_id": "c0", "output": screenshot}
    assert (
        COUNTER.content([item])
        < COUNTER.content([{"type": "input_image", "image_url": image}]) + 20
    )


def test_a_response_object_is_read_from_its_output() -> None:
    response = {"object": "response", "id": "resp_1", "output": [reasoning(0), user("hi")]}
    response["output"][1] = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello."}],
    }
    assert detect(response) is responses
    conversation = responses.read(response, COUNTER, path="a", line=1)
    assert [m.role for m in conversation.messages] == ["assistant"]
    assert conversation.id == "resp_1"


def test_an_earlier_summary_is_known_when_compressed_again(tmp_path: Path) -> None:
    """A summary is written as one ``input_text`` part, which was not read back as a
    summary: compressed again, a Codex session's steps summary was taken for the
    latest user message and the user's real request was folded."""
    record = agent_run(steps=12)
    (once,) = compress(tmp_path, [record], "--max-tokens", "2500")
    (twice,) = compress(tmp_path, [once], "--max-tokens", "700")
    summaries = [i for i in twice["input"] if "[ctxcli summary]" in json.dumps(i)]
    assert len(summaries) == 1, summaries
    text = summaries[0]["content"][0]["text"]
    assert not text.partition("\n")[2].count("[ctxcli summary]")  # merged, not nested
    assert (
        twice["input"][-1] == record["input"][-1]
        and api_errors(record["input"], twice["input"]) == []
    )
    before = int(json.dumps(once).split(" earlier messages folded")[0].rpartition("] ")[2])
    assert int(text.split(" earlier messages folded")[0].rpartition("] ")[2]) >= before


def _search_call(found: str) -> dict[str, Any]:
    """A Response's ``mcp_call`` of a web search that returned ``found``."""
    return {
        "type": "mcp_call",
        "id": "mcp_1",
        "name": "web_search_exa",
        "arguments": '{"query": "NYC mayoral election results 2025"}',
        "output": found,
        "error": None,
    }


def test_hosted_tools_items_are_summarized_as_actions(tmp_path: Path) -> None:
    """A Response's ``mcp_list_tools`` and a 20 KB ``mcp_call`` were read as nothing:
    the summary was skipped and the priority stage dropped both (7,143 tokens to 400
    at a budget of 5,000). They are told as calls now, a failed one with its error."""
    found = json.dumps({"results": [{"url": f"https://news.example/{i}"} for i in range(300)]})
    tools = [{"name": "web_search_exa", "input_schema": {}}, {"name": "crawl", "input_schema": {}}]
    items: list[dict[str, Any]] = [
        user("Who won the election?"),
        {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "dmcp", "tools": tools},
        {"type": "mcp_call", "id": "mcp_2", "name": "crawl", "arguments": "{}", "error": "Timeout"},
        {"type": "web_search_call", "id": "ws_1", "action": {"query": "Mamdani"}, "status": "ok"},
        reasoning(0),
        _search_call(found),
        {"type": "message", "role": "assistant", "content": "Zohran Mamdani won."},
        user("By how much?"),
    ]
    (out,) = compress(tmp_path, [{"input": items}], "--max-tokens", "600")
    assert api_errors(items, out["input"]) == []
    summary = next(i for i in out["input"] if "[ctxcli summary]" in json.dumps(i))
    text = summary["content"][0]["text"]
    assert "mcp_list_tools(dmcp) → web_search_exa, crawl" in text, text
    assert "web_search_exa(NYC mayoral election results 2025) → ok" in text, text
    assert "crawl() → Timeout" in text and "web_search(Mamdani)" in text, text
    assert "https://news.example/0" in text


def test_an_mcp_calls_output_becomes_a_placeholder_in_its_own_item(tmp_path: Path) -> None:
    """An ``mcp_call`` holds its output (20 KB of search results in a real Response):
    read as an assistant message holding the item, it never became a placeholder, so
    the whole call was folded or kept whole. It is a call and its result now, written
    back as the one item with its ``output`` replaced, its other keys untouched."""
    found = json.dumps({"results": [{"url": f"https://news.example/{i}"} for i in range(300)]})
    call = {**_search_call(found), "server_label": "dmcp"}
    items: list[dict[str, Any]] = [
        user("Who won the election?"),
        reasoning(0),
        call,
        {"type": "message", "role": "assistant", "content": "Zohran Mamdani won."},
        user("By how much?"),
    ]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"input": items}) + "\n")
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(target), "-q", "--max-tokens", "1000"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(target.read_text())
    assert api_errors(items, out["input"]) == []
    assert [i["type"] for i in out["input"]] == [i["type"] for i in items]
    written = out["input"][2]
    assert written["output"].startswith("[ctxcli placeholder ") and len(written["output"]) < 3000
    assert {k: v for k, v in written.items() if k != "output"} == {
        k: v for k, v in call.items() if k != "output"
    }
    assert out["input"][1] == items[1]  # its reasoning, before it
    restored = tmp_path / "back.jsonl"
    result = CliRunner().invoke(cli, ["restore", str(target), "-o", str(restored)])
    assert result.exit_code == 0, result.output
    assert json.loads(restored.read_text())["input"] == items


def test_an_mcp_calls_arguments_become_a_placeholder_in_its_own_item(tmp_path: Path) -> None:
    """The arguments of an ``mcp_call`` read as a call and a result were counted as a
    placeholder but written back whole (the call's message stands for no item): 5,145
    tokens written where the stats said 742. They are patched into the item now, and
    restore puts them back."""
    lines = (f"line {i}: print('value {i} of the long script here')" for i in range(300))
    code = json.dumps({"code": "\n".join(lines)})
    call = {"type": "mcp_call", "id": "mcp_A", "name": "run_code", "arguments": code}
    answer = {"type": "output_text", "text": "done"}
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "run the script"},
        {**call, "output": "ok, exit 0"},
        {"type": "message", "role": "assistant", "content": [answer]},
        {"type": "message", "role": "user", "content": "thanks, and now?"},
    ]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"input": items}) + "\n")
    config = tmp_path / "c.yaml"
    config.write_text("placeholder: {clear_inputs: true}\n")
    args = ["compress", str(source), "-o", str(target), "-q", "--max-tokens", "1000"]
    args += ["--config", str(config), "--placeholder-keep-recent", "0"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    out = json.loads(target.read_text())
    written = out["input"][1]
    assert "ctxcli_placeholder" in written["arguments"] and len(written["arguments"]) < 3000
    assert COUNTER.text(target.read_text()) < 1200
    restored = tmp_path / "back.jsonl"
    result = CliRunner().invoke(cli, ["restore", str(target), "-o", str(restored)])
    assert result.exit_code == 0, result.output
    assert json.loads(restored.read_text())["input"] == items


def test_an_mcp_call_without_an_id_is_still_its_results_call() -> None:
    """With no ``id`` its call and result were paired by an empty id, and the summary
    read ``search(x) → ?`` with its facts under ``results``."""
    found = json.dumps({"results": [{"url": f"https://example.com/a/{i}"} for i in range(80)]})
    call = {"type": "mcp_call", "name": "search", "arguments": '{"q": "x"}', "output": found}
    conversation = responses.read({"input": [user("go"), call]}, COUNTER, path="a", line=1)
    assert (
        conversation.messages[1].call_ids
        == conversation.messages[2].result_ids
        == ("ctxcli-mcp-1",)
    )


def test_encrypted_content_counts_at_its_documented_cost_not_as_text() -> None:
    record = {
        "input": [
            user("hi"),
            reasoning(0),
            {"type": "message", "role": "assistant", "content": "ok"},
        ]
    }
    conversation = responses.read(record, COUNTER, path="a", line=1)
    assert opaque_tokens(ENCRYPTED) == len(ENCRYPTED) * 3 // 16 == 151
    plain = COUNTER.message(
        {"role": "assistant", "content": [{"type": "input_text", "text": "ok"}]}
    )
    assert conversation.messages[1].tokens == plain + 151
    compaction = {"input": [{"type": "compaction", "encrypted_content": ENCRYPTED}, user("go on")]}
    read = responses.read(compaction, COUNTER, path="a", line=1)
    assert read.messages[0].is_system  # never dropped, changed or summarized
    assert read.messages[0].tokens == COUNTER.message({"role": "developer", "content": None}) + 151


@pytest.mark.parametrize("budget", [300, 800, 1500, 3000, 100_000])
@pytest.mark.parametrize("stages", ["placeholder,summary,priority", "window", "priority"])
def test_compressed_items_never_meet_an_api_error(tmp_path: Path, budget: int, stages: str) -> None:
    record = agent_run()
    (out,) = compress(tmp_path, [record], "--max-tokens", str(budget), "--stages", stages)
    assert api_errors(record["input"], out["input"]) == []
    assert out["input"][0] == record["input"][0]  # the developer message
    assert out["input"][-1] == record["input"][-1]  # the latest user message
    if budget == 100_000:
        if stages == "priority":  # placeholders replace large outputs, window keeps 10,
            # whatever the budget
            assert out == record
    else:
        assert len(out["input"]) < len(record["input"])
    for item in out["input"]:
        if item["type"] == "reasoning":
            assert item in record["input"]  # id and encrypted_content untouched


def test_placeholders_patch_the_output_item_and_restore(tmp_path: Path) -> None:
    record = agent_run(steps=3, parallel=1)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record) + "\n")
    result = CliRunner().invoke(cli, ["compress", str(source), *PLACEHOLDERS_ONLY])
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "in.compressed.jsonl").read_text())
    outputs = [i for i in out["input"] if i["type"] == "function_call_output"]
    assert all(o["output"].startswith("[ctxcli placeholder") for o in outputs), outputs[0]
    assert [set(o) for o in outputs] == [{"type", "call_id", "output"}] * 3
    restored = CliRunner().invoke(cli, ["restore", str(tmp_path / "in.compressed.jsonl")])
    assert restored.exit_code == 0, restored.output
    assert json.loads(restored.stdout) == record


def test_problems_name_the_items_with_the_api_error_texts() -> None:
    items = [user("hi"), reasoning(0), output(0), call(1)]
    conversation = responses.read({"input": items}, COUNTER, path="a", line=1)
    assert [str(p) for p in responses.problems({"input": items}, conversation)] == [
        "item 1: Item 'rs_0' of type 'reasoning' was provided without its required following item",
        "message 2: tool result 'call_0_0' without its call",
    ]


def test_validate_and_a_record_without_items_name_the_format(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps({"input": [user("hi"), call(0), user("again")]}) + "\n")
    result = CliRunner().invoke(cli, ["validate", str(source)])
    assert result.exit_code == 1
    assert (
        f"{source}:1: responses: message 1: tool calls ['call_0_0'] have no result" in result.stdout
    )


@pytest.mark.parametrize("shape", ["json-array", "jsonl-items", "jsonl-arrays"])
def test_bare_item_lists_are_one_conversation_each(tmp_path: Path, shape: str) -> None:
    items = agent_run()["input"]
    source = tmp_path / ("run.json" if shape == "json-array" else "run.jsonl")
    if shape == "json-array":
        source.write_text(json.dumps(items, indent=2) + "\n")
    elif shape == "jsonl-items":
        source.write_text("".join(json.dumps(i) + "\n" for i in items))
    else:  # a line a request: two item lists
        source.write_text(json.dumps(items) + "\n" + json.dumps(items[:5]) + "\n")
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "1500", "-q"])
    assert result.exit_code == 0, result.output
    out_path = tmp_path / source.name.replace("run.", "run.compressed.")
    text = out_path.read_text()
    if shape == "json-array":
        out = [json.loads(text)]
        assert text.startswith("[\n  {")  # the file's own style
    elif shape == "jsonl-items":
        out = [[json.loads(line) for line in text.splitlines()]]
    else:
        out = [json.loads(line) for line in text.splitlines()]
        assert out[1] == items[:5]
    assert api_errors(items, out[0]) == []
    assert len(out[0]) < len(items) and out[0][-1] == items[-1]
    stats = json.loads(Path(default_stats(str(out_path))).read_text())
    assert stats["conversations"] == (2 if shape == "jsonl-arrays" else 1)
    assert CliRunner().invoke(cli, ["validate", str(out_path)]).exit_code == 0
    same = CliRunner().invoke(
        cli, ["compress", str(source), "--max-tokens", "0", "--stages", "priority", "-q"]
    )
    assert same.exit_code == 0 and out_path.read_bytes() == source.read_bytes()


def test_a_response_output_gets_no_user_message(tmp_path: Path) -> None:
    # A Response's output holds only what the model produced; the summary stage
    # wrote its summary there as a user message, which a Response's schema refuses.
    def said(text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }

    items = [said(f"part {n}: " + "word " * 300) for n in range(4)] + [said("done")]
    record = {"id": "resp_1", "object": "response", "model": "gpt-5", "output": items}
    result = CliRunner().invoke(
        cli, ["compress", "-", "-o", "-", "--max-tokens", "400"], input=json.dumps(record) + "\n"
    )
    assert result.exit_code == 0, result.output
    assert "safer plan" not in result.stderr and "broke a rule" not in result.stderr
    after = json.loads(result.stdout)["output"]
    assert {item["role"] for item in after} == {"assistant"} and after[-1] == items[-1]
    # older large results still become placeholders, in place: only folding is out
    steps = [item for n in range(4) for item in (call(n), output(n, size=400))]
    calls = {"id": "resp_2", "object": "response", "output": [*steps, items[-1]]}
    result = CliRunner().invoke(
        cli, ["compress", "-", "-o", "-", "--max-tokens", "4000"], input=json.dumps(calls) + "\n"
    )
    after = json.loads(result.stdout)["output"]
    assert [item["type"] for item in after] == [item["type"] for item in calls["output"]]
    assert "[ctxcli placeholder" in after[1]["output"]
    # a Response read from the request's input beside it (--messages-key input) is a
    # request: its user messages are no fault, and it is summarized as one
    logged = {**record, "input": [user(f"ask {n} " + "word " * 200) for n in range(4)]}
    args = ["compress", "-", "-o", "-", "--max-tokens", "400", "--messages-key", "input"]
    result = CliRunner().invoke(cli, args, input=json.dumps(logged) + "\n")
    assert result.exit_code == 0 and "broke a rule" not in result.stderr, result.output
    assert "[ctxcli summary]" in json.dumps(json.loads(result.stdout)["input"])
    # and validate names one, where it is
    broken = {**record, "output": [user("hi"), *items]}
    problems = responses.problems(broken, responses.read(broken, COUNTER, path="a", line=1))
    assert [p.detail for p in problems] == [
        "a Response's output holds only output items, and item 0 is a user message"
    ]


def test_a_custom_tool_calls_input_is_never_made_a_placeholder(tmp_path: Path) -> None:
    # An apply_patch call's input (free text) became '{"ctxcli_placeholder": …}': no
    # patch any more, as a chat's custom tool call's input never becomes. It is kept
    # whole, or folded with its output into the summary.
    patch = "*** Begin Patch\n" + "".join(f"+line {n} of the new file\n" for n in range(300))
    items: list[dict[str, Any]] = [user("Fix the bug in src/app.py.")]
    items.append(
        {"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": patch}
    )
    items.append({"type": "custom_tool_call_output", "call_id": "p1", "output": "Done."})
    for n in range(2):
        items += [call(n), output(n, size=100)]
    items.append({"type": "message", "role": "assistant", "content": "Patched."})
    items.append(user("Now run the tests."))
    record = {"id": "run-1", "model": "gpt-5", "input": items}
    kept = []
    for budget in ("3000", "3500", "4000"):
        (after,) = compress(tmp_path, [record], "--max-tokens", budget)
        calls = [i for i in after["input"] if i.get("type") == "custom_tool_call"]
        assert all(c["input"] == patch for c in calls), budget
        assert api_errors(items, after["input"]) == []
        kept.append(len(calls))
    assert kept == [0, 0, 1]
