"""ShareGPT format: ``{"conversations": [{"from": ..., "value": ...}], "system"?, ...}``.

``from`` is ``human`` / ``user``, ``gpt`` / ``assistant``, ``system``, or, for tool
use as LLaMA-Factory writes it, ``function_call`` (the value is the JSON of
``{name, arguments}``) and ``observation`` (its result). Calls carry no ids: a
``function_call`` and the ``observation`` right after it pair by adjacency, so they
map onto the neutral legacy pair (an assistant ``function_call``, then a ``function``
message) and are kept or dropped together. A record-level ``system`` string
(LLaMA-Factory's ``system`` column) is one more ``system`` message, never dropped.

Writing back: a turn no stage changed is the very entry read; a summary becomes a
``human`` turn (a ``system`` turn when its role is ``system``), or, where it meets a
human turn, part of that turn's ``value``, joined by a blank line
(:data:`ctxcli.model.PIECE_JOINER`): turns alternate, so two human turns in a row would
break the dialogue; a record with a human turn whose ``value`` is no string has no
joins (``Conversation.joins_user``). Read back, such a turn is its pieces again
(:func:`ctxcli.model.joined_pieces`): each summary that opens it, and the one that
closes it, a message of its own, and the user's text, so a later run merges the
summary rather than taking it for a request.

Rules (LLaMA-Factory's ShareGPT loader, ``data/converter.py``): the first turn after
the system turns is a ``human`` turn; a ``function_call`` is followed by its
``observation`` (unless it is the last turn, still waiting for it), and an
``observation`` follows a ``function_call``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import InputError
from ctxcli.formats._common import function_of, joined, kind, messages_of
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.model import PIECE_JOINER, Conversation, Message, joined_pieces, read_messages
from ctxcli.model import content_text as text_of
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "sharegpt"
DEFAULT_KEY = "conversations"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
#: ``from`` value -> neutral role; ``function_call`` and ``observation`` are the
#: legacy function pair.
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "function",
    "tool": "function",
}
_CALL, _RESULTS = "function_call", frozenset({"observation", "tool"})
_HUMAN = ("human", "user")
#: The side of the dialogue each sender is on; turns alternate sides (LLaMA-Factory
#: reads human/observation at even positions and gpt/function_call at odd ones).
_SIDES = {
    "human": "user",
    "user": "user",
    "observation": "user",
    "tool": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "function_call": "assistant",
}


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True when the record's list holds ``{from, value}`` entries."""
    turns = record.get(messages_key or DEFAULT_KEY) if isinstance(record, Mapping) else None
    if not isinstance(turns, list):
        return False
    entries = [t for t in turns if isinstance(t, Mapping)]
    return bool(entries) and "from" in entries[0]


def read(
    record: Any,
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
) -> Conversation:
    """Read one ShareGPT record into the neutral model.

    Raises :class:`InputError` for a record that is not an object or has no turn
    list, or with every turn that is not an object or has an unknown ``from``.
    """
    turns = messages_of(record, messages_key or DEFAULT_KEY, path, line)
    neutral: list[dict[str, Any]] = []
    sources: list[int | None] = []
    system = record.get("system")
    if isinstance(system, str) and system:
        neutral.append({"role": "system", "content": system})
        sources.append(None)
    bad: list[str] = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, Mapping):
            bad.append(f"turn {i} is {kind(turn)}, not an object: {turn!r:.60}")
            continue
        sender = turn.get("from")
        if sender not in ROLES:
            bad.append(f"turn {i} has unknown 'from' {sender!r}")
            continue
        for message in _neutral(sender, turn.get("value")):
            neutral.append(message)
            sources.append(i)
    if bad:
        known = ", ".join(ROLES)
        raise InputError(path, line, "; ".join(bad) + f" (known 'from' values: {known})")
    record_id = record.get("id")
    return Conversation(
        messages=read_messages(
            neutral, counter, apart=int(isinstance(system, str) and bool(system))
        ),
        extra_tokens=counter.tools(record.get("tools")),
        id=None if record_id is None else str(record_id),
        line=line,
        meta={"entries": turns, "sources": sources},
        user_first=True,
        alternating=True,
        # its writer joins a summary to a human turn's text: each must have one
        joins_user=all(_is_human(t) for t in turns if _is_human_sender(t)),
        summary_role="user",
    )


