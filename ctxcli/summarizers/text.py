"""Text utilities the summarizers share: a message's text, sentences, shortening,
the language of a conversation.

Sentences split on ``.!?`` followed by a space and on the CJK enders ``。！？``
(no space follows them in Chinese). A list, one item a line ("1.", "2)", "3、",
"(4)", "①", "一、", "a)", or a bullet "-", "*", "•", "·", "–", "+") or numbered
within a line ("1. One-way 2. Economy", counted up from 1), is read item by item:
its markers are no sentence ends, so "2." alone is never taken for one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

REQUEST_CHARS = 160
#: The marks that end a sentence, Latin and CJK (see :func:`sentences`).
SENTENCE_ENDERS = ".!?。！？"
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


#: Code in Markdown, which says nothing of the language a text is written in: a fenced
#: block (to the text's end when it is not closed) and a span in backticks.
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)


def language(texts: Iterable[str], sample: int = 1000, default: str = "en") -> str:
    """``"zh"`` when CJK characters are at least a third of the letters in the first
    ``sample`` characters of ``texts``, their code left out (:data:`_CODE`: a Chinese
    question about a Ruby snippet is Chinese), ``default`` when they hold no letter,
    else ``"en"``."""
    text = ""
    for item in texts:
        if "`" in item:
            item = _CODE.sub("", item[: 8 * sample])
        text += item[: sample - len(text)]
        if len(text) >= sample:
            break
    cjk = len(_CJK.findall(text))
    if not cjk:
        return "en" if _LETTER.search(text) else default
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
            if part:  # its whitespace collapsed: str.split splits where \s matches
                out += [s.strip() for s in _split(" ".join(part.split())) if s.strip()]
    return out


def _split(text: str) -> list[str]:
    """``text`` split at :data:`_SENTENCE_END`; with no sentence ender in it (most list
    items, short lines) as it is, without running the pattern at every position."""
    return _SENTENCE_END.split(text) if any(map(text.__contains__, SENTENCE_ENDERS)) else [text]


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
        return flat if len(flat) <= limit else _first_and_question(blocks, limit)
    cjk = language([flat]) == "zh"
    lead, items, tail = _list_parts(blocks, first_item)
    whole = _join_items(lead, items, tail, cjk=cjk)
    if len(whole) <= limit:
        return whole
    tail = next((s for s in sentences(tail) if s.endswith(("?", "？"))), "")
    return _fair_list(lead, items, tail, limit, cjk=cjk)


def _list_parts(blocks: Sequence[tuple[bool, str]], first_item: int) -> tuple[str, list[str], str]:
    """What stands before the list that starts at block ``first_item``, its items
    (without their closing punctuation) and what follows them."""
    lead = " ".join(part for _, part in blocks[:first_item])
    items = [part.rstrip(_ITEM_END) or part for is_item, part in blocks if is_item]
    tail = " ".join(part for is_item, part in blocks[first_item:] if not is_item)
    return lead, items, tail


def _first_and_question(blocks: Sequence[tuple[bool, str]], limit: int) -> str:
    """The first sentence of ``blocks`` and the first question after it, within
    ``limit`` characters."""
    parts = [s for is_item, part in blocks for s in ([part] if is_item else sentences(part))]
    picked = parts[:1]
    question = next((s for s in parts[1:] if s.endswith(("?", "？"))), None)
    if question:
        picked.append(question)
    return shorten(" ".join(picked), limit)


def _fair_list(lead: str, items: Sequence[str], tail: str, limit: int, *, cjk: bool) -> str:
    """``lead: item; item. tail`` within ``limit`` characters, each piece a fair share
    (:func:`_fair_cuts`), the last items giving way to "…" when there are too many for
    :data:`ITEM_MIN_CHARS` each."""
    count = len(items)
    while True:
        shown = list(items) if count == len(items) else [*items[:count], "…"]
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


#: Words that carry no request: greetings, thanks, assent and filler. A sentence of
#: these alone (and :data:`_STOP_WORDS`) is no request ("Hi! Can you help me with
#: this?", "Thanks! I'll definitely be in touch.").
FILLER_WORDS = frozenset(
    "hi hello hey bonjour hola greetings dear thanks thank thankyou you so much very lot "
    "great ok okay sure yes yeah yep no nope perfect bye goodbye please that's thats that "
    "all have nice good day "
    "i i'm im i'll ill definitely be in touch appreciate it can could would will help me "
    "with this awesome got sounds sound alright cool morning afternoon evening there for "
    "your assistance the wonderful again need like do fine welcome cheers excellent "
    "understood right oh ah um well just wanted wondering if you're hoping assist sir "
    "madam is was everything much appreciated looking forward hear soon today again "
    # a goodbye's promise: "Thanks, you too!", "I'll get back to you.", "Take care!"
    "too talk reach out get back once i've take care far as well later understand see "
    "makes sense patience understanding works".split()
)
_STOP_WORDS = frozenset("a an and or of to the in on at for by is are it this that".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z']*|\d+|[\u3400-\u9fff]")
_CJK_FILLER = re.compile(
    r"^(?:你好|您好|谢谢你|谢谢您|谢谢|好的|嗯+|没问题|再见|不客气|感谢|非常感谢|麻烦了|辛苦了"
    r"|好|行|对|是的|可以|[，。！？!?,.\s~～、])+$"
)


#: What parts the clauses of a Chinese sentence.
_CJK_CLAUSE = re.compile(r"[，,；;。！!？?~～、\s]+")
#: A Chinese clause that closes a chat and asks nothing: what the user says they will
#: do on their own, "I" its subject ("那我先下单", "我考虑一下"; not "好的，下单吧", a
#: go-ahead the assistant waits for), a promise to come back ("后续有问题再联系你").
#: The sample's "那我先下单，后续有问题再联系你。" was its one request at 375 tokens,
#: where "物流显示已签收但我没收到货" went.
_CJK_SIGN_OFF = re.compile(
    r"^(?:那|那么|好|嗯)?(?:我|我们)(?:先|再|就)?(?:去)?(?:下单|看看|想想|考虑一下|考虑考虑|试试)"
    r"(?:吧|了|一下)?$"
    r"|^(?:后续|之后|回头|以后|稍后)?(?:如果)?(?:还)?(?:有问题|有疑问|有需要|有事)?(?:的话)?"
    r"(?:我|我们)?(?:再|会)(?:来)?(?:联系|找|咨询|问)(?:你|您)(?:们)?(?:吧|了)?$"
)


#: A greeting that opens a sentence of content ("Hi, I want to ...", "Hi there, I
#: noticed ...", "Good morning! I ...", "你好，我想...").
_GREETING_LEAD = re.compile(
    r"^(?:你好|您好|(?:hi|hello|hey|bonjour|hola|greetings|good (?:morning|afternoon|evening))"
    r"(?: there| again| team)?\b)[，,!！.\s]+",
    re.IGNORECASE,
)


def own_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that carry something, each once: no filler sentence
    (:func:`is_filler`), no greeting before one, no repeat (pasted code's ``return
    x*2`` twenty-five times is one)."""
    out: dict[str, None] = {}  # in order, each once
    for sentence in sentences(text):
        if not is_filler(sentence):
            out.setdefault(_GREETING_LEAD.sub("", sentence) or sentence)
    return list(out)


