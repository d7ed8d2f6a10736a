"""The placeholder stage: what it replaces, what it keeps, the format, and that
restore after a placeholder-only pipeline gives back the input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.cli import cli
from ctxcli.config import resolve
from ctxcli.errors import ConfigError
from ctxcli.model import make_conversation
from ctxcli.pipeline import DEFAULT_STAGES, Context, build_stage, run
from ctxcli.placeholders import FACT_CHARS
from ctxcli.stages.placeholder import (
    Placeholder,
    content_id,
    cut_preview,
    omitted_facts,
    parse,
    parse_arguments,
    render,
    reports_error,
    settle_store,
)
from ctxcli.store import restore_record
from ctxcli.tokens import get_counter

COUNTER = get_counter("cl100k_base")
BIG = "line of a long tool output\n" * 60  # about 360 tokens


def call(call_id: str, name: str = "read", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def agent(*results: Any, names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """system, user, then one call + result per item of ``results``, then an answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Do the task."},
    ]
    for i, content in enumerate(results):
        name = names[i] if i < len(names) else "read"
        messages.append({"role": "assistant", "content": None, "tool_calls": [call(f"c{i}", name)]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": content})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def apply(messages: list[dict[str, Any]], **options: Any) -> tuple[list[dict[str, Any]], Any]:
    conversation = make_conversation(messages, COUNTER)
    result = settle_store(run(conversation, [Placeholder(**options)], Context(None, COUNTER)))
    return [dict(m.data) for m in result.after.messages], result


def test_a_large_old_result_becomes_a_placeholder_and_the_rest_stays() -> None:
    messages = agent(BIG, "small", BIG)
    out, result = apply(messages, threshold=100, keep_recent=1)
    assert out[3]["content"] != BIG and parse(out[3]["content"])
    assert {k: v for k, v in out[3].items() if k != "content"} == {
        "role": "tool",
        "tool_call_id": "c0",
    }
    assert out[5] == messages[5]  # small
    assert out[7] == messages[7]  # the most recent result stays whole
    assert result.stored == {content_id(BIG): BIG}
    events = result.events["placeholder"]
    assert events["placeholders_written"] == 1
    assert events["tokens_saved"] == result.before.tokens - result.after.tokens > 300
    changed = [m.index for m in result.after.messages if m.changed]
    assert changed == [3]


def test_the_format_says_what_was_there() -> None:
    out, _ = apply(agent(BIG, "x"), threshold=100, keep_recent=1, head_chars=30, tail_chars=10)
    match = parse(out[3]["content"])
    assert match is not None
    assert match["id"] == content_id(BIG) and len(match["id"]) == 16
    assert json.loads(match["tool"]) == "read"
    assert int(match["tokens"]) == COUNTER.text(BIG)
    assert int(match["chars"]) == len(BIG)
    preview = match["preview"]
    head, tail = int(match["head"]), int(match["tail"])
    assert preview[:head] == BIG[:head] and preview[-tail:] == BIG[-tail:]
    assert 15 <= head <= 30 and BIG[head] == "\n"  # cut at a line end
    assert 5 <= tail <= 10 and BIG[-tail - 1] in "\n "  # and between words
    assert f"[... {len(BIG) - head - tail} characters omitted ...]" in preview


#: tau-bench run 169's get_user_details result, shortened. Its placeholder named facts
#: for only a sixth of its characters, so that at a budget of 3000, which kept it in the
#: tail, the saved passenger's birth date and two reservations were lost, while at 2500,
#: which folded it, the summary held them (issue 15).
USER_DETAILS = json.dumps(
    {
        "name": {"first_name": "Raj", "last_name": "Brown"},
        "address": {"address1": "127 Chestnut Street", "city": "San Jose", "zip": "95153"},
        "email": "raj.brown6519@example.com",
        "dob": "1967-03-12",
        "payment_methods": {
            f"{kind}_{n}": {"source": kind, "id": f"{kind}_{n}", "last_four": str(n)[-4:]}
            for kind, n in (("credit_card", 7686643), ("gift_card", 6468981))
        }
        | {"credit_card_8003957": {"source": "credit_card", "brand": "visa", "last_four": "6521"}},
        "saved_passengers": [{"first_name": "Juan", "last_name": "Thomas", "dob": "1990-07-04"}],
        "membership": "regular",
        "reservations": ["VA5SGQ", "41WSQQ", "D9R9S0", "HTGCBX", "Q0K59Y", "N1EBKX"],
    }
)


def test_a_short_results_placeholder_names_every_fact_it_omits() -> None:
    text = render(USER_DETAILS, tool="get_user_details", tokens=300, head=100, tail=30, facts=True)
    preview = parse(text)
    assert preview is not None
    for fact in ("1967-03-12", "credit_card_8003957", "1990-07-04", "41WSQQ", "D9R9S0"):
        assert fact in preview["preview"], fact


def test_the_id_hashes_utf8_bytes_or_canonical_json() -> None:
    import hashlib

    assert content_id("é") == hashlib.sha256("é".encode()).hexdigest()[:16]
    parts = [{"type": "text", "text": "hi"}]
    canonical = b'[{"text":"hi","type":"text"}]'
    assert content_id(parts) == hashlib.sha256(b"\x00parts\x00" + canonical).hexdigest()[:16]
    assert content_id(canonical.decode()) != content_id(parts)  # no string shares it
    assert content_id("a\ud83d") == hashlib.sha256(b"a\xed\xa0\xbd").hexdigest()[:16]


@pytest.mark.parametrize(
    ("options", "names", "replaced"),
    [
        pytest.param({}, (), [3, 5], id="defaults-with-keep-recent-0"),
        pytest.param({"exclude_tools": ["grep"]}, ("grep", "read"), [5], id="exclude"),
        pytest.param({"exclude_tools": "grep"}, ("grep", "read"), [5], id="exclude-one-name"),
        pytest.param({"tool_thresholds": {"grep": 10_000}}, ("grep", "read"), [5], id="per-tool"),
        pytest.param({"threshold": 10_000}, (), [], id="under-threshold"),
        pytest.param(
            {"threshold": 10_000, "tool_thresholds": {"read": 10}}, ("x", "read"), [5], id="lower"
        ),
    ],
)
def test_which_results_are_replaced(
    options: dict[str, Any], names: tuple[str, ...], replaced: list[int]
) -> None:
    options = {"threshold": 100, "keep_recent": 0, **options}
    out, _ = apply(agent(BIG, BIG, names=names), **options)
    assert [i for i, m in enumerate(out) if parse(m.get("content"))] == replaced


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("Traceback (most recent call last):\n" + BIG, id="traceback"),
        pytest.param(BIG + "\nProcess exited with code 2", id="exit-status"),
        pytest.param(BIG + '\n"returncode": 1', id="returncode"),
        pytest.param("Error: " + BIG, id="leading-error"),
        pytest.param(json.dumps({"error": BIG}), id="error-field"),
    ],
)
def test_errors_stay_whole_unless_asked(content: str) -> None:
    assert reports_error({"role": "tool", "content": content})
    out, result = apply(agent(content, "x"), threshold=100, keep_recent=1)
    assert out[3]["content"] == content
    assert result.events["placeholder"]["errors_kept"] == 1
    out, _ = apply(agent(content, "x"), threshold=100, keep_recent=1, keep_errors=False)
    assert parse(out[3]["content"])


