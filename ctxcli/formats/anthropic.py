"""Anthropic Messages format: ``{"system"?, "messages": [...], "tools"?, ...}`` records.

``system`` is a string or a list of text blocks; each message has ``role`` ``user``
or ``assistant`` and ``content``, a string or a list of blocks: ``text``, ``image``,
``document``, ``tool_use`` ``{id, name, input}``, ``tool_result`` ``{tool_use_id,
content, is_error?}``, ``thinking`` ``{thinking, signature}``, ``redacted_thinking``
``{data}`` (and any other type, kept as it is).

How it maps onto the neutral model (and back):

- the top-level ``system`` is one ``system`` message (never dropped; written back by
  leaving ``system`` as it is);
- an assistant message is one ``assistant`` message: its ``tool_use`` blocks become
  ``tool_calls`` (arguments: the JSON of ``input``), its other blocks stay content
  parts, counted by :meth:`ctxcli.tokens.TokenCounter.content`;
- a user message becomes, in block order, one ``tool`` message per ``tool_result``
  block and one ``user`` message per run of other blocks; a string content is one
  ``user`` message.

Writing back: an entry whose neutral messages all survive unchanged is the very entry
that was read. When only some of them survive (the tool results went with a dropped
tool call, say, but the user's text stays), the entry is written with its other keys
and only the blocks of the survivors, in their original order. A message a stage
wrote (a summary) becomes a user message with one text block, whatever its neutral
role, since Anthropic has no system role inside ``messages``.

Rules (Anthropic Messages API, "Tool use" and "Extended thinking" guides): the first
message is a user message; every ``tool_use`` is answered by a ``tool_result`` in the
very next message, a user message, whose tool results come before any other block;
a ``tool_result`` answers a ``tool_use`` of the message just before; thinking blocks
keep their ``signature`` (``data`` for redacted ones) and open their message. The
last message may hold calls still waiting for their results (a log cut mid-run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import InputError
from ctxcli.formats._common import (
    Source,
    kind,
    messages_of,
    patch_blocks,
    rebuild_entries,
)
from ctxcli.formats.base import rewrites
from ctxcli.model import Conversation, Message, read_messages
from ctxcli.model import content_text as text_of
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "anthropic"
DEFAULT_KEY = "messages"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
ROLES = ("user", "assistant")
#: Block types only Anthropic uses; one of them (or a top-level ``system``) tells
#: this format from OpenAI's. A record with string contents only reads the same
#: either way.
_OWN_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "document"})
_THINKING = frozenset({"thinking", "redacted_thinking"})


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for a record with Anthropic-only blocks or a top-level ``system``, and
    no role outside ``user`` / ``assistant``."""
    if not isinstance(record, Mapping):
        return False
    messages = record.get(messages_key or DEFAULT_KEY)
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        return False
    if any(m.get("role") not in ROLES for m in messages):
        return False
    if isinstance(record.get("system"), (str, list)):
        return True
    return any(_own_block(block) for message in messages for block in _blocks(message))


def _own_block(block: Any) -> bool:
    """Whether ``block`` is one only Anthropic writes (an image with a ``source``)."""
    return isinstance(block, Mapping) and (
        block.get("type") in _OWN_BLOCKS or (block.get("type") == "image" and "source" in block)
    )


