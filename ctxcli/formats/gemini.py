"""Gemini API ``contents``: ``{"contents": [...], "systemInstruction"?, "tools"?, ...}``.

Each Content is ``{"role": "user" | "model", "parts": [...]}`` (``function`` is an
older name of the user side for function responses; a missing role is ``user``). A
part holds one of ``text`` (with ``thought: true`` for a thought summary),
``functionCall`` ``{name, args, id?}``, ``functionResponse`` ``{name, response,
id?}``, ``inlineData`` ``{mimeType, data}``, ``fileData``, ``executableCode``, ...,
and may carry an opaque ``thoughtSignature``. The REST API reads snake_case names
(``function_call``, ``thought_signature``, ...) as well; so does this module. A record
of ``history`` Contents (Gemini CLI's ``/chat save`` checkpoint of late 2025) reads
the same; a bare JSON array of them is :mod:`ctxcli.formats.gemini_checkpoint`.

How it maps onto the neutral model (and back):

- ``systemInstruction`` is one ``system`` message, never dropped, written back by
  leaving it as it is;
- a model Content is one ``assistant`` message: its ``functionCall`` parts become
  ``tool_calls`` (id: the call's ``id``, else ``ctxcli-<content>-<part>``, never
  written out; arguments: the JSON of ``args``), its other parts stay content parts;
- a user Content becomes one ``tool`` message per ``functionResponse`` part, then one
  ``user`` message with its other parts. A response answers a call of the model turn
  just before (:func:`answered`: by id, else by name, else by order within the turn,
  as calls may have no ids).
  Its content is the text of a ``response`` that is ``{"output": text}`` or
  ``{"error": text}`` (the API's convention), else the response object.

Writing back (:func:`ctxcli.formats._common.rebuild_entries`): a Content whose
messages all survive unchanged is the very Content read, ``thoughtSignature`` and all;
a partly kept one keeps the parts of its survivors; a changed tool message rewrites
only its part's ``response`` (:func:`response_of`), a changed call only its ``args``.
A message a stage wrote (a summary) is a user Content with one text part, or, next
to a user Content, one more text part of it, in order: the API takes no two user
turns in a row ("Please ensure that multiturn requests alternate between user and
model"), so a summary of the steps after the user's latest turn joins that turn, as
does a summary before it that meets it.

Rules (the API's error texts): a function call turn comes right after a user turn
("Please ensure that function call turn comes immediately after a user turn or after
a function response turn."); a function response turn comes right after a function
call turn ("Please ensure that function response turn comes immediately after a
function call turn.") and holds as many responses as it made calls ("Please ensure
that the number of function response parts is equal to the number of function call
parts of the function call turn."), except after the last Content; when a record uses
thought signatures, each model turn of the current turn (from the last user Content
that is not only function responses) carries one on its first ``functionCall`` part
("Function call is missing a thought_signature in functionCall parts").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import InputError
from ctxcli.formats._common import Source, joined, kind, messages_of, rebuild_entries
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.model import Conversation, Message, read_messages, sealed
from ctxcli.model import content_text as text_of
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "gemini"
DEFAULT_KEY = "contents"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
ROLES = frozenset({"user", "model", "function"})
#: Fields the REST API also reads in snake_case (protobuf JSON names both ways).
_SNAKE = {
    "functionCall": "function_call",
    "functionResponse": "function_response",
    "thoughtSignature": "thought_signature",
    "systemInstruction": "system_instruction",
}
#: The keys of a ``response`` whose one text is the function's output.
_TEXT_KEYS = ("output", "error")


def key(value: Mapping[str, Any], name: str) -> str:
    """The key ``value`` holds ``name`` under: camelCase, or its snake_case spelling."""
    if name in value or name not in _SNAKE:
        return name
    return _SNAKE[name] if _SNAKE[name] in value else name


def field(value: Mapping[str, Any], name: str) -> Any:
    """``value[name]`` in camelCase or snake_case (see :data:`_SNAKE`); ``None``."""
    return value.get(key(value, name))


def is_contents(value: Any) -> bool:
    """True for a non-empty list whose first items are Content objects: ``parts``
    lists with a Gemini role or none."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(c, Mapping)
            and isinstance(c.get("parts"), list)
            and c.get("role", "user") in ROLES
            for c in value[:3]
        )
    )


