"""The ``placeholder`` stage: replace large tool results with restorable placeholders.

A tool result (a ``tool`` or legacy ``function`` message) whose content is over the
threshold (tokens) has its ``content`` replaced by a placeholder text; every other key
of the message (``role``, ``tool_call_id``, ``name``, unknown keys) stays as it was.
The original content goes into :attr:`ctxcli.pipeline.Context.stored` (``{id:
original}``), which the pipeline hands on as :attr:`ctxcli.pipeline.Result.stored` and
the file driver writes to the store (see :mod:`ctxcli.store`); ``ctxcli restore`` puts
it back.

The placeholder format (one line of header, then the preview)::

    [ctxcli placeholder id=3f2a9c0d1e4b5a67 tool="read_log" tokens=812 chars=2819 head=100 tail=50]
    <head: the first `head` characters of the preview text>
    [... 2669 characters omitted ...]
    <tail: the last `tail` characters of the preview text>

:data:`PLACEHOLDER_RE` parses it (``fullmatch`` on the whole content):

- ``id``: the first :data:`ID_HEX` hex digits of a SHA-256 (:func:`content_id`). For
  string content the hash is of its UTF-8 bytes; for any other content (a list of
  parts) of its canonical JSON (sorted keys, ``,`` and ``:`` separators, non-ASCII as
  UTF-8). A lone surrogate (JSON allows ``"\\ud83d"`` alone) is hashed as its 3-byte
  ``surrogatepass`` form, so such a string still has one well-defined id.
- ``tool``: the tool's name as a JSON string (``""`` when neither the message's
  ``name`` nor the matching call names it).
- ``tokens``: the original content's tokens (:meth:`TokenCounter.content`); ``chars``:
  its characters (code points) for a string, of its canonical JSON otherwise.
- ``head`` / ``tail``: the lengths in characters of the two preview pieces, so
  ``preview[:head]`` and ``preview[-tail:]`` (when ``tail`` > 0) give them exactly.
  The preview text is the string content itself, or for a list of parts their texts
  joined by newlines (an image part as ``[image]``).

Previews are cut at a line end, or else between words, where one is near the cut
(:func:`cut_preview`), and always on character boundaries: Python strings are
sequences of code points, so no cut lands inside a multi-byte UTF-8 sequence; a cut
is also moved off a surrogate pair, off a combining mark, variation selector, emoji
modifier or zero-width joiner (so ``👍🏽`` stays whole), and out of a ``data:`` URL
(the preview then ends before it, or starts after it). A lone surrogate in a preview
is replaced with U+FFFD: a preview is for reading, and some APIs reject lone
surrogates. The original, lone surrogate included, is stored and restored exactly
(written as the same ``\\udXXX`` escape).

Results that report an error (:func:`reports_error`) stay whole when ``keep_errors``:
the model learns from its mistakes. With ``clear_inputs``, long tool-call arguments are
replaced too; as arguments are JSON text by the API's definition, the replacement is
the JSON object ``{"ctxcli_placeholder": "<placeholder text>"}``.

What counts as a placeholder (the rule :func:`ctxcli.store.restore_record` follows):
text that begins with :data:`PLACEHOLDER_START` and stands where this stage writes
placeholders: the whole content of a tool result, or the :data:`ARGUMENTS_KEY`
string of call arguments (:func:`placeholder_texts`). Anywhere else (a user or an
assistant quoting one, a summary) it is ordinary text. Such text already in the
input where placeholders go (an earlier run's output, compressed again) is never
replaced; it goes to the store as its own original (``{id of the text: the text}``),
which tells ``restore`` to leave it as it is, and an original whose id such a
placeholder names stays whole here, so one id never stands for two texts in one
conversation. So ``compress`` then ``restore`` with its store gives back the input
(but see :func:`ctxcli.store.restore_record` for an original met again in another
record of the file), and the input's own placeholders restore from the earlier run's
store (or both stores concatenated).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard, TypeVar

from ctxcli import jsonio
from ctxcli.model import Conversation, Message, tool_names, units

if TYPE_CHECKING:
    from ctxcli.stages.base import Context

#: Hex digits of SHA-256 kept in an id: 64 bits, so a collision among ids is unlikely
#: before about 4e9 distinct contents (birthday bound).
ID_HEX = 16
#: The key of the JSON object that replaces long tool-call arguments.
ARGUMENTS_KEY = "ctxcli_placeholder"
#: How every placeholder text begins.
PLACEHOLDER_START = "[ctxcli placeholder "

PLACEHOLDER_RE = re.compile(
    r"\[ctxcli placeholder id=(?P<id>[0-9a-f]{12,64})"
    r' tool=(?P<tool>"(?:[^"\\\n]|\\.)*")'
    r" tokens=(?P<tokens>\d+) chars=(?P<chars>\d+) head=(?P<head>\d+) tail=(?P<tail>\d+)\]"
    r"\n(?P<preview>.*)",
    re.DOTALL,
)
_DATA_URL = re.compile(r"data:[\w.+-]*/?[\w.+-]*(?:;[\w.+-]+(?:=[\w.+-]*)?)*,[\w+/=%.~-]*")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ERROR_TEXT = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\A\s*(?:error|exception|fatal)\b"
    r"|\b(?:exit(?:ed)?(?: with)?(?: code| status)|return ?code|returncode|exit_code)"
    r"[\"']?\s*[:=]?\s*(?:[1-9]\d*|-\d+)\b",
    re.IGNORECASE,
)
TOOL_ROLES = frozenset({"tool", "function"})
#: At most this many characters of facts in a placeholder (:func:`omitted_facts`).
FACT_CHARS = 1200
#: An error line counts by this many characters from its start.
FACT_LINE_CHARS = 120
_FACT = re.compile(
    r"(?P<error>\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\b(?:error|fatal):)"
    r"|[$€£¥]?[A-Za-z0-9_.:@+-]*\d[A-Za-z0-9_.:@+-]*"
    r"|[A-Za-z0-9_.~@+-]*/[A-Za-z0-9_.~@+/-]*[A-Za-z][A-Za-z0-9_.~@+/-]*"
)


class Ran(Protocol):
    """What :func:`settle_store` reads and sets of a run's result
    (:class:`ctxcli.pipeline.Result`)."""

    before: Conversation
    after: Conversation
    events: dict[str, Counter[str]]
    stored: dict[str, Any]


R = TypeVar("R", bound=Ran)


def settle_store(result: R) -> R:
    """``result`` with ``stored`` made the store's content for its conversation: the
    originals the stages replaced that the output still refers to, and the
    placeholder-like texts the input held where placeholders go, each stored as its own
    original whatever the stages (``restore`` then tells such text from a placeholder
    whose store was lost: see :func:`ctxcli.store.restore_record`). When anything was
    replaced, ``events["placeholder"]["placeholders_kept"]`` counts the messages that
    still hold a placeholder. The caller of :func:`ctxcli.pipeline.run` calls this
    before it writes the store."""
    messages = result.before.messages
    as_read = {content_id(t): t for m in messages for t in placeholder_texts(m)}
    stored = {**as_read, **result.stored}
    if stored:  # only what the output still refers to: a later stage may drop some
        current = result.after.messages
        held = [placeholder_ids(m) for m in current if m.changed and m.index is not None]
        as_is = [verbatim_ids(m) for m in current if m.index is not None]
        kept = set().union(*held, *as_is)
        written = any(not looks_like(value) for value in stored.values())
        stored = {key: value for key, value in stored.items() if key in kept}
        if written:
            events = result.events.setdefault("placeholder", Counter())
            events["placeholders_kept"] = sum(map(bool, held))
    result.stored = stored
    return result


def content_id(content: Any) -> str:
    """The id of a content value: hex SHA-256 (first :data:`ID_HEX` digits) of a
    string's UTF-8 bytes, or of any other value's canonical JSON (see module doc)."""
    return hashlib.sha256(_content_bytes(content)).hexdigest()[:ID_HEX]


def _content_bytes(content: Any) -> bytes:
    text = content if isinstance(content, str) else canonical_json(content)
    return text.encode("utf-8", "surrogatepass")


def canonical_json(value: Any) -> str:
    """``value`` as JSON text with sorted keys, no spaces and non-ASCII kept."""
    return jsonio.std_dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse(text: Any) -> re.Match[str] | None:
    """The :data:`PLACEHOLDER_RE` match when ``text`` is a whole placeholder, else None."""
    return PLACEHOLDER_RE.fullmatch(text) if isinstance(text, str) else None


def looks_like(text: Any) -> TypeGuard[str]:
    """True when ``text`` is a string that begins as a placeholder does
    (:data:`PLACEHOLDER_START`), whether or not it is a whole, readable one."""
    return isinstance(text, str) and text.startswith(PLACEHOLDER_START)


def arguments_text(arguments: Any) -> str | None:
    """The string in tool-call ``arguments`` that are the JSON text of an object with
    the one key :data:`ARGUMENTS_KEY` (what ``clear_inputs`` writes), else None."""
    if not isinstance(arguments, str) or ARGUMENTS_KEY not in arguments:
        return None
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    if isinstance(value, dict) and list(value) == [ARGUMENTS_KEY]:
        text = value[ARGUMENTS_KEY]
        return text if isinstance(text, str) else None
    return None


def parse_arguments(arguments: Any) -> re.Match[str] | None:
    """The placeholder match inside replaced tool-call ``arguments``, else None."""
    return parse(arguments_text(arguments))


def placeholder_texts(message: Message) -> list[str]:
    """The texts in ``message`` that look like placeholders (:func:`looks_like`) in the
    places this stage writes them, and only there: the whole ``content`` of a tool
    result (``tool`` / ``function``), and the :data:`ARGUMENTS_KEY` string of call
    arguments (``tool_calls[].function.arguments``, the legacy ``function_call``).
    Placeholder-like text anywhere else (a user quoting one) is ordinary text."""
    texts: list[str] = []
    content = message.data.get("content")
    if message.role in TOOL_ROLES and looks_like(content):
        texts.append(content)
    functions = [
        c.get("function") for c in message.data.get("tool_calls") or [] if isinstance(c, Mapping)
    ]
    functions.append(message.data.get("function_call"))  # the legacy form
    for function in functions:
        if isinstance(function, Mapping):
            text = arguments_text(function.get("arguments"))
            if looks_like(text):
                texts.append(text)
    return texts


def placeholder_ids(message: Message) -> set[str]:
    """Ids of the readable placeholders ``message`` holds where this stage writes
    them (see :func:`placeholder_texts`)."""
    matches = (parse(text) for text in placeholder_texts(message))
    return {match.group("id") for match in matches if match}


def verbatim_ids(message: Message) -> set[str]:
    """Store ids of the placeholder-like texts ``message`` holds (see
    :func:`placeholder_texts`), each taken as its own original: the entries that tell
    ``restore`` the text was in this run's input as it is."""
    return {content_id(text) for text in placeholder_texts(message)}


