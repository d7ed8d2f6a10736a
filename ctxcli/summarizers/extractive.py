"""The offline, deterministic summarizer: ranks what later turns depend on, and keeps
the longest prefix of that ranking the bound allows.

Each folded message gives **items** (:func:`_items`), each for one section:

- ``requests``: the task (the first user message, in its own words up to
  :data:`TASK_TOKENS`), then every later user request without its greetings, thanks
  and filler (:func:`ctxcli.summarizers.text.is_filler`), shortened by dropping its
  sentences of least content (:func:`ctxcli.summarizers.text.by_content`);
- ``instructions``: what the project instructions an agent put in a user message say
  (Codex's AGENTS.md, :func:`_instructions`): the harness's words, not a request;
- ``actions``: every tool call as ``name(identifying arguments) → outcome``
  (:mod:`ctxcli.summarizers.records`), identical calls once with a count (``×3``),
  calls alike but for one value as one (``get_reservation_details(LQ940Q | 2FBBAH)
  ×2 → ok``, :func:`_merged`);
- ``errors``: the error lines of observations (tool and function results, and user
  messages that carry an environment's output after an assistant's action, as
  SWE-agent logs them), each after its tool's name;
- ``facts``: what the user typed (:func:`ctxcli.summarizers.facts.facts`), the
  records of JSON results, each under its own object's label, and the paths, ids and
  dates of other output;
- ``notes``: assistant sentences that state a fact (a digit in them) or a limit (what
  cannot be done: :data:`_REFUSAL`).

The **ranking** (:func:`_rank`) is fixed by the messages alone (:data:`ORDER`): the
task; then the facts the user typed with a digit in them (but the labelled ones a
later call of this tier or the next shows; a bare one goes when such a call is taken
whole, so a call cut to fit does not lose it; first in their tier, as they cost a
few tokens each: :func:`_first_rank`), the error lines, the calls that changed state or failed (what
was acted on, and its arguments; the failed first); then the calls that tried to
change state and failed (a booking refused changed nothing: a cancellation made
before it says more), and after them the plan updates a later one superseded (a
to-do list's older states: the newest says where the run stands);
then the records of what the state-changing calls returned (the final state of what
changed) and of the look-ups of what the user named (:func:`_user_named`: what they
asked about), the amounts the assistant stated (:data:`_AMOUNT`: totals and prices it
told the user, each after the words that say what it is: :func:`_what_amount`; one
said with no such words is of the rest: ``$338`` alone tells nothing) and
the limits it stated (a note of what cannot be done, :data:`_REFUSAL`); then the
later requests that say more than a short question (the user's constraints and
decisions: "I don't want to fly before 11 AM EST", which tau-bench at 2000 tokens lost
to the flights its searches listed; "Can you also add one checked bag", which run 3-0
lost to its look-ups, so that the agent's claim to have added it went unchecked); then
the look-ups of what the user named, their outcome ``ok`` when it is a record said
before (:func:`_gist_unsaid`: a profile's gist of 80 tokens says less per token than
the final state; tau-bench at 1500 tokens keeps 3229 facts so, 2904 with the look-ups
first); then the other look-ups; then the rest
(other records and facts, the typed facts without a digit); then the
short later requests that hold no fact (:data:`ASKED_CHARS`); then the quantities the
assistant stated with one small number (:data:`_COUNT`: ``15 天``, which says less than
the question it answered) and the opaque ids of a tool's output (:data:`_OPAQUE_ID`:
UUIDs, API message ids); then the assistant's notes. Within a tier the newest come
first, but for the final state of what changed, where the messages whose items hold
the most words that hold a fact per character come first, each message's items together
(:func:`_by_density`: the most facts a bound can hold). An item already said (the same
text, or a fact inside an item ranked before it) is skipped, a bare fact goes when an
item taken after it says it (:func:`_costed`), and a record of an object is told
by the values no line before that named it gave (:func:`_unsaid`). The body
holds the longest prefix of that ranking that fits, so a larger bound never keeps less,
and neither does a subset of the same messages (an item's rank depends only on its
own message). The sections are written in :data:`SECTIONS` order, each item in the
order things happened; labels follow the user's language (Chinese when CJK
characters make up a third of the letters of the requests' opening words:
:meth:`Extractive.language_of`).
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli.memo import TextMemo
from ctxcli.model import result_ids
from ctxcli.placeholders import looks_like as _is_placeholder
from ctxcli.summarizers import records as rec
from ctxcli.summarizers.facts import (
    _DIGIT,
    _TOOL_USE_ERROR,
    FACT_CHARS,
    FACT_PATTERNS,
    FACTS_PER_MESSAGE,
    NOTE_CHARS,
    error_lines,
    facts,
    json_facts,
)
from ctxcli.summarizers.text import (
    REQUEST_CHARS,
    SENTENCE_ENDERS,
    by_content,
    content,
    content_words,
    is_filler,
    joined,
    language,
    message_text,
    most_that_fit,
    own_sentences,
    sentences,
    short_request,
    shorten,
)
from ctxcli.tokens import TokenCounter, call_function

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

SECTIONS = ("requests", "instructions", "actions", "errors", "facts", "notes")
LABELS = {
    "en": {
        "requests": "User requests:",
        "instructions": "Project instructions:",
        "actions": "Actions:",
        "errors": "Errors:",
        "facts": "Facts:",
        "notes": "Assistant notes:",
    },
    "zh": {
        "requests": "用户请求：",
        "instructions": "项目说明：",
        "actions": "操作：",
        "errors": "错误：",
        "facts": "关键信息：",
        "notes": "助手答复要点：",
    },
}
#: Labels of earlier versions, read back from a previous summary.
_OLD_LABELS = {"Tools used:": "actions", "使用的工具：": "actions"}
_LABEL_TO_SECTION = {
    **{label: key for labels in LABELS.values() for key, label in labels.items()},
    **_OLD_LABELS,
}
_INLINE = {"facts", "actions"}  # sections written on one line, items joined by "; "
#: What an older summary's cut tools line said it left out: no item of its own.
_MORE_ITEM = re.compile(r"^(?:… and (\d+) more calls?|……另有 (\d+) 次调用)$")

#: The task of an agent run is kept in its own words up to this many tokens.
TASK_TOKENS = 150
#: A later request is kept whole up to this many characters, else by content.
REQUEST_CONTENT_CHARS = 300
TASK_SENTENCE_CHARS = 240
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")
#: The shortest note (characters, a CJK character counting two): a shorter sentence
#: is a fragment ("Total: $5").
NOTE_MIN_CHARS = 20
#: The least room (tokens) the first item that does not fit is cut to.
MIN_CUT_TOKENS = 6
#: The fewest content words (:func:`ctxcli.summarizers.text.content_words`; a CJK
#: character is one) the head a request or note is cut to keeps, when it has no
#: number (:func:`_cut_says`).
CUT_MIN_WORDS = 3
NOTES_PER_MESSAGE = 3
ERRORS_PER_MESSAGE = 8
#: The tiers of the ranking (see the module docstring), and their order, best first
#: (:data:`ORDER`, not the numbers): the final state of what changed before the
#: look-ups that led to it, those of what the user named among them.
#: (:data:`REQUESTED`, the later requests, is numbered after the others: a tier
#: numbered after :data:`CHANGED` is read message by message, when the room reaches it.)
TASK, ACTED, TRIED, NAMED, LOOKUP, CHANGED, REST, ASKED, COUNTED, NOTES, REQUESTED = range(11)
ORDER = (TASK, ACTED, TRIED, CHANGED, REQUESTED, NAMED, LOOKUP, REST, ASKED, COUNTED, NOTES)
#: A later request that is a question (:data:`_QUESTION`) without a fact, this short
#: (characters; a CJK character counts thrice), is of :data:`ASKED`: the answer's
#: facts say more than the question.
ASKED_CHARS = 60
#: A length of time or size the assistant states with one small number (``15 天``,
#: ``24 hours``), no range: of :data:`COUNTED`, after the user's questions, which say
#: more than a duration whose thing the summary cannot name (``2 eggs`` names its own).
_COUNT = re.compile(
    r"\d{1,2}(?:\.\d+)? ?(?:天|年|个月|周|小时|分钟|秒|英寸"
    r"|(?i:days?|hours?|minutes?|seconds?|weeks?|months?|years?|inch(?:es)?))"
)
#: An amount the assistant states (``$255``): a total or a price it told the user.
_AMOUNT = re.compile(r"[$€£¥]\d")
#: Whether a text may hold an :data:`_AMOUNT` fact (facts are taken from the text).
_PRICED = re.compile(r"[$€£¥]").search
#: How an environment's output logged as a user message looks (SWE-agent).
_ENV_OUTPUT = re.compile(
    r"\(Current directory: |\(Open file: |bash-\$|^OBSERVATION:|Traceback \(most recent|"
    r"^\$ |exit (?:code|status) \d",
    re.MULTILINE,
)


#: What Claude Code wraps around a command the user ran, and its caveat before them.
_WRAPPER = re.compile(
    r"<(command-name|command-message|local-command-stdout|local-command-stderr)>.*?</\1>",
    re.DOTALL,
)
_CAVEAT = re.compile(r"\s*Caveat: The messages below were generated by the user")
#: What an agent puts in a user message before the user's own words: Codex's
#: AGENTS.md instructions and environment context, Claude Code's system reminders.
_INJECTED = re.compile(
    r"\s*(?:# AGENTS\.md instructions|<environment_context>|<user_instructions>"
    r"|<system-reminder>|<INSTRUCTIONS>"
    # Claude Code's mark of a turn the user stopped: no request of theirs.
    r"|\[Request interrupted by user(?: for tool use)?\]\s*\Z)"
)


@dataclass(frozen=True)
class Item:
    """One thing a summary may say: its ``section``, ``text``, ``tier`` (see
    :data:`TASK`), the ``position`` of its message (``-1``: a previous summary) and its
    ``order`` within that message."""

    section: str
    text: str
    tier: int
    position: int
    order: int
    #: Where it is shown among its message's items (the task's sentences are ranked
    #: by content but shown in their order).
    seq: int = 0

    def rank(self) -> tuple[int, int, int]:
        """Sort key: tier, newest first, then in the message's order."""
        return self.tier, -self.position, self.order


def parse_summary(body: str) -> dict[str, list[str]]:
    """Read the sections of a summary body this module wrote, in either language
    (older bodies' "Tools used:" line as actions)."""
    sections: dict[str, list[str]] = {key: [] for key in SECTIONS}
    current: str | None = None
    for line in body.splitlines():
        stripped = line.strip()
        label = next((lb for lb in _LABEL_TO_SECTION if stripped.startswith(lb)), None)
        if label:
            current = _LABEL_TO_SECTION[label]
            rest = stripped[len(label) :].strip()
            if rest and current in _INLINE:
                sections[current] += [i for i in rest.split("; ") if i and not _MORE_ITEM.match(i)]
        elif current and stripped.startswith("- "):
            sections[current].append(stripped[2:])
        elif stripped and current is None:
            sections["notes"].append(stripped)  # a summary from another tool: keep as a note
    return sections


def _kinds(
    messages: Sequence[Mapping[str, Any]], texts: Sequence[str], *, has_task: bool
) -> list[str]:
    """What each message (its text the same place of ``texts``) is: ``task`` (the first
    user message that is more than filler such as a greeting alone,
    :func:`ctxcli.summarizers.text.is_filler`; none when ``has_task``), ``user``,
    ``observation`` (a user message carrying an environment's output right after an
    assistant's action), ``assistant``,
    ``result`` (a tool or function result), ``output`` (one whose process says it
    exited with code 0: :func:`ctxcli.summarizers.records.exited_ok`; no line of it is
    an error), or ``other``."""
    kinds: list[str] = []
    previous = ""
    for message, text in zip(messages, texts):
        role = str(message.get("role"))
        kind = role if role in ("user", "assistant") else "other"
        if role in ("tool", "function"):
            kind = "output" if rec.exited_ok(text) else "result"
        elif role == "user" and previous == "assistant" and _ENV_OUTPUT.search(text[:4000]):
            kind = "observation"
        own = _unwrapped(text) if kind == "user" and not has_task else ""
        if own and not is_filler(own):  # "hi" alone asks nothing: the next says the task
            kind, has_task = "task", True
        kinds.append(kind)
        if role != "system":
            previous = role
    return kinds


#: The tools that hand a task to a sub-agent, whose result is its final answer: Claude
#: Code's ``Task``, named ``Agent`` in its logs since 2.1.63 (its sub-agents docs: "In
#: version 2.1.63, the Task tool was renamed to Agent").
_SUB_AGENT_TOOLS = frozenset({"Task", "Agent"})


def _reports(
    messages: Sequence[Mapping[str, Any]], kinds: list[str], names: Mapping[int, str]
) -> list[str]:
    """``kinds`` (:func:`_kinds`) with the result of a sub-agent's call
    (:data:`_SUB_AGENT_TOOLS`; ``names``: each result's call name, by position) that
    did not fail as ``report``: prose read as an answer is (:func:`_later_answer`: its
    notes and facts, ``Next.js: 15.5.2 (upgraded from documented v14)``), not as a
    look-up's output."""
    for i, name in names.items():
        if name in _SUB_AGENT_TOOLS and kinds[i] == "result" and not messages[i].get("is_error"):
            kinds[i] = "report"
    return kinds


def _unwrapped(text: str) -> str:
    """A user message's own words: without an agent's wrappers of a command it ran
    (Claude Code's ``<command-name>``, ``<local-command-stdout>``, its caveat), the
    arguments of a command kept; ``""`` for what an agent injects (:data:`_INJECTED`)."""
    if _CAVEAT.match(text) or _INJECTED.match(text):
        return ""
    return _WRAPPER.sub("", text).replace("<command-args>", "").replace("</command-args>", "")


#: The project instructions Codex CLI puts in a user message: their head
#: (``AGENTS.md instructions for /repo``) and what they say.
_INSTRUCTIONS = re.compile(
    r"\s*# (AGENTS\.md instructions for [^\n]+)\n(.*?)(?:</INSTRUCTIONS>|\Z)", re.DOTALL
)
#: HTML comments and tags of instructions (``<INSTRUCTIONS>``, ``<!-- … -->``).
_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z_]+>", re.DOTALL)
#: What a summary says of folded instructions is kept within this many characters.
INSTRUCTIONS_CHARS = 240


