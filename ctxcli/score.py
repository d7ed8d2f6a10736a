"""Fact retention: how much of what a conversation said survives its compression.

A **fact** is a short string taken from the original conversation's non-system
messages (their content text, and the name and arguments of each tool call); it is
**kept** when it occurs, as a substring, anywhere in the compressed conversation's
text (every message's content and tool calls, summaries and placeholders included),
both texts with runs of whitespace read as one space and JSON escapes of non-ASCII
(``\\u4e2d``) decoded. A fact is counted once per conversation (a set), and a fact
the original's system messages already hold is not counted: those are never changed,
so it would be kept whatever the compressor did. The kinds (one fact may be of
several; the headline figure counts each distinct string once):

- ``ids`` (identifiers and numbers): every word of ASCII letters, digits, ``_`` and
  ``-`` matching ``[A-Za-z0-9][A-Za-z0-9_-]{3,}`` with a digit in it (``HAT123``,
  ``mia_li_3668``, ``2024-05-20``, ``50-100``; trailing ``_``/``-`` dropped), and every
  number of three or more digits that stands alone (not touching a letter, digit,
  ``_`` or ``-``, nor after ``.`` or ``,``; ``480``, ``1,250.00``, the ``277`` of
  ``277号``). A word may hold a number (``HAT123``): the number is not a fact apart.
- ``dates``: ISO dates (``2024-05-20``), ``2024/05/20`` and ``05/20/2024``, English
  month-name dates as month and day (``May 20`` of "May 20th, 2024", ``20 May``), and
  CJK dates (``2024年6月18日``, ``6月18日``; a bare ``18号`` is not one).
- ``amounts``: a number after a currency symbol (``$480``, ``€20.50``, ``¥300``) or
  before or after a currency code (``USD 480``, ``480 USD``; USD, EUR, GBP, CNY, RMB,
  JPY, CAD, AUD), before a currency word (``50 dollars``, ``euros``, ``pounds``,
  ``yuan``) or a CJK currency (``50元``, ``30块``, ``100美元``); a range is one fact,
  whole (``$20-$30``, ``50-100元``).
- ``paths``: a token of ASCII letters, digits and ``_.~@+-`` with a ``/`` in it, not
  part of a URL or a closing tag (``</b>``), that has a letter and either ends in a
  file name with an extension (``src/app.py``, ``docs/a/index.html``), starts with
  ``/``, ``./``, ``../`` or ``~/`` and has two or more parts (``/testbed/src``,
  ``./src``, ``~/.claude``), or has three or more parts (``src/ctxcli/stages``);
  ``and/or``, ``km/h``, ``05/20/2024``, ``/tmp`` and a ``/command`` are not paths.
- ``errors`` (error lines): a line of a tool or function result that names an error
  (:data:`ERROR_LINE`: an ``...Error`` or ``...Exception`` name, ``Traceback``,
  ``FAILED``, ``error:``, ``fatal:``, ``panic:``, ``command not found``, ``No such
  file or directory``, ``Permission denied``, Claude Code's ``<tool_use_error>``), or a
  line of a user message (where some agents log observations, and where a user pastes
  a traceback) that opens with one (:data:`ERROR_OPENS`), unless it is a line of code
  (:data:`CODE_LINE`: a numbered file view's line, ``raise``, ``except``, ``class``,
  ``def``, ``import`` ...); the fact is the line with its whitespace runs as one space,
  stripped, its ``<tool_use_error>`` tags removed, cut to its first
  :data:`ERROR_CHARS` characters.

The error-line rule is this module's own (modelled on the extractive summarizer's), so
that the measure does not move when the summarizer changes.

**Budget use** is tokens after / the budget, for the conversations that were over the
budget before (``None`` for the others, and with no budget). Tokens are
:attr:`ctxcli.model.Conversation.tokens`, as ``compress`` and ``count`` count them.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxcli import jsonio
from ctxcli.model import Conversation, called_functions, content_text

#: The kinds of facts, in the order the report gives them.
KINDS = ("ids", "dates", "amounts", "paths", "errors")
#: How the table heads each kind.
KIND_LABELS = {
    "ids": "ids & numbers",
    "dates": "dates",
    "amounts": "amounts",
    "paths": "paths",
    "errors": "error lines",
}
#: An error line counts by this many characters from its start (after stripping).
ERROR_CHARS = 120
#: Roles whose lines may be error lines (see the module docstring).
OBSERVATION_ROLES = frozenset({"tool", "function", "user"})

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{3,}")
_DIGIT = re.compile(r"\d")
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.,-])(?:\d{1,3}(?:,\d{3})+|\d{3,})(?:\.\d+)?(?![A-Za-z0-9_-])"
)
_MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DATE = re.compile(
    r"(?<![0-9])(?:\d{4}-\d{2}-\d{2}|\d{4}/\d{1,2}/\d{1,2}|\d{1,2}/\d{1,2}/\d{4})(?![0-9])"
    rf"|\b{_MONTHS}\.? \d{{1,2}}(?=(?:st|nd|rd|th)?\b)"
    rf"|(?<![0-9])\d{{1,2}}(?:st|nd|rd|th)? {_MONTHS}\b"
    r"|\d{4} ?年 ?\d{1,2} ?月(?: ?\d{1,2} ?[日号])?|(?<![0-9])\d{1,2} ?月 ?\d{1,2} ?[日号]"
)
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
_SYMBOL = r"[$€£¥￥]"
_RANGE = r" ?(?:-|–|~|～|至|到) ?"
_CODES = r"(?:USD|EUR|GBP|CNY|RMB|JPY|CAD|AUD)"
_AMOUNT = re.compile(
    rf"{_SYMBOL} ?{_NUM}(?:{_RANGE}{_SYMBOL}? ?{_NUM})?"
    rf"|\b{_CODES} ?{_NUM}(?:{_RANGE}{_NUM})?"
    rf"|(?<![0-9.,]){_NUM}(?:{_RANGE}{_NUM})? ?"
    rf"(?:{_CODES}\b|(?:dollars?|euros?|pounds?|yuan)\b|美元|欧元|英镑|日元|港币|元|块)"
)
_PATH_TOKEN = re.compile(r"[A-Za-z0-9_.~@+-]*/[A-Za-z0-9_.~@+/-]*")
_FILE_NAME = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*\.[A-Za-z][A-Za-z0-9]{0,7}")
_LETTER = re.compile(r"[A-Za-z]")
#: A line that names an error (see the module docstring).
ERROR_LINE = re.compile(
    r"\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\b(?:error|fatal|panic):"
    r"|command not found|No such file or directory|Permission denied|<tool_use_error>"
)
#: How an error line of a user message opens: with the error, after an optional
#: ``program: `` (prose that merely names an error, "- **Error Handling**: ...", is not one).
ERROR_OPENS = re.compile(
    r"\s*(?:[\w./-]+: )?(?:\w*(?:Error|Exception)\b|Traceback\b|FAILED\b|(?:error|fatal|panic):)"
    r"|.*(?:command not found|No such file or directory|Permission denied)"
)
#: A line of code shown by a tool that names an error type without reporting one.
CODE_LINE = re.compile(
    r"^\s*\d+[:|→]"
    r"|^\s*(?:[\w./-]*:\d+[:|-]?\s*)?[+-]?\s*"
    r"(?:raise|raises|except|class|def|import|from|catch|throw|throws|elif)\b",
    re.IGNORECASE,
)
_TOOL_USE_ERROR = re.compile(r"</?tool_use_error>")
_SPACE = re.compile(r"\s+")

Facts = dict[str, frozenset[str]]


def _ids(text: str) -> set[str]:
    found = set()
    for match in _WORD.finditer(text):
        word = match.group().rstrip("_-")
        if len(word) >= 4 and _DIGIT.search(word):
            found.add(word)
    found.update(_NUMBER.findall(text))
    return found


def _paths(text: str) -> set[str]:
    found = set()
    for match in _PATH_TOKEN.finditer(text):
        token = match.group().rstrip(".-")
        if text[max(0, match.start() - 1) : match.start()] in (":", "<") or "//" in token:
            continue  # a URL's, or a closing tag
        parts = [p for p in token.split("/") if p]
        if not parts or not _LETTER.search(token):
            continue
        rooted = token.startswith(("/", "./", "../", "~/")) and len(parts) >= 2
        if rooted or len(parts) >= 3 or _FILE_NAME.fullmatch(parts[-1]):
            found.add(token.rstrip("/"))
    return found


def _errors(text: str, *, opening: bool) -> set[str]:
    """Error lines of ``text``; with ``opening`` only lines that open with the error."""
    found = set()
    named = ERROR_OPENS.match if opening else ERROR_LINE.search
    for line in text.splitlines():
        if named(line) and not CODE_LINE.match(line):
            fact = _SPACE.sub(" ", _TOOL_USE_ERROR.sub("", line)).strip()[:ERROR_CHARS]
            if fact:
                found.add(fact.strip())
    return found


@functools.lru_cache(maxsize=4096)
def facts_of(text: str, role: str = "user") -> Facts:
    """The facts of one message's text by kind (see the module docstring); error lines
    of a tool or function result, and of a user message those that open with the error.
    Memoised: texts repeat across a file's conversations (and in ``compress``)."""
    errors: frozenset[str] = frozenset()
    if role in OBSERVATION_ROLES:
        errors = frozenset(_errors(text, opening=role == "user"))
    return {
        "ids": frozenset(_ids(text)),
        "dates": frozenset(m.group() for m in _DATE.finditer(text)),
        "amounts": frozenset(_SPACE.sub(" ", m.group()) for m in _AMOUNT.finditer(text)),
        "paths": frozenset(_paths(text)) if "/" in text else frozenset(),
        "errors": errors,
    }


