"""Claude Code session logs: a ``.jsonl`` file of events, one session a file.

Each event is an object with ``type``, ``uuid``, ``parentUuid`` (``null`` at a root),
``isSidechain``, ``sessionId`` and, for ``user`` and ``assistant`` events, a
``message`` ``{role, content}`` whose content is a string or Anthropic blocks. Claude
Code writes one event per content block of a streamed reply, so consecutive assistant
events with the same ``message.id`` are one API message (parallel tool calls arrive
as several such events).

The *record* of this format is the whole session: the list of its events. The
conversation is the main chain (``isSidechain`` false) of ``user`` and ``assistant``
events, read block by block as :mod:`ctxcli.formats.anthropic` reads messages. Every
other event (sidechains, which are a sub-agent's own context, ``summary``,
``system`` and snapshot events, anything unknown) passes through unchanged and is
never dropped or counted.

Writing back: an event whose messages all survive unchanged is the very event read (so
the compressor writes its line as read); a partly kept one keeps only the surviving
blocks. A dropped event is unlinked, and every ``parentUuid`` that pointed at one is
re-linked to its nearest kept ancestor. A summary becomes a new ``user`` event in the
same style (``cwd``, ``sessionId``, ``version``, ... copied from the event it
precedes), with a fresh ``uuid`` (UUID5 of that event's uuid and the text, so a run
is reproducible) linked into the chain in front of that event. A summary that stands
where Claude Code's own compact summary stood (it folded that event, and follows the
same ``compact_boundary``) keeps its marks (``isCompactSummary``,
``isVisibleInTranscriptOnly``), so Claude Code still shows it as the compact summary
rather than as a prompt the user typed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli.errors import InputError
from ctxcli.formats import anthropic
from ctxcli.formats._common import kind, patch_blocks, pending
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.invariants import pairing_problems
from ctxcli.model import Conversation, Message, read_messages
from ctxcli.model import content_text as text_of
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "claude-code"
DEFAULT_KEY = "message"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
_CHAT = ("user", "assistant")
#: Keys a summary event copies from the event it is put in front of.
_STYLE = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch")
#: Keys a summary event copies from the compact summary it stands in for.
_COMPACT_MARKS = ("isCompactSummary", "isVisibleInTranscriptOnly")
_NAMESPACE = uuid.UUID("6f2b1c4e-9a57-4b8e-8d3e-2f1c0a9b7d10")

Source = list[tuple[int, tuple[int, ...] | None]]


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for one session event: an object with ``type``, ``uuid`` and a
    ``parentUuid`` or ``sessionId`` key (the compressor asks this of a file's first
    record, and then reads the whole file as one session)."""
    return (
        isinstance(record, Mapping)
        and "uuid" in record
        and "type" in record
        and ("parentUuid" in record or "sessionId" in record)
    )


def detect_head(head: Sequence[Any]) -> bool:
    """True for a file's first records (parsed) when most are objects with a string
    ``type`` and one is a session event (:func:`detect`): a real session may open with
    ``summary``, ``file-history-snapshot`` or other lines that carry no message. A line
    of another kind among them (a chat record pasted in) passes through unchanged, as
    any unknown line does; it had made the file's first line "no format fits this
    record", naming the keys of a valid ``file-history-snapshot``."""
    typed = sum(isinstance(r, Mapping) and isinstance(r.get("type"), str) for r in head)
    return 2 * typed > len(head) and any(detect(r) for r in head)


def context_start(events: Sequence[Any]) -> int:
    """Where the model's context starts: after the last ``compact_boundary`` system
    event (the compact summary, marked ``isCompactSummary``, follows it), else at the
    first event. The messages before it were compacted away: they stay in the file
    as they are, and are neither counted nor compressed."""
    return next(
        (
            e + 1
            for e in range(len(events) - 1, -1, -1)
            if isinstance(events[e], Mapping)
            and events[e].get("type") == "system"
            and events[e].get("subtype") == "compact_boundary"
        ),
        0,
    )


