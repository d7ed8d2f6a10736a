"""OpenAI chat format: ``{"messages": [...], "tools"?: [...], ...}`` records.

Messages carry ``role`` (``system``, ``developer``, ``user``, ``assistant``, ``tool``,
legacy ``function``), ``content`` (a string, ``null``, or a list of parts), optional
``name``, assistant ``tool_calls`` and tool ``tool_call_id``. Keys ctxcli does not
know are kept, on the record and on each message.

Two close relatives read as this format too:

- SWE-agent trajectories, whose tool messages name their calls in a ``tool_call_ids``
  list (:attr:`ctxcli.model.Message.result_ids` reads it);
- LLaMA-Factory's OpenAI-style data, where an assistant message carries its calls as
  ``{"type": "tool_call", "value": "{name, arguments}"}`` content parts and the
  ``tool`` messages after it carry no ids. Such a call is given a neutral
  ``tool_calls`` entry with an id ``ctxcli-<message>-<n>`` and the tool messages that
  follow take those ids in order (the last one takes all that are left), so the
  calls pair by adjacency. The added keys never reach the output. Turns alternate
  sides (a user message or tool result, then an assistant message): LLaMA-Factory
  renders them with the model's chat template, and templates such as Llama 2's,
  Mistral's and Gemma's raise "Conversation roles must alternate user/assistant/…".
  So a summary that meets a user message is one more text part of it, before the
  user's parts (its text ending in :data:`ctxcli.model.PIECE_JOINER`, since the
  loader joins text parts with nothing between) or after them (the joiner opening
  it); read back, each such part is a message of its own again.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import InputError
from ctxcli.formats._common import function_of, joined, kind, messages_of, pending
from ctxcli.formats.base import no_kept_problems
from ctxcli.invariants import pairing_problems
from ctxcli.model import (
    PIECE_JOINER,
    ROLES,
    SYSTEM_ROLES,
    Conversation,
    Message,
    read_messages,
    sealed,
)
from ctxcli.placeholders import looks_like
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter, call_function

NAME = "openai"
DEFAULT_KEY = "messages"
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
_PART_CALL = "tool_call"
_ADDED = "_ctxcli_added"
#: Under this key of ``meta``: the entry each neutral message was read from, when a
#: LLaMA-Factory user message held summaries joined to it (else absent).
_SOURCES = "_ctxcli_sources"


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True when ``record`` holds a list of objects with a ``role`` under the key."""
    messages = record.get(messages_key or DEFAULT_KEY) if isinstance(record, Mapping) else None
    return isinstance(messages, list) and all(
        isinstance(m, Mapping) and "role" in m for m in messages[:3]
    )


def read(
    record: Any,
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
) -> Conversation:
    """Check one parsed record and wrap it as a :class:`Conversation`.

    Raises :class:`InputError` (with ``path`` and ``line``) for a record that is not an
    object, has no ``messages_key`` list, or holds a message that is not an object,
    has no ``role``, has a role outside :data:`ctxcli.model.ROLES`, or has
    ``tool_calls`` that are not a list.
    """
    messages = messages_of(record, messages_key or DEFAULT_KEY, path, line)
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InputError(path, line, f"message {i} is {kind(message)}, not an object")
        role = message.get("role")
        if role is None:
            raise InputError(path, line, f"message {i} has no 'role'")
        if role not in ROLES:
            known = ", ".join(sorted(ROLES))
            raise InputError(path, line, f"message {i} has unknown role {role!r} (known: {known})")
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise InputError(path, line, f"message {i}: tool_calls is {kind(calls)}, not a list")
    neutral, added = _with_part_calls(messages)
    neutral = [_unwrapped_placeholder(m) for m in neutral]
    valued = _value_parts(messages)
    neutral, sources = _pieces(neutral) if valued else (neutral, None)
    meta: dict[str, Any] = {"entries": messages}
    if added:
        meta[_ADDED] = added
    if sources is not None:
        meta[_SOURCES] = sources
    record_id = record.get("id")
    return Conversation(
        messages=read_messages(neutral, counter, entries=sources),
        extra_tokens=counter.tools(record.get("tools")),
        id=None if record_id is None else str(record_id),
        line=line,
        meta=meta,
        alternating=valued,
        joins_user=valued,
        summary_role="user" if valued else None,
    )