def _decoded(text: str) -> str:
    """``text`` with JSON escapes of non-ASCII decoded, when it is JSON that has them."""
    if "\\u" not in text or text.lstrip()[:1] not in ("{", "[", '"'):
        return text
    return jsonio.compact(text)


def message_text(data: Mapping[str, Any]) -> str:
    """The text of one neutral message (:mod:`ctxcli.model`) the measure reads: its
    content's text, then each tool call's (and a legacy ``function_call``'s) name and
    arguments, one a line, JSON escapes decoded."""
    parts = [_decoded(content_text(data.get("content")))]
    for function in called_functions(data):
        parts.append(str(function.get("name") or ""))
        parts.append(_decoded(str(function.get("arguments") or "")))
    return "\n".join(p for p in parts if p)


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text)


def conversation_facts(conversation: Conversation) -> Facts:
    """The facts of ``conversation`` by kind: those of its non-system messages, less
    those its system messages hold (see the module docstring)."""
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    system = []
    for message in conversation.messages:
        text = message_text(message.data)
        if message.is_system:
            system.append(text)
            continue
        for kind, values in facts_of(text, message.role).items():
            found[kind].update(values)
    held = _flat("\n".join(system))
    return {kind: frozenset(f for f in values if f not in held) for kind, values in found.items()}


