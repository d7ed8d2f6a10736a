"""OpenAI Responses API items: a record's ``input`` list, or a Response's ``output``.

An item list holds ``message`` items (``role`` ``user``, ``system``, ``developer`` or
``assistant``; ``content`` a string or ``input_text`` / ``output_text`` /
``input_image`` parts; ``type`` may be left out: :func:`item_type`), calls
(``function_call`` ``{call_id, name, arguments}``, ``custom_tool_call`` ``{call_id,
name, input}``, ``local_shell_call`` ``{call_id, action}``) and their outputs
(``function_call_output``, ``custom_tool_call_output``, ``local_shell_call_output``:
``{call_id, output}``), ``reasoning`` items (``encrypted_content``, ``summary``),
``compaction`` items and hosted tools' items (``web_search_call``, ``mcp_call``,
``mcp_list_tools``, ...).

How it maps onto the neutral model (and back):

- a ``message`` item is one message of its role;
- a run of consecutive calls (parallel calls) is one ``assistant`` message with a
  ``tool_calls`` entry per call (``id``: the ``call_id``; arguments: ``arguments``,
  ``input``, or the JSON of a shell call's ``action``); each output is one ``tool``
  message, so that a call and its outputs are one unit, kept or dropped whole;
- ``reasoning`` items belong to the item that follows them (the output they produced):
  they are read into that item's neutral message as content parts, so the two are
  never parted, and written back before it, their ``id`` and ``encrypted_content``
  untouched;
- a ``compaction`` item (the history the API compacted, opaque) is a ``developer``
  message, which no stage drops, changes or summarizes;
- an ``mcp_call`` that holds its output is an ``assistant`` message with its call
  and a ``tool`` message with the output (written back as the one item, its
  ``output`` the tool message's), so the output can become a placeholder;
- a hosted call answered by the item after it (``computer_call`` and its
  ``computer_call_output``, ``shell_call`` and its output, an MCP approval request
  and its response: :data:`ANSWERED_BY`), or a run of them answered by the items
  after the run (parallel calls), is one ``assistant`` message, the items its
  content, and so is a step that makes function calls beside them, up to the last
  answer of the step;
- any other item is an ``assistant`` message of its own, its item as its content.

A message no stage changed is written back as the very items it was read from; a
changed one has its items patched (an output's ``output``, a call's arguments, a
message's text) and keeps every other key; a message a stage wrote (a summary) is a
``message`` item with one ``input_text`` part (``output_text`` for the assistant).

Rules (the API's error texts): an output answers a call made before it (``No tool
call found for function call output with call_id …``); every call has its output
before the next input (``No tool output found for function call …``), except calls
the list ends on; a reasoning item is followed by the item it produced (``Item 'rs_…'
of type 'reasoning' was provided without its required following item``); a call
replayed with its reasoning keeps it (``Item 'fc_…' of type 'function_call' was
provided without its required 'reasoning' item``: read into one message, the two are
never parted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli import jsonio
from ctxcli.errors import InputError
from ctxcli.formats._common import kind, messages_of, pending
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.invariants import pairing_problems
from ctxcli.model import Conversation, Message, read_messages
from ctxcli.model import content_text as text_of
from ctxcli.placeholders import LOCAL_SHELL
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter, call_function

NAME = "responses"
DEFAULT_KEY = "input"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems
#: Call item type -> the type of the item that answers it.
CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
}
OUTPUTS = frozenset(CALLS.values())
#: Hosted call item type -> the type of the item that answers it, the call's key that
#: names it and the answer's key that names the call: the API rejects an answer
#: without its call (``No tool call found for computer call output with call_id
#: …``), and the two are read as one message (:func:`_answered_end`).
ANSWERED_BY = {
    "computer_call": ("computer_call_output", "call_id", "call_id"),
    "shell_call": ("shell_call_output", "call_id", "call_id"),
    "apply_patch_call": ("apply_patch_call_output", "call_id", "call_id"),
    "tool_search_call": ("tool_search_output", "call_id", "call_id"),
    "program": ("program_output", "call_id", "call_id"),
    "mcp_approval_request": ("mcp_approval_response", "id", "approval_request_id"),
}
#: Answer item type -> its call's type (:data:`ANSWERED_BY`).
_ASKED_BY = {answer[0]: call for call, answer in ANSWERED_BY.items()}
MESSAGE_ROLES = frozenset({"user", "system", "developer", "assistant"})
#: Item types that tell a Responses item list from anything else: every type of the
#: API's input items (openai-python's ``ResponseInputItemParam``).
ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "compaction",
        "compaction_trigger",
        "item_reference",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "computer_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "tool_search_call",
        "tool_search_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
    }
    | set(CALLS)
    | OUTPUTS
)

#: A neutral message's source: the positions of the items it was read from.
Source = tuple[int, ...]


def item_type(item: Mapping[str, Any]) -> Any:
    """An item's ``type``: ``"message"`` for a message given without one (the API's
    ``EasyInputMessage``, ``{"role": "user", "content": "…"}``, whose ``type`` is
    optional, as OpenAI's function-calling guide sends the user's question)."""
    kind_of = item.get("type")
    return "message" if kind_of is None and "role" in item else kind_of


def call_id_of(item: Mapping[str, Any]) -> Any:
    """The ``call_id`` a call or an output names; a ``local_shell_call_output``'s
    ``id`` when it has none (the API reference's ``LocalShellCallOutput``: ``id``, "the
    unique ID of the local shell tool call generated by the model", its call's
    ``call_id``)."""
    call_id = item.get("call_id")
    if call_id is None and item_type(item) == "local_shell_call_output":
        return item.get("id")
    return call_id


def is_items(value: Any) -> bool:
    """True for a list whose first items are Responses items (objects whose ``type``
    is one of :data:`ITEM_TYPES`, or messages without one) and that holds one with a
    ``type``: a list of messages alone is a chat's (:mod:`ctxcli.formats.openai`)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(i, Mapping) and is_item(i) for i in value[:3])
        and any(isinstance(i, Mapping) and i.get("type") in ITEM_TYPES for i in value)
    )