def _pieces(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[int] | None]:
    """``messages`` of LLaMA-Factory parts with each user message that holds summaries
    joined to it (module docstring) cut into its pieces: each summary a message of its
    own (its text, the joiner off), the user's parts between them another; with the
    entry each piece was read from. ``(messages, None)`` when no message holds one."""
    out: list[Mapping[str, Any]] = []
    sources: list[int] = []
    for i, message in enumerate(messages):
        pieces = _cut(message)
        out += pieces
        sources += [i] * len(pieces)
    return out, (sources if len(out) > len(messages) else None)


def _cut(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pieces of one message (see :func:`_pieces`): ``[message]`` but for a user
    message of parts that opens with summaries joined to it (each ending in the
    joiner) or closes with one (opening with it), where :func:`write` puts them; a
    sealed text anywhere else is the user's own."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list) or len(content) < 2:
        return [message]
    heads: list[str] = []
    while len(heads) < len(content) - 1:
        text = _joined_summary(content[len(heads)], opening=True)
        if text is None:
            break
        heads.append(text)
    rest = content[len(heads) :]
    tail = _joined_summary(rest[-1], opening=False) if len(rest) > 1 else None
    if not heads and tail is None:
        return [message]
    own = rest[:-1] if tail is not None else rest
    out: list[Mapping[str, Any]] = [{"role": "user", "content": text} for text in heads]
    out.append({**message, "content": own})
    return out + ([{"role": "user", "content": tail}] if tail is not None else [])


def _joined_summary(part: Any, *, opening: bool) -> str | None:
    """The summary a text part holds as :func:`write` joins one to a user message: with
    the joiner after it when it opens the message (``opening``), before it when it
    closes it; else ``None``."""
    value = part.get("value") if isinstance(part, Mapping) else None
    if not isinstance(value, str) or part.get("type", "text") != "text":
        return None
    text = value.removesuffix(PIECE_JOINER) if opening else value.removeprefix(PIECE_JOINER)
    return text if text != value and sealed(text) else None


def writes_as_read(conversation: Conversation) -> bool:
    """True when :func:`write` puts the neutral messages in as they are (no content
    parts were turned into tool calls on reading), so reading the output back would
    give ``conversation`` again (nor a summary joined to a user message)."""
    return _ADDED not in conversation.meta and not conversation.joins_user


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str | None = None
) -> dict[str, Any]:
    """``record`` with its messages replaced by ``conversation``'s (other keys kept).

    A message no stage changed is written as the entry that was read; a changed one
    without the keys the reader added (LLaMA-Factory calls go back into parts); a
    summary a stage wrote or rewrote, in a record of LLaMA-Factory parts, as one such
    text part, joined to the user message it meets (module docstring); the text that
    took the place of a tool result's LLaMA-Factory parts (its placeholder) as one part
    like its first (:func:`_part_for`).
    """
    entries: Sequence[Any] = conversation.meta.get("entries", ())
    added: Mapping[int, tuple[str, ...]] = conversation.meta.get(_ADDED, {})
    sources: Sequence[int] | None = conversation.meta.get(_SOURCES)
    pieced = {s for s, n in Counter(sources).items() if n > 1} if sources else set()
    out = dict(record)
    valued = functools.cache(lambda: _value_parts(entries))  # asked at most once
    written: list[Any] = []
    made: set[int] = set()  # the summaries written, by identity, which join a user's
    for message in conversation.messages:
        at = message.index if sources is None or message.index is None else sources[message.index]
        entry = _written(message, at, (entries, added, at in pieced), valued)
        written.append(entry)
        joining = (message.is_summary or at in pieced) and message.role == "user"
        if joining and valued() and _joins(entry):
            made.add(id(entry))  # a piece of a message read (a pasted summary) joins again
    if made:
        written = joined(_past_system(written, made), made, joins=_joins, join=_join)
    out[messages_key or DEFAULT_KEY] = written
    return out