def _instructions(text: str) -> str:
    """What a summary that folds a user message of project instructions
    (:data:`_INSTRUCTIONS`) says of them: their head, then their sentences of most
    content within :data:`INSTRUCTIONS_CHARS` (``AGENTS.md instructions for /repo:
    ALWAYS prefer MCP graph tools over grep/glob …``); ``""`` for another message."""
    match = _INSTRUCTIONS.match(text)
    if match is None:
        return ""
    rules = _EXAMPLES.sub("", _MARKUP.sub("", match.group(2)))
    said = by_content(rules, lambda s: len(s) <= INSTRUCTIONS_CHARS)
    return f"{match.group(1)}: {said}" if said else match.group(1)


#: A section of instructions headed ``Examples`` (up to the next heading): how a tool is
#: called, which read as a rule ("Who calls it: `trace_path(function_name="OrderHandler",
#: …)`" of Codex's AGENTS.md, an example's made-up names).
_EXAMPLES = re.compile(r"^#+[ \t]*(?i:examples?)\b.*?(?=^#|\Z)", re.MULTILINE | re.DOTALL)


#: The section of Claude Code's compact summary (the first user message of a session
#: continued after ``/compact``) that says what the user asked: ``1. Primary Request
#: and Intent:`` up to the next numbered section.
_COMPACT_INTENT = re.compile(
    r"^[#* ]*1\. *\**Primary Request and Intent\**:?\**\s*(.*?)(?=^[#* ]*2\. |\Z)",
    re.MULTILINE | re.DOTALL,
)


#: A section of Claude Code's compact summary after the request, up to the next
#: numbered section: what the user said (``6. All User Messages:``), what is left to
#: do (``7. Pending Tasks:``), where the work stood (``8. Current Work:``) and what was
#: found (``5. Problem Solving:``, ``4. Errors and Fixes:``).
_COMPACT_SECTION = re.compile(
    r"^[#* ]*\d+\. *\**(All User Messages|Pending Tasks|Current Work|Problem Solving"
    r"|Errors and [Ff]ixes)\**:?\**\s*(.*?)(?=^[#* ]*\d+\. *\**[A-Z]|\Z)",
    re.MULTILINE | re.DOTALL,
)
#: An entry of such a list: ``1. "text"`` or ``- text``.
_COMPACT_ENTRY = re.compile(r'^\s*(?:\d+\.|[-*])\s+"?(.*?)"?\s*$', re.MULTILINE)


def _compact_sections(text: str) -> list[tuple[str, str]]:
    """``(title, body)`` of each :data:`_COMPACT_SECTION` of a compact summary, in
    order (the title's "fixes" as "Fixes"); ``[]`` for any other text."""
    if "Primary Request" not in text:
        return []
    return [
        (title.replace("fixes", "Fixes"), body) for title, body in _COMPACT_SECTION.findall(text)
    ]


def _compact_lists(text: str) -> tuple[list[str], list[str]]:
    """The user's messages and the pending tasks a compact summary lists
    (:func:`_compact_sections`), each entry as written; two empty lists for any other
    text."""
    found: dict[str, list[str]] = {"All User Messages": [], "Pending Tasks": []}
    for title, body in _compact_sections(text):
        if title in found:
            found[title] += [e for e in _COMPACT_ENTRY.findall(body) if e]
    return found["All User Messages"], found["Pending Tasks"]


def _task(text: str) -> list[tuple[str, str, int, int]]:
    """The task's sentences, no filler, of most :func:`content` first, within
    :data:`TASK_TOKENS` (guessed: 4 characters a token, a CJK character one), each
    with its place in the message; of a compact summary, those of the user's request
    it states (:data:`_COMPACT_INTENT`)."""
    intent = _COMPACT_INTENT.search(text) if "Primary Request" in text else None
    said = own_sentences(intent.group(1) if intent else _unwrapped(text))
    ranked = sorted(range(len(said)), key=lambda i: (-content(said[i]), i))
    out: list[tuple[str, str, int, int]] = []
    left = TASK_TOKENS
    for i in ranked:
        sentence = shorten(said[i], TASK_SENTENCE_CHARS)
        cost = len(_CJK_CHAR.findall(sentence)) + len(_CJK_CHAR.sub("", sentence)) // 4 + 1
        if cost > left:
            break
        left -= cost
        out.append(("requests", sentence, TASK, i))
    return out


def _eager_of(text: str, kind: str) -> tuple[tuple[str, str, int, int], ...]:
    """``(section, text, tier, seq)`` of what a message gives the first tiers: the
    task's sentences, the facts the user typed, what project instructions an agent
    put in a user message say (:func:`_instructions`), the error lines of an
    observation;
    ``seq`` its place among them when shown. A placeholder (a tool result ctxcli
    already replaced) says nothing."""
    if _is_placeholder(text) or not text.strip():
        return ()
    out: list[tuple[str, str, int, int]] = _task(text) if kind == "task" else []
    if kind == "task":  # what a compact summary says is left to do, with the acts
        pending = _compact_lists(text)[1]  # then: the steps after it may have done it
        out += [
            ("requests", f"Pending at the compaction: {t}", ACTED, 60 + i)
            for i, t in enumerate(pending)
        ]
    if kind in ("task", "user"):
        said = _facts(_unwrapped(text))
        out += [("facts", f, ACTED, 50 + i) for i, f in enumerate(said)]
        instructions = _instructions(text)
        if instructions:  # an agent's, not the user's: no request
            out.append(("instructions", instructions, ACTED, 0))
    elif kind in ("result", "observation"):  # not "output": its process succeeded
        found = error_lines(text, ERRORS_PER_MESSAGE)
        out += [("errors", line, ACTED, 50 + i) for i, line in enumerate(found)]
    return tuple(out)


def _lazy_of(text: str, kind: str) -> tuple[tuple[str, str, int, int], ...]:
    """``(section, text, tier, seq)`` of what a message gives the later tiers, read
    only when the room reaches them: a later request, the records or facts of a
    result, the facts and notes of the assistant (see the module docstring)."""
    if _is_placeholder(text) or not text.strip():
        return ()
    reader = _LATER.get(kind)
    out = reader(text) if reader else []
    return tuple((section, said, tier, 100 + i) for i, (section, said, tier) in enumerate(out))


def _later_compact(text: str) -> list[tuple[str, str, int]]:
    """The user's messages a compact summary lists (:func:`_compact_lists`), each as a
    later request is told (:func:`_later_request`): the corrections and decisions of
    the session it continues; then what it says was being worked on and how problems
    were solved (:func:`_compact_notes`)."""
    said = _compact_lists(text)[0][1:]  # the first is the task
    return [item for entry in said for item in _later_request(entry)] + _compact_notes(text)


def _compact_notes(text: str) -> list[tuple[str, str, int]]:
    """The notes of a compact summary (:func:`_compact_sections`): ``Current work: …``
    (the first sentences of where the session it continues stood, within
    :data:`NOTE_CHARS`, of :data:`REST`), then each entry of its Problem Solving and
    Errors and Fixes, in order (of :data:`NOTES`)."""
    out: list[tuple[str, str, int]] = []
    for title, body in _compact_sections(text):
        body = body.strip()
        if title == "Current Work":
            first = joined(sentences(body.partition("\n\n")[0])[:2])
            if first:
                out.insert(0, ("notes", shorten(f"Current work: {first}", NOTE_CHARS), REST))
        elif title in ("Problem Solving", "Errors and Fixes"):
            entries = _COMPACT_ENTRY.findall(body) or sentences(body)
            out += [
                ("notes", shorten(e, NOTE_CHARS), NOTES)
                for e in entries
                if len(e) >= NOTE_MIN_CHARS
            ]
    return out


def _later_request(text: str) -> list[tuple[str, str, int]]:
    request = by_content(_unwrapped(text), lambda s: len(s) <= REQUEST_CONTENT_CHARS)
    if not request:
        return []
    width = len(request) + 2 * len(_CJK_CHAR.findall(request))
    asked = width <= ASKED_CHARS and not _DIGIT.search(request) and _QUESTION.search(request)
    return [("requests", request, ASKED if asked else REQUESTED)]


#: A request that is a question: it ends with a question mark, or opens with a word
#: that asks (``What about Berlin``). An instruction (``Check the changelog of Z for
#: breaking changes``) is no question, and says what the answer's facts do not.
_QUESTION = re.compile(
    r"[?？]\s*$|^(?i:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|"
    r"did|can|could|will|would|should|may|might|have|has)\b"
)


def _later_result(text: str) -> list[tuple[str, str, int]]:
    """The records of a JSON result, else the facts of its text (at most
    :data:`FACTS_PER_MESSAGE`): the opaque ids among them (:data:`_OPAQUE_ID`) last and
    of :data:`COUNTED`, after the rest and the user's short questions."""
    value = rec.parse_json(text)
    if value is not None:
        return [("facts", r, REST) for r in rec.records(value, "result")]
    found = _facts(text, strict=True)
    opaque = [f for f in found if _OPAQUE_ID.fullmatch(f)]
    if opaque:
        found = [f for f in found if not _OPAQUE_ID.fullmatch(f)] + opaque
    return [
        ("facts", f, COUNTED if _OPAQUE_ID.fullmatch(f) else REST)
        for f in found[:FACTS_PER_MESSAGE]
    ]


#: An id a machine made that names nothing a reader knows: a UUID, an API's message or
#: tool-call id (``toolu_bdrk_01M6PW…``, ``msg_…``, ``call_…``). Found in a tool's output
#: (a Codex session's grep over fixture files listed ten), it says less than a path; one
#: the user typed, or a call passed, ranks with those.
_OPAQUE_ID = re.compile(
    r"(?i:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"|(?:toolu|msg|call|chatcmpl|resp|fc|rs|req|run|thread|asst)_(?:bdrk_|vrtx_)?[A-Za-z0-9]{16,}"
)


#: A fenced code block of Markdown, and a sentence that is code, JSON or a heading
#: (``"id": "x",``, ``if (n === 0) {``, ``## Design``, a line of code in backticks), a
#: lead-in to a list, or what the assistant says it is about to do: no statement of
#: the assistant; a sentence that opens with a name in backticks is one.
_FENCED = re.compile(r"^ *```.*?^ *```[^\n]*$", re.MULTILINE | re.DOTALL)
_NOT_PROSE = re.compile(
    r"^(?:[\"{}\[\]<#|]|//|``|`[^`]*(?:`\W*)?$)|[{}\[;,(]$"
    # a field and its value, not a sentence (``**Reservation ID**: GV1N64``, ``Departure:
    # 07:00 PM EST``)
    r"|^[*\s]*[A-Z][\w ]{0,25}\**:\**\s+[^.!?]*$"
    # a heading or a lead-in to a list (``**Corrected Phase 4.1 Proposal**:``)
    r"|[:：]\**$"
    # what the assistant is about to do or is doing, said before the outcome (``I'll
    # read lead_v2.txt``, ``I'm now examining lead_memor_v2.txt``)
    r"|^(?:I will|I'll|I am going to|I'm going to|Let me|Now,? let me|Now I will|Now I'll"
    r"|Next,? I)\b|^(?:Now,? )?I(?:'m| am|'ve been| have been)(?: now| currently)? \w+ing\b"
    # the same said for the team, as SWE-agent's model does (``Let's open the
    # `fields.py` file``, ``Now let's run the script``, ``First, we should look at``)
    r"|^(?:(?:Now|First|Next|Then|So),? )?(?i:let's|let us|we'll|we will|we should|we need to)\b"
    # or, as Codex's commentary does, by a verb of looking or of a tool taken up
    # (``Using `superpowers:brainstorming` briefly because …``, ``Checking the config``)
    r"|^(?:Using|Checking|Looking|Reading|Running|Searching|Opening|Inspecting|Exploring"
    r"|Reviewing|Scanning)\b"
)


#: A sentence that says what cannot be done and often why ("basic economy flights
#: cannot be modified", "我们无法退款"): the limit the next turn must keep to.
_REFUSAL = re.compile(
    r"\b(?:cannot|can't|can not|unable to|not (?:allowed|possible|eligible|permitted|able to)"
    r"|against (?:the |our )?policy)\b|无法|不能|不允许|不支持",
    re.IGNORECASE,
)


#: A sentence that says why: a cause found, a fix made, what code does wrong
#: ("`invoice_total` converts the Decimal total to float, which can drop a cent"), on
#: which an agent's next step builds.
_CONCLUDES = re.compile(
    r"\b(?:because|caused by|the cause|root cause|the fix|fixed|instead of|turns out"
    r"|which (?:can|could|would|will|should|means))\b",
    re.IGNORECASE,
)


def _states(text: str) -> bool:
    """Whether ``text`` states a fact (a digit), a limit (:data:`_REFUSAL`) or a
    conclusion (:data:`_CONCLUDES`): what makes an assistant's sentence a note."""
    return bool(_DIGIT.search(text) or _REFUSAL.search(text) or _CONCLUDES.search(text))


def _noted(sentence: str) -> bool:
    """Whether an assistant's ``sentence`` is a note: one of some length that states
    something (:func:`_states`) and is prose (:data:`_NOT_PROSE`), and no heading in
    bold (:data:`_BOLD_HEADING`) but one that states a limit (``**Unfortunately,
    DEF456 cannot be cancelled …**`` is a note in bold)."""
    if len(sentence) + len(_CJK_CHAR.findall(sentence)) < NOTE_MIN_CHARS:
        return False  # a CJK character counts as two
    if _BOLD_HEADING.match(sentence) and not _REFUSAL.search(sentence):
        return False
    return _states(sentence) and not _NOT_PROSE.search(sentence)


#: A heading in bold alone, no sentence in it (``**Flight HAT136 (JFK to ATL)**``).
_BOLD_HEADING = re.compile(r"(?:\d+\.\s*)?\*\*[^*.!?。！？]+\*\*$")