def _is_chat(event: Any) -> bool:
    return (
        isinstance(event, Mapping)
        and event.get("type") in _CHAT
        and isinstance(event.get("message"), Mapping)
        and not event.get("isSidechain")
    )


def read(
    record: Sequence[Any],
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
    lines: Sequence[int] | None = None,
) -> Conversation:
    """Read a session (its events, in file order; ``lines`` their line numbers) into
    the neutral model (see the module docstring).

    Raises :class:`InputError` naming the event's line for an event that is not an
    object, a ``user`` / ``assistant`` event whose message role is neither, or a
    block that is not an object.
    """
    where = list(lines) if lines is not None else [line + i for i in range(len(record))]
    start = context_start(record)
    neutral, sources = _chat_messages(record, start, where, path)
    for data in neutral:
        data.pop("_blocks", None)
    first = next((e for e in record if isinstance(e, Mapping) and e.get("sessionId")), {})
    return Conversation(
        messages=read_messages(neutral, counter, entries=_entries(record, neutral, sources)),
        id=None if not first else str(first.get("sessionId")),
        line=line,
        meta={
            "entries": list(record),
            "sources": sources,
            "lines": where,
            "out_of_context": sum(map(_is_chat, record[:start])),
        },
        user_first=True,
        summary_role="user",
    )


def _entries(
    record: Sequence[Any], neutral: Sequence[Mapping[str, Any]], sources: Sequence[Source]
) -> list[int]:
    """The source entry of each neutral message (its event's index), but for a slash
    command's expansion (a user event with ``isMeta``, the prompt the command stands
    for) right after the user's message that ran it (``<command-args>`` with the
    user's own words): it has that message's entry, so the two are one latest turn
    (:func:`ctxcli.model.latest_turn`). The expansion alone was kept as the latest
    user message, and the request the user typed was folded or dropped."""
    entries = [source[-1][0] for source in sources]
    for i in range(1, len(neutral)):
        event = record[entries[i]]
        after = neutral[i - 1]
        if (
            event.get("isMeta") is True
            and neutral[i].get("role") == "user"
            and after.get("role") == "user"
            and not record[entries[i - 1]].get("isMeta")
            and not after.get("tool_call_id")
        ):
            entries[i] = entries[i - 1]
    return entries


def _chat_messages(
    record: Sequence[Any], start: int, where: Sequence[int], path: str
) -> tuple[list[dict[str, Any]], list[Source]]:
    """The neutral messages of the chat events from ``start`` on (an assistant's with
    its blocks under ``_blocks``), each with its source; the parts of one streamed
    reply are one message. Raises :class:`InputError` as :func:`read` says."""
    neutral: list[dict[str, Any]] = []
    sources: list[Source] = []
    previous_id: Any = None
    for e, event in enumerate(record):
        if not isinstance(event, Mapping):
            raise InputError(path, where[e], f"event is {kind(event)}, not an object")
        if e < start or not _is_chat(event):
            previous_id = None
            continue
        message = event["message"]
        role, content, blocks = _checked(message, path, where[e])
        message_id = message.get("id") if role == "assistant" else None
        if message_id is not None and message_id == previous_id and blocks is not None:
            # One streamed reply written as several events: one neutral message.
            merged = neutral[-1]["_blocks"] + list(blocks)
            neutral[-1] = {**anthropic._assistant(merged), "_blocks": merged}
            sources[-1].append((e, tuple(range(len(blocks)))))
            continue
        previous_id = message_id if blocks is not None else None
        for data, source in _neutral(role, content, blocks, e):
            neutral.append(data)
            sources.append(source)
    return neutral, sources