@pytest.mark.parametrize(
    "content",
    [BIG, BIG + "\nexit code 0", json.dumps({"error": None, "rows": BIG})],
)
def test_a_success_is_not_an_error(content: str) -> None:
    assert not reports_error({"role": "tool", "content": content})


def test_an_error_key_on_the_message_counts() -> None:
    assert reports_error({"role": "tool", "content": BIG, "is_error": True})


def test_legacy_function_results_and_list_content() -> None:
    parts = [{"type": "text", "text": BIG}, {"type": "image_url", "image_url": {"url": "x"}}]
    messages = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": BIG},
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        {"role": "tool", "tool_call_id": "a", "content": parts},
        {"role": "assistant", "content": "ok"},
    ]
    out, result = apply(messages, threshold=100, keep_recent=0)
    assert out[2]["name"] == "f" and json.loads(parse(out[2]["content"])["tool"]) == "f"
    match = parse(out[4]["content"])
    assert match and "[image]" in match["preview"]
    assert result.stored[content_id(parts)] == parts
    restored, ids, missing = restore_record({"messages": out}, result.stored)
    assert restored == {"messages": messages} and len(ids) == 2 and not missing


def test_a_placeholder_is_never_replaced_again_nor_larger_than_its_original() -> None:
    out, _ = apply(agent(BIG, "x"), threshold=100, keep_recent=1)
    again, result = apply(out, threshold=0, keep_recent=0)
    assert again == out
    assert not result.changed
    tiny = "word " * 20  # 20 tokens: a placeholder would not be smaller
    out, result = apply(agent(tiny, "x"), threshold=0, keep_recent=0)
    assert out[3]["content"] == tiny