def _later_answer(text: str) -> list[tuple[str, str, int]]:
    prose = _FENCED.sub("", text) if "```" in text else text
    notes = _notes(sentences(prose) if _states(prose) else [], prose)
    out = [
        ("notes", shorten(s, NOTE_CHARS), CHANGED if _REFUSAL.search(s) else NOTES)
        for s in notes[:NOTES_PER_MESSAGE]
    ]
    seen: dict[str, int] = {}  # how many times each amount was told so far
    for fact in _facts(prose):  # not of its code blocks: examples, a proposal
        if _AMOUNT.match(fact):
            seen[fact] = seen.get(fact, 0) + 1
            told = _what_amount(prose, fact, seen[fact])
            out.append(("facts", told, CHANGED if told != fact else REST))
        elif fact.endswith("元"):
            out.append(("facts", _what_yuan(prose, fact), REST))
        else:
            out.append(("facts", fact, COUNTED if _COUNT.fullmatch(fact) else REST))
    return out


#: An id a limit may be of: a code of capitals and digits (``FQ8APE``, ``H9ZU1C``), an
#: id of words and a number (``credit_card_7447``), or capitals after the word that
#: names the kind of thing (``reservation **IFOYYZ**``).
_SUBJECT_ID = re.compile(
    r"\b(?=[A-Z]*\d)(?=\d*[A-Z])[A-Z0-9]{5,10}\b|\b[a-z]+(?:_[a-z]+)*_\d+\b"
    r"|(?i:\b(?:reservation|booking|order|confirmation|ticket)(?:\s+(?:id|code|number))?)"
    r"[\s*:#(]*\b([A-Z]{5,10})\b"
)


def _notes(said: list[str], prose: str = "") -> list[str]:
    """The notes among an answer's sentences ``said`` (:func:`_noted`; ``prose``: the
    text they were read from): a limit that names no id of its own, after the id the
    sentence before it with ids named, when that named one, and when the limit speaks
    of one thing (:data:`_ONE_THING`: "it", "this reservation"; ``FQ8APE: However,
    this reservation is in basic economy class, which cannot be modified.``), not of a
    kind ("basic economy reservations cannot be canceled" followed a list of five and
    took the last one's id, a reservation that was cancelled); a limit that leads in to
    a list, with the list's items (:func:`_listed_limit`)."""
    out = []
    subject, read = "", 0  # the id the sentences before ``read`` name last, if one
    skip = 0  # the list items a limit before them took
    for k, sentence in enumerate(said):
        if k < skip:
            continue
        listed, skip = _listed_limit(said, k, prose)
        if listed:
            out.append(listed)
            continue
        if not _noted(sentence):
            continue
        limit = _REFUSAL.search(sentence) and not _subject_ids(sentence)
        if limit and _ONE_THING.search(sentence):  # the ids before it, each read once
            for earlier in said[read:k]:
                named = set(_subject_ids(earlier))
                subject = named.pop() if len(named) == 1 else "" if named else subject
            read = k
        one = limit and subject and _ONE_THING.search(sentence)
        out.append(f"{subject}: {sentence}" if one else sentence)
    return out


#: What a limit says of one thing the sentences before it named (``it``, ``this
#: reservation``, ``该预订``), not of a kind (``basic economy reservations``).
_ONE_THING = re.compile(
    r"(?i)\b(?:it|its|this|the (?:reservation|booking|order|flight|ticket|item))\b"
    r"|该|这个|这笔|这张|此订单|此预订|它"
)


def _listed_limit(said: list[str], k: int, prose: str) -> tuple[str, int]:
    """The note of sentence ``k`` of ``said`` when it is a limit that leads in to a
    list in ``prose`` (``However, the following reservations cannot be canceled …:``)
    with the list's items (those right under it, at its first item's indent; a deeper
    item is part of the one above it) joined to it (``…: UDMOP1 (Basic Economy
    without insurance); XAZ3C0 (…)``), which alone read as facts with no word of the
    limit; and the position of the first sentence after the list. ``("", k)`` for any
    other sentence."""
    sentence = said[k]
    if not (sentence.rstrip("*").endswith((":", "：")) and _REFUSAL.search(sentence)):
        return "", k
    at = prose.find(sentence)
    if at < 0:
        return "", k
    items, block = _list_after(prose[at + len(sentence) :])
    if not items:
        return "", k
    end = k + 1
    while end < len(said) and said[end] in block:
        end += 1
    return shorten(f"{sentence} {'; '.join(items)}", NOTE_CHARS), end


def _list_after(text: str) -> tuple[list[str], str]:
    """The items (bold marks taken off) of the Markdown list ``text`` opens with, at its
    first item's indent, and the text of the whole list (its deeper items too)."""
    items: list[str] = []
    indent = None
    lines = text.split("\n")
    body = lines[1:] if lines and not lines[0].strip() else lines
    taken = 0
    for line in body:
        item = _LIST_ITEM.match(line)  # an item's indent, its marker; its text after
        if line.strip() and (item is None or len(item.group(1)) < (indent or 0)):
            break
        if item and indent is None:
            indent = len(item.group(1))
        if item and len(item.group(1)) == indent:
            items.append(line[item.end() :].replace("**", "").strip())
        taken += 1
    return items, "\n".join(body[:taken])


def _subject_ids(sentence: str) -> list[str]:
    """The ids a limit may be of in ``sentence`` (:data:`_SUBJECT_ID`), in order."""
    return [m.group(1) or m.group() for m in _SUBJECT_ID.finditer(sentence)]


#: Chinese words that say what an amount is (``售价 4999 元``, ``实付 4799 元``), and up to
#: three characters after them before the amount (``价格为``, ``每期约``).
_YUAN_WORD = re.compile(
    r"(?:售价|价格|原价|现价|总价|定价|实付|应付|支付|付款|立减|减免|优惠|折扣|退款|退还"
    r"|金额|运费|费用|赔付|赔偿|每期|首付|定金|押金|余额|合计|共计|差价|补贴|返现)[^\d，。；！？\n]{0,3}$"
)
#: The CJK characters right before such a word: which thing the amount is of; or
#: a word with a digit there, a model or a spec, after the CJK word that names it
#: (``标准版 12GB+256GB 售价 4999 元``: the price of which configuration).
_YUAN_LEAD = re.compile(
    r"(?:(?:^|(?<=[^\u4e00-\u9fff]))([\u4e00-\u9fff]{1,4}) ?)?"
    r"((?:[A-Za-z][\w+.-]* )?[A-Za-z0-9][\w+.-]*\d[\w+.-]*) $|([\u4e00-\u9fff]*)$"
)
#: The most CJK characters before :data:`_YUAN_WORD` a label takes: a longer run is a
#: clause that would be cut mid-word (``下单后系统会自动``), and is left out.
YUAN_LEAD_CHARS = 4


def _what_yuan(text: str, amount: str) -> str:
    """``amount`` (``4999 元``) with the words that say what it is where ``text`` first
    states it: the Chinese word for a price, payment or refund ending its clause
    (:data:`_YUAN_WORD`), after the thing it is of when that is a short run of CJK
    characters (``官方款售价 199 元``, ``售价 4999 元``) or a model or spec with its
    name (``标准版 12GB+256GB 售价 4999 元``, ``X-Pro 2026 售价 4999 元``: apart,
    ``12GB+256GB; 售价 4999 元; 16GB+512GB; 售价 5999 元`` paired them wrong); with no
    such word, the thing 的 makes it the price of, right after it (``199 元的碎屏险``:
    ``碎屏险 199 元``, where the sample's two things of 199 元 were one bare fact);
    else the amount alone (``199 元``: a label cut mid-word misleads more)."""
    found = re.search(r"(?<![\d.,])" + re.escape(amount), text)
    if found is None:
        return amount
    clause = _CLAUSE_BEFORE.sub("", text[max(0, found.start() - 60) : found.start()]).rstrip()
    word = _YUAN_WORD.search(clause)
    if word is None:
        of = _YUAN_OF.match(text, found.end())
        return f"{of.group(1)} {amount}" if of else amount
    lead = _YUAN_LEAD.search(clause[: word.start()])
    if lead and lead.group(2):  # what it is the price of: a spec, with its name
        return " ".join(filter(None, [lead.group(1), lead.group(2), word.group(), amount]))
    thing = lead.group(3) if lead and len(lead.group(3)) <= YUAN_LEAD_CHARS else ""
    return f"{thing}{word.group()} {amount}"


#: The thing an amount in 元 is the price of, after it and 的, to the clause's end
#: (``199 元的碎屏险，``).
_YUAN_OF = re.compile(r"的([\u4e00-\u9fff]{2,6})(?=[，。；、！？,.;:：\s]|$)")
#: Words that say what an amount is (``total cost $305``, ``Refund: $6,594``).
_MONEY_WORDS = frozenset(
    "total subtotal price cost fare fee balance refund charge amount payment difference "
    "savings credit compensation insurance deposit tax discount voucher certificate budget "
    "value prices costs fares fees refunds charges".split()
)
#: Words that may say which one it is, before one of :data:`_MONEY_WORDS`
#: (``Remaining balance``, ``travel insurance``).
_MONEY_MODIFIERS = _MONEY_WORDS | frozenset(
    "new old remaining original previous final additional extra travel cancellation change "
    "bag baggage ticket flight gift service net grand outstanding estimated current unused full "
    "partial upgrade booking seat room delivery shipping".split()
)
_CLAUSE_BEFORE = re.compile(r".*[.!?;(\n。！？；（，,]", re.DOTALL)
_LABEL_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\w-]*")
_CJK_LABEL = re.compile(r"[\u4e00-\u9fff]{1,6}$")
_CJK_GLUE = re.compile(r"(?:为|是|的|共计|共|约|合计|一共)+$")
_WORD_AFTER = re.compile(r"[ \t]+([A-Za-z]+)")  # on its line: not the next line's label
#: An id that names which amount it is (``certificate 7504069``): a word with a digit
#: and a letter, or a number of five or more digits, not an operand (``198 + 129``).
_ID_WORD = re.compile(r"(?=.*[A-Za-z]).*\d.*|\d{5,}")


def _ordinal_after(word: str, after: str, before: str) -> bool:
    """Whether ``after`` is the number of one of several things of a kind, right after
    the ``word`` that names it in ``before`` (the text just before an amount:
    ``Certificate 2: $250``), not an amount's digits (``Total: $198 + $129``)."""
    return after.isdigit() and len(after) <= 3 and f"{word} {after}" in before


def _what_amount(text: str, amount: str, nth: int = 1) -> str:
    """``amount`` (``$305``) with the words that say what it is where ``text`` states
    it the ``nth`` time (each of ``Certificate 2: $250``, ``Certificate 3: $250`` is
    read where it stands: read both where the first stands, they were one fact, and the
    certificates no longer added up to their total): the nearest of
    :data:`_MONEY_WORDS` among the last seven words of its
    clause, after a word of :data:`_MONEY_MODIFIERS` before it and with the ids after it
    (``total cost $305``, ``Remaining balance $55``, ``certificate 7504069 $250``,
    ``Certificate 2 $250``: a number of one to three digits right after it too), or,
    with neither, after the ids of the list item it is a field of
    (:func:`_item_subject`: ``HAT004 price $122``); else
    one right after it (``$500 certificate``); else up to six CJK characters before it
    (``退款金额 ¥299``); else the amount alone. A bound stays with the amount it sets
    (:data:`_BOUND`: ``additional cost under $1,000``, ``certificate more than $100``),
    which alone read as a cost or a balance that was never one. An operand of a sum
    or a difference (:data:`_OPERAND`) takes no label, nor does an amount from the
    words in parentheses before it, which are about the amount before them (tau-bench
    read ``Total $198; Total $129`` for ``Gift Card Total: $198 + $129 = $327`` and
    ``certificate $333`` for ``$833 - $500 (certificate) = $333``). Rule of the
    summary's facts: a fact keeps its label (issue 15)."""
    found = _stated(text, amount, nth)
    if found is None:
        return amount
    at = found.start()
    if _OPERAND.match(text, found.end()) or _AFTER_OPERATOR.search(text, max(0, at - 4), at):
        return amount  # ``Gift Card Total: $198 + $129``: the label is the sum's
    clause = _CLAUSE_BEFORE.sub("", text[max(0, at - 80) : at]).rstrip(" :：*-=")
    clause = clause.rpartition(")")[2]  # ``$833 - $500 (certificate) = $333``: an aside
    bound = _BOUND.search(clause)
    told = f"{bound.group().lower()} {amount}" if bound else amount
    words = _LABEL_WORD.findall(clause[: bound.start()] if bound else clause)
    labelled = _by_money_word(words, told, text, at)
    if labelled:
        return labelled
    after = _WORD_AFTER.match(text, at + len(amount))
    if after and after.group(1).lower() in _MONEY_WORDS:
        return f"{told} {after.group(1)}"
    cjk = _CJK_LABEL.search(_CJK_GLUE.sub("", clause.rstrip()))
    return f"{cjk.group()} {amount}" if cjk else told


def _stated(text: str, amount: str, nth: int) -> re.Match[str] | None:
    """Where ``text`` states ``amount`` the ``nth`` time on its own (not ``$30`` of
    ``$305``, nor an end of a range, ``$250-$300``, nor the tail of a path, counted
    as :func:`ctxcli.summarizers.facts.facts` counts it), when that place has a label
    of its own (:data:`_FIELD_LABEL`: ``- Certificate 3: $250``); else where it first
    states it: a later mention in a sentence ("cover the remaining $76 with your gift
    card") took the words near it for a label it does not have ("certificate $76")."""
    alone = r"(?<![-–~/\w])" + re.escape(amount) + r"(?!\d|[.,]\d|\s?[-–~]\s?[$€£¥]?\d)"
    places = list(re.finditer(alone, text))
    if not places:
        return re.search(re.escape(amount) + r"(?!\d|[.,]\d)", text)  # only in a range
    if nth <= len(places) and (nth == 1 or _FIELD_LABEL.search(text, 0, places[nth - 1].start())):
        return places[nth - 1]
    return places[0]


#: A label of its own right before an amount, on its line, in its sentence, clause or
#: aside: a list item's, a line's or a sentence's field name and colon (``- Certificate
#: 3: ``, ``**Total Cost:** ``, ``. Balance: ``, ``(Remaining balance after booking:
#: ``, ``。退款：``).
_FIELD_LABEL = re.compile(
    r"(?:^|\n|[.!?;][ \t]+|[。！？；(（])[ \t]*(?:[-*•][ \t]+|\d+[.)][ \t]+)?(?:\*\*)?"
    r"(?:[A-Za-z][A-Za-z0-9 '-]{0,40}?|[\u4e00-\u9fff]{1,12})"
    r"(?:\*\*)?[ \t]*[:：][ \t]*(?:\*\*)?[ \t]*$"
)


