"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json``).

One JSON object a session: ``{sessionId, projectHash, startTime, lastUpdated,
messages, summary?}``. Each message has ``id``, ``timestamp``, ``type`` and
``content`` (a string, or Gemini parts): ``user``, ``gemini`` (with ``thoughts``
``[{subject, description, timestamp}]``, ``tokens``, ``model`` and ``toolCalls``
``[{id, name, args, result, status, resultDisplay, ...}]``, whose ``result`` is the
parts sent back, a ``functionResponse`` first), or ``info`` / ``error`` /
``warning`` and others, which the model never sees.

How it maps onto the neutral model, as the CLI replays a session to the API when it
resumes one (``convertSessionToClientHistory`` in gemini-cli):

- a ``user`` message is one ``user`` message, unless it is a command (its text starts
  with ``/`` or ``?``), which is not replayed;
- a ``gemini`` message is one ``assistant`` message: its thoughts as thought text
  parts (``**subject** description``; not when its content already holds thought or
  ``functionCall`` parts, which then stand for them), its content, and a tool call per
  ``toolCalls`` entry; each entry with a ``result`` is then one ``tool`` message, its
  content read from the ``functionResponse`` as :mod:`ctxcli.formats.gemini` reads one
  (a result of other parts beside it is the content as it is);
- every other message passes through, never dropped or counted.

Writing back: a message no stage touched is the very object read; a dropped one goes;
a changed tool result rewrites only its ``functionResponse``'s ``response``
(:func:`ctxcli.formats.gemini.response_of`), a changed call only its ``args``
(``resultDisplay``, what the terminal showed, stays). A summary is a new ``user``
message in the recording's style (``id``: UUID5 of the next message's id and the
text, so a run is reproducible; that message's ``timestamp``) before the message it
precedes; one that meets a ``user`` message (the CLI replays each as a user
Content, and the API takes no two in a row) is one more text part of that
message's ``content`` instead, in order.

Rules: those of the API (:func:`ctxcli.formats.gemini.content_problems`) for the
Contents the CLI replays, each named by the message it comes from.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli.errors import InputError
from ctxcli.formats import gemini
from ctxcli.formats._common import joined, kind, messages_of
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.model import Conversation, Message, read_messages
from ctxcli.model import content_text as text_of
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "gemini-cli"
DEFAULT_KEY = "messages"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
TYPES = frozenset({"user", "gemini", "info", "error", "warning", "compression_marker"})
_NAMESPACE = uuid.UUID("0b8f3d2e-5c1a-4e7b-9f60-3a2d1c4b5e6f")