def is_item(item: Mapping[str, Any]) -> bool:
    """Whether ``item`` is a Responses item of a known type, or a message without one."""
    kind_of = item.get("type")
    return kind_of in ITEM_TYPES or (kind_of is None and item.get("role") in MESSAGE_ROLES)


def key_of(record: Any, messages_key: str | None = None) -> str:
    """Where ``record``'s items are: ``messages_key``; a Response's ``output``; else
    ``input``."""
    if messages_key:
        return messages_key
    if isinstance(record, Mapping) and record.get("object") == "response":
        return "output"
    return DEFAULT_KEY


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for an object holding Responses items under its key (see :func:`key_of`);
    also for a request whose ``input`` is a string (the API's shorthand for one user
    message; a ``model`` or ``instructions`` beside it tells it from a dataset's
    ``input`` field) or messages alone with ``instructions`` beside them (a chat's
    messages are under ``messages``, its system prompt among them), and a Response
    with no output (one that failed): the file's other records are read."""
    if not isinstance(record, Mapping):
        return False
    key = key_of(record, messages_key)
    value = record.get(key)
    request = key == DEFAULT_KEY and ("model" in record or "instructions" in record)
    if isinstance(value, str):
        return request
    if is_items(value) or (value == [] and record.get("object") == "response"):
        return True
    return (
        request
        and isinstance(record.get("instructions"), (str, list))
        and isinstance(value, list)
        and bool(value)
        and all(isinstance(i, Mapping) and is_item(i) for i in value)
    )


def read(
    record: Any,
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
) -> Conversation:
    """Read one record's items into the neutral model (see the module docstring).

    Raises :class:`InputError` for a record that is not an object, has no item list,
    or holds an item that is not an object with a ``type``, a ``message`` of an
    unknown role, or a call or output without a ``call_id``.
    """
    key = key_of(record, messages_key)
    text = record.get(key)
    items = [{"role": "user", "content": text}] if isinstance(text, str) else None
    items = items or messages_of(record, key, path, line)
    for i, item in enumerate(items):
        check_item(item, i, path, line)
    neutral, sources = neutral_messages(items)
    apart = with_instructions(neutral, sources, record.get("instructions"))
    record_id = record.get("id")
    return Conversation(
        messages=read_messages(neutral, counter, apart=apart),
        extra_tokens=counter.tools(record.get("tools")),
        id=None if record_id is None else str(record_id),
        line=line,
        meta={"entries": items, "sources": sources, "key": key},
        summaries=not _is_response(record, key),  # see _inputs_in_output
    )