def _past_system(entries: Sequence[Any], made: set[int]) -> list[Any]:
    """``entries`` with each summary of ``made`` that system messages alone part from a
    user message after them moved past them, so it joins that message: sides
    alternate with system messages aside (a summary of what came before is put
    right after the leading system messages, and one may stand mid-record)."""
    out = list(entries)
    i = 0
    while i < len(out):
        j = i + 1
        while id(out[i]) in made and j < len(out) and _role(out[j]) in SYSTEM_ROLES:
            j += 1
        if j > i + 1 and j < len(out) and _joins(out[j]):
            out.insert(j - 1, out.pop(i))
            i = j - 1
        i += 1
    return out


def _role(entry: Any) -> Any:
    return entry.get("role") if isinstance(entry, Mapping) else None


def _joins(entry: Any) -> bool:
    """Whether ``entry`` is a user message a summary joins (module docstring): of
    parts, or of a string, which joins as one text part."""
    content = entry.get("content") if isinstance(entry, Mapping) else None
    parts = isinstance(content, list) and all(isinstance(p, Mapping) for p in content)
    return _role(entry) == "user" and (parts or isinstance(content, str))


def _join(own: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]) -> Any:
    """``before`` and ``after`` as one user message with the keys of ``own`` (the
    message read, when one is): a summary's text part ends in the joiner when it comes
    first, opens with it when it comes second."""
    first, second = _parts(before), _parts(after)
    if first and _sealed_part(first[-1]):
        first[-1] = {**first[-1], "value": first[-1]["value"] + PIECE_JOINER}
    elif second and _sealed_part(second[0]):
        second[0] = {**second[0], "value": PIECE_JOINER + second[0]["value"]}
    return {**own, "content": first + second}


def _sealed_part(part: Any) -> bool:
    """Whether ``part`` is a text part holding a summary (:func:`ctxcli.model.sealed`)."""
    value = part.get("value") if isinstance(part, Mapping) else None
    return isinstance(value, str) and part.get("type", "text") == "text" and sealed(value)


def _parts(entry: Mapping[str, Any]) -> list[Any]:
    """The content of a user message as LLaMA-Factory parts (a string as one text
    part)."""
    content = entry["content"]
    return [{"type": "text", "value": content}] if isinstance(content, str) else list(content)


def _written(
    message: Message,
    at: int | None,
    read: tuple[Sequence[Any], Mapping[int, tuple[str, ...]], bool],
    valued: Callable[[], bool],
) -> Any:
    """What :func:`write` puts out for ``message``, read from entry ``at``, given
    ``read``: the record's entries, the keys the reader added to each, and whether
    entry ``at`` was cut into pieces (a summary joined to it); and whether the record
    holds LLaMA-Factory parts (``valued``)."""
    entries, added, pieced = read
    if at is not None and not message.changed and entries and not pieced:
        return entries[at]
    data = message.data
    if at is not None and at in added:
        data = _without_added(data, added[at])
    was = entries[at] if at is not None and entries else None
    return _as_parts(message, data, was, valued)


def _as_parts(
    message: Message, data: Mapping[str, Any], was: Any, valued: Callable[[], bool]
) -> Any:
    """``data``, the message dict written for ``message`` (read from the entry ``was``,
    if any), with a text that stands in a record of LLaMA-Factory parts as one part:
    a tool result's placeholder (:func:`_part_for`) and a summary."""
    content = data.get("content")
    if message.role in ("tool", "function") and isinstance(content, str) and was is not None:
        part = _part_for(was.get("content") if isinstance(was, Mapping) else None)
        if part is not None:
            return {**data, "content": [{**part, "value": content}]}
    if message.is_summary and isinstance(content, str) and valued():
        part = {"type": "text", "value": content}
        return {**data, "content": [part]}  # a summary, as its record's
    return data