def key_of(record: Any, messages_key: str | None = None) -> str:
    """Where ``record``'s Contents are: ``messages_key``; ``contents``; else a
    ``history`` of Contents (a Gemini CLI checkpoint object)."""
    if messages_key:
        return messages_key
    if (
        isinstance(record, Mapping)
        and "contents" not in record
        and is_contents(record.get("history"))
    ):
        return "history"
    return DEFAULT_KEY


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for an object holding Contents under its key (:func:`key_of`)."""
    return isinstance(record, Mapping) and is_contents(record.get(key_of(record, messages_key)))


def read(
    record: Any,
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
) -> Conversation:
    """Read one record's Contents into the neutral model (see the module docstring).

    Raises :class:`InputError` for a record that is not an object or has no Contents
    list, and for a Content that :func:`check_contents` refuses.
    """
    entries = messages_of(record, key_of(record, messages_key), path, line)
    check_contents(entries, path, line)
    record_id = record.get("id")
    return conversation_of(
        entries,
        counter,
        system=field(record, "systemInstruction"),
        tools=record.get("tools"),
        id=None if record_id is None else str(record_id),
        line=line,
    )


def check_contents(entries: Sequence[Any], path: str, line: int) -> None:
    """Raise :class:`InputError` naming the Content that is not an object with a
    Gemini role and a ``parts`` list of objects, or whose ``functionCall`` or
    ``functionResponse`` is not an object."""
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InputError(path, line, f"content {i} is {kind(entry)}, not an object")
        role = entry.get("role", "user")
        if role not in ROLES:
            known = ", ".join(sorted(ROLES))
            raise InputError(path, line, f"content {i} has unknown role {role!r} (known: {known})")
        parts = entry.get("parts")
        if not isinstance(parts, list):
            raise InputError(path, line, f"content {i}: parts is {kind(parts)}, not a list")
        for j, part in enumerate(parts):
            if not isinstance(part, Mapping):
                raise InputError(path, line, f"content {i} part {j} is {kind(part)}")
            for name in ("functionCall", "functionResponse"):
                value = field(part, name)
                if value is not None and not isinstance(value, Mapping):
                    raise InputError(path, line, f"content {i} part {j}: {name} is {kind(value)}")


def conversation_of(
    entries: Sequence[Mapping[str, Any]],
    counter: TokenCounter,
    *,
    system: Any = None,
    tools: Any = None,
    id: str | None = None,
    line: int = 0,
) -> Conversation:
    """The :class:`Conversation` of checked Contents (``system``: a
    ``systemInstruction``, a Content or a string)."""
    neutral, sources = neutral_messages(entries)
    if isinstance(system, Mapping) and isinstance(system.get("parts"), list):
        system = system["parts"]
    if isinstance(system, (str, list)):
        neutral.insert(0, {"role": "system", "content": system})
        sources.insert(0, (None, None))
    return Conversation(
        messages=read_messages(
            neutral,
            counter,
            entries=[s[0] for s in sources],
            apart=int(isinstance(system, (str, list))),  # the systemInstruction
        ),
        extra_tokens=counter.tools(tools),
        id=id,
        line=line,
        meta={"entries": entries, "sources": sources},
        user_first=True,
        alternating=True,
        joins_user=True,
        summary_role="user",  # Contents have no system role
    )


def neutral_messages(
    entries: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[Source]]:
    """The neutral messages of checked Contents, each with its :data:`Source`."""
    neutral: list[dict[str, Any]] = []
    sources: list[Source] = []
    open_calls: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        parts: list[Mapping[str, Any]] = entry["parts"]
        if entry.get("role") == "model":
            data = _model(parts, i)
            neutral.append(data)
            sources.append((i, tuple(range(len(parts)))))
            open_calls = list(data.get("tool_calls", ()))
            continue
        answers = [j for j, p in enumerate(parts) if field(p, "functionResponse") is not None]
        responses = [field(parts[j], "functionResponse") for j in answers]
        ids = answered(responses, open_calls, [f"{i}-{j}" for j in answers])
        for j, response, call_id in zip(answers, responses, ids):
            neutral.append(tool_message(response, call_id))
            sources.append((i, (j,)))
        others = tuple(j for j in range(len(parts)) if j not in answers)
        for run in user_runs(parts, others) if others or not answers else ():
            neutral.append({"role": "user", "content": [parts[j] for j in run]})
            sources.append((i, run))
        open_calls = []
    return neutral, sources


def user_runs(parts: Sequence[Mapping[str, Any]], others: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The user messages the ``others`` parts of a user Content (positions in
    ``parts``) are read as, each the positions of its parts: one, but for each ctxcli
    summary joined to the turn (a sealed text part: see :func:`written`), which is a
    message of its own, as it was written."""
    runs: list[tuple[int, ...]] = []
    run: tuple[int, ...] = ()
    for j in others:
        part = parts[j]
        text = part.get("text") if isinstance(part, Mapping) else None
        if isinstance(text, str) and not part.get("thought") and sealed(text):
            runs += [run, (j,)] if run else [(j,)]
            run = ()
        else:
            run += (j,)
    return runs + [run] if run or not runs else runs