def _neutral(sender: str, value: Any) -> list[dict[str, Any]]:
    """The neutral messages of one turn: one, but for a human turn that holds ctxcli
    summaries joined to its text (module docstring), one per piece."""
    role = ROLES[sender]
    if sender == _CALL:
        return [{"role": "assistant", "content": None, "function_call": function_of(value)}]
    if role != "user" or not isinstance(value, str):
        return [{"role": role, "content": value}]
    return [{"role": role, "content": piece} for piece, _ in joined_pieces(value)]


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str | None = None
) -> dict[str, Any]:
    """``record`` with its turns rebuilt from ``conversation`` (other keys kept), each
    summary joined to the human turn it meets (module docstring), and sent by the
    name the record's human turns go by (``human``, else ``user``)."""
    turns: Sequence[Any] = conversation.meta.get("entries", ())
    sources: Sequence[int | None] = conversation.meta.get("sources", ())
    pieced, human = _pieced(sources), _human_name(turns)
    written: list[Any] = []
    made: set[int] = set()  # the turns to join with the human turn they meet, by identity
    for message in conversation.messages:
        source = sources[message.index] if message.index is not None else None
        if message.index is not None and not message.changed and source not in pieced:
            written += [turns[source]] if source is not None else []
            continue
        written.append(_rebuilt(message, None if source is None else turns[source], human))
        if source is None or source in pieced:
            made.add(id(written[-1]))
    out = dict(record)
    out[messages_key or DEFAULT_KEY] = joined(written, made, joins=_is_human, join=_join)
    return out


def _pieced(sources: Sequence[int | None]) -> set[int]:
    """The turns read as several messages (a summary joined to a human turn's text)."""
    return {s for s, n in Counter(sources).items() if s is not None and n > 1}


def _human_name(turns: Sequence[Any]) -> str:
    """What the record's human turns are sent by: ``human`` or ``user``."""
    return next((t["from"] for t in turns if _is_human_sender(t)), "human")


def _rebuilt(message: Message, turn: Mapping[str, Any] | None, human: str) -> dict[str, Any]:
    """The turn of a ``message`` a stage wrote (``turn`` ``None``: a summary, from
    ``human`` when of the user side) or changed, or of one piece of ``turn``, whose
    other keys it keeps."""
    if turn is None:
        return _turn(message, human if message.role == "user" else None)
    return {**turn, **_turn(message, turn.get("from"))}


def _is_human_sender(turn: Any) -> bool:
    return isinstance(turn, Mapping) and turn.get("from") in _HUMAN


def _is_human(turn: Any) -> bool:
    """Whether ``turn`` is a human turn with text, which a summary may join."""
    return _is_human_sender(turn) and isinstance(turn.get("value"), str)


def _join(own: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]) -> Any:
    return {**own, "value": f"{before['value']}{PIECE_JOINER}{after['value']}"}


def _turn(message: Message, sender: str | None = None) -> dict[str, Any]:
    """A neutral message as a turn; ``sender`` keeps the ``from`` of the turn it was
    read from (``tool`` and ``observation`` both read as a function result)."""
    data = message.data
    if message.calls_function:
        call = data["function_call"]
        arguments = call.get("arguments")
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments) if isinstance(arguments, str) else arguments
        value = jsonio.dumps({"name": call.get("name"), "arguments": arguments}).decode()
        return {"from": _CALL, "value": value}
    senders = {"user": "human", "assistant": "gpt", "system": "system", "function": "observation"}
    role_sender = sender or senders.get(message.role, "human")
    return {"from": role_sender, "value": text_of(data.get("content"))}


def problems(record: Any, conversation: Conversation) -> list[Problem]:
    """Every ShareGPT rule (module docstring) ``record`` breaks, naming the turn."""
    turns = [t for t in conversation.meta.get("entries", ()) if isinstance(t, Mapping)]
    found: list[Problem] = []
    senders = [t.get("from") for t in turns]
    first = next((i for i, s in enumerate(senders) if s != "system"), None)
    if first is not None and ROLES.get(str(senders[first])) != "user":
        detail = f"the first turn is {senders[first]!r}, not a human turn"
        found.append(Problem("first-not-human", detail, first, unit="turn"))
    sides = [_SIDES.get(str(s)) for s in senders]
    chat = [(i, s) for i, s in enumerate(sides) if s is not None]
    for (_, one), (i, two) in zip(chat, chat[1:]):
        if one == two:
            found.append(Problem("two-in-a-row", f"two {one} turns in a row", i, unit="turn"))
    return found + _call_problems(senders)


def _call_problems(senders: list[Any]) -> list[Problem]:
    """Each ``function_call`` turn answered right after it, each answer right after
    its call."""
    found = []
    for i, sender in enumerate(senders):
        after = senders[i + 1] if i + 1 < len(senders) else None
        before = senders[i - 1] if i else None
        if sender == _CALL and after not in _RESULTS and i + 1 < len(senders):
            detail = "function_call without an observation right after it"
            found.append(Problem("call-without-observation", detail, i, unit="turn"))
        if sender in _RESULTS and before != _CALL:
            detail = f"{sender} without a function_call right before it"
            found.append(Problem("observation-without-call", detail, i, unit="turn"))
    return found