#: The types of LLaMA-Factory parts that hold no text (a text in their place is not
#: one of them: a loader would read a placeholder as an image's URL).
_MEDIA = ("image", "video", "audio", "input_image", "input_audio")


def _part_for(content: Any) -> dict[str, str] | None:
    """The part a text written in place of ``content`` takes when that is a list of
    LLaMA-Factory parts (``[{"type": "text", "value": …}]``), so a loader that reads
    only parts reads it: the ``type`` of its first text part (``observation``), or
    ``text`` when all are media; ``None`` for any other content."""
    if not isinstance(content, list) or not content:
        return None
    if not all(isinstance(p, Mapping) and "value" in p for p in content):
        return None
    types = (str(p.get("type", "text")) for p in content if isinstance(p.get("value"), str))
    return {"type": next((t for t in types if not t.startswith(_MEDIA)), "text")}


def _value_parts(entries: Sequence[Any]) -> bool:
    """Whether the messages of a record hold their text as LLaMA-Factory's parts
    (``[{"type": "text", "value": …}]``), as a message a stage writes (a summary) then
    does too: a loader of such data may take no other shape."""
    return any(
        isinstance(entry, Mapping)
        and isinstance(entry.get("content"), list)
        and any(isinstance(p, Mapping) and "value" in p for p in entry["content"])
        for entry in entries
    )


def problems(record: Any, conversation: Conversation) -> list[Problem]:
    """The OpenAI rules for one record (Chat Completions rejects a request otherwise):
    every tool result follows its call and every call has its results; a tool call
    has a string ``id`` (once per message) and a ``function`` with a ``name``; a tool
    result names the call it answers; ``content`` is a string, ``null`` or a list of
    parts. Calls in the last message may still wait for their results (a log cut
    mid-run, a training target): :func:`ctxcli.formats._common.pending` leaves them
    out. In a record of LLaMA-Factory parts, turns alternate sides (module
    docstring)."""
    found: list[Problem] = []
    if conversation.alternating:
        found += _side_problems(conversation.meta.get("entries", ()))
    for position, message in enumerate(conversation.messages):
        content = message.data.get("content")
        if content is not None and not isinstance(content, (str, list)):
            found.append(Problem("bad-content", f"content is {kind(content)}", position))
        if message.role == "tool" and not message.result_ids:
            detail = "tool result without a tool_call_id"
            found.append(Problem("result-without-id", detail, position))
        calls = message.data.get("tool_calls")
        if isinstance(calls, list):
            found += _call_problems(calls, position)
    pairing = pairing_problems(conversation.messages)
    found += [p for p in pairing if p.rule != "result-without-call-id"]  # said above
    return pending(found, len(conversation.messages))


def _side_problems(entries: Sequence[Any]) -> list[Problem]:
    """A problem for each message of ``entries`` on the same side as the one before it,
    system and developer messages aside: a user message and a tool result are of one
    side, and tool results in a row are one (the results of parallel calls, which
    LLaMA-Factory reads as one observation)."""
    roles = [(i, _role(e)) for i, e in enumerate(entries) if _role(e) not in SYSTEM_ROLES]
    found = []
    for (_, one), (i, two) in zip(roles, roles[1:]):
        if (one == "assistant") == (two == "assistant") and not one == two == "tool":
            side = "assistant" if two == "assistant" else "user-side"
            found.append(Problem("two-in-a-row", f"two {side} messages in a row", i))
    return found


def _call_problems(calls: list[Any], position: int) -> list[Problem]:
    """The rules of the ``tool_calls`` of message ``position``: each with a string
    ``id``, used once, and a ``function`` with a ``name`` (or, a custom tool's call, a
    ``custom`` with one: :func:`ctxcli.tokens.call_function`)."""
    found = []
    ids = []
    for call in calls:
        function = call_function(call)
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(call_id, str) or not call_id:
            found.append(Problem("call-without-id", "a tool call has no id", position))
        if function is None or not isinstance(function.get("name"), str):
            detail = "a tool call has no function name"
            found.append(Problem("call-without-name", detail, position))
        ids.append(call_id)
    twice = sorted({i for i in ids if isinstance(i, str) and ids.count(i) > 1})
    if twice:
        detail = f"tool call id {twice[0]!r} is used twice"
        found.append(Problem("call-id-twice", detail, position))
    return found