#: Where a neutral message was read from: the message's position, and for a tool
#: result the position of its entry in ``toolCalls``.
Source = tuple[int, int | None]


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for an object whose first messages are recording messages: objects with
    an ``id``, a ``timestamp`` and a ``type`` of :data:`TYPES`."""
    messages = record.get(messages_key or DEFAULT_KEY) if isinstance(record, Mapping) else None
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(
            isinstance(m, Mapping) and m.get("type") in TYPES and "id" in m and "timestamp" in m
            for m in messages[:3]
        )
    )


def read(
    record: Any,
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
) -> Conversation:
    """Read one recording into the neutral model (see the module docstring).

    Raises :class:`InputError` for a record that is not an object or has no messages
    list, a message that is not an object or has no ``type`` (another format's
    message: ``--format gemini-cli`` forced on a chat log), or ``toolCalls`` that are
    not a list of objects. A message of a ``type`` not in :data:`TYPES` passes
    through, as a newer CLI's may.
    """
    entries = messages_of(record, messages_key or DEFAULT_KEY, path, line)
    neutral: list[dict[str, Any]] = []
    sources: list[Source] = []
    runs: dict[int, tuple[int, ...]] = {}  # the parts of each message split from its own
    for e, entry in enumerate(entries):
        calls = _calls(entry, e, path, line)
        if entry.get("type") == "user" and not _is_ignored(entry):
            for data, run in _user_messages(entry):
                if run is not None:
                    runs[len(neutral)] = run
                neutral.append(data)
                sources.append((e, None))
        elif entry.get("type") == "gemini":
            for data, source in _gemini_messages(entry, e, calls):
                neutral.append(data)
                sources.append(source)
    session = record.get("sessionId")
    return Conversation(
        messages=read_messages(neutral, counter, entries=[s[0] for s in sources]),
        id=None if session is None else str(session),
        line=line,
        meta={"entries": entries, "sources": sources, "runs": runs},
        user_first=True,
        alternating=True,
        joins_user=True,
        summary_role="user",  # Contents have no system role
    )


def _calls(entry: Any, e: int, path: str, line: int) -> list[Mapping[str, Any]]:
    """The ``toolCalls`` of message ``e`` of a recording (``entry``) on ``line`` of
    ``path``. Raises :class:`InputError` for one that is not an object, has no
    ``type``, or has ``toolCalls`` that are not a list of objects."""
    if not isinstance(entry, Mapping):
        raise InputError(path, line, f"message {e} is {kind(entry)}, not an object")
    if not isinstance(entry.get("type"), str):
        known = ", ".join(sorted(TYPES))
        raise InputError(path, line, f"message {e} has no 'type' (known: {known})")
    calls = entry.get("toolCalls", [])
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
        raise InputError(path, line, f"message {e}: toolCalls is not a list of objects")
    return calls


def _gemini_messages(
    entry: Mapping[str, Any], e: int, calls: Sequence[Mapping[str, Any]]
) -> list[tuple[dict[str, Any], Source]]:
    """The neutral messages of the ``gemini`` message ``e`` (its ``calls``), each with
    its :data:`Source`: the answer, then a tool message per call with a result."""
    data = _assistant(entry, e)
    out: list[tuple[dict[str, Any], Source]] = [(data, (e, None))]
    for k, (call, neutral_call) in enumerate(zip(calls, data.get("tool_calls", ()))):
        if call.get("result"):
            out.append((_result(call, neutral_call["id"]), (e, k)))
    return out


def _user_messages(
    entry: Mapping[str, Any],
) -> list[tuple[dict[str, Any], tuple[int, ...] | None]]:
    """The neutral messages of a ``user`` message, each with the positions of its
    parts when there are several (``None``: the whole content): one, but for each
    summary joined to it (:func:`gemini.user_runs`), which stands apart."""
    content = _parts(entry.get("content"))
    if not isinstance(content, list):
        return [({"role": "user", "content": content}, None)]
    found = gemini.user_runs(content, tuple(range(len(content))))
    if len(found) <= 1:
        return [({"role": "user", "content": content}, None)]
    return [({"role": "user", "content": [content[j] for j in run]}, run) for run in found]


#: How a user message the CLI does not replay starts (``isIgnoredUserContent``): a
#: command, or context a hook or the session injected.
_IGNORED = ("/", "?", "<session_context>", "<hook_context>")


def _is_ignored(entry: Mapping[str, Any]) -> bool:
    """Whether the CLI leaves a user message out when it resumes the session
    (gemini-cli's ``isIgnoredUserContent``): its content as the CLI writes it out
    (text parts as their text, any other part as a mark), trimmed, is empty or starts
    with one of :data:`_IGNORED`."""
    content = _parts(entry.get("content"))
    parts = [] if content is None else content if isinstance(content, list) else [content]
    said = "".join(
        p if isinstance(p, str) else _plain(p) if isinstance(p, Mapping) else "[part]"
        for p in parts
    ).strip()
    return not said or said.startswith(_IGNORED)


def _plain(part: Mapping[str, Any]) -> str:
    """A part as the CLI's ``partToString`` writes it: a text part's text, any other
    (a thought, a file, a call) a bracketed mark."""
    text = part.get("text")
    return text if isinstance(text, str) and "thought" not in part else "[part]"


def _parts(content: Any) -> Any:
    """A message's ``content`` (a string, or a part list union) as neutral content: a
    string as it is, parts as a list of part objects."""
    if isinstance(content, list):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    return [content] if isinstance(content, Mapping) else content


def _model_parts(entry: Mapping[str, Any]) -> list[Any]:
    """The parts of a ``gemini`` message other than calls: thoughts, then content."""
    content = _parts(entry.get("content"))
    parts = content if isinstance(content, list) else ([{"text": content}] if content else [])
    if any(
        isinstance(p, Mapping) and (p.get("thought") or gemini.field(p, "functionCall"))
        for p in parts
    ):
        return [p for p in parts if not gemini.field(p, "functionCall")]
    thoughts = entry.get("thoughts")
    said = [
        {"text": _thought(t), "thought": True}
        for t in (thoughts if isinstance(thoughts, list) else ())
        if isinstance(t, Mapping)
    ]
    return said + parts


def _thought(thought: Mapping[str, Any]) -> str:
    subject, description = thought.get("subject"), str(thought.get("description") or "")
    return f"**{subject}** {description}" if subject else description


def _assistant(entry: Mapping[str, Any], e: int) -> dict[str, Any]:
    data: dict[str, Any] = {"role": "assistant", "content": _model_parts(entry)}
    calls = [gemini.neutral_call(c, f"{e}-{k}") for k, c in enumerate(entry.get("toolCalls") or ())]
    if calls:
        data["tool_calls"] = calls
    return data


def _result(call: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """A tool call's ``result`` as a neutral ``tool`` message, an error's
    (``is_error``) when the call's ``status`` is ``error`` too: the CLI records a
    failed call so, its result need not say it failed (a summary had said
    ``edit(c) → ok``)."""
    response = single_response(call.get("result"))
    if response is not None:
        data = gemini.tool_message(response, call_id)
    else:
        data = {"role": "tool", "tool_call_id": call_id, "content": call["result"]}
        if isinstance(call.get("name"), str):
            data["name"] = call["name"]
    if call.get("status") == "error":
        data["is_error"] = True
    return data


def single_response(result: Any) -> Mapping[str, Any] | None:
    """The ``functionResponse`` of a tool call's ``result`` that is that one part
    alone, else None."""
    if isinstance(result, list) and len(result) == 1 and isinstance(result[0], Mapping):
        response = gemini.field(result[0], "functionResponse")
        return response if isinstance(response, Mapping) else None
    return None


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str | None = None
) -> dict[str, Any]:
    """``record`` with its messages rebuilt from ``conversation`` (module docstring)."""
    entries: Sequence[Any] = conversation.meta["entries"]
    sources: Sequence[Source] = conversation.meta["sources"]
    runs: Mapping[int, tuple[int, ...]] = conversation.meta.get("runs", {})
    kept: dict[int, Any] = {}
    inserts: dict[int, list[Message]] = {}
    waiting: list[Message] = []
    alive: dict[int, list[int]] = {}  # the parts kept of a message read as several
    for message in conversation.messages:
        if message.index is None:
            waiting.append(message)
            continue
        e, k = sources[message.index]
        if waiting:
            inserts.setdefault(e, []).extend(waiting)
            waiting = []
        entry = kept.setdefault(e, entries[e])
        if message.changed:
            kept[e] = _patched(entry, k, message.data)
        if message.index in runs:
            alive.setdefault(e, []).extend(runs[message.index])
    for e, parts in alive.items():
        content = entries[e]["content"]  # a list: only a part list is read as several
        if len(parts) < len(content):  # a summary joined to it was folded anew
            kept[e] = {**kept[e], "content": [content[j] for j in sorted(parts)]}
    inserts[len(entries)] = waiting
    written = dict(record)
    written[messages_key or DEFAULT_KEY] = _placed(entries, {e for e, _ in sources}, kept, inserts)
    return written


def _placed(
    entries: Sequence[Any],
    read_from: set[int],
    kept: Mapping[int, Any],
    inserts: Mapping[int, Sequence[Message]],
) -> list[Any]:
    """The messages written: the ``kept`` ones (by position, as rewritten) and those
    never read (of ``read_from``), each summary of ``inserts`` before the message of
    its position (``len(entries)``: at the end), joined to a user message it meets
    (:func:`ctxcli.formats._common.joined`: under the user's message's own ``id``)."""
    out: list[Any] = []
    made: set[int] = set()  # the messages summaries became, by identity
    for e in range(len(entries) + 1):
        style = entries[min(e, len(entries) - 1)] if entries else {}
        for message in inserts.get(e, ()):
            out.append(_summary(style, message))
            made.add(id(out[-1]))
        if e < len(entries) and (e in kept or e not in read_from):
            out.append(kept.get(e, entries[e]))
    return joined(
        out,
        made,
        joins=_is_user,
        join=lambda own, a, b: {**own, "content": _part_list(a) + _part_list(b)},
        seen=lambda message: isinstance(message, Mapping) and bool(_replay(message)),
    )


def _patched(entry: Mapping[str, Any], k: int | None, data: Mapping[str, Any]) -> Any:
    """``entry`` with the tool call ``k``'s result (or, for ``None``, every call's
    arguments) rewritten from the changed neutral message ``data``."""
    calls = list(entry.get("toolCalls") or ())
    if k is not None:
        calls[k] = {**calls[k], "result": _new_result(calls[k], data.get("content"))}
    else:
        for n, neutral in enumerate(data.get("tool_calls") or ()):
            args = gemini.args_of(
                neutral.get("function", {}).get("arguments"), calls[n].get("args")
            )
            if args != calls[n].get("args"):
                calls[n] = {**calls[n], "args": args}
    return {**entry, "toolCalls": calls}


def _new_result(call: Mapping[str, Any], content: Any) -> list[Any]:
    """A tool call's ``result`` holding neutral ``content``."""
    result: Any = call.get("result")
    response = single_response(result)
    if response is not None:
        part = result[0]
        new = gemini.response_of(response.get("response"), content)
        return [{**part, gemini.key(part, "functionResponse"): {**response, "response": new}}]
    answer = {
        "id": call.get("id"),
        "name": call.get("name"),
        "response": gemini.response_of(None, content),
    }
    return [{"functionResponse": answer}]


