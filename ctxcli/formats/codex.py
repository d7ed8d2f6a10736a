"""Codex CLI rollouts (``~/.codex/sessions/…/rollout-*.jsonl``): one session a file.

Each line is ``{"timestamp", "type", "payload"}``: ``session_meta`` (the session's
``id``, ``cwd``, instructions), ``turn_context``, ``event_msg`` (what the terminal
showed: token counts, command ends, agent messages), ``response_item`` (one
Responses API item: see :mod:`ctxcli.formats.responses`) and ``compacted``
(``{message, replacement_history}``: the history Codex compacted the context into).

The *record* of this format is the whole file: the list of its lines' objects. The
conversation is what the model sees: the ``response_item`` payloads in order, read as
a Responses item list; after a ``compacted`` line, its ``replacement_history`` and
the items after it (the items before are out of the model's context: they are left as
they are and not counted).

Writing back: every line that is not a context item (``event_msg``, ``turn_context``,
``session_meta``, items before a compaction) is kept in its place, as read; an item no
stage changed is its very line; a changed item keeps its line's ``timestamp`` and
``type``; a dropped item's line goes; a message a stage wrote (a summary) is a new
``response_item`` line before the line of the item it precedes, with that line's
timestamp. Items of the ``replacement_history`` are written back into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli.formats import responses
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.model import Conversation, read_messages
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "codex"
DEFAULT_KEY = "payload"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
LINE_TYPES = frozenset({"session_meta", "turn_context", "event_msg", "response_item", "compacted"})

#: Where a context item was read from: a line's position, or ``(line, k)`` for the
#: ``k``-th item of the ``replacement_history`` of the ``compacted`` line there.
Place = int | tuple[int, int]


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for one rollout line: an object with ``timestamp``, a ``payload`` object
    and a ``type`` of :data:`LINE_TYPES`."""
    return (
        isinstance(record, Mapping)
        and record.get("type") in LINE_TYPES
        and isinstance(record.get("payload"), Mapping)
        and "timestamp" in record
    )


def detect_head(head: Sequence[Any]) -> bool:
    """True when a file's first record is a rollout line (:func:`detect`)."""
    return detect(head[0])


def read(
    record: Sequence[Any],
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
    lines: Sequence[int] | None = None,
) -> Conversation:
    """Read a rollout (its lines' objects in file order; ``lines`` their line numbers)
    into the neutral model (see the module docstring).

    Raises :class:`InputError` naming the line of an item that is not one (see
    :func:`ctxcli.formats.responses.read`).
    """
    places = context_places(record)
    items = [item_at(record, place) for place in places]
    for k, (place, item) in enumerate(zip(places, items)):
        at = lines[place if isinstance(place, int) else place[0]] if lines else line
        responses.check_item(item, k, path, at)
    neutral, sources = responses.neutral_messages(items)
    meta: Any = next((e["payload"] for e in record if e.get("type") == "session_meta"), {})
    meta = meta if isinstance(meta, Mapping) else {}
    apart = responses.with_instructions(neutral, sources, _base_instructions(meta))
    session_id = meta.get("id")
    return Conversation(
        messages=read_messages(neutral, counter, apart=apart),
        id=None if session_id is None else str(session_id),
        line=line,
        meta={
            "entries": items,
            "sources": sources,
            "places": places,
            "out_of_context": _before_compaction(record, places),
        },
    )


def _base_instructions(meta: Mapping[str, Any]) -> Any:
    """The instructions a session's requests carry (``session_meta``'s
    ``base_instructions``, ``{"text": …}`` or a string): Codex sends them as the
    Responses ``instructions`` of every turn, and a resumed session takes them from
    here, so they are in the model's context."""
    found = meta.get("base_instructions")
    return found.get("text") if isinstance(found, Mapping) else found


def _before_compaction(events: Sequence[Any], places: Sequence[Place]) -> int:
    """How many items stand before the last ``compacted`` line (out of the context)."""
    cut = next((p[0] for p in places if isinstance(p, tuple)), None)
    if cut is None:
        return 0
    return sum(1 for e in events[:cut] if e.get("type") == "response_item")


def context_places(events: Sequence[Any]) -> list[Place]:
    """Where the items the model sees are: after the last ``compacted`` line, its
    replacement history, then the ``response_item`` lines after it."""
    last = max((i for i, e in enumerate(events) if e.get("type") == "compacted"), default=-1)
    places: list[Place] = []
    if last >= 0:
        history = events[last]["payload"].get("replacement_history")
        if isinstance(history, list):
            places += [(last, k) for k in range(len(history))]
    places += [i for i in range(last + 1, len(events)) if events[i].get("type") == "response_item"]
    return places


def item_at(events: Sequence[Any], place: Place) -> Any:
    """The item at ``place`` (see :data:`Place`)."""
    if isinstance(place, int):
        return events[place]["payload"]
    return events[place[0]]["payload"]["replacement_history"][place[1]]


def write(
    record: Sequence[Any], conversation: Conversation, *, messages_key: str | None = None
) -> list[Any]:
    """The rollout's lines with the context items rebuilt from ``conversation``
    (module docstring); lines kept as they were are the very objects read."""
    places: Sequence[Place] = conversation.meta.get("places", ())
    written = responses.written_items(conversation)
    slots = _slots([origin for _, origin in written], places)
    by_line: dict[int, list[Any]] = {}
    for (item, _), slot in zip(written, slots):
        by_line.setdefault(slot, []).append(item)
    context = {_line_of(place) for place in places}
    out: list[Any] = []
    for e, event in enumerate(record):
        here = by_line.get(e, [])
        if e not in context:
            out.append(event)
        elif event.get("type") == "compacted":
            out.append(_with_history(event, here))
        else:
            out += [_line(event, item) for item in here]
    return out


def _slots(origins: list[int | None], places: Sequence[Place]) -> list[int]:
    """The line each written item belongs on: its own item's, or for a new item the
    line of the next item read (of the last one read when none follows)."""
    lines = [None if o is None else _line_of(places[o]) for o in origins]
    known = [line for line in lines if line is not None]
    following = known[-1] if known else (_line_of(places[-1]) if places else -1)
    slots = []
    for line in reversed(lines):
        following = following if line is None else line
        slots.append(following)
    return slots[::-1]


def _line_of(place: Place) -> int:
    return place if isinstance(place, int) else place[0]


def _line(event: Mapping[str, Any], item: Any) -> Any:
    """``item`` on a line in the style of ``event`` (the line it was read from, or the
    one it is put in front of); the very line when it holds that item."""
    if event.get("payload") is item:
        return event
    return {"timestamp": event.get("timestamp"), "type": "response_item", "payload": item}


def _with_history(event: Mapping[str, Any], items: list[Any]) -> Any:
    payload = event["payload"]
    history = payload.get("replacement_history")
    if (
        isinstance(history, list)
        and len(history) == len(items)
        and all(a is b for a, b in zip(history, items))
    ):
        return event
    return {**event, "payload": {**payload, "replacement_history": items}}


def problems(record: Sequence[Any], conversation: Conversation) -> list[Problem]:
    """The Responses rules (:func:`ctxcli.formats.responses.problems`) for the items the
    model sees."""
    return responses.problems({"input": conversation.meta.get("entries", ())}, conversation)
