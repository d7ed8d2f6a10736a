"""The placeholder text: how ctxcli writes, recognises and names a placeholder, for
the stage that writes them (:mod:`ctxcli.stages.placeholder`), the store that restores
them (:mod:`ctxcli.store`) and whoever must tell one from ordinary text.

The placeholder format (one line of header, then the preview)::

    [ctxcli placeholder id=3f2a9c0d1e4b5a67 tool="read_log" tokens=812 chars=2819 head=100 tail=50]
    <head: the first `head` characters of the preview text>
    [... 2669 characters omitted ...]
    <tail: the last `tail` characters of the preview text>

:data:`PLACEHOLDER_RE` parses it (``fullmatch`` on the whole content):

- ``id``: the first :data:`ID_HEX` hex digits of a SHA-256 (:func:`content_id`). For
  string content the hash is of its UTF-8 bytes; for any other content (a list of
  parts) of :data:`PARTS_PREFIX` then its canonical JSON (sorted keys, ``,`` and ``:``
  separators, non-ASCII as UTF-8), so no string shares its id. A lone surrogate (JSON
  allows ``"\\ud83d"`` alone) is hashed as its 3-byte ``surrogatepass`` form, so such a
  string still has one well-defined id.
- ``tool``: the tool's name as a JSON string (``""`` when neither the message's
  ``name`` nor the matching call names it).
- ``tokens``: the original content's tokens (:meth:`ctxcli.tokens.TokenCounter.content`); ``chars``:
  its characters (code points) for a string, of its canonical JSON otherwise.
- ``head`` / ``tail``: the lengths in characters of the two preview pieces, so
  ``preview[:head]`` and ``preview[-tail:]`` (when ``tail`` > 0) give them exactly.
  The preview text is the string content itself, or for a list of parts their texts
  joined by newlines (an image part as ``[image]``), without the lines Codex CLI's
  exec tools open their output with (:func:`preview_source`).

Previews are cut at a line end, or else between words, where one is near the cut
(:func:`cut_preview`), and always on character boundaries: Python strings are
sequences of code points, so no cut lands inside a multi-byte UTF-8 sequence; a cut
is also moved off a surrogate pair, off a combining mark, variation selector, emoji
modifier or zero-width joiner (so ``👍🏽`` stays whole), and out of a ``data:`` URL
(the preview then ends before it, or starts after it). A lone surrogate in a preview
is replaced with U+FFFD: a preview is for reading, and some APIs reject lone
surrogates. The original, lone surrogate included, is stored and restored exactly
(written as the same ``\\udXXX`` escape).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard

from ctxcli import jsonio
from ctxcli.memo import TextMemo
from ctxcli.model import Message
from ctxcli.summarizers.records import without_exec_head
from ctxcli.tokens import call_function

#: Hex digits of SHA-256 kept in an id: 64 bits, so a collision among ids is unlikely
#: before about 4e9 distinct contents (birthday bound).
ID_HEX = 16
#: The key of the JSON object that replaces long tool-call arguments.
ARGUMENTS_KEY = "ctxcli_placeholder"
#: The name of the calls whose arguments have no place for a placeholder: a Responses
#: ``local_shell_call`` holds its command as an ``action`` object, which its writer
#: keeps as it was (:mod:`ctxcli.formats.responses` names such calls so).
LOCAL_SHELL = "local_shell"
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
TOOL_ROLES = frozenset({"tool", "function"})
#: At most this many characters of facts in a placeholder (:func:`omitted_facts`).
FACT_CHARS = 1200
#: An error line counts by this many characters from its start.
FACT_LINE_CHARS = 120
#: A number with thousands separators (``1,036,051``: one fact, not ``036`` and ``051``),
#: a URL's scheme (``https://…``, not ``//…``); a path may hold a URL's escapes
#: (``Mayor%27s_Race.svg``).
_GROUPED = r"[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,]?\d)"
_SCHEME = r"(?:[A-Za-z][A-Za-z0-9+.-]*://)?"
_FACT = re.compile(
    r"(?P<error>\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\b(?:error|fatal):)"
    rf"|{_GROUPED}"
    r"|[$€£¥]?[A-Za-z0-9_.:@+-]*\d[A-Za-z0-9_.:@+-]*"
    rf"|{_SCHEME}[A-Za-z0-9_.~@+%-]*/[A-Za-z0-9_.~@+%/-]*[A-Za-z][A-Za-z0-9_.~@+%/-]*"
)
#: :data:`_FACT` where it is tried after a position it failed at: a number or a path
#: does not start inside a run of the characters it is made of (had it matched there,
#: it would have matched at the position before), so the run's other positions are
#: passed over at once instead of each scanning the run again (quadratic in its length).
_FACT_AFTER_MISS = re.compile(
    r"(?P<error>\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\b(?:error|fatal):)"
    rf"|(?<![A-Za-z0-9_.:@+,-]){_GROUPED}"
    r"|[$€£¥][A-Za-z0-9_.:@+-]*\d[A-Za-z0-9_.:@+-]*"
    r"|(?<![A-Za-z0-9_.:@+-])[A-Za-z0-9_.:@+-]*\d[A-Za-z0-9_.:@+-]*"
    rf"|(?<![A-Za-z0-9_.~@+%/-]){_SCHEME}[A-Za-z0-9_.~@+%-]*/[A-Za-z0-9_.~@+%/-]*"
    r"[A-Za-z][A-Za-z0-9_.~@+%/-]*"
)
#: A JSON string's escape (``\\u2190``, ``\\n``), as a tool's output that is JSON text
#: holds it, a ``\\u`` one escaped again in JSON text of arguments (``\\\\u0040``),
#: and any other run of backslashes: read as a space, so it is no fact (``u2190``,
#: ``n2025``, ``u0040epam.com``), while a path's ``C:\\\\temp`` keeps ``temp``.
_JSON_ESCAPE = re.compile(r"\\+u[0-9a-fA-F]{4}|(?<!\\)(?:\\\\)*\\[nrtbf\"/]|\\+")


def content_id(content: Any) -> str:
    """The id of a content value: hex SHA-256 (first :data:`ID_HEX` digits) of a
    string's UTF-8 bytes, or of :data:`PARTS_PREFIX` and any other value's canonical
    JSON (see module doc)."""
    if isinstance(content, str):
        return hashlib.sha256(_content_bytes(content)).hexdigest()[:ID_HEX]
    return hashlib.sha256(PARTS_PREFIX + _content_bytes(content)).hexdigest()[:ID_HEX]


#: What the hash of content other than a string (a list of parts, call arguments as an
#: object) starts with, so that no string has its id: a tool result whose text was
#: exactly a list's canonical JSON shared the list's id, and its store then refused
#: both ("names both a string and a list of parts"), costing the whole file.
PARTS_PREFIX = b"\x00parts\x00"


def held_as(content: Any, entry_id: str) -> bool:
    """Whether a store entry with ``entry_id`` holds ``content`` by its hash: its
    :func:`content_id`, or, for content other than a string, the id ctxcli gave it
    before :data:`PARTS_PREFIX` (the hash of its canonical JSON alone), so that stores
    written then still restore."""
    if entry_id == content_id(content):
        return True
    if isinstance(content, str):
        return False
    return entry_id == hashlib.sha256(_content_bytes(content)).hexdigest()[:ID_HEX]


def _content_bytes(content: Any) -> bytes:
    text = content if isinstance(content, str) else canonical_json(content)
    return text.encode("utf-8", "surrogatepass")


def canonical_json(value: Any) -> str:
    """``value`` as JSON text with sorted keys, no spaces and non-ASCII kept."""
    return jsonio.std_dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse(text: Any) -> re.Match[str] | None:
    """The :data:`PLACEHOLDER_RE` match when ``text`` is a whole placeholder, else None."""
    return PLACEHOLDER_RE.fullmatch(text) if isinstance(text, str) else None


#: The line of a placeholder between its head and tail, and the facts it lists.
_OMITTED = re.compile(r"\[\.\.\. \d+ characters omitted(?:; they hold: (?P<held>.*))? \.\.\.\]")


def shown_text(match: re.Match[str]) -> str:
    """What the placeholder of ``match`` (:func:`parse`) shows of its original, for a
    reader without the original: its head, the facts it lists as omitted (one a line,
    so an error line among them reads as one: ``FAILED tests/…: NameError …``), then
    its tail; no frame."""
    preview, head, tail = match.group("preview"), int(match.group("head")), int(match.group("tail"))
    middle = preview[head + 1 : len(preview) - tail - 1 if tail else len(preview)]
    omitted = _OMITTED.fullmatch(middle)
    held = omitted.group("held") if omitted else None
    lines = [preview[:head], *(held.split(", ") if held else ()), preview[len(preview) - tail :]]
    return "\n".join(line for line in lines[:-1] if line) + ("\n" + lines[-1] if tail else "")


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
    calls = message.data.get("tool_calls")
    functions: list[Any] = [call_function(c) for c in calls] if isinstance(calls, list) else []
    functions.append(message.data.get("function_call"))  # the legacy form
    for function in functions:
        if function is not None and isinstance(function, Mapping):  # None: no ABC check
            text = arguments_text(function.get("arguments"))
            if looks_like(text):
                texts.append(text)
    return texts


def placeholder_ids(message: Message) -> set[str]:
    """Ids of the readable placeholders ``message`` holds where this stage writes
    them (see :func:`placeholder_texts`)."""
    return set(placeholders_of(message))


def placeholders_of(message: Message) -> list[str]:
    """The id of each readable placeholder ``message`` holds where this stage writes
    them, in order: an id twice for two placeholders of one original."""
    matches = (parse(text) for text in placeholder_texts(message))
    return [match.group("id") for match in matches if match]


def verbatim_ids(message: Message) -> set[str]:
    """Store ids of the placeholder-like texts ``message`` holds (see
    :func:`placeholder_texts`), each taken as its own original: the entries that tell
    ``restore`` the text was in this run's input as it is."""
    return {content_id(text) for text in placeholder_texts(message)}


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