def _is_user(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("type") == "user" and bool(_replay(message))


def _part_list(message: Mapping[str, Any]) -> list[Any]:
    """A message's ``content`` as a part list, its parts as written (a bare string
    stays one: the CLI reads ``string | Part`` alike)."""
    content = message.get("content")
    return list(content) if isinstance(content, list) else [content]


def _summary(style: Mapping[str, Any], message: Message) -> dict[str, Any]:
    text = text_of(message.data.get("content"))
    seed = f"{style.get('id')}\n{text}"
    return {
        "id": str(uuid.uuid5(_NAMESPACE, seed)),
        "timestamp": style.get("timestamp"),
        "type": "user",
        "content": text,
    }


def problems(record: Any, conversation: Conversation) -> list[Problem]:
    """The API's rules for the Contents the CLI replays (module docstring), each named
    by the message it comes from."""
    contents, origin = replayed(conversation.meta.get("entries", ()))
    return [
        problem.at(message=origin[problem.message or 0], unit="message")
        for problem in gemini.content_problems(contents)
    ]


def replayed(entries: Sequence[Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """The Contents the CLI sends when it resumes the session, and for each the
    position of the message it comes from."""
    contents: list[dict[str, Any]] = []
    origin: list[int] = []
    for e, entry in enumerate(entries):
        replay = _replay(entry) if isinstance(entry, Mapping) else []
        contents += replay
        origin += [e] * len(replay)
    return contents, origin


def _replay(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Contents one message of the session replays (see :func:`replayed`)."""
    if entry.get("type") == "user" and not _is_ignored(entry):
        content = _parts(entry.get("content"))
        parts = content if isinstance(content, list) else [{"text": content}]
        return [{"role": "user", "parts": parts}]
    if entry.get("type") != "gemini":
        return []
    calls = [c for c in entry.get("toolCalls") or () if isinstance(c, Mapping)]
    asked = [{"functionCall": {"name": c.get("name"), "args": c.get("args")}} for c in calls]
    parts = _model_parts(entry) + asked
    if not parts:
        return []  # nothing to replay
    answers = [p for c in calls if c.get("result") for p in _result_parts(c["result"])]
    return [{"role": "model", "parts": parts}] + (
        [{"role": "user", "parts": answers}] if answers else []
    )


def _result_parts(result: Any) -> list[Any]:
    if isinstance(result, list):
        return [p for p in result if isinstance(p, Mapping)]
    if isinstance(result, str):
        return [{"functionResponse": {"response": {"output": result}}}]
    return [result] if isinstance(result, Mapping) else []