def read(
    record: Any,
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
) -> Conversation:
    """Read one Anthropic record into the neutral model (see the module docstring).

    Raises :class:`InputError` for a record that is not an object or has no messages
    list, a message that is not an object, has a role other than ``user`` or
    ``assistant``, or holds a block that is not an object.
    """
    entries = messages_of(record, messages_key or DEFAULT_KEY, path, line)
    neutral: list[dict[str, Any]] = []
    sources: list[Source] = []
    system = record.get("system")
    if isinstance(system, (str, list)):
        neutral.append({"role": "system", "content": system})
        sources.append((None, None))
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InputError(path, line, f"message {i} is {kind(entry)}, not an object")
        role = entry.get("role")
        if role not in ROLES:
            known = ", ".join(ROLES)
            raise InputError(path, line, f"message {i} has unknown role {role!r} (known: {known})")
        content = entry.get("content")
        if not isinstance(content, list):
            neutral.append({"role": role, "content": content})
            sources.append((i, None))
            continue
        for j, block in enumerate(content):
            if not isinstance(block, Mapping):
                raise InputError(
                    path, line, f"message {i} block {j} is {kind(block)}, not an object"
                )
        if role == "assistant":
            neutral.append(_assistant(content))
            sources.append((i, tuple(range(len(content)))))
        else:
            for data, blocks in _user(content):
                neutral.append(data)
                sources.append((i, blocks))
    record_id = record.get("id")
    return Conversation(
        messages=read_messages(
            neutral,
            counter,
            entries=[entry for entry, _ in sources],
            apart=int(isinstance(system, (str, list))),
        ),
        extra_tokens=counter.tools(record.get("tools")),
        id=None if record_id is None else str(record_id),
        line=line,
        meta={"entries": entries, "sources": sources},
        user_first=True,
        summary_role="user",
    )


def _assistant(content: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    calls = [
        {
            "id": str(b.get("id")),
            "type": "function",
            "function": {
                "name": str(b.get("name", "")),
                "arguments": jsonio.dumps(b.get("input", {})).decode(),
            },
        }
        for b in content
        if b.get("type") == "tool_use"
    ]
    data: dict[str, Any] = {
        "role": "assistant",
        "content": [b for b in content if b.get("type") != "tool_use"],
    }
    if calls:
        data["tool_calls"] = calls
    return data


def _user(
    content: Sequence[Mapping[str, Any]],
) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    out: list[tuple[dict[str, Any], tuple[int, ...]]] = []
    run: list[int] = []
    for j, block in enumerate(content):
        if block.get("type") != "tool_result":
            run.append(j)
            continue
        if run:
            out.append(({"role": "user", "content": [content[k] for k in run]}, tuple(run)))
            run = []
        data = {
            "role": "tool",
            "tool_call_id": str(block.get("tool_use_id")),
            "content": block.get("content"),
        }
        if block.get("is_error"):
            data["is_error"] = True
        out.append((data, (j,)))
    if run or not content:
        out.append(({"role": "user", "content": [content[k] for k in run]}, tuple(run)))
    return out


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str | None = None
) -> dict[str, Any]:
    """``record`` with ``messages`` rebuilt from ``conversation`` (see the module
    docstring for how partly kept entries and new messages are written)."""
    out = dict(record)
    out[messages_key or DEFAULT_KEY] = rebuild_entries(
        conversation, key="content", new_entry=_entry, patch=patch_blocks
    )
    return out


def _entry(message: Message) -> dict[str, Any]:
    """A neutral message a stage wrote or changed, as an Anthropic message."""
    data = message.data
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": data.get("tool_call_id"),
            "content": data.get("content"),
        }
        if data.get("is_error"):
            block["is_error"] = True
        return {"role": "user", "content": [block]}
    if message.role == "assistant":
        content = data.get("content")
        blocks = list(content) if isinstance(content, list) else []
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        for call in data.get("tool_calls") or ():
            function = call.get("function", {})
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "input": orjson.loads(function.get("arguments") or "{}"),
                }
            )
        return {"role": "assistant", "content": blocks}
    return {"role": "user", "content": [{"type": "text", "text": text_of(data.get("content"))}]}


def problems(record: Any, conversation: Conversation) -> list[Problem]:
    """Every Anthropic rule (module docstring) ``record`` breaks, each naming the
    message (its position in ``messages``)."""
    entries: Sequence[Mapping[str, Any]] = conversation.meta.get("entries", ())
    found: list[Problem] = []
    if entries and entries[0].get("role") != "user":
        detail = f"the first message is {entries[0].get('role')}, not user"
        found.append(Problem("first-not-user", detail, 0))
    expected: list[str] = []
    used: set[str] = set()  # the tool_use ids of the messages so far
    for i, entry in enumerate(entries):
        blocks = [b for b in _blocks(entry) if isinstance(b, Mapping)]
        found += _result_problems(i, entry, blocks, expected)
        found += _thinking_problems(i, entry, blocks)
        expected = []
        if entry.get("role") == "assistant":
            expected = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
            found += _ids_used_twice(i, expected, used)
    return found