def _fact_matches(source: str) -> Iterator[re.Match[str]]:
    """The matches of :data:`_FACT` in ``source``, as ``_FACT.finditer`` gives them:
    where a match ends (or at the start) ``_FACT`` itself is tried, and after a
    position where it fails, :data:`_FACT_AFTER_MISS` (every match non-empty)."""
    pos = 0
    while pos <= len(source):
        match = _FACT.match(source, pos) or _FACT_AFTER_MISS.search(source, pos + 1)
        if match is None:
            return
        yield match
        pos = match.end()


def omitted_facts(source: str, shown: str) -> list[str]:
    """What identifies the part of ``source`` a preview leaves out: its words with a
    digit (ids, dates, amounts, numbers), its paths and its error lines (up to
    :data:`FACT_LINE_CHARS` characters each) that ``shown`` lacks, each once, as many
    as fit :data:`FACT_CHARS` characters or an eighth of ``source``'s, whichever is
    more (a result too full of facts for that saves nothing and is not replaced). They
    come by what they tell (:func:`_telling`): error lines and paths first, then ids
    and other words with a letter, then amounts and decimals, then bare whole numbers
    (a numbered file view's line numbers, counters), each kind in the order they
    first appear; the room takes them in that order, so the noise goes first
    (``they hold: 0.19, helper_0, 100, 101, 102 …`` hid a test run's ``FAILED`` line).
    The room is not cut for a short ``source``: a result kept as a placeholder at a
    larger budget must not name fewer facts than its summary holds at a smaller one,
    where it is folded; nor is it so small for a long one that a narrower preview
    (less room left to widen it at a larger budget) names fewer facts than a wider
    one (issue 15: a bigger budget never keeps less). That holds for any fixed order:
    a wider preview leaves out a subset, and each fact it still leaves out has no more
    before it."""
    room = max(FACT_CHARS, len(source) // 8)
    if "\\" in source:
        source = _JSON_ESCAPE.sub(" ", source)
    found: list[tuple[int, int, str]] = []  # (kind, first place, fact)
    seen: set[str] = set()
    for match in _fact_matches(source):
        fact = match.group()
        if match.lastgroup == "error":  # the whole line it stands in, if a line's length
            start = source.rfind("\n", 0, match.start()) + 1
            end = source.find("\n", match.end())
            end = end if end >= 0 else len(source)
            if end - start > 2 * FACT_LINE_CHARS:  # a dump (JSON on one line): from it on
                start = match.start()
            fact = source[start:end].strip()[:FACT_LINE_CHARS]
        fact = fact.rstrip(".,:;-")
        if len(fact) < 3 or fact in seen or fact in shown:
            continue
        seen.add(fact)
        found.append((_telling(fact, match.lastgroup == "error"), len(found), fact))
    facts: list[str] = []
    for _, _, fact in sorted(found):
        room -= len(fact) + 2
        if room < 0:
            break
        facts.append(fact)
    return facts


#: A fact made of digits alone, with thousands separators or a sign at most.
_BARE_NUMBER = re.compile(r"[+-]?\d[\d,]*")
#: A fact that is an amount or a decimal (``$480``, ``0.19``, ``1,190.37``).
_AMOUNT_OR_DECIMAL = re.compile(r"[$€£¥+-]?\d[\d,]*(?:\.\d+)?%?")


def _telling(fact: str, error: bool) -> int:
    """The rank of what ``fact`` tells, lower first (:func:`omitted_facts`): 0 an
    error line or a path, 1 another word with a letter (an id, a date's ISO form
    with ``T``, a version), 2 an amount or a decimal, 3 a bare whole number."""
    if error or "/" in fact:
        return 0
    if _BARE_NUMBER.fullmatch(fact):
        return 3
    if _AMOUNT_OR_DECIMAL.fullmatch(fact):
        return 2
    return 1


def render(
    content: Any, *, tool: str, tokens: int, head: int, tail: int, facts: bool = False
) -> str:
    """The placeholder text for ``content`` (format in the module docstring); with
    ``facts`` the line that says what is omitted names what identifies it
    (:func:`omitted_facts`): ``[... 2669 characters omitted; they hold: JG7FMM,
    2024-05-20, $480 ...]``. A string's is made once per run (:data:`_rendered`): the
    placeholder stage and the summary's compaction write the same one."""
    if isinstance(content, str):
        return _rendered(content, tool, tokens, head, tail, facts)
    return _render(content, tool, tokens, head, tail, facts)


def preview_source(content: Any) -> str:
    """The text a placeholder's preview is cut from: :func:`preview_text` without the
    lines Codex CLI's exec tools open their output with (``Chunk ID: 712654``, ``Wall
    time: …``, ``Process exited with code 0``, ``Original token count: 714``,
    ``Output:``), which took a preview's whole head; ``exit N`` in their place for a
    code other than 0 (:func:`ctxcli.summarizers.records.without_exec_head`)."""
    return without_exec_head(preview_text(content))


def _render(content: Any, tool: str, tokens: int, head: int, tail: int, facts: bool) -> str:
    source = preview_source(content)
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


#: :func:`render` of string content, by the content's hash and length and the options.
_rendered: TextMemo[str] = TextMemo(_render, size=1 << 12)