def reports_error(message: Mapping[str, Any]) -> bool:
    """True when a tool result reports an error: an ``error`` / ``is_error`` key on
    the message, content that is a JSON object with a non-empty ``error`` field, or
    text with a Python traceback, a leading ``Error:``, or a non-zero exit status
    (``exit code 2``, ``returncode: 1``)."""
    if message.get("is_error") is True or message.get("error"):
        return True
    text = preview_text(message.get("content"))
    if _ERROR_TEXT.search(text):
        return True
    stripped = text.lstrip()
    if stripped.startswith("{") and '"error"' in stripped:
        try:
            value = json.loads(stripped)
        except ValueError:
            return False
        return isinstance(value, dict) and bool(value.get("error"))
    return False


def preview_text(content: Any) -> str:
    """The text a preview is cut from: a string as is; a list of parts as their texts
    joined by newlines (images as ``[image]``); anything else as its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return canonical_json(content)
    pieces = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, Mapping) and str(part.get("type", "")).startswith(
            ("image", "input_image")
        ):
            pieces.append("[image]")
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif isinstance(part, Mapping) and isinstance(part.get("value"), str):
            pieces.append(part["value"])
        else:
            pieces.append(canonical_json(part))
    return "\n".join(pieces)


def _joins(text: str, at: int) -> bool:
    """True when a cut before ``text[at]`` would split a character as people see it."""
    if at <= 0 or at >= len(text):
        return False
    before, after = text[at - 1], text[at]
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return True
    if before == "\u200d" or after == "\u200d":
        return True
    code = ord(after)
    return (
        unicodedata.combining(after) != 0
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin-tone modifiers
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences
    )


def cut_preview(text: str, head: int, tail: int) -> tuple[str, str]:
    """The first ``head`` and last ``tail`` characters of ``text`` (fewer where a cut
    would split a character or a ``data:`` URL), never overlapping. Where something is
    left out, a cut falls at a line end, or else between words, when one is in the
    later half of the head (the earlier half of the tail): a word cut short reads as
    another word."""
    n = len(text)
    end = min(head, n)
    start = max(n - tail, end) if tail > 0 else n
    if end < start:  # something is left out between them
        cut = text.rfind("\n", end // 2, end)
        cut = cut if cut >= 0 else text.rfind(" ", end // 2, end)
        end = cut if cut > 0 else end
        if start < n:
            half = start + (n - start) // 2
            cut = text.find("\n", start, half)
            cut = cut if cut >= 0 else text.find(" ", start, half)
            start = cut + 1 if cut >= 0 else start
    for match in _DATA_URL.finditer(text):
        if match.start() < end < match.end():
            end = match.start()
        if match.start() < start < match.end():
            start = match.end()
    while _joins(text, end):
        end -= 1
    while _joins(text, start):
        start += 1
    return text[:end], text[start:]


def _clean(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def omitted_facts(source: str, shown: str) -> list[str]:
    """What identifies the part of ``source`` a preview leaves out: its words with a
    digit (ids, dates, amounts, numbers), its paths and its error lines (up to
    :data:`FACT_LINE_CHARS` characters each) that ``shown`` lacks, each once, in the
    order they first appear, as many as fit a sixth of ``source``'s characters (at
    most :data:`FACT_CHARS`). The scan stops once they fill it."""
    room = min(FACT_CHARS, len(source) // 6)
    facts: list[str] = []
    seen: set[str] = set()
    for match in _FACT.finditer(source):
        fact = match.group()
        if match.lastgroup == "error":  # the whole line it stands in
            start = source.rfind("\n", 0, match.start()) + 1
            end = source.find("\n", match.end())
            fact = source[start : end if end >= 0 else len(source)].strip()[:FACT_LINE_CHARS]
        fact = fact.rstrip(".,:;-")
        if len(fact) < 3 or fact in seen or fact in shown:
            continue
        room -= len(fact) + 2
        if room < 0:
            break
        seen.add(fact)
        facts.append(fact)
    return facts


def render(
    content: Any, *, tool: str, tokens: int, head: int, tail: int, facts: bool = False
) -> str:
    """The placeholder text for ``content`` (format in the module docstring); with
    ``facts`` the line that says what is omitted names what identifies it
    (:func:`omitted_facts`): ``[... 2669 characters omitted; they hold: JG7FMM,
    2024-05-20, $480 ...]``."""
    source = preview_text(content)
    first, last = cut_preview(source, head, tail)
    first, last = _clean(first), _clean(last)
    chars = len(content) if isinstance(content, str) else len(canonical_json(content))
    omitted = len(source) - len(first) - len(last)
    name = json.dumps(_clean(tool), ensure_ascii=False)
    held = omitted_facts(source, first + "\n" + last) if facts and omitted else []
    hold = f"; they hold: {_clean(', '.join(held))}" if held else ""
    lines = [
        f"[ctxcli placeholder id={content_id(content)} tool={name} tokens={tokens}"
        f" chars={chars} head={len(first)} tail={len(last)}]",
        first,
        f"[... {omitted} characters omitted{hold} ...]",
    ]
    if last:
        lines.append(last)
    return "\n".join(lines)


@dataclass(frozen=True)
class Placeholder:
    """Replace tool results over ``threshold`` tokens of content with placeholders.

    ``keep_recent``: the last N tool results stay whole. ``exclude_tools``: tools whose
    results are never replaced. ``tool_thresholds``: ``{tool name: tokens}`` overriding
    ``threshold`` per tool. ``keep_errors``: results that report an error stay whole
    (:func:`reports_error`). ``clear_inputs``: also replace tool-call arguments over the
    threshold (not those of calls whose results ``keep_recent`` keeps, nor those of the
    last unit's calls: the conversation's current state). ``head_chars`` /
    ``tail_chars``: preview lengths in characters. ``facts``: the placeholder names
    what identifies the omitted part (:func:`omitted_facts`), so a result kept as a
    placeholder holds the ids a summary of it would. ``until_fit``: replace results
    (oldest first) only while the conversation is over the budget, so one within it
    is left as it is; else it runs whatever the budget. The default pipeline sets
    both (:data:`ctxcli.config.DEFAULT_OPTIONS`). A result
    is replaced only when its placeholder is smaller. The originals go to
    ``context.stored``. Text that looks like a placeholder where placeholders go is
    kept as it is and stored as its own original (see the module docstring).
    """

    name: ClassVar[str] = "placeholder"
    #: It shortens tool results but drops no message.
    fits_budget: ClassVar[bool] = False
    threshold: int = 500
    keep_recent: int = 3
    exclude_tools: tuple[str, ...] = ()
    tool_thresholds: Mapping[str, int] = field(default_factory=dict)
    keep_errors: bool = True
    clear_inputs: bool = False
    head_chars: int = 100
    tail_chars: int = 50
    facts: bool = False
    until_fit: bool = False

    def __post_init__(self) -> None:
        exclude = self.exclude_tools
        exclude = (exclude,) if isinstance(exclude, str) else tuple(exclude or ())
        object.__setattr__(self, "exclude_tools", exclude)
        if not isinstance(self.tool_thresholds, Mapping):
            raise ValueError("tool_thresholds must map tool names to tokens")
        object.__setattr__(self, "tool_thresholds", dict(self.tool_thresholds))
        numbers = {
            "threshold": self.threshold,
            "keep_recent": self.keep_recent,
            "head_chars": self.head_chars,
            "tail_chars": self.tail_chars,
            **{f"tool_thresholds[{k!r}]": v for k, v in self.tool_thresholds.items()},
        }
        for key, value in numbers.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{key} must be a whole number, 0 or more, not {value!r}")

    def limit(self, tool: str) -> int:
        """The threshold (tokens of content) for ``tool``'s results and arguments."""
        return self.tool_thresholds.get(tool, self.threshold)

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        excess = self._excess(conversation, context)
        if excess is not None and excess <= 0:
            return conversation, {}
        messages = list(conversation.messages)
        results = [i for i, m in enumerate(messages) if m.role in TOOL_ROLES]
        recent = set(results[len(results) - self.keep_recent :]) if self.keep_recent else set()
        events: dict[str, int] = {}
        # Placeholder-like text the input already holds where placeholders go (an
        # earlier run's output, compressed again) is kept as it is
        # (:func:`settle_store` records it in the store as its own original, so that
        # restoring with this run's store leaves it be); its original, if this run
        # meets it too, stays whole (see ``restore``).
        held: set[str] = set()
        for message in messages:
            held |= placeholder_ids(message)
        candidates = [i for i in results if i not in recent]
        excess = self._results(messages, candidates, (held, excess), context, events)
        if self.clear_inputs:
            self._clear_all(messages, recent, context, events, held)
        if not events.get("placeholders_written"):
            return conversation, {k: v for k, v in events.items() if k == "errors_kept"}
        return conversation.with_messages(messages), events

    def _clear_all(
        self,
        messages: list[Message],
        recent: set[int],
        context: Context,
        events: dict[str, int],
        held: set[str],
    ) -> None:
        """``clear_inputs``: replace the long call arguments of every assistant message
        but the last unit's, and those of the calls whose results stay whole (at the
        positions ``recent``)."""
        recent_ids = {call_id for i in recent for call_id in messages[i].result_ids}
        # A legacy function result pairs with the function_call right before it.
        recent_calls = {i - 1 for i in recent if messages[i].role == "function"}
        # The last unit is the conversation's current state: in a tool loop the
        # model goes on from those calls, which Anthropic wants exactly as they were.
        current = units(messages)[-1][0] if messages else -1
        for i, message in enumerate(messages):
            if message.role == "assistant" and i != current:
                messages[i] = self._clear_calls(
                    message, recent_ids, context, events, held, keep_function=i in recent_calls
                )

    def _excess(self, conversation: Conversation, context: Context) -> int | None:
        """With ``until_fit`` and a budget, the tokens over it; else ``None``."""
        if not self.until_fit or context.max_tokens is None:
            return None
        return conversation.tokens - context.max_tokens

    def _results(
        self,
        messages: list[Message],
        candidates: list[int],
        held_excess: tuple[set[str], int | None],
        context: Context,
        events: dict[str, int],
    ) -> int | None:
        """Replace the tool results at ``candidates`` (oldest first) in ``messages``,
        while ``excess`` (tokens over the budget, ``None``: no bound) is above 0; what
        is left of it."""
        held, excess = held_excess
        counter = context.counter
        names = tool_names([m.data for m in messages])
        for i in candidates:
            message = messages[i]
            tool = names[i]
            content = message.data.get("content")
            if excess is not None and excess <= 0:
                break
            if tool in self.exclude_tools or content is None or looks_like(content):
                continue
            if content_id(content) in held:
                continue
            tokens = counter.content(content)
            if tokens <= self.limit(tool):
                continue
            if self.keep_errors and reports_error(message.data):
                events["errors_kept"] = events.get("errors_kept", 0) + 1
                continue
            text = self._text(content, tool, tokens)
            new = message.replace({**message.data, "content": text}, counter)
            if new.tokens >= message.tokens:
                continue
            context.stored[content_id(content)] = content
            messages[i] = new
            _count(events, message, new)
            if excess is not None:
                excess -= message.tokens - new.tokens
        return excess

    def _text(self, content: Any, tool: str, tokens: int) -> str:
        return render(
            content,
            tool=tool,
            tokens=tokens,
            head=self.head_chars,
            tail=self.tail_chars,
            facts=self.facts,
        )

    def _clear_calls(
        self,
        message: Message,
        keep_ids: set[str],
        context: Context,
        events: dict[str, int],
        held: set[str],
        *,
        keep_function: bool = False,
    ) -> Message:
        data = dict(message.data)
        touched = 0
        calls = data.get("tool_calls")
        if isinstance(calls, list):
            new_calls = []
            for call in calls:
                new_call = call
                if isinstance(call, Mapping) and str(call.get("id")) not in keep_ids:
                    function = call.get("function")
                    new_function = self._clear_function(function, context, held)
                    if new_function is not function:
                        new_call = {**call, "function": new_function}
                        touched += 1
                new_calls.append(new_call)
            data["tool_calls"] = new_calls
        function_call = data.get("function_call")
        if isinstance(function_call, Mapping) and not keep_function:
            new_function = self._clear_function(function_call, context, held)
            if new_function is not function_call:
                data["function_call"] = new_function
                touched += 1
        if not touched:
            return message
        new = message.replace(data, context.counter)
        _count(events, message, new, count=touched, key="inputs_cleared")
        return new

    def _clear_function(self, function: Any, context: Context, held: set[str]) -> Any:
        if not isinstance(function, Mapping):
            return function
        counter = context.counter
        tool = str(function.get("name") or "")
        arguments = function.get("arguments")
        if tool in self.exclude_tools or not isinstance(arguments, str):
            return function
        if looks_like(arguments_text(arguments)) or looks_like(arguments):
            return function
        if content_id(arguments) in held:
            return function
        tokens = counter.text(arguments)
        if tokens <= self.limit(tool):
            return function
        text = self._text(arguments, tool, tokens)
        replaced = json.dumps({ARGUMENTS_KEY: text}, ensure_ascii=False)
        if counter.text(replaced) >= tokens:
            return function
        context.stored[content_id(arguments)] = arguments
        return {**function, "arguments": replaced}


def _count(
    events: dict[str, int], old: Message, new: Message, *, count: int = 1, key: str = ""
) -> None:
    events["placeholders_written"] = events.get("placeholders_written", 0) + count
    events["tokens_saved"] = events.get("tokens_saved", 0) + old.tokens - new.tokens
    if key:
        events[key] = events.get(key, 0) + count