def conversation_text(conversation: Conversation) -> str:
    """Every message's text (:func:`message_text`), whitespace runs as one space: where
    facts are looked up."""
    return _flat("\n".join(message_text(m.data) for m in conversation.messages))


@dataclass(frozen=True)
class ConversationScore:
    """One conversation: where it is (``line``, ``record``, as :mod:`ctxcli.count`
    names them) and its ``id``; ``tokens`` before and after; the ``budget`` (tokens,
    ``None`` for none); ``kept`` and ``total`` facts by kind and under ``"all"`` (each
    distinct fact once); the facts ``lost`` by kind, sorted."""

    id: str | None
    line: int | None
    record: int | None
    tokens: tuple[int, int]
    budget: int | None
    kept: dict[str, int]
    total: dict[str, int]
    lost: dict[str, list[str]]

    @property
    def over_before(self) -> bool:
        """True when the original did not fit the budget."""
        return self.budget is not None and self.tokens[0] > self.budget

    @property
    def budget_use(self) -> float | None:
        """Tokens after / budget, for a conversation over budget before; else ``None``."""
        return self.tokens[1] / self.budget if self.over_before and self.budget else None

    @property
    def retention(self) -> float | None:
        """Facts kept / facts, ``None`` for a conversation without facts."""
        return self.kept["all"] / self.total["all"] if self.total["all"] else None


