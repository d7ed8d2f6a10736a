"""Gemini API contents and Gemini CLI checkpoints: read, compressed, written back, and
never in a shape the API refuses (each rule checked here by the API's own error text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_responses import compress

from ctxcli.cli import cli
from ctxcli.formats import detect, detect_file, gemini, gemini_checkpoint
from ctxcli.tokens import DOCUMENT_TOKENS, IMAGE_TOKENS, TokenCounter

COUNTER = TokenCounter("o200k_base")
SYSTEM = {"parts": [{"text": "You are a coding agent."}]}
TOOLS = [{"functionDeclarations": [{"name": "read_file", "parameters": {"type": "object"}}]}]


def signature(n: int) -> str:
    return f"CiQB{n:04d}" + "Zm9vYmFy" * 40


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def call_part(n: int, k: int, *, ids: bool = False) -> dict[str, Any]:
    call: dict[str, Any] = {"name": f"tool_{k}", "args": {"path": f"src/file_{n}_{k}.py"}}
    if ids:
        call["id"] = f"call_{n}_{k}"
    part: dict[str, Any] = {"functionCall": call}
    if k == 0:  # parallel calls: the signature is on the first one only
        part["thoughtSignature"] = signature(n)
    return part


def response_part(n: int, k: int, *, ids: bool = False, size: int = 200) -> dict[str, Any]:
    text = f"contents of file {n}/{k}: " + " ".join(f"line{n}x{i}" for i in range(size))
    answer: dict[str, Any] = {"name": f"tool_{k}", "response": {"output": text}}
    if ids:
        answer["id"] = f"call_{n}_{k}"
    return {"functionResponse": answer}


def agent_run(
    steps: int = 12, parallel: int = 2, *, ids: bool = False, ongoing: bool = False
) -> dict[str, Any]:
    """A chat turn, a task, then steps of (thought, parallel calls) → responses; an
    answer and a new question, or (``ongoing``) the responses of the latest step."""
    contents: list[dict[str, Any]] = [
        user("Hello, what can you do?"),
        {"role": "model", "parts": [{"text": "I can read and fix code. " * 20}]},
        user("Fix the failing test in src/."),
    ]
    for n in range(steps):
        thought = {"text": f"I should look at the files of step {n}.", "thought": True}
        calls = [call_part(n, k, ids=ids) for k in range(parallel)]
        contents.append({"role": "model", "parts": [thought, *calls]})
        contents.append(
            {"role": "user", "parts": [response_part(n, k, ids=ids) for k in range(parallel)]}
        )
    if not ongoing:
        answer = {"text": "Fixed it.", "thoughtSignature": signature(99)}
        contents += [{"role": "model", "parts": [answer]}, user("Thanks. Now run the linter.")]
    return {"systemInstruction": SYSTEM, "contents": contents, "tools": TOOLS}


def _has(content: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [p[name] for p in content["parts"] if name in p]


def api_errors(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The Gemini API's errors for ``after`` (a compressed copy of ``before``),
    checked apart from ctxcli's own rules."""
    errors = []
    signed = any("thoughtSignature" in p for c in before for p in c["parts"])
    current = max(
        (
            i
            for i, c in enumerate(after)
            if c["role"] == "user" and any("functionResponse" not in p for p in c["parts"])
        ),
        default=0,
    )
    for i, content in enumerate(after):
        calls, answers = _has(content, "functionCall"), _has(content, "functionResponse")
        previous = after[i - 1] if i else None
        if calls and (previous is None or previous["role"] != "user"):
            errors.append(
                "Please ensure that function call turn comes immediately after a user turn "
                "or after a function response turn."
            )
        if answers and (previous is None or not _has(previous, "functionCall")):
            errors.append(
                "Please ensure that function response turn comes immediately after a "
                "function call turn."
            )
        if (
            calls
            and i + 1 < len(after)
            and len(_has(after[i + 1], "functionResponse")) != len(calls)
        ):
            errors.append(
                "Please ensure that the number of function response parts is equal to the "
                "number of function call parts of the function call turn."
            )
        if answers and previous is not None:
            asked = {c.get("id") for c in _has(previous, "functionCall")}
            errors += [
                f"unknown id {a['id']}" for a in answers if "id" in a and a["id"] not in asked
            ]
        first = next((p for p in content["parts"] if "functionCall" in p), None)
        if signed and i >= current and first is not None and "thoughtSignature" not in first:
            errors.append(
                "Function call is missing a thought_signature in functionCall parts. "
                f"Additional data, function call `default_api:{first['functionCall']['name']}`"
                f" , position {i + 1}."
            )
    if not _same_sides(before):
        errors += [
            "Please ensure that multiturn requests alternate between user and model."
            for a, b in zip(after, after[1:])
            if a["role"] == b["role"]
        ]
    signed_parts = [p for c in before for p in c["parts"] if "thoughtSignature" in p]
    for content in after:
        for part in content["parts"]:
            if "thoughtSignature" in part:
                assert part in signed_parts  # byte-exact, on the part it came with
    return errors