def with_instructions(
    neutral: list[dict[str, Any]], sources: list[Source], instructions: Any
) -> int:
    """Put the request's ``instructions`` first in ``neutral`` as a ``system`` message
    read from no item (``()`` in ``sources``: it is written back where it was, in the
    record, untouched), so that they are counted and kept as a system prompt is: the
    API puts them in the model's context before the items ("A system (or developer)
    message inserted into the model's context", openai-python's
    ``ResponseCreateParams.instructions``). A string, or a Response's list of input
    items (their texts); anything else, or an empty one, is left out. Returns how
    many messages it put first (1 or 0), ``read_messages``' ``apart``."""
    if isinstance(instructions, list):
        texts = (text_of(i.get("content")) for i in instructions if isinstance(i, Mapping))
        instructions = "\n".join(text for text in texts if text)
    if not isinstance(instructions, str) or not instructions:
        return 0
    neutral.insert(0, {"role": "system", "content": instructions})
    sources.insert(0, ())
    return 1


def check_item(item: Any, i: int, path: str, line: int) -> None:
    """Raise :class:`InputError` for item ``i`` when it is not one (see :func:`read`)."""
    if not isinstance(item, Mapping) or not isinstance(item_type(item), str):
        what = kind(item) if not isinstance(item, Mapping) else "an object without a type"
        raise InputError(path, line, f"item {i} is {what}")
    kind_of = item_type(item)
    if kind_of == "message" and item.get("role") not in MESSAGE_ROLES:
        known = ", ".join(sorted(MESSAGE_ROLES))
        raise InputError(path, line, f"item {i} has unknown role {item.get('role')!r} ({known})")
    if (kind_of in CALLS or kind_of in OUTPUTS) and not isinstance(call_id_of(item), str):
        raise InputError(path, line, f"item {i} ({kind_of}) has no call_id")


def neutral_messages(
    items: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[Source]]:
    """The neutral messages of an item list, each with the positions of its items."""
    neutral: list[dict[str, Any]] = []
    sources: list[Source] = []
    reasoning: list[int] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item_type(item) == "reasoning":
            reasoning.append(i)
            i += 1
            continue
        if _answered_in_place(item):  # an mcp_call with its output: a call and a result
            call, result = _hosted_pair(item, i)
            if reasoning:
                call["content"] = [_reasoning_part(items[r]) for r in reasoning]
            neutral += [call, result]
            sources += [tuple(reasoning), (i,)]
            reasoning = []
            i += 1
            continue
        end = _answered_end(items, i)
        if item_type(item) in CALLS and end == i + 1:
            while end < len(items) and item_type(items[end]) in CALLS:
                end += 1
        data = _neutral(items, range(i, end))
        if reasoning:
            parts = [_reasoning_part(items[r]) for r in reasoning]
            data["content"] = parts + _parts(data.get("content"))
        neutral.append(data)
        sources.append((*reasoning, *range(i, end)))
        reasoning = []
        i = end
    if reasoning:  # reasoning the list ends on: its following item is missing
        parts = [_reasoning_part(items[r]) for r in reasoning]
        neutral.append({"role": "assistant", "content": parts})
        sources.append(tuple(reasoning))
    return neutral, sources


def _answered_end(items: Sequence[Mapping[str, Any]], i: int) -> int:
    """Where the message of item ``i`` ends: for a run of calls (consecutive call
    items, their reasoning among them) with a hosted call in it (:data:`ANSWERED_BY`),
    after the last answer to a call of the step (:func:`_step_end`): one ``assistant``
    message, its content the items, so no stage parts a call from its answer (a
    computer-use run cut between a ``computer_call`` and its screenshot kept the
    screenshot alone); nor is an answer, which the API wants as it is (a screenshot, a
    shell's output list), ever a placeholder. ``i + 1`` for any other item, or a run
    whose hosted calls get no answer in their step."""
    run = i
    while run < len(items) and item_type(items[run]) in _STEP_CALLS:
        run += 1
    if not any(item_type(items[k]) in ANSWERED_BY for k in range(i, run)):
        return i + 1
    return _step_end(items, i) or i + 1


#: The items a run of calls is made of (:func:`_answered_end`).
_STEP_CALLS = frozenset(ANSWERED_BY) | frozenset(CALLS) | {"reasoning"}