def _by_money_word(words: list[str], told: str, text: str, at: int) -> str | None:
    """``told`` (the amount at ``at`` of ``text``, with its bound) after the nearest of
    :data:`_MONEY_WORDS` among the last seven ``words`` of its clause, as
    :func:`_what_amount` says; ``None`` when none is there."""
    near = text[max(0, at - 80) : at]  # where a numbered word stands (``Certificate 2``)
    for j in range(len(words) - 1, max(-1, len(words) - 8), -1):
        if words[j].lower() in _MONEY_WORDS:
            lead = words[j - 1 : j] if j and words[j - 1].lower() in _MONEY_MODIFIERS else []
            ids = [w for w in words[j + 1 :] if _ID_WORD.fullmatch(w)]
            if j + 1 < len(words) and _ordinal_after(words[j], words[j + 1], near):
                ids = [words[j + 1], *ids]  # ``Certificate 2: $250``
            subject = "" if lead or ids else _item_subject(text, at)
            if subject:  # ``HAT004 price $122``, not ``Price $122``
                return f"{subject} {words[j].lower()} {told}"
            return " ".join([*lead, words[j], *ids, told])
    return None


#: What follows an amount that is an operand of a sum or a difference (``$20-$30`` is
#: a range: a minus takes a space before it).
_OPERAND = re.compile(r" [-−+×*/] ?[$€£¥]?\d|[+×*/] ?[$€£¥]?\d")
#: What comes before an amount that is a later operand.
_AFTER_OPERATOR = re.compile(r"\d(?: [-−+×*/]|[+×*/]) ?$")
#: Words that make an amount a bound, right before it: ``under $1,000`` is a budget,
#: ``more than $100`` a limit, not a price or a balance.
_BOUND = re.compile(
    r"\b(?:(?:no |not )?(?:more|less|fewer|greater|higher|lower) than|under|over|below|above"
    r"|at (?:most|least)|up to|exceed(?:s|ing)?|within)$",
    re.IGNORECASE,
)


#: A Markdown list item's indent.
_LIST_ITEM = re.compile(r"([ \t]*)(?:[-*+]|\d{1,2}[.)])[ \t]")
_ITEM_WORD = re.compile(r"[\w-]+")
#: How many lines up :func:`_item_subject` looks for the item above, and the most ids
#: it names (``HAT069 & HAT274 price $321``: the price of two flights).
ITEM_LINES = 8
ITEM_IDS = 2


def _item_subject(text: str, at: int) -> str:
    """The ids the amount at ``at`` of ``text`` is of, when it stands in an indented
    Markdown list item: those (:data:`_ID_WORD`, at most :data:`ITEM_IDS`) of the
    nearest item above it of the same level that holds one (``- Flight Number:
    HAT004`` above ``- Price: $122``), else of the item one level up (``1. Flight
    HAT023 …`` above ``   - Price: $364``); ``""`` when the line at ``at`` is no
    indented item, or no such id is within :data:`ITEM_LINES` lines of items above it."""
    start = text.rfind("\n", 0, at) + 1
    item = _LIST_ITEM.match(text, start)
    if item is None or not item.group(1):
        return ""
    indent = len(item.group(1).expandtabs(4))
    for _ in range(ITEM_LINES):
        if start == 0:
            return ""
        end, start = start - 1, text.rfind("\n", 0, start - 1) + 1
        above = _LIST_ITEM.match(text, start, end)
        if above is None:
            return ""  # prose between: not one list
        level = len(above.group(1).expandtabs(4))
        if level > indent:
            continue  # what an item before it holds
        line = text[above.end() : end]
        named = [w for w in _ITEM_WORD.findall(line) if _ID_WORD.fullmatch(w)]
        if named or level < indent:
            return " & ".join(named[:ITEM_IDS])
    return ""


def _facts(text: str, *, strict: bool = False) -> list[str]:
    """The :func:`ctxcli.summarizers.facts.facts` of ``text`` without the words of its
    Markdown headings, bold and list labels (``#1``, ``Technical Concepts``, ``Flight
    Number:``: a section's or a field's name, no fact, unless it holds a digit), each
    path whole (:func:`_whole`) or not at all."""
    marked = "\n".join(_MARKED_UP.findall(text)) if "#" in text or "**" in text else ""
    imported = set(_IMPORTED.findall(text)) if strict and "./" in text else set()
    out = []
    for fact in facts(text, strict=strict):
        fact = _whole(fact, text)
        label = not _DIGIT.search(fact) and (fact in marked or f"{fact}:" in text)
        heading = label or _HEADING_NUMBER.fullmatch(fact)
        if fact and not heading and fact not in imported:
            out.append(fact)
    return out


#: A module a line of source code imports by a relative path (``from '../../core/types.js'``,
#: ``require("./paths")``): the file a tool showed uses it; no file the agent touched.
_IMPORTED = re.compile(r"""(?:\bfrom|\bimport|\brequire\()\s*['"](\.{1,2}/[^'"\s]+)['"]""")


#: A Markdown heading line, or a bold span.
_MARKED_UP = re.compile(r"^ *#+ .*$|\*\*[^*\n]+\*\*", re.MULTILINE)
#: A heading's number (``#1``), and a path a fact's length cut (``src/a/LONG-NA…``).
_HEADING_NUMBER = re.compile(r"#\d+")
_CUT_PATH = re.compile(r"[^\s…]*/[^\s…]*…")
_PATH_REST = re.compile(r"[^\s'\"`()\[\]{},;<>]*")


def _whole(fact: str, text: str) -> str:
    """``fact``, a path the fact's length cut restored whole from ``text`` (``""`` when
    it is not found there)."""
    if not _CUT_PATH.fullmatch(fact):
        return fact
    head = fact[:-1]
    at = text.find(head)
    if at < 0:
        return ""
    rest = _PATH_REST.match(text, at + len(head))
    return head + (rest.group() if rest else "")


#: The kinds of a tool or function result (:func:`_kinds`).
_RESULTS = ("result", "output")
#: What :func:`_lazy_of` reads of each kind of message.
_LATER = {
    "task": _later_compact,
    "user": _later_request,
    "result": _later_result,
    "output": _later_result,
    "observation": _later_result,
    "assistant": _later_answer,
    "report": _later_answer,
}
#: The later tiers each kind of message can give (:data:`_LATER`'s readers; a result's
#: facts of :data:`REST` are of :data:`CHANGED` under a call that changes state), so a
#: tier's pass reads only the messages that may give it: the later requests, ranked
#: before the rest, would otherwise read every result and answer of the fold, all the
#: way back, before the room is known to reach them.
_LATER_TIERS = {
    "task": frozenset({REQUESTED, ASKED, REST, NOTES}),
    "user": frozenset({REQUESTED, ASKED}),
    **dict.fromkeys(("result", "output", "observation"), frozenset({CHANGED, REST, COUNTED})),
    **dict.fromkeys(("assistant", "report"), frozenset({CHANGED, REST, COUNTED, NOTES})),
}


#: What one message says, memoised: a text seen before in this process (a repeated
#: prompt or tool result) is read once, and shared with other worker processes.
_eager = TextMemo(_eager_of, size=1 << 15, share_as="extract", share_from=0)
_lazy = TextMemo(_lazy_of, size=1 << 15, share_as="extract later", share_from=0)
#: The identifying arguments of a call, memoised the same way.
_arguments = TextMemo(rec.arguments_text, size=1 << 15, share_as="arguments", share_from=0)
#: The ids a look-up found, and its gist, memoised the same way.
_found = TextMemo(rec.found, size=1 << 15, share_as="found", share_from=0)
_gist = TextMemo(rec.gist, size=1 << 15, share_as="gist", share_from=0)
_hits = TextMemo(rec.hits, size=1 << 15, share_as="hits", share_from=0)


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """``(name, arguments, call id)`` of each call an assistant message makes."""
    calls: list[tuple[str, str, str | None]] = []
    for call in message.get("tool_calls") or []:
        function = call_function(call)
        if function is not None:
            arguments = function.get("arguments")
            calls.append((str(function.get("name", "?")), _string(arguments), _id(call.get("id"))))
    function_call = message.get("function_call")
    if isinstance(function_call, Mapping):
        arguments = function_call.get("arguments")
        calls.append((str(function_call.get("name", "?")), _string(arguments), None))
    return calls


#: The items of hosted tools (the Responses API's ``mcp_call``, ``web_search_call``,
#: ``mcp_list_tools``, ...), which :mod:`ctxcli.formats.responses` reads as an
#: assistant message holding the item, by the keys that may hold its arguments and
#: its result (the first of each the item has).
_HOSTED_ARGUMENTS = ("arguments", "action", "queries", "code", "server_label")
_HOSTED_RESULT = ("error", "output", "results", "outputs", "tools", "result", "status")


