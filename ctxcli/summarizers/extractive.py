"""The offline, deterministic summarizer: picks what later turns depend on.

It keeps, in this order of precedence while the bound allows:

1. every user request in short form (its first sentence, and its first question);
2. the facts, found by pattern in every folded message, tool results and tool-call
   arguments included: identifiers, numbers with units, names, dates, amounts, e-mail
   addresses, URLs, paths, and ``key=value`` pairs of JSON results (at most
   :data:`FACTS_PER_MESSAGE` from one tool result, at most two of one shape);
3. error lines of tool results, each after the name of its tool (tracebacks, failed
   tests: what the agent learned, and from which call);
4. assistant sentences that state a fact (those holding a digit: a number, id, date,
   amount);
5. the tools that were called, with counts, in the order of their latest use (they
   come before the last of the facts and the notes, see :data:`_PASSES`; a cut line
   keeps the latest).

Sentences split on ``.!?`` followed by a space and on the CJK enders ``。！？``
(no space follows them in Chinese). A list, one item a line ("1.", "2)", "3、",
"(4)", "①", "一、", "a)", or a bullet "-", "*", "•", "·", "–", "+") or numbered
within a line ("1. One-way 2. Economy", counted up from 1), is read item by item:
its markers are no sentence ends, so "2." alone is never taken for one. Section
labels follow the conversation's language: Chinese when CJK characters make up a
third of its letters.

When the bound cuts the tools line, it says how many calls it leaves out
(``… and 7 more calls``), so a partial list does not read as all that was done.
The other sections say nothing: facts, errors and notes are picks by nature, and
in a tight bound a short request is worth more than a line saying one is missing.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from ctxcli.memo import TextMemo
from ctxcli.model import tool_names
from ctxcli.tokens import TokenCounter

SECTIONS = ("requests", "facts", "errors", "notes", "tools")
LABELS = {
    "en": {
        "requests": "User requests:",
        "notes": "Assistant notes:",
        "facts": "Facts:",
        "errors": "Errors:",
        "tools": "Tools used:",
    },
    "zh": {
        "requests": "用户请求：",
        "notes": "助手答复要点：",
        "facts": "关键信息：",
        "errors": "错误：",
        "tools": "使用的工具：",
    },
}
_LABEL_TO_SECTION = {label: key for labels in LABELS.values() for key, label in labels.items()}
_INLINE = {"facts", "tools"}  # sections written on one line, items joined by "; "
#: What a cut tools line says it leaves out, by language: (one, many). It counts
#: calls, so the counts of merged summaries add up exactly.
MORE = {
    "en": {"tools": ("… and {} more call", "… and {} more calls")},
    "zh": {"tools": ("……另有 {} 次调用", "……另有 {} 次调用")},
}
#: Any of :data:`MORE`, read back from a previous summary.
_MORE_ITEM = re.compile(r"^(?:… and (\d+) more calls?|……另有 (\d+) 次调用)$")

REQUEST_CHARS = 160
NOTE_CHARS = 200
FACT_CHARS = 60

_SENTENCE_END = re.compile(r"(?<=[。！？])|(?<=[.!?])\s+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")
_SPACE = re.compile(r"\s+")
#: A list marker opening a line: a bullet, or a number or letter with "." or ")"
#: and a space after it ("1.5 kg" is no item), or a Chinese one ("3、", "（4）", "①",
#: "一、") that needs no space; a Markdown check box after it goes too.
_LIST_MARKER = re.compile(
    r"^\s*(?:[-*•·–+](?=\s)|\d{1,3}[.)）](?=\s|$)|[a-zA-Z][)）](?=\s)|\d{1,3}、"
    r"|[(（]\d{1,3}[)）]|[①-⑳]|[一二三四五六七八九十]{1,3}、)\s*(?:\[[ xX]\]\s+)?"
)
#: A number that may mark an item within a line: "2. ", "2) ", "2、", not glued to a
#: word or number before it ("v2. ", "1,2. ").
_INLINE_MARKER = re.compile(r"(?<![A-Za-z0-9_.,])(\d{1,2})(?:[.)）](?=\s)|、)\s*")
#: What may come right before the "1" that opens a list within a line.
_LIST_OPENERS = (":", "：", ".", "!", "?", "。", "！", "？", ";", "；")
#: Trailing punctuation an item loses when items are joined.
_ITEM_END = ".;,。；，、 "
#: An item cut shorter than this says too little: fewer items are kept instead.
ITEM_MIN_CHARS = 16
NOTE_MIN_CHARS = 20
FILL_TRIES = 8

_NOT_ALNUM_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_ALNUM_AFTER = r"(?![A-Za-z0-9_])"
_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_UNITS = (
    r"(?:kg|g|mg|lb|lbs|oz|ml|l|cl|km|m|cm|mm|mi|ft|in|gb|mb|kb|tb|ms|s|sec|min|h|hrs?"
    r"|%|mph|kwh|w|v|°c|°f|c|f)"
)
_CJK_UNITS = (
    r"(?:个|件|台|部|期|天|周|月|年|日|号|元|块|万|亿|小时|分钟"
    r"|岁|人|位|次|寸|英寸|克|千克|公斤|毫升|升|折|%)"
)
_STOP = frozenset(
    "a an and or of to the in on at for by with from is are was were be it its this that "
    "than then as but not no so if".split()
)
#: Words that make no quantity after a number ("1 with", "0199 please"), unlike
#: "2 eggs" or "4 people".
_NOT_COUNTED = _STOP | frozenset(
    "please thanks thank now also just here there what which when where who will would "
    "can could should have has had do does did you your my our their".split()
)
_NUMBER_WORD = re.compile(r"\d+(?:\.\d+)? ([a-z]+)")

_PATH_START = r"(?<![\w.@/-])"
_CURRENCY_CODES = ("USD", "EUR", "GBP", "CNY", "RMB")
#: (pattern, substrings one of which every match contains, or ``None``): they are
#: looked for first, so a pattern is not run over text it cannot match.
FACT_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...] | None], ...] = (
    (re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]*\w"), ("@",)),  # e-mail
    (re.compile(r"https?://[^\s\"'<>)]+"), ("://",)),  # URL
    (
        re.compile(  # paths: absolute, relative, or a file with an extension
            rf"{_PATH_START}(?:~|\.{{1,2}}|[\w.-]+)?(?:/[\w.@-]+){{2,}}/?"
            rf"|{_PATH_START}[\w.-]+/[\w.@/-]*\.\w{{1,5}}\b"
        ),
        ("/",),
    ),
    (re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?"), ("-",)),  # ISO date
    (
        re.compile(rf"{_NOT_ALNUM_BEFORE}{_MONTHS} \d{{1,2}}(?:, \d{{4}})?"),
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
    ),  # May 15
    (
        re.compile(r"\d{4} ?年 ?\d{1,2} ?月(?: ?\d{1,2} ?[日号])?|\d{1,2} ?月 ?\d{1,2} ?[日号]"),
        ("月",),
    ),  # 6月18日
    (re.compile(r"\+?\d{1,4}[ -]\d{3,4}[ -]\d{4}(?![\d])"), None),  # phone numbers
    (
        re.compile(r"(?:[$€£¥￥]|(?:USD|EUR|GBP|CNY|RMB) ?)\d(?:[\d,]*\d)?(?:\.\d+)?"),
        ("$", "€", "£", "¥", "￥", *_CURRENCY_CODES),
    ),  # $1.50
    (
        re.compile(
            r"\d[\d,]*(?:\.\d+)?\s?(?:元|块|美元|欧元|USD|EUR|GBP|CNY|RMB|dollars?|euros?|yuan)"
        ),
        ("元", "块", "dollar", "euro", "yuan", *_CURRENCY_CODES),
    ),
    (
        re.compile(
            rf"{_NOT_ALNUM_BEFORE}#?[A-Za-z][A-Za-z_-]*\d[A-Za-z0-9_-]*(?:\.\d+)*{_NOT_ALNUM_AFTER}"
        ),
        None,
    ),  # ids, versions (pytest-8.3.2)
    (
        re.compile(
            rf"{_NOT_ALNUM_BEFORE}#?\d+[A-Za-z][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*{_NOT_ALNUM_AFTER}"
        ),
        None,
    ),
    (re.compile(rf"#\d+|{_NOT_ALNUM_BEFORE}\d{{4,}}{_NOT_ALNUM_AFTER}"), None),  # order no.
    (
        re.compile(rf"\d+(?:\.\d+)? ?{_UNITS}(?: [a-z]{{3,12}})?(?![A-Za-z])", re.IGNORECASE),
        None,
    ),
    (re.compile(rf"\d+(?:\.\d+)? ?{_CJK_UNITS}"), None),
    (re.compile(r"\d+(?:\.\d+)? [a-z]{3,12}(?![A-Za-z])"), None),  # 2 eggs, 4 people
)
#: The patterns that can match text without a digit (e-mail, URL, path).
_NO_DIGIT_PATTERNS = FACT_PATTERNS[:3]
#: What is read from tool output that is not JSON (logs, code, file dumps): addresses,
#: paths, dates, amounts and identifiers, not bare numbers, quantities or names.
_STRICT_PATTERNS = FACT_PATTERNS[:11]
_DIGIT = re.compile(r"\d")
FACT_SCAN_CHARS = 4000
ERROR_SCAN_CHARS = 20000
FACTS_PER_MESSAGE = 12
_SHAPE_DIGITS = re.compile(r"\d+")
#: Claude Code's wrapper of a failed tool call's result.
_TOOL_USE_ERROR = re.compile(r"</?tool_use_error>")
_ERROR_WORDS = (
    "Error",
    "Exception",
    "Traceback",
    "FAILED",
    "error:",
    "fatal:",
    "panic:",
    "<tool_use_error>",
)
_ERROR_LINE = re.compile(
    r"^.*(?:\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\b(?:error|fatal|panic):"
    r"|<tool_use_error>).*$",
    re.MULTILINE,
)
#: A line of source code shown by a tool that names an error type without reporting
#: one: a line of a numbered file view (``36:     raise RuntimeError``, ``25: Raises
#: ValueError if ...``, Claude Code's ``85→- error: Error messages``), or code in a
#: diff or a grep hit (``+ raise KeyError(k)``).
_CODE_LINE = re.compile(
    r"^\s*\d+[:|→]"
    r"|^\s*(?:[\w./-]*:\d+[:|-]?\s*)?[+-]?\s*"
    r"(?:raise|raises|except|class|def|import|catch|throw|throws|elif)\b",
    re.IGNORECASE,
)
#: Names: two or more capitalised words inside a sentence ("New York", "Mia Li"), or
#: one after a word that introduces a place or person ("from Austin", "to Oslo") -
#: a lone capitalised word elsewhere is too often just a word ("Would", "Price").
_NAME = re.compile(
    r"(?<=[a-z,;:] )([A-Z][a-z]+(?: [A-Z][a-z]+)+)"
    r"|\b(?:in|to|from|at|near|via|with|for|named|called|by) ([A-Z][a-z]+(?: [A-Z][a-z]+)*)"
)
#: Keys of a state rather than a thing: their values say something only of an item
#: the summary names (see :func:`json_facts`).
_STATUS_KEY = re.compile(r"(?:^|_)(?:status|state)$", re.IGNORECASE)
_JSON_KEYS = re.compile(
    r"(?:^|_)(?:id|name|number|date|time|amount|price|total|status|email|phone|city|origin|"
    r"destination|code|order|reservation|flight|cabin|payment|balance|address|zip)(?:$|_|s$)",
    re.IGNORECASE,
)


def language(texts: Iterable[str], sample: int = 1000) -> str:
    """``"zh"`` when CJK characters are at least a third of the letters in the first
    ``sample`` characters of ``texts``, else ``"en"``."""
    text = ""
    for item in texts:
        text += item[: sample - len(text)]
        if len(text) >= sample:
            break
    cjk = len(_CJK.findall(text))
    if not cjk:
        return "en"
    return "zh" if cjk * 3 >= len(_LETTER.findall(text)) else "en"


def _enumeration(line: str) -> tuple[str, list[str]] | None:
    """``(lead, items)`` of a line that numbers two or more items in it, counting up
    from 1 ("Answers: 1. One-way 2. Economy"), else ``None``. The "1" opens the line
    or follows a colon or a sentence end, so "version 2. Then" is no list."""
    if "1" not in line:
        return None
    cuts: list[re.Match[str]] = []
    for match in _INLINE_MARKER.finditer(line):
        number = int(match.group(1))
        if number == len(cuts) + 1:
            if number == 1:
                before = line[: match.start()].rstrip()
                if before and not before.endswith(_LIST_OPENERS):
                    continue
            cuts.append(match)
    if len(cuts) < 2:
        return None
    ends = [m.start() for m in cuts[1:]] + [len(line)]
    items = [line[m.end() : end].strip() for m, end in zip(cuts, ends)]
    return line[: cuts[0].start()].strip(), [item for item in items if item]


def _line_items(line: str) -> tuple[str, list[str]]:
    """``(prose, items)`` of one line: a line opened by a list marker is one item
    (or several, numbered within it); else its prose and the items numbered in it."""
    found = _enumeration(line)
    if found:
        return found
    marker = _LIST_MARKER.match(line)
    if marker:
        item = line[marker.end() :].strip()
        return "", [item] if item else []
    return line.strip(), []


def _blocks(text: str) -> list[tuple[bool, str]]:
    """``text`` as ``(is_item, text)`` blocks, whitespace collapsed: each list item
    (with the indented lines under it), and the prose between lists, its lines
    joined by a space."""
    blocks: list[tuple[bool, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        prose, items = _line_items(line)
        if prose and blocks and blocks[-1][0] and not items and line[:1].isspace():
            blocks[-1] = (True, f"{blocks[-1][1]} {prose}")  # an item's next line
            continue
        if prose:
            if blocks and not blocks[-1][0]:
                blocks[-1] = (False, f"{blocks[-1][1]} {prose}")
            else:
                blocks.append((False, prose))
        blocks += [(True, item) for item in items]
    return [(is_item, _SPACE.sub(" ", part).strip()) for is_item, part in blocks]


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (Latin ``.!?`` + space, CJK ``。！？``, line
    breaks), list items apart and without their markers (``1.``, ``-``, ``3、``; see
    the module docstring)."""
    out = []
    for line in text.splitlines():
        prose, items = _line_items(line)
        for part in (prose, *items):
            out += [s.strip() for s in _SENTENCE_END.split(_SPACE.sub(" ", part)) if s.strip()]
    return out


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters (code points), ending in "…"."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its leading whole sentences if any fit,
    else cut, ending in "…"."""
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in sentences(text):
        longer = f"{kept} {sentence}" if kept else sentence
        if len(longer) > limit:
            break
        kept = longer
    return kept.rstrip(_ITEM_END) or shorten(text, limit)


def _join_items(lead: str, items: Sequence[str], tail: str, *, cjk: bool) -> str:
    """``lead: item; item. tail`` (in Chinese ``lead：item；item。tail``)."""
    text = ("；" if cjk else "; ").join(items)
    if lead:
        colon = "" if lead.endswith(_LIST_OPENERS + (",", "，")) else "：" if cjk else ":"
        text = lead + colon + ("" if cjk else " ") + text
    if tail:
        end = "" if text.endswith(("!", "?", "！", "？", "…")) else "。" if cjk else "."
        text += end + ("" if cjk else " ") + tail
    return text


def _fair_cuts(pieces: Sequence[str], budget: int) -> list[str]:
    """``pieces`` within ``budget`` characters in all, each cut by :func:`_cut` to a
    fair share: the short ones whole, what they leave split evenly among the rest."""
    out = list(pieces)
    left = budget
    by_length = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    for done, i in enumerate(by_length):
        share = left // (len(pieces) - done)
        if len(pieces[i]) > share:
            out[i] = _cut(pieces[i], share)
        left -= len(out[i])
    return out


def short_request(text: str, limit: int = REQUEST_CHARS) -> str:
    """A user message in short form, within ``limit`` characters: whole if short,
    else its first sentence plus its first question.

    A message holding a list (see the module docstring) within its first ``limit``
    characters gives the text before the list, then the items joined by "; "
    (Chinese "；"), then what follows. When that is too long, each keeps a fair share
    of the characters (its leading whole sentences if they fit, else a cut ending in
    "…"), only the first question of what follows is kept, and when the items are too
    many for :data:`ITEM_MIN_CHARS` each, the last ones give way to "…".
    """
    flat = _SPACE.sub(" ", text).strip()
    blocks = _blocks(text)
    first_item = next((i for i, (is_item, _) in enumerate(blocks) if is_item), None)
    if first_item is None or sum(len(part) for _, part in blocks[:first_item]) > limit:
        if len(flat) <= limit:
            return flat
        parts = [s for is_item, part in blocks for s in ([part] if is_item else sentences(part))]
        picked = parts[:1]
        question = next((s for s in parts[1:] if s.endswith(("?", "？"))), None)
        if question:
            picked.append(question)
        return shorten(" ".join(picked), limit)
    cjk = language([flat]) == "zh"
    lead = " ".join(part for _, part in blocks[:first_item])
    items = [part.rstrip(_ITEM_END) or part for is_item, part in blocks if is_item]
    tail = " ".join(part for is_item, part in blocks[first_item:] if not is_item)
    whole = _join_items(lead, items, tail, cjk=cjk)
    if len(whole) <= limit:
        return whole
    tail = next((s for s in sentences(tail) if s.endswith(("?", "？"))), "")
    count = len(items)
    while True:
        shown = items if count == len(items) else [*items[:count], "…"]
        pieces = [piece for piece in (lead, *shown, tail) if piece]
        frame = _join_items(lead and "x", ["x"] * len(shown), tail and "x", cjk=cjk)
        budget = limit - (len(frame) - len(pieces))  # what the pieces may take
        if count <= 1 or budget // len(pieces) >= ITEM_MIN_CHARS:
            break
        count -= 1
    cuts = iter(_fair_cuts(pieces, budget))
    lead = next(cuts) if lead else ""
    shown = [next(cuts) for _ in shown]
    tail = next(cuts) if tail else ""
    return shorten(_join_items(lead, shown, tail, cjk=cjk), limit)


def facts(text: str, *, strict: bool = False) -> list[str]:
    """Identifiers, numbers, names, dates and amounts found in ``text``, in order;
    ``strict`` keeps to addresses, paths, dates, amounts and identifiers.

    Only the first :data:`FACT_SCAN_CHARS` characters are read: past that, a message is
    a dump whose facts a summary cannot hold anyway.
    """
    text = text[:FACT_SCAN_CHARS]
    found: list[tuple[int, str]] = []
    if not _DIGIT.search(text):
        patterns = _NO_DIGIT_PATTERNS
    else:
        patterns = _STRICT_PATTERNS if strict else FACT_PATTERNS
    for pattern, needs in patterns:
        if needs is None or any(part in text for part in needs):
            found += [(m.start(), m.group().strip()) for m in pattern.finditer(text)]
    if not strict:
        for m in _NAME.finditer(text):
            group = 1 if m.group(1) else 2
            found.append((m.start(group), m.group(group)))
    found.sort(key=lambda item: (item[0], -len(item[1])))
    result: list[str] = []
    end = -1
    for start, fact in found:
        if start < end or fact.lower() in _STOP:
            continue  # inside a longer fact found at an earlier position
        counted = _NUMBER_WORD.fullmatch(fact)
        if counted and counted.group(1) in _NOT_COUNTED:
            continue  # a number and the next word, not a quantity
        result.append(shorten(fact, FACT_CHARS))
        end = start + len(fact)
    return result


def json_facts(value: Any, limit: int = 12) -> list[str]:
    """``key=value`` pairs of a parsed JSON value whose key names an id, name, date,
    amount, status or the like (at most ``limit``). The status of an item in a list
    (a to-do list's ``status=pending``, a flight list's ``status=available``) is left
    out: the item it belongs to is not said, so it tells nothing."""
    out: list[str] = []

    def walk(node: Any, in_list: bool) -> None:
        if len(out) >= limit:
            return
        if isinstance(node, Mapping):
            for key, item in node.items():
                if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                    if in_list and _STATUS_KEY.search(str(key)):
                        continue
                    if _JSON_KEYS.search(str(key)) and len(str(item)) <= FACT_CHARS:
                        out.append(f"{key}={item}")
                else:
                    walk(item, in_list)
        elif isinstance(node, list):
            for item in node:
                walk(item, True)

    walk(value, False)
    return out[:limit]


def message_text(message: Mapping[str, Any]) -> str:
    """The readable text of a message: its content, text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping):
                value = part.get("text", part.get("value"))
                if isinstance(value, str):
                    texts.append(value)
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return ""


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            calls.append((str(function.get("name", "?")), str(function.get("arguments") or "")))
    function_call = message.get("function_call")
    if function_call is not None and isinstance(function_call, Mapping):
        calls.append(
            (str(function_call.get("name", "?")), str(function_call.get("arguments") or ""))
        )
    return calls