def test_clear_inputs_replaces_long_arguments_with_json() -> None:
    arguments = json.dumps({"patch": BIG})
    messages = agent(BIG, "x")
    messages[2]["tool_calls"][0]["function"]["arguments"] = arguments
    out, result = apply(messages, threshold=100, keep_recent=1)
    assert out[2] == messages[2]
    out, result = apply(messages, threshold=100, keep_recent=1, clear_inputs=True)
    replaced = out[2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(replaced).keys() == {"ctxcli_placeholder"}
    assert parse_arguments(replaced)["id"] == content_id(arguments)
    assert out[2]["tool_calls"][0]["id"] == "c0"
    assert result.events["placeholder"]["inputs_cleared"] == 1
    restored, _, _ = restore_record({"messages": out}, result.stored)
    assert restored == {"messages": messages}


def test_cuts_never_split_a_character() -> None:
    text = "ab👍🏽cd" + "x" * 50 + "e\u0301f"
    assert cut_preview(text, 3, 0) == ("ab", "")  # not inside thumbs + skin tone
    assert cut_preview(text, 4, 0) == ("ab👍🏽", "")
    head, tail = cut_preview(text, 0, 2)
    assert tail == "f"  # not between e and its combining accent
    assert cut_preview("a\ud83d\ude00b", 2, 0) == ("a", "")  # not inside a pair


def test_previews_cut_at_line_ends_or_between_words() -> None:
    text = "first line here\nsecond line that goes on\n" + "x" * 500 + "\nlast words of it"
    head, tail = cut_preview(text, 30, 14)
    assert head == "first line here"  # the line end in the head's later half
    assert tail == "words of it"  # no line end in the tail's first half: a space
    head, _ = cut_preview("y" * 400, 30, 10)
    assert head == "y" * 30  # nowhere to cut between words: the count decides


def test_a_codex_exec_output_is_previewed_without_its_opening_lines() -> None:
    """A Codex CLI session's placeholders at a quarter of its tokens showed "Chunk ID:
    712654 / Wall time: 0.0000 seconds / Process exited with code 0 / Original token
    count: 714" as their whole head, and none of the output."""
    output = "src/app.ts: export const port = 3001;\n" + BIG
    for code, opening in (("0", "src/app.ts: export"), ("2", "exit 2\nsrc/app.ts")):
        content = (
            f"Chunk ID: 712654\nWall time: 0.0000 seconds\nProcess exited with code {code}\n"
            f"Original token count: 714\nOutput:\n{output}"
        )
        text = render(content, tool="exec_command", tokens=714, head=60, tail=20)
        assert text.split("\n", 1)[1].startswith(opening), text
        match = parse(text)
        assert match is not None and f"chars={len(content)}" in text


def test_an_error_word_in_a_dump_line_lists_from_that_word() -> None:
    """A Claude Code ``Edit``'s arguments, one line of JSON holding the field name
    ``lastConversationSyncError``, listed the line it stood in from its start: "{"file_path":
    "/Users/…", "old_string": "#### Type Definit"."""
    edit = json.dumps({"file_path": "/repo/a.md", "old_string": "x " * 200 + "syncError?: string"})
    assert omitted_facts(edit, "")[-1].startswith("syncError?: string")
    log = "ok\n" * 50 + "ValueError: invalid literal for int() with base 10: 'abc'\n" + "ok\n" * 50
    assert "ValueError: invalid literal for int() with base 10: 'abc'" in omitted_facts(log, "")


def test_a_placeholder_names_what_tells_most_before_numbers() -> None:
    """The sample agent run's test output listed ``tests/test_invoice.py, 100, 0.10,
    0.36, … 101, 102, 103 …`` in the order met: its room could end in line numbers
    before the ``FAILED`` line. Error lines and paths come first, then ids, then
    amounts and decimals, then bare numbers, each kind in the order met."""
    log = "".join(f"{n} ok 0.{n % 100:02d}\n" for n in range(100, 400))
    log += "FAILED tests/test_invoice.py::test_cents - NameError: name 'Decimal'\n"
    log += "see case_17 and INV-2026-11-0381\n"
    held = omitted_facts(log, "")
    assert held[:3] == [
        "FAILED tests/test_invoice.py::test_cents - NameError: name 'Decimal'",
        "tests/test_invoice.py",
        "case_17",
    ], held
    assert held[3] == "INV-2026-11-0381" and held[4] == "0.00", held
    kinds = ["bare" if fact.isdigit() else "other" for fact in held]
    assert kinds == sorted(kinds, key=lambda kind: kind == "bare"), held  # numbers last
    assert len(", ".join(held)) <= max(FACT_CHARS, len(log) // 8)  # the room as before


def test_cuts_stay_out_of_data_urls() -> None:
    url = "data:image/png;base64," + "A" * 200
    text = "see " + url + " end of text"
    head, tail = cut_preview(text, 40, 0)
    assert head == "see "
    head, tail = cut_preview(text, 0, 20)
    assert tail == "end of text"  # out of the URL, and between words


def test_a_lone_surrogate_is_replaced_in_the_preview_and_kept_in_the_store() -> None:
    content = "broken \ud83d here " + BIG
    text = render(content, tool="t", tokens=1, head=10, tail=5)
    assert "\ud83d" not in text and "broken \ufffd" in text
    text.encode("utf-8")  # strict UTF-8: no lone surrogate left
    out, result = apply(agent(content, "x"), threshold=100, keep_recent=1)
    assert result.stored[content_id(content)] == content


@pytest.mark.parametrize(
    "options",
    [{"threshold": -1}, {"keep_recent": "3"}, {"tool_thresholds": {"a": -2}}, {"head_chars": 1.5}],
)
def test_bad_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="stage 'placeholder'"):
        build_stage("placeholder", options)


def test_it_is_registered_and_on_by_default() -> None:
    assert DEFAULT_STAGES == ("placeholder", "summary", "priority")
    settings_ = resolve({"placeholder": {"threshold": 300, "tool_thresholds": {"grep": 50}}})
    stage = settings_.stages[0]
    assert isinstance(stage, Placeholder)
    assert stage.threshold == 300 and stage.limit("grep") == 50 and stage.limit("x") == 300


def test_the_side_channel_is_per_conversation() -> None:
    context = Context(None, COUNTER)
    stage = Placeholder(threshold=100, keep_recent=0)
    first = settle_store(run(make_conversation(agent(BIG), COUNTER), [stage], context))
    second = settle_store(run(make_conversation(agent("small"), COUNTER), [stage], context))
    assert list(first.stored) == [content_id(BIG)]
    assert second.stored == {} and context.stored == {}


# --- placeholder-like text in the input: only ctxcli's own placeholders are restored ---

#: A well-formed placeholder naming an id no store here holds.
FOREIGN = render("some original text", tool="x", tokens=4, head=4, tail=2)
MANGLED = "[ctxcli placeholder quoted by hand, not a whole one"


def tool_record(content: Any, *, arguments: str = "{}") -> dict[str, Any]:
    messages = agent(content)
    messages[2]["tool_calls"][0]["function"]["arguments"] = arguments
    return {"id": "r", "messages": messages}


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(
            {"messages": [{"role": "user", "content": f"see {FOREIGN} above"}]}, id="user-quotes"
        ),
        pytest.param({"messages": [{"role": "user", "content": FOREIGN}]}, id="user-is-one"),
        pytest.param({"messages": [{"role": "assistant", "content": MANGLED}]}, id="assistant"),
        pytest.param({"messages": [{"role": "system", "content": FOREIGN}]}, id="system"),
        pytest.param({"id": FOREIGN, "meta": {"note": MANGLED}, "messages": []}, id="metadata"),
        pytest.param(
            {"messages": [{"role": "user", "content": [{"type": "text", "text": FOREIGN}]}]},
            id="text-block",
        ),
        pytest.param(
            {"messages": [{"role": "tool", "tool_call_id": "a", "content": f"x {FOREIGN}"}]},
            id="inside-a-tool-result",
        ),
        pytest.param(
            {"conversations": [{"from": "gpt", "value": FOREIGN}]}, id="sharegpt-gpt-turn"
        ),
    ],
)
def test_text_that_quotes_a_placeholder_is_not_one(record: dict[str, Any]) -> None:
    store = {parse(FOREIGN)["id"]: "some original text"}
    for held in ({}, store):  # whether or not the store holds its id
        out, ids, problems = restore_record(record, held)
        assert out is record and ids == [] and problems == []


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        pytest.param(tool_record(FOREIGN), parse(FOREIGN)["id"], id="tool-result"),
        pytest.param(
            tool_record("x", arguments=json.dumps({"ctxcli_placeholder": FOREIGN})),
            parse(FOREIGN)["id"],
            id="arguments",
        ),
        pytest.param(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "a", "content": FOREIGN}
                        ],
                    }
                ]
            },
            parse(FOREIGN)["id"],
            id="anthropic-tool-result",
        ),
        pytest.param(
            {"conversations": [{"from": "observation", "value": MANGLED}]},
            f"unreadable placeholder {MANGLED!r}",
            id="sharegpt-mangled",
        ),
    ],
)
def test_a_placeholder_where_ctxcli_writes_them_is_reported_when_the_store_lacks_it(
    record: dict[str, Any], problem: str
) -> None:
    out, ids, problems = restore_record(record, {})
    assert out is record and ids == [] and problems == [problem]
    # A store that holds the text as its own original (the run kept it as it was).
    text = FOREIGN if parse(FOREIGN)["id"] == problem else MANGLED
    out, ids, problems = restore_record(record, {content_id(text): text})
    assert out is record and ids == [] and problems == []