def _step_end(items: Sequence[Mapping[str, Any]], start: int) -> int | None:
    """The end of the span from ``start`` to the last item that answers a call made in
    it (a hosted call's answer, a function call's output), reading on while a call
    waits and no user message stands between (the assistant's message while a
    computer action ran is part of the same step); ``None`` when no hosted call of it
    is answered. A function call made beside a hosted one is answered in the span too:
    ``computer_call c1, function_call f1, computer_call_output c1,
    function_call_output f1`` read as the hosted call's message up to ``c1``'s answer
    left ``f1``'s output without its call, and a summary folded the call alone."""
    last, hosted, waiting = None, False, set()
    for k in range(start, len(items)):
        item = items[k]
        if k > start and item_type(item) == "message" and item.get("role") != "assistant":
            break
        opened, answered = _asked(item), _answered(item)
        if opened is not None:
            waiting.add(opened)
        elif answered is not None and answered in waiting:
            waiting.discard(answered)
            last, hosted = k, hosted or answered[0] in ANSWERED_BY
        if not waiting:
            break
    return last + 1 if hosted and last is not None else None


#: Output item type -> its call's type (:data:`CALLS`).
_CALL_OF = {output: call for call, output in CALLS.items()}


def _asked(item: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(call type, name)`` of a call item (a hosted call: :data:`ANSWERED_BY`, or a
    function-style call: :data:`CALLS`), what its answer names; ``None`` for another
    item."""
    kind_of = item_type(item)
    if kind_of in ANSWERED_BY:
        return kind_of, item.get(ANSWERED_BY[kind_of][1])
    return (kind_of, call_id_of(item)) if kind_of in CALLS else None


def _answered(item: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(call type, name)`` of the call an answer item answers (as :func:`_asked`
    gives it for that call); ``None`` for another item."""
    kind_of = item_type(item)
    call = _ASKED_BY.get(kind_of)
    if call is not None:
        return call, item.get(ANSWERED_BY[call][2])
    return (_CALL_OF[kind_of], call_id_of(item)) if kind_of in OUTPUTS else None


def _answered_in_place(item: Mapping[str, Any]) -> bool:
    """Whether ``item`` is a hosted call that holds its own output as text (an
    ``mcp_call`` with its ``output``)."""
    return item_type(item) == "mcp_call" and isinstance(item.get("output"), str)


def _hosted_pair(item: Mapping[str, Any], at: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """An ``mcp_call`` item (:func:`_answered_in_place`) at position ``at`` as an
    assistant message with its call (``id``: the item's ``id``, else one made of
    ``at``) and a ``tool`` message with its ``output``: a unit, so the output can
    become a placeholder and is kept or dropped with its call. The item is written back
    from the ``tool`` message (its ``output`` patched) and the call (its ``arguments``:
    :func:`written_items`), the assistant message standing for no item of its own."""
    call_id = str(item.get("id") or f"ctxcli-mcp-{at}")
    arguments = item.get("arguments")
    function = {
        "name": str(item.get("name") or "mcp"),
        "arguments": arguments if isinstance(arguments, str) else "",
    }
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }
    return call, {"role": "tool", "tool_call_id": call_id, "content": item["output"]}


def _neutral(items: Sequence[Mapping[str, Any]], span: range) -> dict[str, Any]:
    """The neutral message of the items in ``span``: one item, a run of calls, or a
    step with a hosted call (:func:`_answered_end`), the items its content."""
    item = items[span[0]]
    kind_of = item_type(item)
    if all(item_type(items[k]) in CALLS for k in span):
        return {"role": "assistant", "content": None, "tool_calls": [_call(items[k]) for k in span]}
    if kind_of in OUTPUTS:
        return {"role": "tool", "tool_call_id": call_id_of(item), "content": item.get("output")}
    if kind_of == "message":
        return {"role": item["role"], "content": item.get("content")}
    if kind_of == "compaction":
        return {"role": "developer", "content": [dict(item)]}
    return {"role": "assistant", "content": [dict(items[k]) for k in span]}


def _call(item: Mapping[str, Any]) -> dict[str, Any]:
    """The neutral tool call of a call item: a custom tool's as OpenAI chat has one
    (``{"type": "custom", "custom": {"name", "input"}}``: free text, which no stage
    rewrites, as :func:`ctxcli.tokens.call_function` says; an ``apply_patch`` patch
    had become a JSON placeholder), any other as a function call."""
    if item_type(item) == "custom_tool_call":
        text = item.get("input")
        custom = {
            "name": str(item.get("name") or ""),
            "input": text if isinstance(text, str) else "",
        }
        return {"id": item["call_id"], "type": "custom", "custom": custom}
    arguments: Any = (
        jsonio.dumps(item.get("action")).decode()
        if item_type(item) == "local_shell_call"
        else item.get("arguments")
    )
    name = item.get("name") or (LOCAL_SHELL if item_type(item) == "local_shell_call" else "")
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {
            "name": str(name),
            "arguments": arguments if isinstance(arguments, str) else "",
        },
    }


