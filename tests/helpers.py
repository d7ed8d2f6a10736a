"""Checks the tests run on every output, independent of the pipeline's own check.

They work on the JSON written to disk: output messages are matched to the input's by
value, in order, so a message that was written back changed or out of order shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxcli.invariants import problems
from ctxcli.model import Conversation, Message
from ctxcli.tokens import TokenCounter


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def to_conversation(
    messages: list[dict[str, Any]],
    counter: TokenCounter,
    originals: list[dict[str, Any]] | None = None,
) -> Conversation:
    """Wrap dicts; with ``originals``, give each message its input position by value.

    Matching runs from the end, as compression keeps the end: of two equal messages
    the later one is taken as the one kept.
    """
    positions: list[int | None] = [None] * len(messages)
    if originals is not None:
        cursor = len(originals)
        for k in range(len(messages) - 1, -1, -1):
            for j in range(cursor - 1, -1, -1):
                if originals[j] == messages[k]:
                    positions[k], cursor = j, j
                    break
    wrapped = []
    for data, index in zip(messages, positions):
        if index is not None and originals is not None:
            data = originals[index]
        wrapped.append(Message(data, counter.message(data), index, index is None))
    return Conversation(tuple(wrapped))


def assert_valid(
    before: dict[str, Any],
    after: dict[str, Any],
    counter: TokenCounter,
    *,
    max_tokens: int | None,
    over_budget_ok: bool = False,
) -> None:
    """Every invariant holds for one output record (see ctxcli.invariants)."""
    original = to_conversation(before["messages"], counter)
    originals = [m.data for m in original.messages]
    result = to_conversation(after["messages"], counter, originals)
    for message in result.messages:
        if message.index is None:
            assert message.is_summary, f"new message that is not a summary: {message.data}"
    found = problems(original, result, max_tokens=None if over_budget_ok else max_tokens)
    assert not found, found
    assert {k: v for k, v in before.items() if k != "messages"} == {
        k: v for k, v in after.items() if k != "messages"
    }