#: A user's promise to come back with what was asked for ("Alright, I'll check my
#: emails and get back to you.", "I'll make sure to find it first.", "I'm still
#: searching for it."): it opens so, and then says only :data:`_DEFERRAL_WORDS`.
_DEFERRAL = re.compile(
    r"^(?:(?:alright|okay|ok|got it|great|sure|thanks|thank you|well|in that case|i see)"
    r"[,.!]*\s+)*(?:i['’]ll|i will|let me|i['’]m still|i am still)\s+(?:try to |make "
    r"sure to |do that and |go )?(?:find|look|check|search|gather|get|reach out|dig|"
    r"locate|let you know|have|work on|come back)",
    re.IGNORECASE,
)
#: Thanks for the way ("Thank you for guiding me through this process."): it opens so,
#: and then says only :data:`_WAY_WORDS` (no "please provide my reservation details").
_THANKS_FOR = re.compile(r"^(?:thanks|thank you)(?: so much| very much)? for\b", re.IGNORECASE)
_WAY_WORDS = frozenset(
    "guiding through process explaining clarifying checking letting detailed update "
    "walking information details explanation".split()
)
_DEFERRAL_WORDS = frozenset(
    "try find them look check search searching gather dig locate make first my email "
    "emails inbox records account details information those ready next time when as "
    "possible shortly let know provide contact customer service necessary meanwhile "
    "then do user id ids reservation number it still back come getting need further help "
    "anything else more work".split()
)