def _same_sides(contents: list[dict[str, Any]]) -> bool:
    """Whether two Contents of one role meet in ``contents``."""
    return any(a["role"] == b["role"] for a, b in zip(contents, contents[1:]))


def test_contents_are_detected_and_read_into_units() -> None:
    record = agent_run(steps=2)
    assert detect(record) is gemini
    conversation = gemini.read(record, COUNTER, path="a", line=1)
    roles = [m.role for m in conversation.messages]
    steps = ["assistant", "tool", "tool"] * 2
    assert roles == ["system", "user", "assistant", "user", *steps, "assistant", "user"]
    assert conversation.messages[0].is_system
    first_step = conversation.messages[4]
    # calls without ids get neutral ones, and their responses answer them in order
    assert [c["id"] for c in first_step.data["tool_calls"]] == ["ctxcli-3-1", "ctxcli-3-2"]
    assert [m.data["tool_call_id"] for m in conversation.messages[5:7]] == [
        "ctxcli-3-1",
        "ctxcli-3-2",
    ]
    assert conversation.messages[5].data["content"].startswith("contents of file 0/0")
    assert conversation.extra_tokens > 0  # the function declarations
    assert gemini.problems(record, conversation) == []


def test_responses_pair_by_id_else_by_name_else_by_order() -> None:
    calls = [
        {"functionCall": {"name": "a", "args": {}, "id": "x"}},
        {"functionCall": {"name": "b", "args": {}}},
        {"functionCall": {"name": "b", "args": {"n": 2}}},
        {"functionCall": {"name": "c", "args": {}}},
    ]
    answers = [
        {"functionResponse": {"name": "b", "response": {"output": "b1"}}},
        {"functionResponse": {"name": "z", "response": {"output": "?"}}},
        {"functionResponse": {"name": "a", "id": "x", "response": {"output": "a"}}},
        {"functionResponse": {"name": "b", "response": {"output": "b2"}}},
    ]
    record = {
        "contents": [
            user("go"),
            {"role": "model", "parts": calls},
            {"role": "user", "parts": answers},
        ]
    }
    conversation = gemini.read(record, COUNTER, path="a", line=1)
    paired = {m.data["content"]: m.data["tool_call_id"] for m in conversation.messages[2:]}
    # by id first, then the two "b" by name in order, and "z" takes what is left
    assert paired == {"b1": "ctxcli-1-1", "?": "ctxcli-1-3", "a": "x", "b2": "ctxcli-1-2"}
    assert gemini.problems(record, conversation) == []


@pytest.mark.parametrize("budget", [400, 1500, 4000, 100_000])
@pytest.mark.parametrize("stages", ["placeholder,summary,priority", "window", "priority"])
@pytest.mark.parametrize("ongoing", [False, True], ids=["answered", "ongoing"])
def test_compressed_contents_never_meet_an_api_error(
    tmp_path: Path, budget: int, stages: str, ongoing: bool
) -> None:
    record = agent_run(ongoing=ongoing)
    (out,) = compress(tmp_path, [record], "--max-tokens", str(budget), "--stages", stages)
    assert api_errors(record["contents"], out["contents"]) == []
    assert out["systemInstruction"] == SYSTEM and out["tools"] == TOOLS
    assert out["contents"][-1] == record["contents"][-1]
    assert "ctxcli-" not in json.dumps(out)  # neutral ids never reach the output
    if budget == 100_000 and stages == "priority":
        assert out == record
    elif budget < 100_000:
        assert len(out["contents"]) < len(record["contents"])