def test_compressing_again_keeps_the_inputs_placeholders_and_restores_with_both_stores() -> None:
    first, one = apply(agent(BIG, "x"), threshold=100, keep_recent=1)
    assert parse(first[3]["content"])
    # The run goes on: the same file read again, a quoted placeholder, a mangled one.
    later = [
        *first[:-1],
        {"role": "assistant", "content": f"As {first[3]['content']} said"},
        {"role": "assistant", "content": None, "tool_calls": [call("d"), call("e")]},
        {"role": "tool", "tool_call_id": "d", "content": BIG},
        {"role": "tool", "tool_call_id": "e", "content": MANGLED + BIG},
        {"role": "user", "content": first[3]["content"]},
    ]
    second, two = apply(later, threshold=100, keep_recent=0)
    assert second[3] == first[3]  # the earlier placeholder stays as it was
    assert second[8]["content"] == BIG  # its original stays whole: one id, one meaning
    assert second[9]["content"] == MANGLED + BIG  # placeholder-like: never replaced
    assert two.stored == {
        content_id(first[3]["content"]): first[3]["content"],
        content_id(MANGLED + BIG): MANGLED + BIG,
    }
    assert two.events["placeholder"].get("placeholders_written", 0) == 0
    back, ids, problems = restore_record({"messages": second}, two.stored)
    assert back == {"messages": later} and ids == [] and problems == []
    # Both stores together (files concatenated) put back both runs' originals.
    back, ids, problems = restore_record({"messages": second}, {**one.stored, **two.stored})
    assert back == {"messages": [*later[:3], agent(BIG, "x")[3], *later[4:]]}
    assert ids == [content_id(BIG)] and problems == []
    assert back["messages"][-1] == later[-1]  # the user's copy is the user's text
    # The first store alone cannot vouch for placeholder-like text the first run
    # never saw, so it names it.
    _, _, problems = restore_record({"messages": later}, one.stored)
    assert problems == [f"unreadable placeholder {(MANGLED + BIG)[:60]!r}"]