def score(
    before: Conversation,
    after: Conversation,
    *,
    budget: int | None = None,
    line: int | None = None,
    record: int | None = None,
) -> ConversationScore:
    """How many of ``before``'s facts ``after`` keeps (see the module docstring)."""
    facts = conversation_facts(before)
    text = conversation_text(after)
    everything = frozenset().union(*facts.values())
    kept_facts = {f for f in everything if f in text}
    kept = {kind: len(values & kept_facts) for kind, values in facts.items()}
    total = {kind: len(values) for kind, values in facts.items()}
    kept["all"], total["all"] = len(kept_facts), len(everything)
    lost = {kind: sorted(values - kept_facts) for kind, values in facts.items()}
    return ConversationScore(
        before.id, line, record, (before.tokens, after.tokens), budget, kept, total, lost
    )


@dataclass
class FileScore:
    """A file's (or any set of conversations') totals: ``conversations``, tokens
    before and after, how many were over budget before and after, facts ``kept`` and
    ``total`` by kind and ``"all"`` (summed over the conversations: the headline
    ratio weighs every fact alike), each conversation's retention (for the mean) and
    budget use (for the median), and the :class:`ConversationScore` of each in
    ``items`` when asked for."""

    path: str = ""
    compressed: str = ""
    budget: int | None = None
    conversations: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    over_before: int = 0
    over_after: int = 0
    kept: Counter[str] = field(default_factory=Counter)
    total: Counter[str] = field(default_factory=Counter)
    retentions: list[float] = field(default_factory=list)
    budget_uses: list[float] = field(default_factory=list)
    items: list[ConversationScore] = field(default_factory=list)

    def add(self, item: ConversationScore, *, keep: bool = False) -> None:
        """Count one conversation (keep it in ``items`` with ``keep``)."""
        self.budget = item.budget
        self.conversations += 1
        self.tokens_before += item.tokens[0]
        self.tokens_after += item.tokens[1]
        self.over_before += item.over_before
        self.over_after += item.budget is not None and item.tokens[1] > item.budget
        self.kept.update(item.kept)
        self.total.update(item.total)
        if item.retention is not None:
            self.retentions.append(item.retention)
        if item.budget_use is not None:
            self.budget_uses.append(item.budget_use)
        if keep:
            self.items.append(item)

    def merge(self, other: FileScore) -> None:
        """Add the counts of ``other``, a later part of the same file."""
        self.budget = other.budget if other.conversations else self.budget
        for name in ("conversations", "tokens_before", "tokens_after"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.over_before += other.over_before
        self.over_after += other.over_after
        self.kept.update(other.kept)
        self.total.update(other.total)
        self.retentions += other.retentions
        self.budget_uses += other.budget_uses
        self.items += other.items

    def ratio(self, kind: str = "all") -> float | None:
        """Facts of ``kind`` kept / facts of ``kind``; ``None`` when there are none."""
        return self.kept[kind] / self.total[kind] if self.total[kind] else None

    @property
    def budget_use(self) -> float | None:
        """The median budget use of the conversations over budget before."""
        return statistics.median(self.budget_uses) if self.budget_uses else None

    def to_json(self) -> dict[str, Any]:
        """The figure as JSON (the stats file's ``score``, a file of ``ctxcli score``)."""
        return {
            "conversations": self.conversations,
            "budget": self.budget,
            "tokens": {"before": self.tokens_before, "after": self.tokens_after},
            "over_budget": {"before": self.over_before, "after": self.over_after},
            "budget_use": {
                "median": _round(self.budget_use),
                "mean": _round(statistics.fmean(self.budget_uses) if self.budget_uses else None),
                "conversations": len(self.budget_uses),
            },
            "facts": _facts_json(self.kept, self.total),
            "retention_mean": _round(
                statistics.fmean(self.retentions) if self.retentions else None
            ),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _facts_json(kept: Mapping[str, int], total: Mapping[str, int]) -> dict[str, Any]:
    return {
        kind: {
            "kept": kept.get(kind, 0),
            "total": total.get(kind, 0),
            "ratio": _round(kept.get(kind, 0) / total[kind] if total.get(kind) else None),
        }
        for kind in ("all", *KINDS)
    }


def item_json(item: ConversationScore) -> dict[str, Any]:
    """One conversation's score as JSON (``ctxcli score --per-conversation``)."""
    return {
        "id": item.id,
        "line": item.line,
        "record": item.record,
        "tokens": {"before": item.tokens[0], "after": item.tokens[1]},
        "over_budget_before": item.over_before,
        "budget_use": _round(item.budget_use),
        "facts": _facts_json(item.kept, item.total),
        "lost": item.lost,
    }


def render(scored: FileScore, fmt: str = "table", *, per_conversation: bool = False) -> str:
    """The report: ``json`` (the figure of :meth:`FileScore.to_json` with the two
    paths, and ``items``, one per conversation, with ``per_conversation``) or
    ``table`` (a row for the file; with ``per_conversation`` a row per conversation,
    where it is and its id, and a ``total`` row; each kind as ``ratio (kept/total)``,
    ``-`` for none)."""
    if fmt == "json":
        out: dict[str, Any] = {"original": scored.path, "compressed": scored.compressed}
        out.update(scored.to_json())
        if per_conversation:
            out["items"] = [item_json(item) for item in scored.items]
        return jsonio.dumps_indented(out).decode().rstrip("\n")
    header = ["file", "conversation", "id"] if per_conversation else ["file", "convs"]
    header += ["tokens before→after", "budget use", "facts kept"]
    header += [KIND_LABELS[kind] for kind in KINDS]
    body = [_row(scored.path, item) for item in scored.items] if per_conversation else []
    body.append(_file_row(scored, per_conversation=per_conversation))
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *body]]
    return "\n".join(lines)