def test_summaries_beside_the_task_join_its_turn_as_parts(tmp_path: Path) -> None:
    # The API takes no two user turns in a row: the summary of the chat before the
    # task, and that of the steps after it, are text parts of the task's own Content.
    record = agent_run(ongoing=True)
    (out,) = compress(tmp_path, [record], "--max-tokens", "4000")
    assert api_errors(record["contents"], out["contents"]) == []
    before, task, steps = (p["text"] for p in out["contents"][0]["parts"])
    assert task == "Fix the failing test in src/."
    assert before.startswith("[ctxcli summary] 2 earlier messages folded.")
    assert steps.startswith("[ctxcli summary] 22 earlier messages folded.")
    assert "tool_0(src/file_0_0.py" in steps
    assert out["contents"][1:] == record["contents"][-2:]  # the last step, as it was


def test_a_chat_summary_that_meets_the_latest_turn_joins_it(tmp_path: Path) -> None:
    # A chat's fold could not end at a user Content (the summary would be a second
    # user turn in a row): turns were dropped with no summary. The writer joins them.
    contents = []
    for i in range(4):
        contents.append(user(f"What does order ORD-{7100 + i} hold?"))
        contents.append({"role": "model", "parts": [{"text": f"It holds {i + 2} lamps. " * 12}]})
    contents += [user("Which of them shipped?"), {"role": "model", "parts": [{"text": "All."}]}]
    (out,) = compress(tmp_path, [{"contents": contents}], "--max-tokens", "150")
    assert api_errors(contents, out["contents"]) == []
    summary, latest = out["contents"][0]["parts"]
    assert summary["text"].startswith("[ctxcli summary] 8 earlier messages folded.")
    assert "ORD-7100" in summary["text"] and latest == contents[-2]["parts"][0]
    assert out["contents"][1:] == contents[-1:]


def test_steps_after_a_turn_that_opens_with_responses_are_folded_too(tmp_path: Path) -> None:
    # The user's latest words may share a Content with the responses to the calls
    # before them. The steps after that turn were never folded: priority dropped them,
    # with no summary to say what they did. Now their summary is one more text part.
    record = agent_run(steps=2, ongoing=True)
    contents = record["contents"]
    contents[-1]["parts"].append({"text": "Now fix src/other.py instead."})
    for n in range(10, 22):
        contents.append({"role": "model", "parts": [call_part(n, 0), call_part(n, 1)]})
        contents.append({"role": "user", "parts": [response_part(n, 0), response_part(n, 1)]})
    (out,) = compress(tmp_path, [record], "--max-tokens", "6000")
    assert api_errors(contents, out["contents"]) == []
    turn = next(
        c for c in out["contents"] if {"text": "Now fix src/other.py instead."} in c["parts"]
    )
    assert [next(iter(p)) for p in turn["parts"]] == ["functionResponse"] * 2 + ["text"] * 2
    steps = turn["parts"][-1]["text"]
    assert steps.startswith("[ctxcli summary]") and "tool_0(src/file_10_0.py" in steps, steps
    assert out["contents"][-2:] == contents[-2:]


def test_a_system_summary_is_a_user_part_in_contents(tmp_path: Path) -> None:
    # Contents have no system role: with --summary-role system a summary is still
    # written, and counted, as the user side, whatever the latest turn holds.
    record = agent_run(steps=3, ongoing=True)
    record["contents"][-1]["parts"].append({"text": "Also look at src/util.py."})
    (out,) = compress(tmp_path, [record], "--max-tokens", "1000", "--summary-role", "system")
    assert api_errors(record["contents"], out["contents"]) == []
    assert out["contents"][0]["parts"][0]["text"].startswith("[ctxcli summary]")
    assert out["contents"][-1] == record["contents"][-1]