def _ids_used_twice(i: int, ids: list[str], used: set[str]) -> list[Problem]:
    """A problem for each of the tool_use ``ids`` of message ``i`` that a call before
    it has (``used``, to which they are added): the API wants them unique ("tool_use
    ids must be unique"), and a result could not say which it answers. Each, not the
    first alone: a compressed copy that folds the message of one is checked against
    the input's problems, where the next must already stand."""
    found: list[Problem] = []
    for call_id in ids:
        if call_id in used:
            detail = f"tool_use id {call_id!r} is used twice (tool_use ids must be unique)"
            found.append(Problem("call-id-twice", detail, i))
        used.add(call_id)
    return found


def _result_problems(
    i: int, entry: Mapping[str, Any], blocks: list[Mapping[str, Any]], expected: list[str]
) -> list[Problem]:
    """The tool_result rules of message ``i``, after a message whose calls were
    ``expected``: every call answered, no result without its call, results first."""
    found = []
    results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
    if expected:
        missing = [e for e in expected if e not in results]
        if entry.get("role") != "user" or missing:
            detail = f"tool_use {missing or expected} has no tool_result in the next message"
            found.append(Problem("tool-use-without-result", detail, i - 1))
    extra = [r for r in results if r not in expected]
    if extra:
        detail = f"tool_result {extra} without a tool_use just before"
        found.append(Problem("tool-result-without-use", detail, i))
    if results and not _results_first([b.get("type") for b in blocks]):
        detail = "tool_result blocks must come before other blocks"
        found.append(Problem("tool-result-not-first", detail, i))
    return found


def _results_first(types: list[Any]) -> bool:
    """Whether no other block stands before the last ``tool_result`` of ``types``."""
    first_other = next((k for k, t in enumerate(types) if t != "tool_result"), None)
    last_result = max(k for k, t in enumerate(types) if t == "tool_result")
    return first_other is None or first_other >= last_result


def _blocks(entry: Mapping[str, Any]) -> list[Any]:
    content = entry.get("content")
    return content if isinstance(content, list) else []


def _thinking_problems(
    i: int, entry: Mapping[str, Any], blocks: list[Mapping[str, Any]]
) -> list[Problem]:
    found = []
    types = [b.get("type") for b in blocks]
    for j, block in enumerate(blocks):
        if block.get("type") == "thinking" and not (
            isinstance(block.get("thinking"), str) and isinstance(block.get("signature"), str)
        ):
            detail = "thinking block without thinking and signature"
            found.append(Problem("thinking-unsigned", detail, i, block=j))
        if block.get("type") == "redacted_thinking" and not isinstance(block.get("data"), str):
            detail = "redacted_thinking block without data"
            found.append(Problem("redacted-thinking-empty", detail, i, block=j))
    if any(t in _THINKING for t in types):
        if entry.get("role") != "assistant":
            detail = f"thinking blocks in a {entry.get('role')} message"
            found.append(Problem("thinking-outside-assistant", detail, i))
        first_other = next((k for k, t in enumerate(types) if t not in _THINKING), len(types))
        if any(t in _THINKING for t in types[first_other:]):
            found.append(Problem("thinking-not-first", "thinking blocks must open the message", i))
    return found


def kept_problems(before: Conversation, after: Conversation) -> list[Problem]:
    """Rules only a compressed copy can break: in an ongoing tool loop (the input ends
    on tool results) the last assistant message, thinking blocks and all, is kept as
    it was; the API checks the thinking blocks' signatures."""
    messages = before.messages
    if not messages or messages[-1].role != "tool":
        return []
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not assistants:
        return []
    last = assistants[-1]
    if any(m.index == last and not m.changed for m in after.messages):
        return []
    detail = f"the last assistant turn (message {last}) was not kept exactly"
    return [Problem("last-assistant-changed", detail)]