def test_clear_inputs_keeps_the_calls_of_the_current_state(tmp_path: Path) -> None:
    """In a tool loop (the conversation ends on results) the last calls stay as they
    were, arguments included: Anthropic wants the last assistant turn exactly (the file
    aborted: 'the last assistant turn was not kept exactly'); earlier ones are cleared."""
    messages = agent(BIG, "x")[:-1]
    for i in (2, 4):
        messages[i]["tool_calls"][0]["function"]["arguments"] = json.dumps({"patch": BIG})
    out, result = apply(messages, threshold=100, keep_recent=0, clear_inputs=True)
    assert parse_arguments(out[2]["tool_calls"][0]["function"]["arguments"])
    assert out[4] == messages[4] and result.events["placeholder"]["inputs_cleared"] == 1
    patch = {"path": "a.py", "content": "def f():\n    return 1\n" * 40}
    thinking = {"type": "thinking", "thinking": "I will write it.", "signature": "sig=="}
    use = {"type": "tool_use", "id": "t1", "name": "write", "input": patch}
    record = {
        "id": "a",
        "messages": [
            {"role": "user", "content": "Write the file."},
            {"role": "assistant", "content": [thinking, use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ],
    }
    source, config = tmp_path / "in.jsonl", tmp_path / "c.yaml"
    source.write_text(json.dumps(record) + "\n")
    config.write_text(
        "stages:\n  - placeholder: {threshold: 20, keep_recent: 0, clear_inputs: true}\n"
    )
    done = CliRunner().invoke(cli, ["compress", str(source), "--config", str(config), "-o", "-"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == record


def test_arguments_that_look_like_a_placeholder_are_kept_and_restore_as_they_were() -> None:
    held = json.dumps({"ctxcli_placeholder": FOREIGN})
    messages = agent(BIG, "x")
    messages[2]["tool_calls"][0]["function"]["arguments"] = held
    messages[4]["tool_calls"][0]["function"]["arguments"] = json.dumps({"patch": BIG})
    out, result = apply(messages, threshold=100, keep_recent=0, clear_inputs=True)
    assert out[2]["tool_calls"][0]["function"]["arguments"] == held
    assert parse_arguments(out[4]["tool_calls"][0]["function"]["arguments"])
    assert result.stored[content_id(FOREIGN)] == FOREIGN
    back, ids, problems = restore_record({"messages": out}, result.stored)
    assert back == {"messages": messages} and len(ids) == 2 and problems == []


# --- property: restore after placeholder-only compression gives back the input ---

plain = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="ab 😀é\n漢👍🏽\u0301", min_size=0, max_size=400),
    st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=12), st.integers(1, 80)),
)
# Placeholder-like text on purpose: whole placeholders (of text that may also be in
# the conversation), quoted ones, mangled ones, and arguments that hold one.
placeholder_like = st.one_of(
    st.builds(lambda t: render(t, tool="read", tokens=9, head=5, tail=2), plain),
    st.builds(lambda t, p: f"{t}{p}{t}", plain, st.sampled_from([FOREIGN, MANGLED])),
    st.sampled_from([FOREIGN, MANGLED, MANGLED + BIG]),
    st.builds(lambda t: json.dumps({"ctxcli_placeholder": t}), st.sampled_from([FOREIGN, MANGLED])),
)
texts = st.one_of(plain, placeholder_like)
contents = st.one_of(
    texts,
    st.none(),
    st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), min_size=1, max_size=3),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(texts)})
    for turn in range(draw(st.integers(0, 5))):
        messages.append({"role": "user", "content": draw(texts)})
        ids = [f"t{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
        if ids:
            calls = [call(i, draw(st.sampled_from(["read", "grep"])), draw(texts)) for i in ids]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for i in ids:
                result = {"role": "tool", "tool_call_id": i, "content": draw(contents)}
                if draw(st.booleans()):
                    result["extra"] = draw(st.integers())
                messages.append(result)
        messages.append({"role": "assistant", "content": draw(texts)})
    return messages


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversations(),
    st.integers(0, 60),
    st.integers(0, 3),
    st.booleans(),
    st.integers(0, 30),
)
def test_restore_gives_back_the_input(
    messages: list[dict[str, Any]], threshold: int, keep_recent: int, inputs: bool, head: int
) -> None:
    record = {"id": "r", "messages": messages}
    out, result = apply(
        messages,
        threshold=threshold,
        keep_recent=keep_recent,
        clear_inputs=inputs,
        head_chars=head,
        tail_chars=head // 2,
    )
    # The written form goes through JSON, as the files do.
    written = json.loads(json.dumps({"id": "r", "messages": out}))
    store = json.loads(json.dumps(result.stored))
    restored, ids, missing = restore_record(written, store)
    assert not missing
    assert restored == record
    assert len(ids) == result.events.get("placeholder", {}).get("placeholders_written", 0)