def test_a_joined_summary_is_merged_when_compressed_again(tmp_path: Path) -> None:
    record = agent_run(steps=20, ongoing=True)
    runs = [tmp_path / str(n) for n in range(3)]  # each run its own store
    for run in runs:
        run.mkdir()
    (first,) = compress(runs[0], [record], "--max-tokens", "6000")
    (again,) = compress(runs[1], [first], "--max-tokens", "4000")
    assert api_errors(record["contents"], again["contents"]) == []
    texts = [p["text"] for p in again["contents"][0]["parts"]]
    assert texts[1] == "Fix the failing test in src/."
    assert [t.partition(" #")[0] for t in texts if t.startswith("[ctxcli summary]")] == [
        "[ctxcli summary] 2 earlier messages folded.",
        "[ctxcli summary] 38 earlier messages folded.",  # 36 then, and 2 more: one summary
    ]
    (same,) = compress(runs[2], [again], "--max-tokens", "4000")
    assert same == again


def test_calls_with_ids_keep_them_paired(tmp_path: Path) -> None:
    record = agent_run(ids=True)
    (out,) = compress(tmp_path, [record], "--max-tokens", "1500")
    assert api_errors(record["contents"], out["contents"]) == []


def test_no_change_gives_back_the_file_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(json.dumps(agent_run(steps=n), indent=None) + "\n" for n in (1, 3, 5))
    )
    result = CliRunner().invoke(
        cli, ["compress", str(source), "--max-tokens", "0", "--stages", "priority"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "in.compressed.jsonl").read_bytes() == source.read_bytes()


def test_placeholders_patch_the_response_only_and_restore(tmp_path: Path) -> None:
    record = agent_run(steps=3, parallel=1)
    record["contents"][-3]["parts"][0]["functionResponse"]["response"] = {
        "result": {"rows": list(range(300))}  # no output key: the whole object is stored
    }
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record) + "\n")
    args = ["--stages", "placeholder", "--placeholder-threshold", "50"]
    args += ["--placeholder-keep-recent", "0"]
    result = CliRunner().invoke(cli, ["compress", str(source), *args])
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "in.compressed.jsonl").read_text())
    answers = [
        p["functionResponse"]
        for c in out["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert len(answers) == 3
    for answer in answers:
        assert list(answer["response"]) == ["output"]
        assert answer["response"]["output"].startswith("[ctxcli placeholder")
        assert set(answer) == {"name", "response"}
    assert api_errors(record["contents"], out["contents"]) == []
    restored = CliRunner().invoke(cli, ["restore", str(tmp_path / "in.compressed.jsonl")])
    assert restored.exit_code == 0, restored.output
    assert json.loads(restored.stdout) == record


def test_problems_name_the_contents_with_the_api_error_texts() -> None:
    contents = [
        user("go"),
        {"role": "model", "parts": [{"text": "thinking aloud"}]},
        {"role": "model", "parts": [call_part(0, 0), call_part(0, 1)]},
        {"role": "user", "parts": [response_part(0, 0)]},
        {"role": "user", "parts": [response_part(1, 0)]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
    ]
    record = {"contents": contents}
    conversation = gemini.read(record, COUNTER, path="a", line=1)
    assert [str(p) for p in gemini.problems(record, conversation)] == [
        "content 2: Please ensure that function call turn comes immediately after a user "
        "turn or after a function response turn.",
        "content 2: Please ensure that the number of function response parts is equal to the "
        "number of function call parts of the function call turn (2 calls, 1 responses).",
        "content 4: Please ensure that function response turn comes immediately after a "
        "function call turn.",
        "content 5: Function call is missing a thought_signature in functionCall parts "
        "(function call `f`).",
    ]


def test_media_parts_count_at_a_fixed_cost_never_as_text() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo" * 5000}}
    pdf = {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}}
    frame = COUNTER.message({"role": "user", "content": []})
    assert COUNTER.message({"role": "user", "content": [image]}) == frame + IMAGE_TOKENS
    assert COUNTER.message({"role": "user", "content": [pdf]}) == frame + DOCUMENT_TOKENS
    record = {"contents": [{"role": "user", "parts": [{"text": "what is this?"}, image]}]}
    conversation = gemini.read(record, COUNTER, path="a", line=1)
    assert conversation.messages[0].tokens < 200


def test_snake_case_and_history_records_read_the_same() -> None:
    snake = {
        "system_instruction": SYSTEM,
        "contents": [
            user("go"),
            {"role": "model", "parts": [{"function_call": {"name": "f", "args": {}}}]},
            {"role": "function", "parts": [{"function_response": {"name": "f", "response": {}}}]},
        ],
    }
    conversation = gemini.read(snake, COUNTER, path="a", line=1)
    assert [m.role for m in conversation.messages] == ["system", "user", "assistant", "tool"]
    assert gemini.problems(snake, conversation) == []
    checkpoint = {"history": agent_run(steps=1)["contents"], "authType": "oauth-personal"}
    assert detect(checkpoint) is gemini
    assert len(gemini.read(checkpoint, COUNTER, path="a", line=1).messages) == 8


def checkpoint(tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    contents = agent_run(ongoing=True)["contents"]
    source = tmp_path / "checkpoint-fix.json"
    source.write_text(json.dumps(contents, indent=2) + "\n")  # as the CLI saves it
    return contents, source


FORCED = ["--format", "gemini-checkpoint"]


def test_a_checkpoint_array_is_one_conversation(tmp_path: Path) -> None:
    contents, source = checkpoint(tmp_path)
    assert detect_file(contents[:20]) is gemini_checkpoint
    conversation = gemini_checkpoint.read(contents, COUNTER, path="c", line=0)
    assert len(conversation.messages) == 3 + 12 * 3
    assert gemini_checkpoint.problems(contents, conversation) == []
    kept = [
        m for m in conversation.messages if m.entry in (0, len(contents) - 2, len(contents) - 1)
    ]
    out = gemini_checkpoint.write(contents, conversation.with_messages(kept))
    assert out == [contents[0], contents[-2], contents[-1]]
    assert all(a is b for a, b in zip(out, [contents[0], contents[-2], contents[-1]]))
    same = CliRunner().invoke(
        cli, ["compress", str(source), *FORCED, "--max-tokens", "0", "--stages", "priority"]
    )
    assert same.exit_code == 0, same.output
    assert (tmp_path / "checkpoint-fix.compressed.json").read_bytes() == source.read_bytes()
    checked = CliRunner().invoke(cli, ["validate", str(source), *FORCED])
    assert checked.exit_code == 0, checked.output


def test_a_compressed_checkpoint_is_the_kept_array(tmp_path: Path) -> None:
    contents, source = checkpoint(tmp_path)
    result = CliRunner().invoke(cli, ["compress", str(source), *FORCED, "--max-tokens", "1500"])
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "checkpoint-fix.compressed.json").read_text())
    assert isinstance(out, list) and len(out) < len(contents)
    assert api_errors(contents, out) == []
    forced = (tmp_path / "checkpoint-fix.compressed.json").read_bytes()
    found = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "1500"])
    assert found.exit_code == 0, found.output  # a checkpoint array needs no --format
    assert (tmp_path / "checkpoint-fix.compressed.json").read_bytes() == forced
    assert forced.startswith(source.read_bytes()[:10])  # the file's own indentation