def _model(parts: Sequence[Mapping[str, Any]], i: int) -> dict[str, Any]:
    calls = [(j, field(p, "functionCall")) for j, p in enumerate(parts)]
    data: dict[str, Any] = {
        "role": "assistant",
        "content": [p for p, (_, call) in zip(parts, calls) if call is None],
    }
    tool_calls = [neutral_call(c, f"{i}-{j}") for j, c in calls if c is not None]
    if tool_calls:
        data["tool_calls"] = tool_calls
    return data


def neutral_call(call: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``functionCall`` as a neutral tool call; one without an id is given
    ``ctxcli-<where>``, which no writer puts out."""
    call_id = call.get("id")
    return {
        "id": f"ctxcli-{where}" if call_id is None else str(call_id),
        "type": "function",
        "function": {
            "name": str(call.get("name") or ""),
            "arguments": jsonio.dumps(call.get("args", {})).decode(),
        },
    }


def answered(
    answers: Sequence[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]], where: Sequence[str]
) -> list[str]:
    """The id of the call (neutral, of the turn before) each ``functionResponse`` of
    ``answers`` answers: first those of the responses' ids, then of their names, then
    in order, each call taken once. A response that answers none keeps its own id
    (else ``ctxcli-<where>``), so the pairing check names it."""
    ids: list[str | None] = [None] * len(answers)
    left = list(calls)
    for fits in (
        lambda a, c: a.get("id") is not None and c["id"] == str(a["id"]),
        lambda a, c: c["function"]["name"] == a.get("name"),
        lambda a, c: True,
    ):
        for n, answer in enumerate(answers):
            match = next((c for c in left if fits(answer, c)), None) if ids[n] is None else None
            if match is not None:
                left.remove(match)
                ids[n] = str(match["id"])
    return [
        i if i is not None else (f"ctxcli-{w}" if a.get("id") is None else str(a["id"]))
        for i, a, w in zip(ids, answers, where)
    ]


def tool_message(response: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """A ``functionResponse`` as a neutral ``tool`` message answering ``call_id``."""
    value = response.get("response")
    data: dict[str, Any] = {"role": "tool", "tool_call_id": call_id}
    if isinstance(response.get("name"), str):
        data["name"] = response["name"]
    data["content"] = response_content(value)
    if isinstance(value, Mapping) and list(value) == ["error"]:
        data["is_error"] = True
    return data


def response_content(value: Any) -> Any:
    """The neutral content of a ``response``: the text of ``{"output": text}`` or
    ``{"error": text}``, else the value itself."""
    if isinstance(value, Mapping) and len(value) == 1:
        ((name, text),) = value.items()
        if name in _TEXT_KEYS and isinstance(text, str):
            return text
    return value


def response_of(value: Any, content: Any) -> Any:
    """The ``response`` for neutral ``content`` in place of ``value`` (the response
    read): ``value`` itself when it reads as ``content``; text under the key ``value``
    had (``output`` unless it was ``error``); an object as it is; other content as the
    ``output`` text of its parts. :func:`ctxcli.store.restore_record` puts an original
    back by the same rule."""
    if response_content(value) == content:
        return value
    if isinstance(content, str):
        had = list(value) if isinstance(value, Mapping) else []
        return {"error" if had == ["error"] else "output": content}
    if isinstance(content, Mapping):
        return content
    return {"output": text_of(content)}


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str | None = None
) -> dict[str, Any]:
    """``record`` with its Contents rebuilt from ``conversation`` (module docstring)."""
    out = dict(record)
    out[key_of(record, messages_key)] = written(conversation)
    return out


def written(conversation: Conversation) -> list[Any]:
    """The Contents ``conversation`` writes (see the module docstring)."""
    made: set[int] = set()  # the Contents a stage's messages became, by identity

    def new(message: Message) -> dict[str, Any]:
        content = new_content(message)
        made.add(id(content))
        return content

    contents = rebuild_entries(conversation, key="parts", new_entry=new, patch=patch_parts)
    return joined(
        contents,
        made,
        joins=_is_user,
        join=lambda own, a, b: {**own, "parts": [*a["parts"], *b["parts"]]},
    )


def _is_user(content: Any) -> bool:
    """Whether a Content is of the user side (a missing role is ``user``)."""
    return isinstance(content, Mapping) and content.get("role", "user") in ("user", "function")


def new_content(message: Message) -> dict[str, Any]:
    """A message a stage wrote (a summary) as a Content with one text part."""
    role = "model" if message.role == "assistant" else "user"
    return {"role": role, "parts": [{"text": text_of(message.data.get("content"))}]}


def patch_parts(
    parts: list[Any], blocks: Iterable[int], message: Mapping[str, Any]
) -> dict[int, Any]:
    """New versions of the ``parts`` (by position) read into ``message``, which a stage
    changed: a ``functionResponse`` takes the message's content (:func:`response_of`),
    the n-th ``functionCall`` the n-th call's arguments; every other key (a
    ``thoughtSignature``) stays."""
    calls: Iterator[Mapping[str, Any]] = iter(message.get("tool_calls") or ())
    patched: dict[int, Any] = {}
    for j in blocks:
        part = parts[j]
        response, call = field(part, "functionResponse"), field(part, "functionCall")
        if response is not None and message.get("role") == "tool":
            new = response_of(response.get("response"), message.get("content"))
            if new is not response.get("response"):
                patched[j] = {**part, key(part, "functionResponse"): {**response, "response": new}}
        elif call is not None:
            function: Mapping[str, Any] = next(calls, {}).get("function") or {}
            args = args_of(function.get("arguments"), call.get("args"))
            if args != call.get("args"):
                patched[j] = {**part, key(part, "functionCall"): {**call, "args": args}}
    return patched


def args_of(arguments: Any, had: Any) -> Any:
    """Neutral call ``arguments`` (JSON text) as a ``functionCall``'s ``args`` (``had``,
    the args read, when there is no text; text that is no JSON under ``arguments``)."""
    if not isinstance(arguments, str):
        return had
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"arguments": arguments}


def problems(record: Any, conversation: Conversation) -> list[Problem]:
    """Every rule of the module docstring ``record`` breaks, naming the Content (its
    position in the list)."""
    return content_problems(conversation.meta.get("entries", ()))


def content_problems(entries: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """The Gemini rules (module docstring) ``entries`` (checked Contents) break, each
    naming the Content (``unit`` ``content``)."""
    found: list[Problem] = []
    calls = [_count(e, "functionCall") for e in entries]
    answers = [_count(e, "functionResponse") for e in entries]
    signed = any(field(p, "thoughtSignature") for e in entries for p in e["parts"])
    current = _current_turn(entries)
    for i, entry in enumerate(entries):
        found += _turn_problems(entries, calls, answers, i)
        if signed and calls[i] and i >= current:
            found += _signature_problems(entry, i)
    return found


def _turn_problems(
    entries: Sequence[Mapping[str, Any]], calls: list[int], answers: list[int], i: int
) -> list[Problem]:
    """The turn rules of Content ``i``: calls right after a user or response turn,
    answered by as many responses, responses right after calls. ``calls`` and
    ``answers`` count each Content's function calls and responses."""
    found = []
    model = entries[i].get("role") == "model"
    if calls[i] and (not model or i == 0 or entries[i - 1].get("role") == "model"):
        detail = (
            "Please ensure that function call turn comes immediately "
            "after a user turn or after a function response turn."
        )
        found.append(Problem("call-turn-misplaced", detail, i, unit="content"))
    if calls[i] and i + 1 < len(entries) and answers[i + 1] != calls[i]:
        detail = (
            "Please ensure that the number of function response parts is "
            "equal to the number of function call parts of the function call turn "
            f"({calls[i]} calls, {answers[i + 1]} responses)."
        )
        found.append(Problem("responses-uncounted", detail, i, unit="content"))
    if answers[i] and (model or i == 0 or not calls[i - 1]):
        detail = (
            "Please ensure that function response turn comes immediately "
            "after a function call turn."
        )
        found.append(Problem("response-turn-misplaced", detail, i, unit="content"))
    return found


def _signature_problems(entry: Mapping[str, Any], i: int) -> list[Problem]:
    """The Content ``i`` of the current turn holding calls: its first call signed."""
    first = next(p for p in entry["parts"] if field(p, "functionCall") is not None)
    if field(first, "thoughtSignature"):
        return []
    name = field(first, "functionCall").get("name")
    detail = (
        "Function call is missing a thought_signature in "
        f"functionCall parts (function call `{name}`)."
    )
    return [Problem("call-unsigned", detail, i, unit="content")]


def _count(entry: Mapping[str, Any], name: str) -> int:
    return sum(1 for p in entry["parts"] if field(p, name) is not None)


def _current_turn(entries: Sequence[Mapping[str, Any]]) -> int:
    """Where the current turn starts: the last user Content holding more than
    function responses (0 when there is none)."""
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if entry.get("role") != "model" and any(
            field(p, "functionResponse") is None for p in entry["parts"]
        ):
            return i
    return 0