def hosted_calls(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """``messages`` with each assistant message that holds hosted tools' items
    (content parts of a ``type`` ending in ``_call``, or ``mcp_list_tools``) read as a
    call of each and its result (``web_search_exa({"query": …}) → …``; one with an
    ``error`` failed), so the summary tells them as actions: they were read as
    nothing, and a Response's ``mcp_call`` of 20 KB of search results was dropped with
    no summary. ``messages`` itself when none does."""
    if not any(_hosted_parts(m) for m in messages):
        return messages
    out: list[Mapping[str, Any]] = []
    for message in messages:
        parts = _hosted_parts(message)
        if not parts:
            out.append(message)
            continue
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for part in parts:
            call_id = str(part.get("id") or f"hosted_{len(out)}_{len(calls)}")
            name, arguments, result = _hosted_call(part)
            function = {"name": name, "arguments": arguments}
            calls.append({"id": call_id, "type": "function", "function": function})
            answer = {"role": "tool", "tool_call_id": call_id, "content": result}
            results.append({**answer, "is_error": True} if part.get("error") else answer)
        rest = [p for p in message["content"] if all(p is not q for q in parts)]
        out.append({"role": "assistant", "content": rest or None, "tool_calls": calls})
        out += results
    return out


def _hosted_call(part: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(name, arguments, result)`` of a hosted tool's item: a listing of an MCP
    server's tools is ``mcp_list_tools(server) → their names``; any other item is its
    tool's ``name`` (else its type without ``_call``), its arguments and its result
    or error (the first key of :data:`_HOSTED_ARGUMENTS` and :data:`_HOSTED_RESULT` it
    has)."""
    kind = str(part["type"])
    if kind == "mcp_list_tools":
        tools = part.get("tools")
        listed = rec.parse_json(tools) if isinstance(tools, str) else tools
        names = [t.get("name") for t in listed or () if isinstance(t, Mapping)]
        shown = ", ".join(str(n) for n in names if n)
        return kind, _string(part.get("server_label")), shown or _string(tools)
    name = str(part.get("name") or kind.removesuffix("_call"))
    arguments = next((_string(part[k]) for k in _HOSTED_ARGUMENTS if part.get(k)), "")
    result = next((_string(part[k]) for k in _HOSTED_RESULT if part.get(k)), "")
    return name, arguments, result


def _hosted_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The hosted tools' items among an assistant message's content parts."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [
        part
        for part in content
        if isinstance(part, Mapping)
        and isinstance(part.get("type"), str)
        and (part["type"].endswith("_call") or part["type"] == "mcp_list_tools")
    ]


def _with_thoughts(message: Mapping[str, Any]) -> str:
    """The text of ``message``, an assistant's with the thoughts its calls of the
    "think" tool logged after it (:func:`ctxcli.summarizers.records.thought`): what it
    reasoned is read as what it said (notes, facts), not as an action
    (``think(24 NQNU5R) → ok``)."""
    text = message_text(message)
    if message.get("role") != "assistant":
        return text
    thoughts = [rec.thought(name, arguments) for name, arguments, _ in _calls(message)]
    return "\n".join([text, *(t for t in thoughts if t)]).strip() if any(thoughts) else text


def _string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    from ctxcli import jsonio  # an integer past 64 bits, read exact, is no orjson's

    return jsonio.dumps(value).decode()


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


#: Every call with its result (:func:`_results`): ``(position, name, arguments,
#: result position or None, call id or None)``, in order.
Paired = list[tuple[int, str, str, int | None, str | None]]


def _results(messages: Sequence[Mapping[str, Any]]) -> Paired:
    """``(position, name, arguments, result position, call id)`` of every call in order, its
    result the first after it that names its call id (:func:`ctxcli.model.result_ids`:
    one result may answer several, as LLaMA-Factory's do; ids may be reused:
    tau-bench's are), else the next result that names none (``None``: none)."""
    by_id: dict[str, list[int]] = {}
    loose: list[int] = []
    for i, message in enumerate(messages):
        if str(message.get("role")) in ("tool", "function"):
            ids = result_ids(message)
            for answered in ids:
                by_id.setdefault(answered, []).append(i)
            if not ids:
                loose.append(i)
    out: Paired = []
    next_loose = 0
    for i, message in enumerate(messages):
        for name, arguments, call_id in _calls(message):
            at = _first_after(by_id.get(call_id, []), i) if call_id else None
            while at is None and next_loose < len(loose) and loose[next_loose] <= i:
                next_loose += 1
            if at is None and next_loose < len(loose):
                at = loose[next_loose]
            out.append((i, name, arguments, at, call_id))
    return out


def _first_after(positions: list[int], i: int) -> int | None:
    """The first of ``positions`` (ascending) after ``i``, taken from the list; else
    the first one (a result logged before its call), ``None`` when there is none."""
    for n, at in enumerate(positions):
        if at > i:
            return positions.pop(n)
    return positions[0] if positions else None


def _actions(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    kinds: Sequence[str],
    named: frozenset[int],
    paired: Paired,
) -> list[Item]:
    """One item per distinct call, at the place of its last use, with its outcome
    (:func:`ctxcli.summarizers.records.outcome`) from its result; a call that changed
    state, or a look-up that failed, is of :data:`ACTED`, one that failed to change
    state, or a plan update a later one superseded, of :data:`TRIED`, a look-up of
    what the user named of :data:`NAMED`, another of :data:`LOOKUP`. A call that
    differs from the next of its name in an argument or two says only that
    (:func:`_as_next`); calls that differ in one value alone are one item
    (:func:`_merged`)."""
    made = _made(messages, texts, kinds, named, paired)
    where = {text: (i, tier) for text, i, _, tier in made}
    out = []
    for order, (text, count) in enumerate(rec.collapse([t for t, _, _, _ in made])):
        position, tier = where[text]
        if count > 1:
            head, arrow, tail = text.partition(") → ")
            text = f"{head}) ×{count}{arrow[1:]}{tail}"
        out.append(Item("actions", text, tier, position, order, order))
    return _merged(out)


#: An action whose arguments are one value, or differ from the next call's in one:
#: ``name(value) → outcome``, ``name(as the next, but key value) → outcome``. The value
#: is a word (an id, an amount, a date): a command or a phrase (``pip install -e .``)
#: joined to another by `` | `` would read as a shell pipe.
_ONE_VALUE = re.compile(
    r"(?P<head>[^(]+\((?:as the next, but [^ ,()]+ )?)(?P<value>[^ ,()]+)\)(?P<tail> → .*)"
)


def _merged(actions: Sequence[Item]) -> list[Item]:
    """``actions`` with those of one name, tier and outcome that differ in one value
    alone (:data:`_ONE_VALUE`: ``get_reservation_details(LQ940Q) → ok``, a payment
    tried again with another card and failing alike) as one item, ``name(LQ940Q |
    2FBBAH) ×2 → ok``, at the place of the first of them: so fewer messages (the
    newer ones kept whole) leave it where it was. A call that changes state closes
    every merge open before it, so the actions stay in order around it (a file read,
    written, then read again is not two reads before the write)."""
    out: list[Item] = []
    groups: dict[int, tuple[str, str, list[str]]] = {}  # by place: head, tail, values
    open_at: dict[tuple[str, str, int], int] = {}
    for item in actions:
        one = _ONE_VALUE.fullmatch(item.text)
        key = (one["head"], one["tail"], item.tier) if one else None
        if one and key in open_at:
            groups[open_at[key]][2].append(one["value"])
            continue
        if rec.changes_state(item.text.partition("(")[0]):
            open_at.clear()
        if one and key:
            open_at[key] = len(out)
            groups[len(out)] = (key[0], key[1], [one["value"]])
        out.append(item)
    for at, (head, tail, values) in groups.items():
        if len(values) > 1:
            text = f"{head}{' | '.join(values)}) ×{len(values)}{tail}"
            out[at] = dataclasses.replace(out[at], text=text)
    return out


def _made(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    kinds: Sequence[str],
    named: frozenset[int],
    results: Paired,
) -> list[tuple[str, int, str, int]]:
    """``(action, position, name, tier)`` of every call in order (see :func:`_actions`),
    a look-up's outcome the ids it found (:func:`ctxcli.summarizers.records.found`),
    or, of a result in ``named``, its gist (:func:`ctxcli.summarizers.records.gist`:
    its record, so it is not written again) and its tier :data:`NAMED`. A look-up
    whose arguments all go (prose
    without a fact, :func:`ctxcli.summarizers.records.arguments_text`) and that says
    only ``ok`` is left out, and so is a poll of a running process, whose outcome is
    its command's (:func:`_polls_told`)."""
    calls: list[tuple[str, str, str, int, int]] = []  # (name, arguments, outcome, i, tier)
    sharing = Counter(at for _, _, _, at, _ in results)
    taken: Counter[int | None] = Counter()
    for i, name, arguments, at, call_id in results:
        k = taken[at]
        taken[at] += 1
        if rec.thought(name, arguments) is not None:
            continue  # the assistant's reasoning: its text's (:func:`_with_thoughts`)
        call = (name, arguments)
        said = "?"
        if at is not None:
            text = _part(texts[at], (k, sharing[at]), call_id)
            said = _outcome(messages[at], kinds[at], call, text, at in named)
        asked = at in named and bool(_arguments(arguments))
        calls.append((name, arguments, said, i, _call_tier(name, said, asked=asked)))
    calls = _polls_told(calls)
    made = []
    plans = _plan_changes(calls)
    for j, (name, arguments, said, i, tier) in enumerate(_superseded(calls, plans)):
        shown = plans.get(j) or _as_next(calls, j) or _arguments(arguments)
        if not shown and said == "ok" and tier == LOOKUP and arguments.strip("{} "):
            continue  # told by nothing: a thought with no fact in it
        made.append((name, shown, said, i, tier))
    return [(f"{n}({shown}) → {said}", i, n, tier) for n, shown, said, i, tier in _placed(made)]


def _call_tier(name: str, said: str, *, asked: bool) -> int:
    """The tier of a call of ``name`` whose outcome is ``said`` (see :func:`_actions`):
    a look-up of what the user named (``asked``) is what they asked about, so it ranks
    right after the acts; a state change is never cut before a look-up."""
    failed = rec.ERROR_OUTCOME.search(said) is not None
    if rec.changes_state(name):
        return TRIED if failed else ACTED
    return ACTED if failed else NAMED if asked else LOOKUP


def _superseded(
    calls: Sequence[tuple[str, str, str, int, int]], plans: Mapping[int, str]
) -> list[tuple[str, str, str, int, int]]:
    """``calls`` (name, arguments, outcome, message, tier), the plan updates a later
    one superseded (``plans``, :func:`_plan_changes`) of :data:`TRIED` where they were
    of :data:`ACTED`: a to-do list's older state is not where the run stands."""
    return [
        (*call[:4], TRIED) if j in plans and call[4] == ACTED else call
        for j, call in enumerate(calls)
    ]


def _plan_changes(calls: Sequence[tuple[str, str, str, int, int]]) -> dict[int, str]:
    """``{call: shown}`` for each plan update (a to-do list: Claude Code's ``TodoWrite``,
    Codex's ``update_plan``, :func:`ctxcli.summarizers.records.plan_steps`) that a later
    update of its name supersedes: the steps it changed since the one before it (the
    first, all of them), ``no change`` when it changed none. The newest is told whole:
    where the run stands; the older ones, each the whole list again, said only the
    step or two that moved."""
    steps = [rec.plan_steps(arguments) for _, arguments, _, _, _ in calls]
    newest = {calls[j][0]: j for j in range(len(calls)) if steps[j]}
    out: dict[int, str] = {}
    before: dict[str, list[str]] = {}
    for j, (name, _, _, _, _) in enumerate(calls):
        if not steps[j]:
            continue
        if j != newest[name]:
            moved = [step for step in steps[j] if step not in before.get(name, ())]
            out[j] = shorten(", ".join(moved), rec.ACTION_ARGUMENT_CHARS) if moved else "no change"
        before[name] = steps[j]
    return out


def _poll_links(calls: Sequence[tuple[str, str, str]]) -> dict[int, int]:
    """``{poll: starter}`` over ``calls`` (``(name, arguments, outcome)``, in order, the
    outcome a result's first line will do): each poll of a running process (Codex's
    ``write_stdin`` sending nothing, :func:`_polled`) by the place of the call whose
    outcome said the session it names (``running, session 20936``:
    :data:`ctxcli.summarizers.records.RUNNING`), until a poll no longer says so. A poll
    of no session seen, or one that sends input, has none."""
    links: dict[int, int] = {}
    running: dict[str, int] = {}  # session → the call that started it
    for k, (name, arguments, said) in enumerate(calls):
        session = _polled(name, arguments)
        started = rec.RUNNING.fullmatch(said)
        if session is not None and session in running:
            links[k] = running[session]
            if not (started and started[1] == session):
                del running[session]
        elif started:
            running[started[1]] = k
    return links


def _polls_told(
    calls: list[tuple[str, str, str, int, int]],
) -> list[tuple[str, str, str, int, int]]:
    """``calls`` (``(name, arguments, outcome, position, tier)``, in order) without
    the polls of a running process (:func:`_poll_links`): each poll's outcome becomes
    that of the call that started the process (``exec_command(npm test …) →
    AssertionError: …``, not ``→ running`` and a poll that failed), and its tier
    :data:`ACTED` when one is an error."""
    links = _poll_links([call[:3] for call in calls])
    out = list(calls)
    for k, starter in links.items():
        name, arguments, _, position, tier = out[starter]
        said = calls[k][2]
        acted = ACTED if rec.ERROR_OUTCOME.search(said) else tier
        out[starter] = (name, arguments, said, position, acted)
    return [call for k, call in enumerate(out) if k not in links]


def _polled_names(texts: Sequence[str], names: dict[int, str], paired: Paired) -> dict[int, str]:
    """``names`` (each result's call name, by position) with a poll's result named by
    the call that started the process it polls (:func:`_poll_links`): its error lines
    are that command's (``exec_command: …``, not ``write_stdin: …``)."""
    if "write_stdin" not in names.values():
        return names
    answered = [(name, a, at) for _, name, a, at, _ in paired if at is not None]
    heads = [(name, a, texts[at].partition("\n")[0]) for name, a, at in answered]
    for k, starter in _poll_links(heads).items():
        names[answered[k][2]] = answered[starter][0]
    return names


def _polled(name: str, arguments: str) -> str | None:
    """The session a call polls: Codex's ``write_stdin`` with no ``chars`` to send
    (``{"session_id": 20936, "chars": ""}``) reads what that process wrote since;
    ``None`` for any other call."""
    if name != "write_stdin":
        return None
    value = rec.parse_json(arguments)
    if not isinstance(value, Mapping) or value.get("chars"):
        return None
    session = value.get("session_id")
    return str(session) if isinstance(session, (int, str)) else None


def _placed(
    made: list[tuple[str, str, str, int, int]],
) -> list[tuple[str, str, str, int, int]]:
    """``made`` (``(name, shown arguments, outcome, position, tier)``, in order) with a
    last argument that is a path (a working directory: Codex's ``exec_command(…,
    /Users/…/repo)``) left out of every call but the newest of its name and tier that
    has it, which ranks before them (so a bound that shows one of them shows it too)."""
    seen: set[tuple[str, int, str]] = set()
    out = []
    for name, shown, said, i, tier in reversed(made):
        head, comma, last = shown.rpartition(", ")
        if comma and "/" in last and not last.endswith("…"):
            if (name, tier, last) in seen:
                shown = head
            seen.add((name, tier, last))
        out.append((name, shown, said, i, tier))
    return out[::-1]


def _part(text: str, place: tuple[int, int], call_id: str | None) -> str:
    """What result ``text`` says to a call (``call_id``), the ``k``-th of the ``count``
    it answers (``place``): when it is a JSON list of as many entries, each naming its
    call, the ``content`` of the entry with that id, else of the ``k``-th
    (LLaMA-Factory's results: ``[{"tool_call_id": …, "name": "circle_area", "content":
    "{'area': 7.0686, …}"}, …]``, one for parallel calls, ids of its own); else the
    whole ``text``."""
    k, count = place
    if not text.lstrip().startswith("["):
        return text
    value = rec.parse_json(text)
    if not isinstance(value, list) or len(value) != count or not all(map(_names_call, value)):
        return text
    entry = next((e for e in value if call_id and e.get("tool_call_id") == call_id), value[k])
    content = entry["content"]
    return content if isinstance(content, str) else _string(content)


def _names_call(entry: Any) -> bool:
    """Whether a result's list ``entry`` is one call's: its ``content``, and the call's
    ``name`` or ``tool_call_id``."""
    return (
        isinstance(entry, Mapping)
        and "content" in entry
        and ("name" in entry or "tool_call_id" in entry)
    )


def _outcome(
    message: Mapping[str, Any],
    kind: str,
    call: tuple[str, str],
    text: str,
    named: bool,
) -> str:
    """The outcome of a ``call`` (name, arguments) whose result is ``message`` (of
    ``kind``, its text for this call ``text``: :func:`_part`; see :func:`_made`); of
    one that changed state, ``ok`` names what it made when its
    arguments do not (``ok, reservation HATHAT``: the id the next turns reuse), or
    the file it changed when they name nothing but the text an edit wrote
    (``edit(return int(round(…))) → ok, /testbed/src/fields.py``: SWE-agent's edits
    give only the text replaced); a search that exited 1 found ``no match``
    (:func:`ctxcli.summarizers.records.no_match`), one that found lines says in which
    files (:func:`ctxcli.summarizers.records.hits`: ``12 lines in 3 files: …``), and
    so does a file list; a sub-agent's result says what its report found
    (:func:`ctxcli.summarizers.records.report`)."""
    name, arguments = call
    errors = [t[1] for t in _eager(text, kind) if t[0] == "errors"]
    failed = message.get("is_error") is True
    said = rec.outcome(text, failed=failed, errors=errors[:1], succeeded=kind == "output")
    if said == "exit 1" and rec.no_match(arguments):
        return "no match"
    if said != "ok":
        return said
    return _more_than_ok(call, text, named) or said


def _more_than_ok(call: tuple[str, str], text: str, named: bool) -> str:
    """What :func:`_outcome` says of a ``call`` whose result ``text`` says ``ok`` (see
    there; ``named``: a look-up of what the user named), ``""`` when nothing more."""
    name, arguments = call
    if rec.runs_subagent(arguments):  # what the sub-agent found
        return rec.report(text)
    found_files = _hits(text)  # a search or a file list: what it found
    if found_files:
        return found_files
    answered = rec.answer(text)  # a small object with no id: circle_area → area 7.0686
    if answered:
        return answered
    if rec.changes_state(name):
        named_one = rec.names_target(arguments)  # what it changed, if said
        own = rec.made(text) or ("" if named_one else rec.touched(text))
        return f"ok, {own}" if own and own.rpartition(" ")[2] not in arguments else ""
    found = _gist if named else _found  # a named look-up's record is said once
    return found(text)


def _as_next(calls: Sequence[tuple[str, str, str, int, int]], j: int) -> str | None:
    """``as the next, but amount 5``: call ``j``'s arguments told by their difference
    (:func:`ctxcli.summarizers.records.difference`) from the next call of its name,
    when that one ranks no lower (so it is in every summary that holds this one); not
    for a call that changed state (a booking made is written out whole, whatever was
    tried after it)."""
    name, arguments, said, _, tier = calls[j]
    if rec.changes_state(name) and not rec.ERROR_OUTCOME.search(said):
        return None  # what was done is said in full, not as a later attempt's variant
    later = next((c for c in calls[j + 1 :] if c[0] == name and c[1] != arguments), None)
    if later is None or later[4] > tier:
        return None
    changed = rec.difference(arguments, later[1])
    return f"as the next, but {changed}" if changed else None


def _result_names(messages: Sequence[Mapping[str, Any]], paired: Paired) -> dict[int, str]:
    """The name of the call each result (by position) answers: its own ``name``, else
    that of the call :func:`_results` pairs it with; ``""`` for a result of no call."""
    out = {i: "" for i, m in enumerate(messages) if str(m.get("role")) in ("tool", "function")}
    for _, name, _, at, _ in paired:
        if at is not None:
            out[at] = name
    for i in out:
        own = messages[i].get("name")
        if isinstance(own, str) and own:
            out[i] = own
    return out


def _first_items(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    kinds: Sequence[str],
    names: Mapping[int, str],
    named: frozenset[int],
    paired: Paired,
) -> list[Item]:
    """The items of the first tiers (the task, what the user typed, errors, actions)
    of every message, each result's error after its call's name (``names``); the
    results of ``named`` (:func:`_user_named`) told in their action; ``paired``: the
    calls and their results (:func:`_results`)."""
    actions = _actions(messages, texts, kinds, named, paired)
    # An error line an action shows as its outcome is said there, whole or cut (the
    # outcome and the error line are cut to different lengths: compare their heads).
    outcomes = [action.text.rpartition(" → ")[2] for action in actions]
    items: list[Item] = []
    for i, (text, kind) in enumerate(zip(texts, kinds)):
        name = names.get(i, "")
        found = _eager(text, kind)
        for order, (section, said, tier, seq) in enumerate(found):
            if section == "errors" and _said_in(said, outcomes):
                continue
            if section == "errors" and name:
                said = f"{name}: {said}"
            typed = _typed_tier(said, i, actions) if section == "facts" else tier
            if typed is not None:
                items.append(Item(section, said, typed, i, order, seq))
        failed = kind in _RESULTS and messages[i].get("is_error") is True
        if failed and not any(t[0] == "errors" for t in found):
            line = _failure(text, name, outcomes)
            if line:
                items.append(Item("errors", line, ACTED, i, 99, 99))
    return items + actions


def _failure(text: str, name: str, outcomes: Sequence[str]) -> str:
    """The error line of a failed result with no error line of its own: its first
    line, after its tool's ``name``; ``""`` when an action's outcome says it, or the
    user refused the call (the action says ``rejected by the user``)."""
    line = shorten(_TOOL_USE_ERROR.sub("", text.strip().partition("\n")[0]).strip(), NOTE_CHARS)
    if _said_in(line, outcomes) or rec.user_rejected(text):
        return ""
    return f"{name}: {line}" if name else line


def _said_in(line: str, outcomes: Sequence[str]) -> bool:
    """Whether one of ``outcomes`` says ``line``: the same text, or, both cut at
    different lengths (``…``), one the head of the other."""
    line = line.removesuffix("…")
    heads = (o.removesuffix("…") for o in outcomes)
    return any(line.startswith(o) or o.startswith(line) for o in heads if o and line)


def _typed_tier(fact: str, position: int, actions: Sequence[Item]) -> int | None:
    """The tier of a ``fact`` the user typed in message ``position`` (the first tiers'
    facts are all typed: :func:`_eager_of`): :data:`ACTED`;
    :data:`REST` for one without a digit (``New York``, ``Gift Card``: a place or a
    word the requests say in context, no id), ``None`` for a labelled one when a later
    call that changes state or failed, or a later look-up of what the user named,
    shows it (``book_reservation(mia_li_3668, …)``: of its tier or the next, newer). A
    bare one (``HAT136``) stays: it goes when that call is taken whole
    (:func:`_costed`), and stays beside it cut (tau-bench run 100 at 1350 tokens cut
    the booking before the flights the user chose, which 1300 kept in their words)."""
    if not _DIGIT.search(fact):
        return REST
    if _bare(Item("facts", fact, ACTED, position, 0, 0)):
        return ACTED
    shown = any(
        a.tier in (ACTED, NAMED) and a.position > position and fact in a.text for a in actions
    )
    return None if shown else ACTED


def _later_items(
    texts: Sequence[str],
    kinds: Sequence[str],
    names: Mapping[int, str],
    tier: int,
    told: tuple[frozenset[int], frozenset[int], frozenset[int]],
) -> Iterator[Item]:
    """The items of one of the later tiers, newest message first, each message read
    when the stream reaches it; ``told``: three sets of result positions. A record of
    the result of a state-changing call, or of a look-up of what the user named (first
    of ``told``, :func:`_user_named`), is of :data:`CHANGED`, under its call's name,
    and so is an opaque id in the result of a state-changing call that runs no shell
    command (second of ``told``:
    ``create_session`` → ``id 5d1c8e2a-…`` is what it made; a command's output, a
    ``grep`` of a config file, holds what it found). The facts of a file a call read
    (third, :func:`_makers_and_reads`) are of :data:`COUNTED`: what a file says (a
    ``setup.py``'s e-mail and URLs, a doc's example date) is there to read again, and
    tells less than what the run's commands found (the version pip installed)."""
    named, makers, reads = told
    for i in range(len(texts) - 1, -1, -1):
        if tier not in _LATER_TIERS.get(kinds[i], ()):
            continue
        name = names.get(i, "")
        changed = bool(name) and (rec.changes_state(name) or i in named)
        if tier == CHANGED and not changed and not _answer_of_changed(texts[i], kinds[i]):
            continue
        for order, (section, said, own, seq) in enumerate(_lazy(texts[i], kinds[i])):
            if section == "facts":
                own = _result_tier(own, changed=changed, made=i in makers, read=i in reads)
            if own != tier:
                continue
            if section == "facts" and name:  # ``search_books: …``, not ``search_bookss``
                said = _RESULT_LABEL.sub(name, said, count=1)
            yield Item(section, said, own, i, order, seq)


def _result_tier(tier: int, *, changed: bool, made: bool, read: bool) -> int:
    """The tier of a fact of ``tier`` in a result: as :func:`_changed_tier` says for a
    call that ``changed`` state or looked up what the user named; :data:`COUNTED` for
    one of :data:`REST` a file ``read`` gave; else ``tier``."""
    if changed:
        return _changed_tier(tier, made=made)
    return COUNTED if read and tier == REST else tier


def _changed_tier(tier: int, *, made: bool) -> int:
    """The tier of a fact of ``tier`` in the result of a call that changes state or
    looks up what the user named: :data:`CHANGED` for one of :data:`REST`, and for an
    opaque id (:data:`COUNTED`) the call ``made``; else ``tier``."""
    return CHANGED if tier == REST or (tier == COUNTED and made) else tier


#: The label :func:`ctxcli.summarizers.records.records` gives a result's record(s),
#: which the call's name replaces.
_RESULT_LABEL = re.compile(r"^results?\b")


def _answer_of_changed(text: str, kind: str) -> bool:
    """Whether ``text``, a message of ``kind``, is an answer that may name an amount or
    a limit (the only items of :data:`CHANGED` an answer gives: :func:`_later_answer`)."""
    if kind != "assistant":
        return False
    return _PRICED(text) is not None or _REFUSAL.search(text) is not None


def _user_named(texts: Sequence[str], kinds: Sequence[str], paired: Paired) -> frozenset[int]:
    """The positions of the results of calls whose arguments hold a fact the user
    typed before them (``get_user_details(mia_li_3668)``): what the user is, and
    what they asked about. Only earlier messages count, so the messages older than
    any point give the same answer alone."""
    typed: set[str] = set()
    out: set[int] = set()
    by_message: dict[int, list[tuple[str, int]]] = {}
    for i, _, arguments, at, _ in paired:
        if at is not None:
            by_message.setdefault(i, []).append((arguments, at))
    for i, (text, kind) in enumerate(zip(texts, kinds)):
        if kind in ("task", "user"):
            typed.update(t[1] for t in _eager(text, kind) if t[0] == "facts")
        for arguments, at in by_message.get(i, ()):
            if any(fact in arguments for fact in typed):
                out.add(at)
    return frozenset(out)


def _stream(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    kinds: Sequence[str],
    earlier: Sequence[Item],
    results: tuple[dict[int, str], Paired],
) -> Iterator[Item]:
    """Every item, best first (:meth:`Item.rank`): the first tiers at once, the later
    ones message by message as they are asked for (an earlier summary's last in each
    tier: it is older than every message); ``results``: each result's call name
    (:func:`_result_names`) and the calls with their results (:func:`_results`)."""
    names, paired = results
    names = _polled_names(texts, names, paired)
    named = _user_named(texts, kinds, paired)
    told = (named, *_makers_and_reads(paired))
    first = sorted(_first_items(messages, texts, kinds, names, named, paired), key=_first_rank)
    for tier in ORDER:
        yield from (item for item in first if item.tier == tier)
        if tier == CHANGED:
            changed = _later_items(texts, kinds, names, tier, told)
            yield from _by_density(_newest_amounts(_newest_state(changed), texts))
        elif tier > CHANGED:
            yield from _later_items(texts, kinds, names, tier, told)
        yield from sorted((item for item in earlier if item.tier == tier), key=Item.rank)


#: A call that reads a file: a read tool (Claude Code's ``Read``, SWE-agent's ``open``,
#: ``read_file``, ``view``), or a shell command that prints one (``cat``, ``head``,
#: ``tail``, ``nl``, ``sed -n``).
_READ_NAME = re.compile(r"(?i)(?:read|open|view|cat)(?:_?file)?")
_READ_COMMAND = re.compile(r"\s*(?:cat|head|tail|nl|less|more|sed\s+-n)\s")


def _makers_and_reads(paired: Paired) -> tuple[frozenset[int], frozenset[int]]:
    """The positions of the results of state-changing calls that run no shell command
    (what such a call returns is what it made: :func:`_later_items`), and of calls that
    read a file (:data:`_READ_NAME`, :data:`_READ_COMMAND`); each call's command read
    once."""
    makers, reads = set(), set()
    for _, name, arguments, at, _ in paired:
        if at is None:
            continue
        if _READ_NAME.fullmatch(name):
            reads.add(at)
            continue
        command = rec.command_of(arguments)
        if command is None and rec.changes_state(name):
            makers.add(at)
        elif command is not None and _READ_COMMAND.match(command):
            reads.add(at)
    return frozenset(makers), frozenset(reads)


def _newest_state(items: Iterable[Item]) -> list[Item]:
    """``items`` of :data:`CHANGED` (newest message first) with each object's final
    state. A result's object is its first record's, when that names an id
    (``reservation YAX4DR``: a flight number or a card is no object of its own, the
    same in two reservations); an older result's records of an object a newer result
    gave again are trimmed to what that one did not say again (:func:`_trimmed`): a
    look-up's ``price 122`` is stale beside the update's ``price 350``, its flights the
    update no longer lists are gone, its ``address …`` is not (tau-bench 14-3 at 1500
    kept the look-up's economy prices and cut the upgrade's; 13-0 listed four flights
    beside the one the reservation kept)."""
    listed = list(items)
    subjects: dict[int, str] = {}  # each message's object: its first record's label
    for item in listed:
        subjects.setdefault(item.position, _own_label(item))
    newest: dict[str, tuple[int, dict[str, set[str]]]] = {}  # object: (message, its say)
    for item in listed:
        subject, label = subjects[item.position], _label(item)
        if not (subject and label):
            continue
        position, said = newest.setdefault(subject, (item.position, {}))
        if position == item.position:
            parts = item.text[len(label) + 2 :].split(", ")
            keys = (p.rpartition(" ")[0] for p in parts if " " in p)
            said.setdefault(label, set()).update(parts, keys)
    out = []
    for item in listed:
        subject, label = subjects[item.position], _label(item)
        if not subject or not label or newest[subject][0] == item.position:
            out.append(item)
        elif (trimmed := _trimmed(item, label, newest[subject][1])) is not None:
            out.append(trimmed)
    return out


#: An answer's amount labelled as a balance, what is left or owed (``Remaining balance
#: $55``, ``balance due $20``): a state, which a later answer may state again, updated.
#: Not a price or a total (``Total Price $207``): an answer lists one per option, and a
#: later one is another option's, not the same one's updated.
_NAMED_AMOUNT = re.compile(
    r"((?i:[\w' -]*\b(?:balance|remaining|left|outstanding|owed|owing|due)\b[\w' -]*))"
    r" [$€£¥]\d[\d,]*(?:\.\d+)?"
)


def _newest_amounts(items: list[Item], texts: Sequence[str]) -> list[Item]:
    """``items`` of :data:`CHANGED` (newest message first) without an answer's
    labelled amount (:data:`_NAMED_AMOUNT`) that a newer message says again under the
    same label, and names every id (:data:`_ID_WORD`) its own message names, if any
    (``texts``: the messages' texts): the final state of what changed (issue 15). tau-bench 0-0 kept
    ``Remaining balance $5`` beside the newer ``Remaining balance $55``, and which was
    current could not be told; two gift cards' balances, each told in a message that
    names its card, are two states."""
    newest: dict[str, frozenset[str]] = {}  # label: the ids of its newest message
    out = []
    for item in items:
        named = _NAMED_AMOUNT.fullmatch(item.text) if item.section == "facts" else None
        if named is not None:
            label = named.group(1).lower()
            words = _ITEM_WORD.findall(texts[item.position])
            ids = frozenset(w for w in words if _ID_WORD.fullmatch(w))
            if label in newest and ids <= newest[label]:
                continue  # a newer message stated it again, of the same things
            newest.setdefault(label, ids)
        out.append(item)
    return out


def _label(item: Item) -> str:
    """The label of ``item`` when it is a record (``flight HAT235``, ``passengers``),
    else ``""``."""
    label, colon, _ = item.text.partition(": ")
    return label if item.section == "facts" and colon else ""


def _own_label(item: Item) -> str:
    """The label of ``item`` when it is a record of an object with an id (``flight
    HAT235``), else ``""``."""
    label = _label(item)
    return label if _id_of(label) else ""


def _id_of(label: str) -> str:
    """The id of the object a record's ``label`` names, its last word when that holds
    a digit and follows the kind of thing (``HAT235`` of ``flight HAT235``), else
    ``""``."""
    kind, space, own = label.rpartition(" ")
    return own if space and kind and _DIGIT.search(own) else ""


def _trimmed(item: Item, label: str, newer: Mapping[str, set[str]]) -> Item | None:
    """``item``, an older record under ``label`` of an object a newer result told again
    (``newer``: what that one's records said, by label, values and their keys), with
    only what the newer did not say again: ``None`` for a part of the object the newer
    no longer has (a flight, when it lists flights) or a field of no id it restates
    (``passengers``); else the values it has no key for, and its values of no key when
    the newer record says none of them again (:func:`_unkeyed`: ``economy`` beside
    ``mia_1, BOS→MSP, business``; a status alone, ``cancelled``, leaves them)."""
    said = newer.get(label)
    if said is None:
        kinds = {other.partition(" ")[0] for other in newer}
        return None if label.partition(" ")[0] in kinds else item
    if " " not in label:
        return None
    parts = item.text[len(label) + 2 :].split(", ")
    restated = any(" " not in p and p in said for p in parts)
    kept = [p for p in parts if p not in said and _unkeyed(p, said, restated)]
    return dataclasses.replace(item, text=f"{label}: {', '.join(kept)}") if kept else None


def _unkeyed(part: str, said: set[str], restated: bool) -> bool:
    """Whether ``part`` of an older record is no value a newer one of the same object
    gave anew: its key is not among ``said``, or, with no key, the newer record has not
    ``restated`` the values of no key (it shares none with the older: a status alone)."""
    key = part.rpartition(" ")[0]
    return key not in said if key else not restated


def _first_rank(item: Item) -> tuple[int, int, int, int]:
    """Sort key of the first tiers' items: :meth:`Item.rank`, but within a tier the
    facts the user typed first (a few tokens each, where an action with its arguments
    takes tens), then the error lines and the calls whose outcome is an error
    (:data:`ctxcli.summarizers.records.ERROR_OUTCOME`: what not to do again), then the
    rest."""
    tier, newest, order = item.rank()
    if item.section == "facts":
        return tier, 0, newest, order
    failed = item.section == "errors" or (
        rec.ERROR_OUTCOME.search(item.text.rpartition(" → ")[2]) is not None
    )
    return tier, 1 if failed else 2, newest, order


#: A word that holds a fact: one with two or more digits (an id, a number, a date's
#: part), an amount, a name with a digit (``HAT1``); not a lone digit, a count
#: (``total_baggages 3``), which says less than an id of its length.
_DIGIT_WORD = re.compile(r"[\w$€£¥.,-]*\d[\w.,-]*\d[\w.,-]*|[$€£¥]\d|[A-Za-z_][\w-]*\d[\w-]*")


def _by_density(items: list[Item]) -> list[Item]:
    """``items`` of :data:`CHANGED`, densest message first: the most words that hold a
    fact (:data:`_DIGIT_WORD`) per character over all a message gives to the tier (an
    answer's ``Refund $6,594`` before a reservation of ``…, total_baggages 3``), so
    the bound keeps the most facts of the final state; then newest first. A message's
    items stay together and in their order: a reservation's flights and payments
    never come without it."""
    words: dict[int, int] = {}
    chars: dict[int, int] = {}
    for item in items:
        words[item.position] = words.get(item.position, 0) + len(_DIGIT_WORD.findall(item.text))
        chars[item.position] = chars.get(item.position, 0) + len(item.text) + 8
    return sorted(
        items, key=lambda i: (-words[i.position] / chars[i.position], -i.position, i.order)
    )


def _previous_items(previous: str | None) -> list[Item]:
    """The items of an earlier summary, older than every message: its first request
    the task."""
    if not previous:
        return []
    items = []
    tiers = {
        "requests": REQUESTED,
        "instructions": ACTED,
        "errors": ACTED,
        "facts": CHANGED,
        "notes": NOTES,
    }
    for section, said in parse_summary(previous).items():
        for order, text in enumerate(said):
            tier = tiers.get(section, LOOKUP)
            if section == "requests" and order == 0:
                tier = TASK
            if section == "actions":
                tier = ACTED if rec.changes_state(text.partition("(")[0]) else LOOKUP
            items.append(Item(section, text, tier, -1, order, order))
    return items


#: How many characters of the requests (code left out) say the language a summary's
#: labels are in: a request opens with what the user asks, in their words, and may
#: go on with code or data (glaive: a Chinese question, then a Scala listing).
REQUEST_SAMPLE_CHARS = 200

#: The ranking :meth:`Extractive.measure` computed last in this thread, for the
#: :meth:`Extractive.summarize` of the same messages that often follows it.
_MEASURED = threading.local()


class _Ranking:
    """A ranking (an iterator of items, best first) read no further than asked, and
    read once: each pass over it gives the items read so far, then reads on."""

    def __init__(self, items: Iterator[Item]) -> None:
        self._items = items
        self._read: list[Item] = []

    def __iter__(self) -> Iterator[Item]:
        k = 0
        while True:
            if k == len(self._read):
                item = next(self._items, None)
                if item is None:
                    return
                self._read.append(item)
            yield self._read[k]
            k += 1


def _measured(
    messages: Sequence[Mapping[str, Any]], previous: str | None, hint: str | None
) -> tuple[_Ranking, str] | None:
    """The ranking and language :meth:`Extractive.measure` found for these very
    ``messages`` (equal ones), ``previous`` and ``hint``, if they were the last
    measured."""
    slot = getattr(_MEASURED, "slot", None)
    if slot is None or slot[1] != (previous, hint) or len(slot[0]) != len(messages):
        return None
    if not all(a is b or a == b for a, b in zip(slot[0], messages)):
        return None
    return slot[2], slot[3]


class Extractive:
    """The default summarizer (see the module docstring). Thread-safe, and stateless
    but for the last ranking :meth:`measure` found in each thread;
    :data:`EXTRACTIVE` is the one the others use."""

    concurrency = 1
    offline = True
    stats = None

    def language_of(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        hint: str | None = None,
    ) -> str:
        """The language (``"en"`` or ``"zh"``) :meth:`summarize` writes its labels in
        for the same arguments: that of the requests' first
        :data:`REQUEST_SAMPLE_CHARS` characters, their code left out (the previous
        summary's, then the user's messages; not of the calls and JSON results beside
        them, which would make a Chinese chat's labels English); with no request
        among them, or none with a letter (steps alone: a call and its result),
        ``hint`` when given (the conversation's: the user's language), else that of
        the messages' text."""
        known = _measured(messages, previous, hint)
        return known[1] if known else self._read(hosted_calls(messages), previous, hint)[3]

    def _read(
        self, messages: Sequence[Mapping[str, Any]], previous: str | None, hint: str | None
    ) -> tuple[list[Item], list[str], list[str], str, tuple[dict[int, str], Paired]]:
        """``(earlier summary's items, texts, kinds, language, (each result's call
        name, the calls with their results))`` (the language: see
        :meth:`language_of`); a result's text without the lines Codex's exec tools
        open it with (:func:`ctxcli.summarizers.records.without_exec_head`)."""
        earlier = _previous_items(previous)
        texts = [_with_thoughts(message) for message in messages]
        has_task = any(item.tier == TASK for item in earlier)
        paired = _results(messages)
        names = _result_names(messages, paired)
        kinds = _reports(messages, _kinds(messages, texts, has_task=has_task), names)
        texts = [rec.without_exec_head(t) if k in _RESULTS else t for t, k in zip(texts, kinds)]
        requests = [item.text for item in earlier if item.section == "requests"]
        requests += [t for t, k in zip(texts, kinds) if k in ("task", "user")]
        lang = language(requests, REQUEST_SAMPLE_CHARS, "") or hint or language(texts)
        return earlier, texts, kinds, lang, (names, paired)

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
        hint: str | None = None,
    ) -> str:
        """Summary body of ``messages`` merged with ``previous``, within ``max_tokens``
        tokens (as counted by ``counter``): the longest prefix of the ranking that fits
        (see the module docstring), its labels in the language :meth:`language_of`
        gives with ``hint``. Never raises for odd content."""
        known = _measured(messages, previous, hint)
        if known:
            return _render(known[0], LABELS[known[1]], max_tokens, counter)
        readable = hosted_calls(messages)
        earlier, texts, kinds, lang, names = self._read(readable, previous, hint)
        ranked = _rank(_stream(readable, texts, kinds, earlier, names))
        return _render(ranked, LABELS[lang], max_tokens, counter)

    def measure(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        counter: TokenCounter,
        bound: int | None = None,
        hint: str | None = None,
    ) -> int:
        """Tokens the body of :meth:`summarize` takes with no bound: every ranked item
        with what leads it (:func:`_lead`), as :func:`_render` costs them (the joined
        text may count a token or two more or fewer). With ``bound`` (tokens), reading
        stops at the first item that takes the count past it: the count returned is
        then more than ``bound``, and the messages' later tiers are read only as far
        as that item (see the module docstring); ``hint``: see :meth:`language_of`.
        The ranking is kept, read that far, for a :meth:`summarize` of the same
        messages and ``hint``."""
        readable = hosted_calls(messages)
        earlier, texts, kinds, lang, names = self._read(readable, previous, hint)
        ranked = _Ranking(_rank(_stream(readable, texts, kinds, earlier, names)))
        _MEASURED.slot = (list(messages), (previous, hint), ranked, lang)
        used = 0
        for _, _, cost, _ in _costed(ranked, LABELS[lang], counter):
            used += cost
            if bound is not None and used > bound:
                break
        return used


#: The extractive summarizer, shared (the summary stage knows it by identity).
EXTRACTIVE = Extractive()


def _rank(items: Iterable[Item]) -> Iterator[Item]:
    """``items`` (best first) each text once (a fact once whatever its case), without
    the short facts an item ranked before them already says, and without the notes a
    note or an action's outcome ranked before them says (:func:`_alike`: an answer that
    repeats the thought before it, a sub-agent's report its call's outcome told)."""
    seen: set[str] = set()  # :func:`_said_key` of each item said
    said = ""  # what was said so far, one item a line
    noted: list[tuple[frozenset[str], frozenset[str]]] = []  # words, facts of notes, outcomes
    owners: dict[int, str] = {}  # the last record with an id read of each message
    for item in items:
        owner = _owner(item, owners)
        key = _said_key(item) + owner
        if key in seen:
            continue  # ``Certificate 7504069 $250`` after ``certificate 7504069 $250``
        if _repeats(item, noted):
            continue  # the answer that says what the thought before it said
        short = item.section == "facts" and len(item.text) <= FACT_CHARS
        if short and not owner and _holds(said, item.text):
            continue
        values = item.text.partition(": ")[2] if item.section == "facts" else ""
        if values and not owner and values in said and _told_of(item.text, values, said):
            continue  # a record a look-up's action already shows (its gist)
        shown = _unsaid(item, values, said) if values else _gist_unsaid(item, said)
        seen.add(key)
        said += item.text + "\n"
        if shown is not None:
            yield shown


def _owner(item: Item, owners: dict[int, str]) -> str:
    """The record ``item`` is part of, when it is a part with no id of its own
    (``passengers: Amelia Davis 1984-03-05`` of ``reservation UDMOP1: …``): the last
    record with an id (:func:`_id_of`) the ranking gave of the same message, as the
    parts of a result's records are ranked in their order; ``""`` for any other item.
    Two reservations of one passenger each have that line, and each keeps it; one
    said once as said again (the same record, twice) still goes. ``owners`` is
    updated with ``item`` when it is a record with an id."""
    if item.section != "facts" or ": " not in item.text:
        return ""
    label = item.text.partition(": ")[0]
    if _id_of(label):
        owners[item.position] = item.text
        return ""
    return owners.get(item.position, "")


def _said_key(item: Item) -> str:
    """What tells ``item`` from the items said before it: its text, a fact's in lower
    case."""
    return item.text.lower() if item.section == "facts" else item.text


def _gist_unsaid(item: Item, said: str) -> Item:
    """``item``, an action whose outcome is the gist of a record a line of ``said``
    gave (``get_user_details(daiki_muller_1116) → name Daiki Muller, …`` after
    ``get_user_details: name Daiki Muller, …``, the final state ranking first), or a
    look-up of an object whose record a line gave (:func:`_newer_record`: ``→
    james_9828, business`` after ``reservation GV1N64: james_9828, business,
    cancelled``), with ``ok`` for that outcome; any other item as it is."""
    if item.section != "actions":
        return item
    head, arrow, outcome = item.text.rpartition(" → ")
    if not arrow or outcome == "ok":
        return item
    if f": {outcome}\n" not in said and not _newer_record(head, outcome, said):
        return item
    return dataclasses.replace(item, text=f"{head} → ok")


def _newer_record(call: str, outcome: str, said: str) -> bool:
    """Whether a line of ``said`` is a record of an object with an id the ``call``
    (``get_reservation_details(YAX4DR``) names: its final state, which a look-up's
    ``outcome`` said at its time again, or stale; never for a call that may change
    state (its outcome says what it made: ``ok, reservation HATHAT``) nor an error."""
    if rec.changes_state(call.partition("(")[0]) or rec.ERROR_OUTCOME.search(outcome):
        return False
    ids = (_id_of(line.partition(": ")[0]) for line in said.splitlines())
    return any(own and _holds(call, own) for own in ids)


#: How alike two notes' words must be for the later to say nothing new (the share
#: of the words either says that both say): "XEHM4B: Unfortunately, it cannot be
#: canceled for a refund …" after "XEHM4B: It cannot be canceled for a refund …".
ALIKE_NOTES = 0.7


def _repeats(item: Item, noted: list[tuple[frozenset[str], frozenset[str]]]) -> bool:
    """Whether ``item`` is a note that says what a note or an action's outcome ranked
    before it said (``noted``: their words and facts, :func:`_told`), which it adds to
    when it says something new."""
    if item.section == "notes":
        told = _told(item.text)
        if any(_alike(*told, earlier) for earlier in noted):
            return True
        noted.append(told)
    elif item.section == "actions" and (told := _told(item.text.rpartition(" → ")[2]))[0]:
        noted.append(told)
    return False


def _told(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The content words and the words that hold a fact of ``text`` (a note, an
    action's outcome), as :func:`_alike` compares them."""
    return content_words(text), frozenset(_DIGIT_WORD.findall(text))


def _alike(
    words: frozenset[str], facts: frozenset[str], earlier: tuple[frozenset[str], frozenset[str]]
) -> bool:
    """Whether a note of ``words`` and ``facts`` says what an ``earlier`` one (its
    words and facts) said: every fact of it, and words alike by :data:`ALIKE_NOTES`."""
    before, known = earlier
    return facts <= known and len(words & before) >= ALIKE_NOTES * len(words | before) > 0


def _told_of(text: str, values: str, said: str) -> bool:
    """Whether a line of ``said`` that holds a record's ``values`` (``text``: ``label:
    values``) names the record's own id too, when its label has one: a look-up's gist
    of that object; ``certificate_9984806: amount 250`` tells nothing of
    ``certificate_2765295: amount 250``."""
    own = text[: -len(values) - 2].rpartition(" ")[2]
    if not _DIGIT.search(own):
        return True
    return any(own in line for line in said.splitlines() if values in line)


def _unsaid(item: Item, values: str, said: str) -> Item | None:
    """A record of an object with an id (``reservation GV1N64``) told by the values no
    line said before with that id gave (:data:`_VALUE_SEP`: a look-up's gist, the call
    that changed it): ``flight HAT028: 2024-05-21, price 105`` after
    ``update_reservation_flights(…, HAT028 (each date 2024-05-21), …)`` is ``flight
    HAT028: price 105``; ``None`` when it has none left."""
    label = item.text[: -len(values) - 2]
    own = _id_of(label)
    if not own or own not in said:
        return item
    given: set[str] = set()
    for line in said.splitlines():
        if own not in line:
            continue  # nor its label, which ends in it
        pieces = _VALUE_SEP.split(line)
        if own in pieces or label in pieces:
            given.update(pieces)
    parts = values.split(", ")
    kept = [part for part in parts if part not in given and not _value_given(part, given)]
    if len(kept) == len(parts):
        return item
    return dataclasses.replace(item, text=f"{label}: {', '.join(kept)}") if kept else None


def _value_given(part: str, given: set[str]) -> bool:
    """Whether ``part``, a record's ``key value`` (``amount 250``), has a value of two
    or more characters that a line naming the same object gave (``…, 250, …``)."""
    value = part.rpartition(" ")[2]
    return value != part and len(value) >= 2 and value in given


#: What parts a line into its values: an action's arguments and outcome, a record's
#: label and values, merged values, a run's shared value (``HAT077 (each date …)``).
_VALUE_SEP = re.compile(r",? \(each [^ ()]+ |[,;] | → | \| |: |[()]")


def _render(
    ranked: Iterable[Item], labels: Mapping[str, str], max_tokens: int, counter: TokenCounter
) -> str:
    """The longest prefix of ``ranked`` whose body fits ``max_tokens`` tokens, written
    out (:func:`_text`): items are costed one by one with what leads them (their
    separator, and their section's label with the first: :func:`_lead`), the two
    counted together as the joined body has them, less the bare facts taken before
    that the item says (:func:`_costed`: they go when it comes); the first that does
    not fit is cut to the room left (:func:`_cut_item`), so a larger bound shows more
    of it. The joined text is measured at the end, as counts of parts can undercount
    their join by a token or two (a label that went with a bare fact an item took the
    place of): the cut item is cut to as much less, and an item taken off for it gives
    back the bare facts it took the place of."""
    picked: list[Item] = []
    displaced: dict[int, list[Item]] = {}  # id of an item taken: the bare facts it said
    used = 0
    cut: tuple[Item, Item, str, int] | None = None  # (cut, its item, lead, room)
    for item, lead, cost, said in _costed(ranked, labels, counter):
        if used + cost > max_tokens:
            room = max_tokens - used
            shorter = _cut_item(item, room, lead, counter)
            if shorter is not None:
                picked.append(shorter)
                cut = (shorter, item, lead, room)
            break
        if said:
            picked = _without(picked, said)
            displaced[id(item)] = said
        picked.append(item)
        used += cost
    text = _text(picked, labels)
    while picked and (over := counter.text(text) - max_tokens) > 0:
        last = picked.pop()
        if cut is not None and last is cut[0]:
            shorter = _cut_item(cut[1], cut[3] - over, cut[2], counter)
            if shorter is not None:
                picked.append(shorter)
                cut = (shorter, cut[1], cut[2], cut[3] - over)
        else:
            picked += displaced.pop(id(last), [])
        text = _text(picked, labels)
    return text


def _cut_item(item: Item, room: int, lead: str, counter: TokenCounter) -> Item | None:
    """``item`` cut to ``room`` tokens with its ``lead`` (an action by
    :func:`_cut_call`, else, or when that leaves nothing, by :func:`_cut_to`), ``None``
    when the room is under :data:`MIN_CUT_TOKENS` or the cut says nothing of it
    (:func:`_cut_says`). A failed action is never cut to a head of its call: that
    hides the failure (``book_reservation(mohamed_silva_9265 …`` of three calls that
    each failed read as a booking made)."""
    if room < MIN_CUT_TOKENS:
        return None
    cut = _cut_call(item.text, room, counter, lead) if item.section == "actions" else ""
    if not cut and item.section == "actions" and _failed(item.text):
        return None
    if not cut:
        cut = _cut_to(item.text, room, counter, lead, values=item.section in _INLINE)
    return dataclasses.replace(item, text=cut) if _cut_says(cut, item) else None


def _costed(
    ranked: Iterable[Item], labels: Mapping[str, str], counter: TokenCounter
) -> Iterator[tuple[Item, str, int, list[Item]]]:
    """``(item, lead, tokens, said)`` of each of ``ranked`` in turn, costed as the body
    joins it after the ones before (:func:`_lead`, counted with its text), each taken
    as written once the next is asked for. ``said``: the bare facts taken before
    (a fact item with no label, :data:`FACT_CHARS` or shorter) that the item's text
    holds as a whole word (``6276644`` in ``payment_id gift_card_6276644``), which go
    when it is taken; the tokens are net of theirs (each as it was costed: its label
    goes with the first, so the join may count a token or two more or fewer)."""
    picked: list[Item] = []
    bare: list[tuple[Item, int]] = []  # the bare facts among them, each with its tokens
    sections: set[str] = set()
    for item in ranked:
        fact = _bare(item)
        gone = [b for b in bare if b[0].text in item.text and _holds(item.text, b[0].text)]
        said = [p for p, _ in gone]
        if said:
            picked = _without(picked, said)
            bare = [b for b in bare if all(b[0] is not q for q in said)]
            sections = {p.section for p in picked}
        lead = _lead(item, picked, sections, labels)
        cost = counter.text(lead + item.text)
        yield item, lead, cost - sum(tokens for _, tokens in gone), said
        picked.append(item)
        if fact:
            bare.append((item, cost))
        sections.add(item.section)


def _without(items: list[Item], gone: list[Item]) -> list[Item]:
    """``items`` but those of ``gone`` (the very items)."""
    ids = {id(item) for item in gone}
    return [item for item in items if id(item) not in ids]


def _bare(item: Item) -> bool:
    """Whether ``item`` is a bare fact: of the facts, with no label, short."""
    return item.section == "facts" and len(item.text) <= FACT_CHARS and ": " not in item.text


#: What may follow a fact in a word that says it still: an ordinal's ending (``May
#: 20th``), an ISO date's time (``2024-05-14T05:35``).
_SAME_AFTER = re.compile(r"(?:st|nd|rd|th)\b|T\d")


def _holds(text: str, fact: str) -> bool:
    """Whether ``text`` holds ``fact`` as a whole word: no letter or digit beside it,
    nor a joiner that goes on to one (``7091239`` is not in ``7091239-2`` nor ``900``
    in ``SKU-900-XL``), nor before it one that follows a digit (``24`` is not in
    ``2024-05-24``); an id's tail after ``_`` is whole (``6276644`` of
    ``gift_card_6276644``), and so is a date before :data:`_SAME_AFTER`."""
    start = text.find(fact)
    while start >= 0:
        end = start + len(fact)
        before, after = text[max(0, start - 2) : start], text[end : end + 2]
        joined_before = before[-1:].isalnum() or (
            len(before) == 2 and before[1] in "-./" and before[0].isdigit()
        )
        joined_after = (after[:1].isalnum() and not _SAME_AFTER.match(text, end)) or (
            after[:1] in "-_./" and after[1:].isalnum()
        )
        if not joined_before and not joined_after:
            return True
        start = text.find(fact, start + 1)
    return False


def _cut_says(cut: str, item: Item) -> bool:
    """Whether ``cut``, the head of ``item`` that fits, says something: not filler
    alone ("Yes, please …", "好的， …"), and, of a request or note, not a head that
    stops before every id or number it gave ("Yes, please use the card ending …"), nor
    one of no number that stops inside a sentence with fewer than
    :data:`CUT_MIN_WORDS` content words ("If changing requires an …" of "…, I'm willing
    to do that": the condition without what it is of; "Fix the build. …" is a whole
    sentence). Such a head holds no fact, so dropping it costs a smaller budget none."""
    head = cut.removesuffix("…").strip()
    if not head or is_filler(head):
        return False
    if item.section not in ("requests", "notes") or _DIGIT.search(cut):
        return True
    if _DIGIT.search(item.text):
        return False
    return head.endswith(tuple(SENTENCE_ENDERS)) or len(content_words(head)) >= CUT_MIN_WORDS


def _lead(item: Item, picked: Sequence[Item], sections: set[str], labels: Mapping[str, str]) -> str:
    """What leads ``item`` in the body: its separator, and with the first of its
    section the label (and the line break before it)."""
    inline = item.section in _INLINE
    if item.section not in sections:
        return ("\n" if picked else "") + labels[item.section] + (" " if inline else "\n- ")
    if item.tier == TASK and any(p.tier == TASK for p in picked):
        return " "
    return "; " if inline else "\n- "


#: Where an item may be cut, its separator dropped: prose before a word, an action
#: or a record only between its values (whole ids and values are kept).
#: Where a text may be cut: before a space (and the comma, semicolon or colon before
#: it), or after a CJK mark of a pause or an end (Chinese has no spaces: a request of
#: one long sentence could not be cut at all).
_CUT_AT = re.compile(r"[,;:]? |(?<=[，；：。、！？])")
_CUT_BETWEEN_VALUES = re.compile(r", | → ")


def _cut_to(
    text: str, tokens: int, counter: TokenCounter, lead: str = "", *, values: bool = False
) -> str:
    """The longest head of ``text`` ending at a cut point (:data:`_CUT_AT`; with
    ``values``, an action's or record's, :data:`_CUT_BETWEEN_VALUES`), then `` …``,
    that fits ``tokens`` tokens after ``lead`` (``""`` if none), found by bisection on
    its cut points."""
    points = _CUT_BETWEEN_VALUES if values else _CUT_AT
    ends = [m.start() for m in points.finditer(text)]
    ends = [end for end in ends if end > 0]
    low = most_that_fit(
        len(ends), lambda k: counter.text(lead + text[: ends[k - 1]] + " …") <= tokens
    )
    return text[: ends[low - 1]] + " …" if low else ""


def _failed(action: str) -> bool:
    """Whether an ``action`` (``name(arguments) → outcome``) failed: its outcome is an
    error (:data:`ctxcli.summarizers.records.ERROR_OUTCOME`)."""
    arrow, outcome = action.rpartition(" → ")[1:]
    return bool(arrow and rec.ERROR_OUTCOME.search(outcome))


#: An action's call and how many times it was made (``book_reservation(…) ×3``).
_CALL_COUNT = re.compile(r"(?P<call>[^(]+\(.*)\)(?P<count> ×\d+)?", re.DOTALL)


def _cut_call(text: str, tokens: int, counter: TokenCounter, lead: str = "") -> str:
    """An action ``text`` (``name(arguments) → outcome``) with its arguments cut
    between values, its outcome whole, that fits ``tokens`` tokens after ``lead``
    (``update_reservation_flights(EQ1G6C, economy …) → ok``: whether it was done, and
    its error, say more than its last arguments); where no argument fits, an error
    (:data:`ctxcli.summarizers.records.ERROR_OUTCOME`) keeps none (``book_reservation(…)
    ×3 → Error: payment amount does not add up, …``), and then is cut too
    (:func:`_cut_to`); ``""`` when no such cut fits, or the action has no outcome."""
    call, arrow, outcome = text.rpartition(" → ")
    parts = _CALL_COUNT.fullmatch(call) if arrow else None
    if parts is None:
        return ""
    head, count = parts["call"], parts["count"] or ""
    tail = f" …){count} → {outcome}"
    ends = [m.start() for m in re.finditer(", ", head)]
    low = most_that_fit(
        len(ends), lambda k: counter.text(lead + head[: ends[k - 1]] + tail) <= tokens
    )
    if low or not rec.ERROR_OUTCOME.search(outcome):  # ``cancel_reservation(K1NW8N …``
        return head[: ends[low - 1]] + tail if low else ""  # says more than ``(…) → ok``
    bare = f"{head.partition('(')[0]}(…){count} → "
    if counter.text(lead + bare + outcome) <= tokens:
        return bare + outcome
    cut = _cut_to(outcome, tokens, counter, lead + bare, values=True)
    return bare + cut if cut else ""


def _unrepeated(requests: list[str]) -> list[str]:
    """``requests`` without the sentences an earlier one said word for word (a user
    who ends every message with the same line): a request left with none goes."""
    out: list[str] = []
    said: list[str] = []
    for request in requests:
        own = sentences(request)
        kept = [s for s in own if len(s) < NOTE_MIN_CHARS or s not in said]
        if len(kept) < len(own):
            request = " ".join(kept)
        said += own
        if request:
            out.append(request)
    return out


def _text(picked: Sequence[Item], labels: Mapping[str, str]) -> str:
    """The body of the ``picked`` items: each section under its label, its items in
    the order things happened, the task's sentences on one line."""
    lines = []
    for key in SECTIONS:
        chosen = sorted((i for i in picked if i.section == key), key=lambda i: (i.position, i.seq))
        if not chosen:
            continue
        texts = [i.text for i in chosen if i.tier != TASK]
        task = [i.text for i in chosen if i.tier == TASK]
        if task:
            texts.insert(0, joined(task))
        if key == "requests":
            texts = _unrepeated(texts)
        if key in _INLINE:
            lines.append(f"{labels[key]} {'; '.join(texts)}")
        else:
            lines.append(labels[key])
            lines += [f"- {text}" for text in texts]
    return "\n".join(lines)