def test_validate_names_the_format_and_the_content(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    record = {"contents": [user("hi"), {"role": "user", "parts": [response_part(0, 0)]}]}
    source.write_text(json.dumps(record) + "\n")
    result = CliRunner().invoke(cli, ["validate", str(source)])
    assert result.exit_code == 1
    assert (
        f"{source}:1: gemini: content 1: Please ensure that function response turn comes "
        "immediately after a function call turn." in result.stdout
    )


def test_the_oracle_knows_each_api_error() -> None:
    before = agent_run(steps=2, ongoing=True)["contents"]
    unsigned = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}
    # task, step 0's calls, step 1's calls and responses, an unsigned call answered by
    # step 0's two responses, a model text, and step 1's responses again
    after = [before[2], before[3], before[5], before[6], unsigned, before[4], before[1]]
    after.append(before[6])
    count = (
        "Please ensure that the number of function response parts is equal to the number "
        "of function call parts of the function call turn."
    )
    assert api_errors(before, after) == [
        count,
        "Please ensure that function call turn comes immediately after a user turn or after "
        "a function response turn.",
        count,
        "Function call is missing a thought_signature in functionCall parts. Additional "
        "data, function call `default_api:f` , position 5.",
        "Please ensure that function response turn comes immediately after a function call turn.",
        # step 0's calls meet step 1's calls
        "Please ensure that multiturn requests alternate between user and model.",
    ]
