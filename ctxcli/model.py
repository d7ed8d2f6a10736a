"""The neutral message model every stage works on.

A conversation is a list of :class:`Message` objects, each wrapping one OpenAI-style
chat message dict (``role``, ``content``, ``name``, ``tool_calls``, ``tool_call_id``,
legacy ``function_call``) with its token count and its position in the input. Format
adapters read into this model and write back; a message no stage changed keeps the
very dict that was read, so it is written back as it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxcli.tokens import REPLY_PRIMING, TokenCounter, call_function

SYSTEM_ROLES = frozenset({"system", "developer"})
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

#: What every summary ctxcli writes starts with.
SUMMARY_MARKER = "[ctxcli summary]"
#: Decimal digits of the seal that ends a summary's header line (ordinary text that
#: happens to carry a valid one is one in 1e9). Digits cost the same tokens whatever
#: they are (tiktoken's encodings split them in threes), so the cost is known before.
SEAL_DIGITS = 9
#: What a summary's header says it folded, in English and in Chinese (the count of
#: messages is the group).
_FOLDED_EN = r"(\d+) earlier messages? folded"
_FOLDED_ZH = r"已折叠较早的 (\d+) 条消息"
_FOLDED_RE = re.compile(f"{_FOLDED_EN}|{_FOLDED_ZH}")
#: A summary's header line (:func:`summary_header`), then ``#`` and its seal.
_SEALED_RE = re.compile(
    rf"(?P<header>{re.escape(SUMMARY_MARKER)} (?:{_FOLDED_EN}\.|{_FOLDED_ZH}。))"
    rf" #(?P<seal>\d{{{SEAL_DIGITS}}})\n"
)
#: The roles ctxcli writes a summary with.
SUMMARY_ROLES = frozenset({"user", "system"})


def seal(header: str, body: str) -> str:
    """The text of a summary: its ``header`` line closed by `` #`` and a seal, then a
    line end and ``body``, e.g. ``[ctxcli summary] 5 earlier messages folded. #037241995``.

    The seal is :data:`SEAL_DIGITS` decimal digits of the SHA-256 of the header and
    body, so a later run knows the summaries ctxcli wrote (and only those: text
    that merely starts with the same header, or a summary edited since, carries no
    valid seal) by their text alone, which every format keeps as it is. Where such a
    summary is recognised is said in :func:`read_messages`.
    """
    return f"{header} #{_seal_of(header, body)}\n{body}"


def _seal_of(header: str, body: str) -> str:
    data = f"ctxcli summary\0{header}\n{body}".encode("utf-8", "surrogatepass")
    number = int.from_bytes(hashlib.sha256(data).digest()[:8], "big") % 10**SEAL_DIGITS
    return f"{number:0{SEAL_DIGITS}d}"


def sealed(text: str) -> bool:
    """True when ``text`` is a summary as :func:`seal` writes it, its seal intact."""
    match = _SEALED_RE.match(text)
    return match is not None and match["seal"] == _seal_of(match["header"], text[match.end() :])


#: What a writer puts between a summary and the user text it joins in one string
#: (ShareGPT's ``value``: :func:`joined_pieces`).
PIECE_JOINER = "\n\n"


def joined_pieces(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into the pieces a writer joined with :data:`PIECE_JOINER`: the
    ctxcli summaries (sealed: :func:`sealed`) that open it and the one that closes
    it, and the text between (empty when a joiner ends or opens it), in order, each
    with whether it is a summary; ``[(text, False)]`` when it holds none (the usual
    case, found with one substring search). A writer joins summaries before the
    user's text and one after it, never inside it: any other sealed summary is the
    text's own (a user who pasted one: :func:`_one_text`). A summary starts the text
    or follows a joiner, and ends it or comes before one; since its seal covers its
    whole body, the first such end where the seal holds is where it ends."""
    if SUMMARY_MARKER not in text:
        return [(text, False)]
    pieces: list[tuple[str, bool]] = []
    plain_from = 0  # where the text not yet taken starts
    start = 0
    while start < len(text):
        end = _sealed_end(text, start) if text.startswith(SUMMARY_MARKER, start) else None
        if end is not None:
            if plain_from < start:
                pieces.append((text[plain_from : start - len(PIECE_JOINER)], False))
            pieces.append((text[start:end], True))
            plain_from = start = end + len(PIECE_JOINER)
            continue
        found = text.find(PIECE_JOINER + SUMMARY_MARKER, start)
        start = len(text) if found < 0 else found + len(PIECE_JOINER)
    if plain_from <= len(text):  # the text after the last summary's joiner
        pieces.append((text[plain_from:], False))
    return _one_text(pieces)