def _structured_facts(text: str) -> list[str]:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json_facts(orjson.loads(stripped))
        except orjson.JSONDecodeError:
            pass
    return facts(text, strict=True)


def _argument_facts_of(arguments: str) -> list[str]:
    return _structured_facts(arguments)[:FACTS_PER_MESSAGE]


#: Facts of tool-call arguments, memoised like :data:`_extract`.
_argument_facts = TextMemo(
    _argument_facts_of, size=1 << 15, share_as="argument facts", share_from=0
)


def error_lines(text: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` lines of ``text`` that report an error (an ``...Error`` or
    ``...Exception`` name, ``Traceback``, ``FAILED``, ``error:``, ``fatal:``, Claude
    Code's ``<tool_use_error>``), shortened: what an agent learned from its mistakes. A
    line that ends in a colon ("failed due to the following issue:") takes the next
    line with it, which says what the error was."""
    text = text[:ERROR_SCAN_CHARS]
    if not any(word in text for word in _ERROR_WORDS):
        return []
    found: list[str] = []
    for match in _ERROR_LINE.finditer(text):
        if _CODE_LINE.match(match.group()):
            continue  # code that names an error, not an error that happened
        line = match.group().strip()
        if line.endswith(":") and not line.startswith("Traceback"):
            after = text[match.end() + 1 :].partition("\n")[0].strip()
            if after and not _ERROR_LINE.fullmatch(after):  # else it is listed itself
                line = f"{line} {after}"
        line = shorten(_TOOL_USE_ERROR.sub("", line).strip(), NOTE_CHARS)
        if line not in found:
            found.append(line)
        if len(found) >= limit:
            break
    return found


def _extract_one(text: str, role: str) -> tuple[tuple[str, ...], ...]:
    """What one message gives each section, in :data:`SECTIONS` order. A placeholder
    (a tool result ctxcli already replaced) gives nothing: its preview is a fragment
    and its id no fact."""
    if text.startswith("[ctxcli placeholder "):
        return (), (), (), (), ()
    requests: list[str] = []
    found: list[str] = []
    errors: list[str] = []
    notes: list[str] = []
    if role == "user" and text.strip():
        requests.append(short_request(text))
    elif role == "assistant" and text.strip():
        notes = [
            shorten(s, NOTE_CHARS)
            for s in sentences(text)
            if len(s) >= NOTE_MIN_CHARS and _DIGIT.search(s)
        ][:3]
    elif role in ("tool", "function"):
        found = _structured_facts(text)[:FACTS_PER_MESSAGE]
        errors = error_lines(text)
    if role in ("user", "assistant"):
        found += facts(text)
    return tuple(requests), tuple(found), tuple(errors), tuple(notes), ()


@functools.lru_cache(maxsize=65536)
def _shape(fact: str) -> str:
    return _SHAPE_DIGITS.sub("#", fact.lower())


#: What one message gives each section, memoised: a text seen before in this process
#: (a repeated prompt or tool result) is read once. Shared with other worker processes
#: whatever the text's length: reading even a short one with all the patterns costs
#: about 40 microseconds, several times what passing its result on does.
_extract = TextMemo(_extract_one, size=1 << 15, share_as="extract", share_from=0)


def _thin(found: list[str]) -> list[str]:
    """Facts without near-repeats: at most 2 of one shape (digits and case aside), so
    ``helper_1 … helper_40`` in a code dump do not crowd out the rest."""
    shapes: Counter[str] = Counter()
    out: dict[str, None] = {}  # ordered, with O(1) membership
    for fact in found:
        if fact in out:
            continue
        shape = _shape(fact)
        shapes[shape] += 1
        if shapes[shape] <= 2:
            out[fact] = None
    return list(out)


def parse_summary(body: str) -> dict[str, list[str]]:
    """Read the sections of a summary body this module wrote, in either language."""
    sections: dict[str, list[str]] = {key: [] for key in SECTIONS}
    current: str | None = None
    for line in body.splitlines():
        stripped = line.strip()
        label = next((lb for lb in _LABEL_TO_SECTION if stripped.startswith(lb)), None)
        if label:
            current = _LABEL_TO_SECTION[label]
            rest = stripped[len(label) :].strip()
            if rest and current in _INLINE:
                sections[current] += [item for item in rest.split("; ") if item]
        elif current and stripped.startswith("- "):
            sections[current].append(stripped[2:])
        elif stripped and current is None:
            sections["notes"].append(stripped)  # a summary from another tool: keep as a note
    return sections


class Extractive:
    """The default summarizer (see the module docstring). Stateless and thread-safe."""

    def language_of(self, messages: Sequence[Mapping[str, Any]], *, previous: str | None) -> str:
        """The language (``"en"`` or ``"zh"``) :meth:`summarize` writes its labels in
        for the same arguments: that of the requests (the previous summary's, then the
        messages'), then of the messages' text. Cheap: extraction is memoised."""
        requests = parse_summary(previous)["requests"] if previous else []
        texts = [message_text(message) for message in messages]
        for message, text in zip(messages, texts):
            requests += _extract(text, str(message.get("role")))[0]
        return language(requests + texts)

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        """Summary body of ``messages`` merged with ``previous``, within ``max_tokens``
        tokens (as counted by ``counter``). Never raises for odd content."""
        items = parse_summary(previous) if previous else {key: [] for key in SECTIONS}
        hidden: Counter[str] = Counter()  # what a previous summary said it left out
        for key in MORE["en"]:
            for item in list(items[key]):
                match = _MORE_ITEM.match(item)
                if match:
                    items[key].remove(item)
                    hidden[key] += int(match.group(1) or match.group(2))
        tools: Counter[str] = Counter()
        for item in items["tools"]:
            name, _, times = item.rpartition(" ×")
            tools[name or item] += int(times) if times.isdigit() else 1
        texts = []
        names = tool_names(messages)
        for i, message in enumerate(messages):
            role = str(message.get("role"))
            text = message_text(message)
            texts.append(text)
            for key, found in zip(SECTIONS, _extract(text, role)):
                if key == "errors" and not found and message.get("is_error") is True:
                    # The result says it failed (Anthropic's flag), in words of its own.
                    first = text.strip().partition("\n")[0]
                    found = (shorten(_TOOL_USE_ERROR.sub("", first).strip(), NOTE_CHARS),)
                if key == "errors" and names.get(i):
                    found = tuple(f"{names[i]}: {line}" for line in found)  # which call failed
                items[key] += found
            for name, arguments in _calls(message):
                tools[name] = tools.pop(name, 0) + 1  # in the order of their latest use
                items["facts"] += _argument_facts(arguments)
        items["facts"] = _thin(items["facts"])
        items["tools"] = [f"{name} ×{n}" if n > 1 else name for name, n in tools.items()]
        lang = language(items["requests"] + texts)  # as :meth:`language_of` says
        return _render(items, LABELS[lang], max_tokens, counter, more=MORE[lang], hidden=hidden)


#: Selection passes: (section, share of the bound it may fill up to). Requests get the
#: first 60% (the task and the latest first, see :func:`_order`), so the facts are not
#: crowded out, but the task, the first request, may take the whole bound: a summary
#: too small for it and any fact says what was asked, not what was found. Then the
#: rest, by precedence, save that the tools line comes before the last of the facts and
#: the notes: it is short and the only word on what was done, and last it was left a
#: token or two (one tool of six shown), or none once it has to say what it leaves out.
_PASSES = (
    ("requests", 0.6),
    ("facts", 0.9),
    ("errors", 1.0),
    ("requests", 1.0),
    ("tools", 1.0),
    ("facts", 1.0),
    ("notes", 1.0),
)


def _render(
    items: Mapping[str, list[str]],
    labels: Mapping[str, str],
    max_tokens: int,
    counter: TokenCounter,
    *,
    more: Mapping[str, tuple[str, str]] | None = None,
    hidden: Mapping[str, int] | None = None,
) -> str:
    """Greedily fit items within ``max_tokens`` tokens, pass by pass (:data:`_PASSES`);
    each section keeps its items in their original order. A section in ``more`` that
    shows some items but not all says how many it leaves out (plus ``hidden[key]``,
    left out by a previous summary): its cost is held as soon as the section is known
    to be cut, and the exact checks at the end measure it with the rest."""
    more = more or {}
    hidden = hidden or {}
    picked: dict[str, set[int]] = {key: set() for key in SECTIONS}
    seen: set[str] = set()
    written = ""  # what was picked so far, to skip facts already said
    used = 0
    costs: dict[tuple[str, int], int] = {}  # an item's cost with its separator, once
    # The cost of saying what a section leaves out, held while it is cut.
    reserve = {
        key: counter.text(("; " if key in _INLINE else "\n- ") + forms[1].format(9999))
        for key, forms in more.items()
    }
    held: dict[str, int] = {}
    for key, share in _PASSES:
        section = items[key]
        if len(picked[key]) == len(section):
            continue  # every item of this section is in
        limit = max_tokens * share
        separator = "; " if key in _INLINE else "\n- "
        order = [i for i in _order(key, len(section)) if i not in picked[key]]
        left = 0  # what the rest of this section costs: needed only to hold a "more"
        if key in reserve:
            for i in order:
                if (key, i) not in costs:
                    costs[key, i] = counter.text(separator + section[i])
            left = sum(costs[key, i] for i in order)
        for i in order:
            item = section[i]
            if item in seen or (key == "facts" and item in written):
                left -= costs.get((key, i), 0)
                continue  # already said, in this or another section
            cost = costs.get((key, i))
            if cost is None:
                cost = costs[key, i] = counter.text(separator + item)
            if not picked[key]:
                cost += counter.text(labels[key]) + 1
            others = sum(held.values()) - held.get(key, 0)
            hold = held.get(key, 0)
            if key in reserve and not hold and (hidden.get(key) or used + others + left > limit):
                hold = reserve[key]  # not all of it fits: saying so is paid for once
            task = key == "requests" and i == 0
            if used + others + cost + hold > (max_tokens if task else limit):
                continue
            picked[key].add(i)
            seen.add(item)
            written += "\n" + item
            used += cost
            left -= costs[key, i]
            held[key] = hold if left > 0 or hidden.get(key) else 0
    # The estimate above sums parts, which overcounts their join a little: offer what
    # was left out once more, measuring the joined text exactly (a few tries at most).
    tries = 0
    room = max_tokens - counter.text(_text(items, picked, labels, more, hidden))
    for key, _ in _PASSES:
        for i in _order(key, len(items[key])):
            if i in picked[key] or items[key][i] in seen or tries >= FILL_TRIES:
                continue
            if counter.text(items[key][i]) > room:
                continue  # cannot fit, whatever the join saves
            tries += 1
            picked[key].add(i)
            size = counter.text(_text(items, picked, labels, more, hidden))
            if size <= max_tokens:
                seen.add(items[key][i])
                room = max_tokens - size
            else:
                picked[key].discard(i)
    text = _text(items, picked, labels, more, hidden)
    while text and counter.text(text) > max_tokens:
        # Counts of parts can undercount their join by a token here and there.
        key = next(k for k in reversed(SECTIONS) if picked[k])
        picked[key].discard(max(picked[key]))
        text = _text(items, picked, labels, more, hidden)
    return text


def _text(
    items: Mapping[str, list[str]],
    picked: Mapping[str, set[int]],
    labels: Mapping[str, str],
    more: Mapping[str, tuple[str, str]],
    hidden: Mapping[str, int],
) -> str:
    """The body showing the ``picked`` items; a section in ``more`` that shows some
    but not all of its items ends by saying how many calls it leaves out."""
    chosen = {key: [items[key][i] for i in sorted(picked[key])] for key in SECTIONS}
    for key, forms in more.items():
        if not chosen[key]:
            continue  # no line, so no claim to be the whole
        count = hidden.get(key, 0)
        count += sum(
            _weight(key, items[key][i]) for i in range(len(items[key])) if i not in picked[key]
        )
        if count:
            chosen[key].append(forms[count > 1].format(count))
    return _join(chosen, labels)


def _weight(key: str, item: str) -> int:
    """How many calls an item stands for: ``n`` for a tool ``name ×n``, else 1."""
    times = item.rpartition(" ×")[2] if key == "tools" else ""
    return int(times) if times.isdigit() else 1


def _order(key: str, count: int) -> list[int]:
    """In which order a section's items are offered (they are shown in their own order
    whatever it is): requests the first one (the task) and then newest first, as later
    turns depend most on the latest; tools the newest first, as the calls that changed
    things (a booking, an edit) tend to come after the look-ups; the rest as they
    came."""
    if key == "tools":
        return list(range(count - 1, -1, -1))
    if key != "requests" or count < 2:
        return list(range(count))
    return [0, *range(count - 1, 0, -1)]


def _join(chosen: Mapping[str, list[str]], labels: Mapping[str, str]) -> str:
    lines = []
    for key in SECTIONS:
        if not chosen[key]:
            continue
        if key in _INLINE:
            lines.append(f"{labels[key]} {'; '.join(chosen[key])}")
        else:
            lines.append(labels[key])
            lines += [f"- {item}" for item in chosen[key]]
    return "\n".join(lines)