def _checked(message: Mapping[str, Any], path: str, line: int) -> tuple[str, Any, list[Any] | None]:
    """A chat event's ``message``: its role, content and blocks (``None`` for a content
    that is no list). Raises :class:`InputError` for a role outside user / assistant
    or a block that is not an object."""
    role = message.get("role")
    if role not in _CHAT:
        known = ", ".join(_CHAT)
        raise InputError(path, line, f"message has unknown role {role!r} (known: {known})")
    content = message.get("content")
    blocks = content if isinstance(content, list) else None
    for j, block in enumerate(blocks or ()):
        if not isinstance(block, Mapping):
            raise InputError(path, line, f"block {j} is {kind(block)}, not an object")
    return str(role), content, blocks


def _neutral(
    role: str, content: Any, blocks: list[Any] | None, e: int
) -> list[tuple[dict[str, Any], list[tuple[int, tuple[int, ...] | None]]]]:
    """The neutral messages of the chat event at ``e``, each with its source (an
    assistant's keeps its blocks under ``_blocks``, for a streamed reply's next part)."""
    if blocks is None:
        return [({"role": role, "content": content}, [(e, None)])]
    if role == "assistant":
        data = {**anthropic._assistant(blocks), "_blocks": list(blocks)}
        return [(data, [(e, tuple(range(len(blocks))))])]
    return [(data, [(e, kept)]) for data, kept in anthropic._user(blocks)]


def write(
    record: Sequence[Any], conversation: Conversation, *, messages_key: str | None = None
) -> list[Any]:
    """The session's events after compression: kept events (the very objects read
    when unchanged), summary events, and ``parentUuid`` links re-made; see the module
    docstring."""
    events: Sequence[Any] = conversation.meta["entries"]
    sources: Sequence[Source] = conversation.meta["sources"]
    kept, inserts, waiting, patches = _plan(conversation)
    chat = {e for source in sources for e, _ in source}
    dropped = {e for e in chat if e not in kept}
    parents = {ev.get("uuid"): ev.get("parentUuid") for ev in events if isinstance(ev, Mapping)}
    gone = {events[e].get("uuid") for e in dropped} - {None}
    # The compact summaries folded, by the boundary each follows.
    compacts = {
        events[e].get("parentUuid"): events[e] for e in dropped if events[e].get("isCompactSummary")
    }
    out: list[Any] = []
    for e, event in enumerate(events):
        if e in dropped:
            continue
        parent = _live_parent(event.get("parentUuid"), gone, parents)
        for message in inserts.get(e, ()):
            new = _summary_event(event, parent, message, compacts.pop(parent, None))
            out.append(new)
            parent = new["uuid"]
        if e in chat:
            event = _trimmed(event, kept.get(e), patches.get(e, {}))
        if parent != event.get("parentUuid"):
            event = {**event, "parentUuid": parent}
        out.append(event)
    return out + _trailing(out, waiting)


def _trailing(out: Sequence[Any], waiting: Sequence[Message]) -> list[dict[str, Any]]:
    """Summary events for the summaries after the last kept message, chained after
    the last chat event of ``out``."""
    last = next((ev for ev in reversed(out) if _is_chat(ev)), None) if waiting else None
    events = []
    for message in waiting:
        style = last or {}
        last = _summary_event(style, style.get("uuid"), message)
        events.append(last)
    return events


def _plan(
    conversation: Conversation,
) -> tuple[
    dict[int, set[int] | None], dict[int, list[Message]], list[Message], dict[int, dict[int, Any]]
]:
    """What :func:`write` does to each event: the blocks it keeps (``None``: all, its
    content no list), the summaries to put in front of it, the summaries after the last
    kept message (``waiting``) and the blocks rewritten, by event position."""
    events: Sequence[Any] = conversation.meta["entries"]
    sources: Sequence[Source] = conversation.meta["sources"]
    kept: dict[int, set[int] | None] = {}
    inserts: dict[int, list[Message]] = {}
    waiting: list[Message] = []
    patches: dict[int, dict[int, Any]] = {}
    for message in conversation.messages:
        if message.index is None:
            waiting.append(message)
            continue
        for e, blocks in sources[message.index]:
            if waiting:
                inserts.setdefault(e, []).extend(waiting)
                waiting = []
            if message.changed and blocks is not None:  # rewritten in its own blocks
                content = events[e]["message"].get("content")
                patches.setdefault(e, {}).update(patch_blocks(content, blocks, message.data))
            if blocks is None:
                kept[e] = None
            else:
                have = kept.setdefault(e, set())
                if have is not None:
                    have.update(blocks)
    return kept, inserts, waiting, patches


