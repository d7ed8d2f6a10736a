"""Helpers the format adapters share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import InputError
from ctxcli.problems import Problem

if TYPE_CHECKING:
    from ctxcli.model import Conversation, Message

#: Where a neutral message was read from: the position of its source entry (``None``
#: for a part of the record kept apart, such as a top-level system prompt) and the
#: positions of its blocks in that entry's list (``None``: the entry's content is no
#: list, as a string content).
Source = tuple[int | None, tuple[int, ...] | None]
#: Rewrites the blocks of an entry from the neutral message a stage changed: given the
#: entry's blocks, the positions read into that message and its dict, the new blocks
#: by position (:func:`patch_blocks` is Anthropic's).
Patch = Callable[[list[Any], Iterable[int], Mapping[str, Any]], dict[int, Any]]


def kind(value: Any) -> str:
    """How an error names the JSON type of ``value`` ("an array", "a string" ...)."""
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    if type(value) in names:
        return names[type(value)]
    if isinstance(value, (int, float)):
        return "a number"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def messages_of(record: Any, key: str, path: str, line: int) -> list[Any]:
    """``record[key]`` when ``record`` is an object holding a list there.

    Raises :class:`InputError` naming the keys the record does have.
    """
    if not isinstance(record, Mapping):
        raise InputError(path, line, f"expected a JSON object, got {kind(record)}")
    messages = record.get(key)
    if not isinstance(messages, list):
        found = "no" if messages is None else f"{kind(messages)} as"
        keys = ", ".join(map(repr, list(record)[:8]))
        raise InputError(path, line, f"{found} {key!r} list (keys: {keys})")
    return messages


#: The rules of :func:`ctxcli.invariants.pairing_problems` for calls with no result.
UNANSWERED = frozenset({"call-without-result", "function-call-without-result"})


def pending(problems: list[Problem], count: int) -> list[Problem]:
    """``problems`` (from :func:`ctxcli.invariants.pairing_problems` over ``count``
    messages) without calls that have no result in the last message: a transcript may
    end on calls that still wait for their results, as a log cut mid-run or a
    training target does; it is only wrong to go on without them."""
    return [
        p for p in problems if not (p.rule in UNANSWERED and p.message == count - 1 and not p.new)
    ]


def patch_blocks(
    content: list[Any], blocks: Iterable[int], message: Mapping[str, Any]
) -> dict[int, Any]:
    """New versions of the content ``blocks`` of a source entry, rewritten from the
    neutral ``message`` a stage changed (the placeholder stage: a tool result's content,
    a tool call's arguments): ``{block index: new block}``, each block keeping every key
    it had but the one changed. A ``tool_result`` takes the message's content; a
    ``tool_use`` takes the arguments of the call with its id (parsed from JSON, as
    ``input`` is an object); other blocks stay as they are.
    """
    calls = {}
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            calls[call.get("id")] = function.get("arguments")
    patched: dict[int, Any] = {}
    for j in blocks:
        block = content[j]
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_result" and message.get("role") == "tool":
            if block.get("content") != message.get("content"):
                patched[j] = {**block, "content": message.get("content")}
        elif block.get("type") == "tool_use" and block.get("id") in calls:
            arguments = calls[block.get("id")]
            try:
                value = orjson.loads(arguments) if isinstance(arguments, str) else arguments
            except orjson.JSONDecodeError:
                value = arguments
            if value != block.get("input"):
                patched[j] = {**block, "input": value}
    return patched


def function_of(value: Any) -> dict[str, str]:
    """A ``{"name", "arguments"}`` function call from a JSON text or object holding
    ``name`` and ``arguments`` (the ShareGPT ``function_call`` turn, a LLaMA-Factory
    ``tool_call`` part); ``arguments`` become a JSON string as in the OpenAI format.
    Anything else is kept whole as the arguments of a call with no name."""
    try:
        parsed = orjson.loads(value) if isinstance(value, str) else value
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, Mapping) and "name" in parsed:
        arguments = parsed.get("arguments")
        if not isinstance(arguments, str):
            arguments = jsonio.dumps(arguments).decode()
        return {"name": str(parsed["name"]), "arguments": arguments}
    return {"name": "", "arguments": value if isinstance(value, str) else str(value)}


def rebuild_entries(
    conversation: Conversation,
    *,
    key: str,
    new_entry: Callable[[Message], dict[str, Any]],
    patch: Patch,
) -> list[Any]:
    """The entries (messages) of a record whose entries each hold a list of blocks
    under ``key`` (Anthropic ``content``, Gemini ``parts``), rebuilt from
    ``conversation`` read with ``meta["entries"]`` and ``meta["sources"]`` (a
    :data:`Source` per neutral message).

    An entry whose neutral messages all survive unchanged is the very entry read; one
    of which only some survive is written with its other keys and the blocks of the
    survivors, in their original order, changed ones rewritten by ``patch``. A message
    a stage wrote (or one whose entry held no list) becomes ``new_entry(message)``; a
    message with no entry (the top-level system prompt) is left to the record.
    """
    entries: Sequence[Mapping[str, Any]] = conversation.meta.get("entries", ())
    sources: Sequence[Source] = conversation.meta.get("sources", ())
    pieces: list[tuple[int, list[int]] | dict[str, Any]] = []
    patches: dict[int, dict[int, Any]] = {}
    for message in conversation.messages:
        source = sources[message.index] if message.index is not None else None
        if source is None or (message.changed and source[1] is None):
            pieces.append(new_entry(message))  # new, or a whole-string entry rewritten
            continue
        entry, blocks = source
        if entry is None:
            continue  # kept apart in the record, written back as it was
        content = entries[entry].get(key)
        if message.changed and isinstance(content, list):  # rewritten in its own blocks
            patches.setdefault(entry, {}).update(patch(content, blocks or (), message.data))
        _add_blocks(pieces, entry, blocks or ())
    return [
        piece
        if isinstance(piece, dict)
        else _rebuilt(entries[piece[0]], key, piece[1], patches.get(piece[0], {}))
        for piece in pieces
    ]


def _add_blocks(
    pieces: list[tuple[int, list[int]] | dict[str, Any]], entry: int, blocks: Iterable[int]
) -> None:
    """Add the ``blocks`` of ``entry`` to the last piece when it is that entry's, else
    as a piece of their own."""
    last = pieces[-1] if pieces else None
    if isinstance(last, tuple) and last[0] == entry:
        last[1].extend(blocks)
    else:
        pieces.append((entry, list(blocks)))


def _rebuilt(
    original: Mapping[str, Any], key: str, kept: list[int], patched: Mapping[int, Any]
) -> Any:
    """The entry ``original`` with only the blocks ``kept`` under ``key``, those of
    ``patched`` rewritten: the very entry when all are kept as they were."""
    content = original.get(key)
    if not isinstance(content, list) or (len(kept) == len(content) and not patched):
        return original
    return {**original, key: [patched.get(j, content[j]) for j in sorted(kept)]}


def joined(
    entries: Sequence[Any],
    new: set[int],
    *,
    joins: Callable[[Any], bool],
    join: Callable[[Any, Any, Any], Any],
    seen: Callable[[Any], bool] = lambda entry: True,
) -> list[Any]:
    """``entries`` with each entry a stage wrote (of ``new``, by identity) that meets
    another where both are ones ``joins`` takes made one: ``join(own, before, after)``,
    ``own`` the entry read (whose keys the joined one keeps). "Meets" skips the
    entries ``seen`` says the provider never sees. For formats that take no two turns
    of a side in a row (Gemini: "Please ensure that multiturn requests alternate
    between user and model"), so a summary joins the user turn it meets."""
    out: list[Any] = []
    last = -1  # where in ``out`` the last entry seen is (-1: none yet)
    for entry in entries:
        before = out[last] if last >= 0 else None
        fresh = id(entry) in new or id(before) in new
        if before is not None and fresh and joins(before) and joins(entry):
            own = entry if id(before) in new else before
            out[last] = join(own, before, entry)
            continue
        out.append(entry)
        if seen(entry):
            last = len(out) - 1
    return out