def _one_text(pieces: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """``pieces`` with the summaries amid the text, and all but the last of those
    after it, made part of the text: a writer puts the summaries of what comes before
    the text first and one summary of the steps after it last, so only those are read
    as summaries."""
    plain = [k for k, (_, summary) in enumerate(pieces) if not summary]
    if not plain:
        return pieces
    first, last = plain[0], max(plain[-1], len(pieces) - 2)
    if last > first:
        text = PIECE_JOINER.join(piece for piece, _ in pieces[first : last + 1])
        pieces[first : last + 1] = [(text, False)]
    return pieces


def _sealed_end(text: str, start: int) -> int | None:
    """Where the summary that starts ``text`` at ``start`` ends (see
    :func:`joined_pieces`), or ``None`` when no sealed summary starts there."""
    end = start
    while True:
        found = text.find(PIECE_JOINER, end + 1)
        end = len(text) if found < 0 else found
        if sealed(text[start:end]):
            return end
        if found < 0:
            return None


def summary_header(count: int, language: str = "en") -> str:
    """A summary's first line before its seal (:func:`seal`): that it folded ``count``
    earlier messages, in Chinese for ``language`` ``zh``, else in English."""
    if language == "zh":
        return f"{SUMMARY_MARKER} 已折叠较早的 {count} 条消息。"
    return f"{SUMMARY_MARKER} {count} earlier message{'' if count == 1 else 's'} folded."


def folded_count(line: str) -> int | None:
    """How many messages a summary's header ``line`` (:func:`summary_header`) says it
    folded; ``None`` when it says none."""
    match = _FOLDED_RE.search(line)
    return None if match is None else int(match.group(1) or match.group(2))


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string as it is; a list of parts as the
    ``text`` (else ``value``, LLaMA-Factory's) of each part that is an object, joined by
    line ends; ``None`` as ``""``; anything else as its ``str``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") or p.get("value") for p in content if isinstance(p, Mapping)]
        return "\n".join(text for text in texts if isinstance(text, str))
    return "" if content is None else str(content)


def tool_calls(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool calls of a message dict: each entry of its ``tool_calls`` list that is
    an object (``{"id", "type", "function": {"name", "arguments"}}``); empty when it
    has none."""
    calls = data.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [call for call in calls if isinstance(call, Mapping)]


def called_functions(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The functions a message dict calls (``{"name", "arguments"}``): the function
    of each of its :func:`tool_calls` (:func:`ctxcli.tokens.call_function`), then its
    legacy ``function_call``; those that are objects only."""
    found: list[Any] = [call_function(call) for call in tool_calls(data)]
    found.append(data.get("function_call"))
    return [function for function in found if isinstance(function, Mapping)]


#: The roles of a tool result: ``tool`` (answering the ids of :func:`result_ids`) and
#: the legacy ``function`` (answering the ``function_call`` before it).
RESULT_ROLES = frozenset({"tool", "function"})


def is_tool_result(data: Mapping[str, Any]) -> bool:
    """Whether a message dict is a tool result (its role one of :data:`RESULT_ROLES`)."""
    return data.get("role") in RESULT_ROLES


#: The types of a content part that is text alone (Chat Completions and Anthropic;
#: the Responses API's input and output).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def _leading_text(content: Any) -> str:
    """The text of a summary ctxcli may have written: a string content, or the text of
    a content that is one text part (an Anthropic ``{"type": "text", ...}`` block, a
    Gemini ``{"text": ...}`` part that is no thought, a Responses API or Codex
    ``input_text`` / ``output_text`` part, LLaMA-Factory's ``{"type": "text", "value":
    ...}``); else ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        part = content[0]
        plain = part.get("type", "text") in _TEXT_PARTS and not part.get("thought")
        text = part.get("text", part.get("value")) if plain else None
        return text if isinstance(text, str) else ""
    return ""


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    ``data`` is the message dict; ``tokens`` its size by
    :meth:`TokenCounter.message`; ``index`` its position in the input (``None`` for a
    message a stage wrote); ``changed`` is true once a stage replaced ``data``.
    ``entry`` is the position of the source entry it was read from, for formats where
    one entry holds several neutral messages (an Anthropic user message with tool
    results and text): such messages stand or fall together with the latest user turn.
    ``plain`` is true for a message read where ctxcli writes no summary
    (:func:`read_messages`): it is never taken for one, whatever its text.
    """

    data: Mapping[str, Any]
    tokens: int
    index: int | None = None
    changed: bool = False
    entry: int | None = None
    plain: bool = False
    #: ``data["role"]`` as a string (``""`` when missing).
    role: str = field(init=False, repr=False, compare=False)
    #: True for a summary written by ctxcli (this run or an earlier one): a user or
    #: system message whose text is sealed (:func:`seal`), unless ``plain``.
    is_summary: bool = field(init=False, repr=False, compare=False)
    #: A system or developer message, which no stage drops or changes; a ctxcli
    #: summary written with the system role is not one: it is folded into the next.
    is_system: bool = field(init=False, repr=False, compare=False)
    #: The ``id`` of each tool call this message makes (empty when none).
    call_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    #: The call ids a ``tool`` message answers (see :func:`result_ids`).
    result_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Stages ask these of every message many times: worked out once, here.
        role = str(self.data.get("role", ""))
        summary = (
            not self.plain
            and role in SUMMARY_ROLES
            and sealed(_leading_text(self.data.get("content")))
        )
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "is_summary", summary)
        object.__setattr__(self, "is_system", role in SYSTEM_ROLES and not summary)
        calls = tuple(str(call.get("id")) for call in tool_calls(self.data))
        object.__setattr__(self, "call_ids", calls)
        object.__setattr__(self, "result_ids", result_ids(self.data))

    @property
    def calls_function(self) -> bool:
        """True for an assistant message with a legacy ``function_call``."""
        call = self.data.get("function_call")
        return call is not None and isinstance(call, Mapping)  # most have none: no ABC check

    def replace(self, data: Mapping[str, Any], counter: TokenCounter) -> Message:
        """A copy holding ``data`` instead, recounted and marked changed."""
        return dataclasses.replace(self, data=data, tokens=counter.message(data), changed=True)


@dataclass(frozen=True, slots=True)
class Conversation:
    """One record's messages plus what the budget must also pay for.

    ``extra_tokens`` is the cost of the record's ``tools`` definitions; ``tokens``
    adds it and the reply priming (:data:`REPLY_PRIMING`) to the messages' sum.
    ``id`` is the record's ``id`` (or ``None``); ``line`` its 1-based line in the input.
    ``user_first`` is true for formats whose first non-system message must be a user
    message even after a system prompt (Anthropic keeps its system prompt apart from
    the messages, so a leading system message does not excuse an assistant opening).
    ``meta`` is the format adapter's own record of where each message came from.
    ``alternating`` is true for formats whose turns must alternate between the user
    side and the assistant side (:func:`side`), as trainers read ShareGPT data.
    ``joins_user`` is true for such formats whose writer puts a message a stage wrote
    next to a user message into that message: as one more part (Gemini, whose
    Contents hold parts: "Please ensure that multiturn requests alternate between
    user and model"), or as more of its text (ShareGPT's ``value``), so a summary may
    meet a user message there too, and follow the latest user turn.
    ``summary_role`` is the role a summary takes whatever the summary stage's option
    (``None``: the option's): ``user`` in formats whose system prompt stands apart
    from the dialogue (Anthropic's top-level ``system``, ShareGPT's leading system
    turns, which LLaMA-Factory reads only first, Claude Code), where a summary is one
    of the dialogue's user turns. ``summaries`` is false where no message of a user
    or system may be written: a Response's ``output``, which holds only what the
    model produced (the summary stage folds nothing there, and only turns older
    large tool results into placeholders; the other stages work as anywhere).
    """

    messages: tuple[Message, ...]
    extra_tokens: int = 0
    id: str | None = None
    line: int = 0
    meta: Mapping[str, Any] = field(default_factory=dict)
    user_first: bool = False
    alternating: bool = False
    joins_user: bool = False
    summary_role: str | None = None
    summaries: bool = True

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages) + REPLY_PRIMING + self.extra_tokens

    def with_messages(self, messages: Sequence[Message]) -> Conversation:
        return dataclasses.replace(self, messages=tuple(messages))

    @property
    def label(self) -> str:
        """How warnings name this conversation: its id, else its line, else ``(no id)``
        (a record of a JSON array, which the warning's place names by index)."""
        if self.id is not None:
            return self.id
        return f"line {self.line}" if self.line else "(no id)"


def make_conversation(
    messages: Sequence[Mapping[str, Any]],
    counter: TokenCounter,
    *,
    tools: Any = None,
    id: str | None = None,
    line: int = 0,
) -> Conversation:
    """Wrap OpenAI-style message dicts (already validated) in a :class:`Conversation`."""
    return Conversation(
        messages=read_messages(messages, counter),
        extra_tokens=counter.tools(tools),
        id=id,
        line=line,
    )


def read_messages(
    messages: Sequence[Mapping[str, Any]],
    counter: TokenCounter,
    *,
    entries: Sequence[int | None] | None = None,
    apart: int = 0,
) -> tuple[Message, ...]:
    """The neutral message dicts a format read, as :class:`Message` objects counted by
    ``counter``; message ``i`` is ``index`` ``i`` and, with ``entries``, was read from
    source entry ``entries[i]``.

    A ctxcli summary is recognised by its seal (:func:`seal`) and only where ctxcli
    writes one: right after the leading system messages, or right after a user
    message, system messages aside (a summary of the steps follows the user's task;
    a system message among the steps stays where it was). A sealed text anywhere
    else, and in the first ``apart`` messages (a record's own system prompt, such as
    Anthropic's top-level ``system``), is ordinary text. So a system prompt, a latest
    user message or any other message is what it says it is, whatever its text.
    """
    out: list[Message] = []
    before: Message | None = None  # the last message so far that is not a system one
    for i, data in enumerate(messages):
        entry = entries[i] if entries is not None else None
        message = Message(data, counter.message(data), i, entry=entry, plain=i < apart)
        after_user = before is not None and before.role == "user" and not before.is_summary
        if message.is_summary and not (before is None or after_user):
            message = dataclasses.replace(message, plain=True)
        if not message.is_system:
            before = message
        out.append(message)
    return tuple(out)


def units(messages: Sequence[Message]) -> list[list[int]]:
    """Split messages into units that are kept or dropped whole; returns index lists.

    An assistant message with ``tool_calls`` forms one unit with the ``tool`` messages
    that follow it (its results, parallel calls included); a legacy ``function_call``
    forms one with the ``function`` message that follows it (they pair by adjacency).
    Every other message is a unit of its own. Tool results that follow a unit whose
    ids do not match are kept with it, so an input's structure is never split further.
    A result that answers a call of an earlier unit, with other messages between
    (a Responses item list with a message between a ``function_call`` and its output),
    joins every unit from that call's to its own (:func:`_joined_by_ids`): no cut
    falls between them, which would leave the result without its call.
    """
    return _joined_by_ids(messages, _adjacent_units(messages))


def _adjacent_units(messages: Sequence[Message]) -> list[list[int]]:
    """The units of :func:`units` by adjacency alone."""
    groups: list[list[int]] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        group = [i]
        i += 1
        if message.call_ids:
            while i < n and messages[i].role == "tool":
                group.append(i)
                i += 1
        elif message.calls_function:
            while i < n and messages[i].role == "function":
                group.append(i)
                i += 1
        groups.append(group)
    return groups


def _joined_by_ids(messages: Sequence[Message], groups: list[list[int]]) -> list[list[int]]:
    """``groups`` with the units from a call's to that of a result that answers it
    apart (not in the call's own unit) joined into one (:func:`units`): the call is
    the latest before the result with its id (ids repeat: tau-bench's runs reuse
    theirs); ``groups`` itself when no result stands apart."""
    latest: dict[str, int] = {}  # each call id's latest unit so far
    spans: list[tuple[int, int]] = []
    for g, group in enumerate(groups):
        for i in group:
            message = messages[i]
            for call_id in message.result_ids if message.role == "tool" else ():
                start = latest.get(call_id, g)
                if start != g:
                    spans.append((start, g))
            for call_id in message.call_ids:
                latest[call_id] = g
    if not spans:
        return groups
    end_of = list(range(len(groups)))  # the last unit each unit is joined up to
    for start, end in spans:
        end_of[start] = max(end_of[start], end)
    out: list[list[int]] = []
    reach = -1
    for g, group in enumerate(groups):
        if out and g <= reach:
            out[-1].extend(group)
        else:
            out.append(list(group))
        reach = max(reach, end_of[g])
    return out


def result_ids(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The call ids a ``tool`` message dict answers: its ``tool_call_id``, or each id of
    a ``tool_call_ids`` list (SWE-agent trajectories); empty when it names none."""
    call_id = data.get("tool_call_id")
    if call_id is not None:
        return (str(call_id),)
    ids = data.get("tool_call_ids")
    if isinstance(ids, list):
        return tuple(str(i) for i in ids)
    return ()


def tool_names(messages: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Position of each tool result in ``messages`` (message dicts) -> the name of its
    tool: the result's own ``name``, else the one the call it answers gave (for a
    legacy ``function`` result, the ``function_call`` before it); ``""`` when neither
    says."""
    by_id: dict[str, str] = {}
    last_function = ""
    out: dict[int, str] = {}
    for position, data in enumerate(messages):
        for call in tool_calls(data):
            function = call_function(call)
            if function is not None:
                by_id[str(call.get("id"))] = str(function.get("name") or "")
        function_call = data.get("function_call")
        if isinstance(function_call, Mapping):
            last_function = str(function_call.get("name") or "")
        if not is_tool_result(data):
            continue
        name = data.get("name")
        if isinstance(name, str) and name:
            out[position] = name
        elif data.get("role") == "tool":
            out[position] = next((by_id[c] for c in result_ids(data) if c in by_id), "")
        else:
            out[position] = last_function
    return out


def latest_user_index(messages: Sequence[Message]) -> int | None:
    """Position of the last ``user`` message that is not a ctxcli summary, or ``None``
    when there is none. A user's own message is never a summary, whatever its text
    (:func:`read_messages`)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and not messages[i].is_summary:
            return i
    return None


def pinned(messages: Sequence[Message], groups: list[list[int]] | None = None) -> set[int]:
    """Positions no stage may drop: system and developer messages, the latest user
    turn (the latest user message, and whatever was read from the same source entry
    with the units it belongs to), and the last unit (the conversation's current state:
    a final answer or the latest tool call with its results)."""
    keep = {i for i, m in enumerate(messages) if m.is_system}
    groups = groups if groups is not None else units(messages)
    keep.update(latest_turn(messages, groups))
    if groups:
        keep.update(groups[-1])
    return keep


def latest_turn(messages: Sequence[Message], groups: list[list[int]]) -> list[int]:
    """Positions of the latest user turn: the latest user message, and when it was read
    from an entry that also held other messages (tool results beside text in one
    Anthropic user message), those too, each with its whole unit, but for a ctxcli
    summary joined to it (Gemini), which is folded as any other. Empty when there is
    no user message."""
    last_user = latest_user_index(messages)
    if last_user is None:
        return []
    entry = messages[last_user].entry
    if entry is None:
        return [last_user]
    same = {i for i, m in enumerate(messages) if m.entry == entry and not m.is_summary}
    turn = {last_user}
    for group in groups:
        if same.intersection(group):
            turn.update(group)
    return sorted(turn)


def starts_badly(kept: Sequence[Message]) -> bool:
    """True when a conversation without a leading system message would open with an
    assistant or tool message, which Anthropic, Gemini and others reject."""
    return bool(kept) and kept[0].role in ("assistant", "tool", "function")


def side(message: Message) -> str:
    """Which side of a dialogue ``message`` is on: ``user`` (user messages and tool or
    function results), ``assistant``, or ``system``."""
    if message.is_system:
        return "system"
    return "assistant" if message.role == "assistant" else "user"


def opens_badly(kept: Sequence[Message], *, user_first: bool = False) -> bool:
    """True when ``kept`` opens badly: with an assistant or tool message, after the
    leading system messages when ``user_first`` (see :class:`Conversation`), or at
    the very start otherwise (a system prompt then excuses what follows)."""
    if not user_first:
        return not (kept and kept[0].is_system) and starts_badly(kept)
    return starts_badly([m for m in kept if not m.is_system])
