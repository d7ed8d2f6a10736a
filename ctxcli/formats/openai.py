"""OpenAI chat format: ``{"messages": [...], "tools"?: [...], ...}`` records.

Messages carry ``role`` (``system``, ``developer``, ``user``, ``assistant``, ``tool``,
legacy ``function``), ``content`` (a string, ``null``, or a list of parts), optional
``name``, assistant ``tool_calls`` and tool ``tool_call_id``. Keys ctxcli does not
know are kept, on the record and on each message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxcli.errors import InputError
from ctxcli.model import ROLES, Conversation, make_conversation
from ctxcli.tokens import TokenCounter


def read(
    record: Any, counter: TokenCounter, *, path: str, line: int, messages_key: str = "messages"
) -> Conversation:
    """Check one parsed record and wrap it as a :class:`Conversation`.

    Raises :class:`InputError` (with ``path`` and ``line``) for a record that is not an
    object, has no ``messages_key`` list, or holds a message that is not an object,
    has no ``role`` or has a role outside :data:`ctxcli.model.ROLES`.
    """
    if not isinstance(record, Mapping):
        raise InputError(path, line, f"expected a JSON object, got {_kind(record)}")
    messages = record.get(messages_key)
    if not isinstance(messages, list):
        found = "no" if messages is None else f"a {_kind(messages)} as"
        keys = ", ".join(map(repr, list(record)[:8]))
        raise InputError(path, line, f"{found} {messages_key!r} list (keys: {keys})")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InputError(path, line, f"message {i} is {_kind(message)}, not an object")
        role = message.get("role")
        if role is None:
            raise InputError(path, line, f"message {i} has no 'role'")
        if role not in ROLES:
            known = ", ".join(sorted(ROLES))
            raise InputError(path, line, f"message {i} has unknown role {role!r} (known: {known})")
    record_id = record.get("id")
    return make_conversation(
        messages,
        counter,
        tools=record.get("tools"),
        id=None if record_id is None else str(record_id),
        line=line,
    )


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str = "messages"
) -> dict[str, Any]:
    """``record`` with its messages replaced by ``conversation``'s (other keys kept)."""
    out = dict(record)
    out[messages_key] = [m.data for m in conversation.messages]
    return out


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