def _reasoning_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """A reasoning item as a content part: counted by its summary and the size of its
    encrypted content (:meth:`ctxcli.tokens.TokenCounter.content`)."""
    return {**item, "type": "reasoning"}


def _parts(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return list(content) if isinstance(content, list) else [content]


def write(
    record: Mapping[str, Any], conversation: Conversation, *, messages_key: str | None = None
) -> dict[str, Any]:
    """``record`` with its items rebuilt from ``conversation`` (module docstring); as
    it was when its input is a string no stage changed."""
    if isinstance(record.get(key_of(record, messages_key)), str) and not any(
        m.changed or m.index is None for m in conversation.messages
    ):
        return dict(record)
    out = dict(record)
    out[key_of(record, messages_key)] = [item for item, _ in written_items(conversation)]
    return out


def written_items(conversation: Conversation) -> list[tuple[Any, int | None]]:
    """The items ``conversation`` writes, each with the position of the item it was
    read from (``None`` for a message a stage wrote)."""
    items: Sequence[Mapping[str, Any]] = conversation.meta.get("entries", ())
    sources: Sequence[Source] = conversation.meta.get("sources", ())
    calls = _changed_in_place_calls(conversation, items, sources)
    written: list[tuple[Any, int | None]] = []
    for message in conversation.messages:
        if message.index is None:
            written.append((new_item(message), None))
            continue
        for k in sources[message.index]:
            item = _patched(items[k], message.data) if message.changed else items[k]
            written.append((_patched_call(item, calls[k]) if k in calls else item, k))
    return written


def _changed_in_place_calls(
    conversation: Conversation, items: Sequence[Mapping[str, Any]], sources: Sequence[Source]
) -> dict[int, Mapping[str, Any]]:
    """The call message a stage changed (its arguments a placeholder) of each
    ``mcp_call`` read as a call and a result (:func:`_hosted_pair`), by the item's
    position: the result's message writes the item, with these arguments."""
    out: dict[int, Mapping[str, Any]] = {}
    messages = conversation.messages
    for call, result in zip(messages, messages[1:]):
        if call.index is None or result.index is None or not call.changed:
            continue
        source = sources[result.index]
        if len(source) == 1 and _answered_in_place(items[source[0]]):
            out[source[0]] = call.data
    return out


def new_item(message: Message) -> dict[str, Any]:
    """A message a stage wrote (a summary), as a ``message`` item."""
    role = message.role if message.role in MESSAGE_ROLES else "user"
    part = "output_text" if role == "assistant" else "input_text"
    text = text_of(message.data.get("content"))
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def _patched(item: Mapping[str, Any], data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``item`` rewritten from the neutral message ``data`` a stage changed."""
    kind_of = item_type(item)
    if (kind_of in OUTPUTS or _answered_in_place(item)) and data.get("role") == "tool":
        return {**item, "output": data.get("content")}
    if kind_of in CALLS:
        return _patched_call(item, data)
    if kind_of == "message":
        return _patched_message(item, data)
    return item


def _patched_call(item: Mapping[str, Any], data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A call item with the arguments of its call in ``data`` (an ``mcp_call``'s the
    one call there)."""
    calls: dict[Any, Mapping[str, Any]] = {
        c.get("id"): call_function(c) or {} for c in data.get("tool_calls") or ()
    }
    if item_type(item) == "mcp_call":
        arguments = next(iter(calls.values()), {}).get("arguments")
        return item if arguments == item.get("arguments") else {**item, "arguments": arguments}
    arguments = calls.get(item.get("call_id"), {}).get("arguments")
    if item_type(item) == "function_call" and arguments != item.get("arguments"):
        return {**item, "arguments": arguments}
    if item_type(item) == "custom_tool_call" and arguments != item.get("input"):
        return {**item, "input": arguments}
    return item


def _patched_message(item: Mapping[str, Any], data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A message item with the content of ``data`` (its reasoning parts left out, and
    as text when the item's content was)."""
    content = data.get("content")
    if isinstance(content, list):
        content = [
            p for p in content if not (isinstance(p, Mapping) and p.get("type") == "reasoning")
        ]
        if isinstance(item.get("content"), str):
            content = text_of(content)
    return item if content == item.get("content") else {**item, "content": content}


def problems(record: Any, conversation: Conversation) -> list[Problem]:
    """Every rule of the module docstring ``record`` breaks, naming the item (its
    position in the list)."""
    items: Sequence[Mapping[str, Any]] = conversation.meta.get("entries", ())
    key = conversation.meta.get("key", key_of(record))
    inputs = _inputs_in_output(items) if _is_response(record, key) else []
    return inputs + item_problems(items) + _pairing(conversation)


def _is_response(record: Any, key: str) -> bool:
    """Whether ``record`` is a Response (``"object": "response"``) read from its
    ``output`` (``key``: where its items were read; a Response logged with the request's
    ``input`` beside its output, read with ``--messages-key input``, is a request's)."""
    return isinstance(record, Mapping) and record.get("object") == "response" and key == "output"


def _inputs_in_output(items: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """A problem for each message of a Response's ``output`` that is not the
    assistant's: an output holds only what the model produced (the API's Response
    object; a schema that parses one, as the Vercel AI SDK's does, refuses a user
    message there). So no summary is written there
    (:attr:`ctxcli.model.Conversation.summaries`)."""
    return [
        Problem(
            "input-in-output",
            f"a Response's output holds only output items, and item {i} is a "
            f"{item.get('role')} message",
            i,
            unit="item",
        )
        for i, item in enumerate(items)
        if item_type(item) == "message" and item.get("role") != "assistant"
    ]


def item_problems(items: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """The rules of single items in order: reasoning followed by what it produced; a
    hosted call's answer after its call (:data:`ANSWERED_BY`)."""
    found = _unasked(items)
    for i, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        following = item_type(items[i + 1]) if i + 1 < len(items) else None
        if (
            following is None
            or following in OUTPUTS
            or (following == "message" and items[i + 1].get("role") != "assistant")
        ):
            detail = (
                f"Item {item.get('id')!r} of type 'reasoning' was provided without "
                "its required following item"
            )
            found.append(Problem("reasoning-alone", detail, i, unit="item"))
    return found


def _unasked(items: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """A problem for each answer of :data:`ANSWERED_BY` with no call before it that it
    names, in the API's words (``No tool call found for computer call output with
    call_id …``)."""
    asked: set[tuple[str, Any]] = set()
    found = []
    for i, item in enumerate(items):
        opened, answered = _asked(item), _answered(item)
        if opened is not None:
            asked.add(opened)
        if answered is None or answered[0] not in ANSWERED_BY or answered in asked:
            continue
        what = item_type(item).replace("_", " ")
        key = ANSWERED_BY[answered[0]][2]
        detail = f"No tool call found for {what} with {key} {answered[1]}"
        found.append(Problem("result-without-call", detail, i, unit="item"))
    return found


def _pairing(conversation: Conversation) -> list[Problem]:
    """Tool pairing (:func:`ctxcli.invariants.pairing_problems`), each message named by
    the position of the last item it was read from (``message 7``: item 7)."""
    sources: Sequence[Source] = conversation.meta.get("sources", ())
    by_item = [Message(m.data, 0, _last_item(sources, m.index)) for m in conversation.messages]
    last = by_item[-1].index if by_item else None
    return pending(pairing_problems(by_item), 0 if last is None else last + 1)


def _last_item(sources: Sequence[Source], index: int | None) -> int | None:
    """The position of the last item a message was read from (``None``: a message a
    stage wrote, or the call of an ``mcp_call``, which stands for no item of its own)."""
    if index is None or not sources or not sources[index]:
        return None
    return sources[index][-1]
