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
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli.memo import TextMemo
from ctxcli.model import tool_names
from ctxcli.stages.placeholder import looks_like as _is_placeholder
from ctxcli.summarizers.facts import (
    _DIGIT,
    _SHAPE_DIGITS,
    _TOOL_USE_ERROR,
    FACT_CHARS,
    FACT_PATTERNS,
    FACTS_PER_MESSAGE,
    NOTE_CHARS,
    _argument_facts,
    _calls,
    _structured_facts,
    error_lines,
    facts,
    json_facts,
)
from ctxcli.summarizers.text import (
    REQUEST_CHARS,
    language,
    message_text,
    sentences,
    short_request,
    shorten,
)
from ctxcli.tokens import TokenCounter

#: Re-exported: other modules import these from here.
__all__ = [
    "EXTRACTIVE",
    "FACT_CHARS",
    "FACT_PATTERNS",
    "LABELS",
    "NOTE_CHARS",
    "REQUEST_CHARS",
    "SECTIONS",
    "Extractive",
    "error_lines",
    "facts",
    "json_facts",
    "language",
    "message_text",
    "parse_summary",
    "sentences",
    "short_request",
    "shorten",
]

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

NOTE_MIN_CHARS = 20
FILL_TRIES = 8


def _extract_one(text: str, role: str) -> tuple[tuple[str, ...], ...]:
    """What one message gives each section, in :data:`SECTIONS` order. A placeholder
    (a tool result ctxcli already replaced) gives nothing: its preview is a fragment
    and its id no fact."""
    if _is_placeholder(text):
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
    """The default summarizer (see the module docstring). Stateless and thread-safe;
    :data:`EXTRACTIVE` is the one the others use."""

    concurrency = 1
    offline = True
    stats = None

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


#: The extractive summarizer, shared (the summary stage knows it by identity).
EXTRACTIVE = Extractive()


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