def test_spare_tokens_put_a_result_back_whole_never_a_preview_as_large() -> None:
    """The summary stage gives its unused tokens to the kept placeholders' previews:
    a Codex session at a quarter had six placeholders larger than their results
    (297 tokens for 259: a preview of all but a few characters)."""
    from ctxcli.model import Message
    from ctxcli.placeholders import content_id, render
    from ctxcli.stages.base import Context
    from ctxcli.stages.placeholder import widen
    from ctxcli.tokens import TokenCounter

    counter = TokenCounter("o200k_base")
    original = "\n".join(f"line {k}: value_{k} = {k * 7}" for k in range(40))
    tokens = counter.text(original)
    text = render(original, tool="exec", tokens=tokens, head=40, tail=20, facts=True)
    ident = content_id(original)
    assert f"id={ident}" in text
    data = {"role": "tool", "tool_call_id": "c1", "content": text}
    message = Message(data, counter.message(data))
    context = Context(10_000, counter, stored={ident: original})
    for spare in (tokens // 3, tokens * 2):
        messages = [message]
        widen(messages, spare, context)
        content = messages[0].data["content"]
        assert content == original or counter.text(content) < tokens, spare
    assert messages[0].data["content"] == original  # the room held it all


@pytest.mark.parametrize(
    ("source", "named", "not_named"),
    [
        pytest.param(
            "Mamdani 1,036,051 votes, Cuomo 854,995; $1,234.50 raised",
            ["1,036,051", "854,995", "$1,234.50"],
            ["036", "051", "995", "234.50"],
            id="thousands-separators",
        ),
        pytest.param(
            "see https://en.wikipedia.org/wiki/Mayor%27s_Race and ftp://x.org/a",
            ["https://en.wikipedia.org/wiki/Mayor%27s_Race", "ftp://x.org/a"],
            ["//en.wikipedia.org/wiki/Mayor"],
            id="urls-whole",
        ),
        pytest.param(
            r'{"text": "\u2190 Back\n2025 results \u201340 \"HAT123\""}',
            ["2025", "HAT123"],
            ["u2190", "u201340", "n2025"],
            id="json-escapes",
        ),
        pytest.param(
            r'{"content": "write to me\\u0040corp42.com from C:\\temp2025"}',
            ["temp2025"],
            ["u0040corp42.com", "emp2025"],
            id="escaped-again",
        ),
    ],
)
def test_the_facts_a_placeholder_names_are_whole(
    source: str, named: list[str], not_named: list[str]
) -> None:
    """What a placeholder says its omitted part holds is whole: a number with its
    thousands separators, a URL with its scheme, and no JSON escape read as a word (a
    Responses MCP result's list read ``u2190, u00a0, … 036, 051, 854, 995`` and every
    URL as ``//www…``)."""
    held = omitted_facts(source, "")
    assert all(fact in held for fact in named), held
    assert not any(fact in held for fact in not_named), held
