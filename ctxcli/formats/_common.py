"""Helpers the format adapters share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import InputError


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


def text_of(content: Any) -> str:
    """The text of neutral ``content``: a string, or the text of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") or p.get("value") for p in content if isinstance(p, Mapping)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return "" if content is None else str(content)


def pending(problems: list[str], count: int) -> list[str]:
    """``problems`` (from :func:`ctxcli.invariants.pairing_problems` over ``count``
    messages) without "calls have no result" for the last message: a transcript may
    end on calls that still wait for their results, as a log cut mid-run or a
    training target does; it is only wrong to go on without them."""
    last = f"message {count - 1}: "
    return [p for p in problems if not (p.startswith(last) and p.endswith("no result"))]


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