def is_filler(sentence: str) -> bool:
    """True when ``sentence`` is a greeting, thanks or filler alone (see
    :data:`FILLER_WORDS`), a promise to come back with what was asked for and no more
    (:data:`_DEFERRAL`) or thanks for the way (:data:`_THANKS_FOR`), in English or
    Chinese (each clause filler or a sign-off: :data:`_CJK_SIGN_OFF`)."""
    if _CJK.search(sentence):
        clauses = filter(None, _CJK_CLAUSE.split(sentence.strip()))
        return all(_CJK_FILLER.match(c) or _CJK_SIGN_OFF.match(c) for c in clauses)
    words = _words(sentence)
    if all(w in FILLER_WORDS or w in _STOP_WORDS for w in words):
        return True
    lead = sentence.strip()
    if _DEFERRAL.match(lead):
        own = _DEFERRAL_WORDS
    elif _THANKS_FOR.match(lead):
        own = _WAY_WORDS
    else:
        return False
    return all(w in FILLER_WORDS or w in _STOP_WORDS or w in own for w in words)


def content_words(sentence: str) -> frozenset[str]:
    """The words of ``sentence`` that say something, lowercased: none of
    :data:`FILLER_WORDS` and stop words, none shorter than three characters (CJK
    characters each count as a word)."""
    return frozenset(
        word
        for word in _words(sentence)
        if (len(word) >= 3 or _CJK.match(word))
        and word not in FILLER_WORDS
        and word not in _STOP_WORDS
    )


def content(sentence: str) -> int:
    """How much ``sentence`` says: its words that are not filler, a word holding a
    digit counting thrice (an id, an amount, a date)."""
    score = 0
    for word in _words(sentence):
        if word in FILLER_WORDS or word in _STOP_WORDS:
            continue
        score += 3 if word[:1].isdigit() else 1
    return score


def _words(sentence: str) -> list[str]:
    """The words of ``sentence`` (:data:`_WORD`), lowercased, a curly apostrophe read
    as a straight one (``I’ll`` is ``i'll``)."""
    return [word.lower() for word in _WORD.findall(sentence.replace("\u2019", "'"))]


def by_content(text: str, fits: Callable[[str], bool]) -> str:
    """``text`` without its filler sentences, and while it does not ``fits``, without
    its sentences of least :func:`content` too (those kept stay in their order,
    :func:`joined`). What ``fits`` a smaller bound is kept in a larger one: sentences
    go in one fixed order. ``""`` when no sentence is left or even the one of most
    content does not fit (cut to fit then, ending in "…", if it can)."""
    kept = own_sentences(text)
    if not kept:
        return ""
    whole = joined(kept)
    if fits(whole):
        return whole
    ranked = sorted(range(len(kept)), key=lambda i: (-content(kept[i]), i))
    chosen: list[int] = []
    for i in ranked:
        trial = sorted([*chosen, i])
        if not fits(joined([kept[j] for j in trial])):
            break
        chosen = trial
    if chosen:
        return joined([kept[j] for j in chosen])
    first = kept[ranked[0]]
    for size in range(len(first) - 1, 8, -max(1, len(first) // 8)):
        if fits(shorten(first, size)):
            return shorten(first, size)
    return ""


_ENDED = (".", "!", "?", "。", "！", "？", "…", ";", "；", ":", "：")


def joined(parts: Sequence[str]) -> str:
    """Sentences or list items as one text: after a sentence end a space (none in
    Chinese), else ``"; "`` (``"；"``), so list items stay apart."""
    out = ""
    for part in parts:
        if out:
            cjk = bool(_CJK.search(out[-1:] + part[:1]))
            if out.endswith(_ENDED):
                out += "" if cjk else " "
            else:
                out += "；" if cjk else "; "
        out += part
    return out


def most_that_fit(count: int, fits: Callable[[int], bool]) -> int:
    """The largest ``k`` of ``0..count`` for which ``fits(k)`` holds (``fits`` holds
    for every ``k`` below one it holds for; ``0`` is taken to fit), by bisection: the
    longest head of a text within a bound, cut at one of ``count`` places."""
    low, high = 0, count
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