def _with_part_calls(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], dict[int, tuple[str, ...]]]:
    """Neutral dicts: LLaMA-Factory ``tool_call`` parts become ``tool_calls``."""
    neutral: list[Mapping[str, Any]] = list(messages)
    added: dict[int, tuple[str, ...]] = {}
    open_ids: list[str] = []
    for i, message in enumerate(messages):
        content = message.get("content")
        role = message.get("role")
        if role == "tool" and open_ids and not Message(message, 0).result_ids:
            following = i + 1 < len(messages) and messages[i + 1].get("role") == "tool"
            take = open_ids[:1] if following else open_ids
            neutral[i] = {**message, "tool_call_ids": take}
            added[i] = ("tool_call_ids",)
            open_ids = open_ids[len(take) :]
            continue
        open_ids = []
        if role != "assistant" or "tool_calls" in message or not isinstance(content, list):
            continue
        called = _called(message, content, i)
        if called is not None:
            neutral[i] = called
            added[i] = ("tool_calls",)
            open_ids = [c["id"] for c in called["tool_calls"]]
    return neutral, added


def _called(message: Mapping[str, Any], content: list[Any], i: int) -> dict[str, Any] | None:
    """Assistant message ``i`` with its ``tool_call`` parts as ``tool_calls``, or
    ``None`` when its ``content`` holds none."""
    calls = [p for p in content if isinstance(p, Mapping) and p.get("type") == _PART_CALL]
    if not calls:
        return None
    tool_calls = [_call(part, f"ctxcli-{i}-{n}") for n, part in enumerate(calls)]
    rest = [p for p in content if not (isinstance(p, Mapping) and p.get("type") == _PART_CALL)]
    return {**message, "content": rest, "tool_calls": tool_calls}


def _call(part: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    function = function_of(part.get("value"))
    return {"id": call_id, "type": "function", "function": function, "_part": part}


def _unwrapped_placeholder(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool result whose content is one LLaMA-Factory part holding a placeholder (an
    earlier run's, as :func:`write` puts one) with that text as its content, so it is
    read as a placeholder (not replaced again, and named in the store as it was); the
    writer puts the part back (:func:`_part_for`). Any other message as it is."""
    content = message.get("content")
    if message.get("role") not in ("tool", "function") or not isinstance(content, list):
        return message
    if len(content) != 1 or not isinstance(content[0], Mapping):
        return message
    text = content[0].get("value")
    return {**message, "content": text} if looks_like(text) else message


def _without_added(data: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out = {k: v for k, v in data.items() if k not in keys}
    if "tool_calls" in keys:
        parts = [_part_of(c) for c in data.get("tool_calls") or () if "_part" in c]
        content = out.get("content")
        out["content"] = (list(content) if isinstance(content, list) else []) + parts
    return out


def _part_of(call: Mapping[str, Any]) -> Any:
    """The ``tool_call`` part a neutral call was read from, with the arguments a stage
    gave the call (a placeholder) in its value, as an object where the part's were."""
    part = call["_part"]
    function = call.get("function")
    if not isinstance(function, Mapping) or function == function_of(part.get("value")):
        return part
    arguments = function.get("arguments")
    try:
        was = orjson.loads(part["value"]) if isinstance(part.get("value"), str) else None
    except orjson.JSONDecodeError:
        was = None
    if not (isinstance(was, Mapping) and isinstance(was.get("arguments"), str)):
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments) if isinstance(arguments, str) else arguments
    value = jsonio.dumps({"name": function.get("name"), "arguments": arguments}).decode()
    return {**part, "value": value}