def _cell(kept: int, total: int) -> str:
    return f"{kept / total:.2f} ({kept:,}/{total:,})" if total else "-"


def _use(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _row(path: str, item: ConversationScore) -> list[str]:
    place = f"record {item.record}" if item.record is not None else f"line {item.line or 1}"
    cells = [path, place, item.id or "", f"{item.tokens[0]:,}→{item.tokens[1]:,}"]
    cells.append(_use(item.budget_use))
    return cells + [_cell(item.kept[k], item.total[k]) for k in ("all", *KINDS)]


def _file_row(scored: FileScore, *, per_conversation: bool) -> list[str]:
    convs = f"{scored.conversations:,}"
    lead = [scored.path, convs]
    if per_conversation:
        lead = ["total", f"{convs} conversation{'' if scored.conversations == 1 else 's'}", ""]
    use = _use(scored.budget_use)
    if scored.budget_uses:
        use += f" (median of {len(scored.budget_uses):,} over budget)"
    cells = [*lead, f"{scored.tokens_before:,}→{scored.tokens_after:,}", use]
    return cells + [_cell(scored.kept[k], scored.total[k]) for k in ("all", *KINDS)]


def summary_line(scored: FileScore) -> str:
    """The figure in one line, for the end-of-run table of ``compress --score``."""
    kinds = ", ".join(f"{KIND_LABELS[k]} {scored.ratio(k):.2f}" for k in KINDS if scored.total[k])
    line = f"facts kept {_cell(scored.kept['all'], scored.total['all'])}"
    if kinds:
        line += f" ({kinds})"
    if scored.budget_uses:
        line += (
            f"; budget use {_use(scored.budget_use)} (median of "
            f"{len(scored.budget_uses):,} over budget before)"
        )
    return line