def _live_parent(parent: Any, gone: set[Any], parents: Mapping[Any, Any]) -> Any:
    """The nearest ancestor of ``parent`` (itself first) not ``gone``; a cycle of
    links ends at the event where it closes."""
    seen = set()
    while parent in gone and parent not in seen:
        seen.add(parent)
        parent = parents.get(parent)
    return parent


def _trimmed(
    event: Mapping[str, Any], survivors: set[int] | None, patched: Mapping[int, Any]
) -> Mapping[str, Any]:
    """A chat ``event`` with only its ``survivors`` blocks (``None``: all), those of
    ``patched`` rewritten; the very event when nothing changes."""
    content = event["message"].get("content")
    blocks_kept = survivors if survivors is not None and isinstance(content, list) else None
    if content and blocks_kept is not None and (len(blocks_kept) < len(content) or patched):
        rebuilt = [patched.get(j, content[j]) for j in sorted(blocks_kept)]
        return {**event, "message": {**event["message"], "content": rebuilt}}
    return event


def _summary_event(
    style: Mapping[str, Any],
    parent: Any,
    message: Message,
    compact: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The event of a summary ``message``, linked to ``parent``, with the keys of
    :data:`_STYLE` from ``style`` (the event it precedes) and those of
    :data:`_COMPACT_MARKS` from ``compact`` (the compact summary it stands in for)."""
    text = text_of(message.data.get("content"))
    seed = f"{style.get('uuid')}\n{text}"
    event: dict[str, Any] = {"parentUuid": parent}
    event.update({k: style[k] for k in _STYLE if k in style})
    event["isSidechain"] = False
    event.update({k: compact[k] for k in _COMPACT_MARKS if compact and k in compact})
    event["type"] = "user"
    event["message"] = {"role": "user", "content": text}
    event["uuid"] = str(uuid.uuid5(_NAMESPACE, seed))
    if "timestamp" in style:
        event["timestamp"] = style["timestamp"]
    return event


def problems(record: Sequence[Any], conversation: Conversation) -> list[Problem]:
    """What makes the session invalid, naming the line of the event: a ``uuid`` used
    twice, a ``parentUuid`` that names no earlier event, and on the main chain the
    Anthropic rules (first message a user message; every ``tool_use`` answered by its
    ``tool_result`` before anything else, every ``tool_result`` after its call)."""
    lines: Sequence[int] = conversation.meta["lines"]
    sources: Sequence[Source] = conversation.meta["sources"]
    found: list[Problem] = []
    seen: set[Any] = set()
    for e, event in enumerate(record):
        if not isinstance(event, Mapping):
            continue
        parent = event.get("parentUuid")
        if parent is not None and parent not in seen:
            detail = f"parentUuid {parent!r} names no earlier event"
            found.append(Problem("dangling-parent", detail, lines[e], unit="line"))
        uuid_here = event.get("uuid")
        if uuid_here is None:  # summary, file-history-snapshot ... lines carry none
            continue
        if uuid_here in seen:
            detail = f"uuid {uuid_here!r} is used twice"
            found.append(Problem("uuid-twice", detail, lines[e], unit="line"))
        seen.add(uuid_here)
    messages = conversation.messages
    if messages and messages[0].role != "user":
        detail = f"the session opens with {messages[0].role}"
        found.append(Problem("first-not-user", detail, lines[sources[0][0][0]], unit="line"))
    for problem in pending(pairing_problems(messages), len(messages)):
        at = problem.message if problem.message is not None else 0
        found.append(problem.at(message=lines[sources[at][0][0]], unit="line"))
    return found
