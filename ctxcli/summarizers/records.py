"""What tool calls and their results give a summary: labelled records and actions.

A **record** is one JSON object of a tool result (or tool-call arguments) written on
one line under its own label, its values never mixed with another object's: the
object's id (``reservation JG7FMM: ATL→SFO, economy, 2024-05-20, HAT123, 480``), or
the key it sits under. An **action** is a call as ``name(identifying arguments) →
outcome``, the outcome ``ok`` or the result's first error line.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from ctxcli.summarizers.facts import PATH, error_lines
from ctxcli.summarizers.text import own_sentences, shorten

#: The longest record and action (characters): past that a record is a dump.
RECORD_CHARS = 200
ACTION_ARGUMENT_CHARS = 240
ARGUMENT_CHARS = 60
#: A string argument longer than this (characters) with a space in it is prose.
PROSE_CHARS = 40
#: A result this short (characters, one line, not JSON) is shown as the outcome.
SHORT_RESULT_CHARS = 40
#: The most records one tool result gives.
RECORDS_PER_RESULT = 24
#: Keys whose value names the object they are in (``reservation_id``, ``flight_number``).
_ID_KEY = re.compile(r"(?:^|_)(?:id|number|code|no)$", re.IGNORECASE)
#: Calls that only read: they come after the calls that change state, see
#: :func:`changes_state`.
_LOOKUP = re.compile(
    r"^(?:get|search|list|find|read|open|view|show|fetch|lookup|look|query|check|calculate"
    r"|think|grep|glob|ls|cat|scroll|goto|describe|count|todoread|websearch|webfetch)"
    r"(?:_|$|[A-Z])",
    re.IGNORECASE,
)
_SPACE = re.compile(r"\s+")
_DIGIT = re.compile(r"\d")
#: Keys whose value is a state (``available``): said only where siblings differ in it.
_STATUS_KEY = re.compile(r"(?:^|_)(?:status|state)$", re.IGNORECASE)
#: The seconds of a time of day (``07:00:00`` and ``08:28:51`` are written ``07:00`` and
#: ``08:28``: a minute is as precise as a later turn needs, two tokens less).
_SECONDS = re.compile(r"(?<!\d)(\d{1,2}:\d\d):\d\d(?![\d.,:])")
#: A nested object of whole numbers all below this is a set of counts (seats left):
#: no fact a later turn needs, so a record leaves it out.
SMALL_COUNT = 100
#: An outcome that reports a failure (see :func:`outcome`).
ERROR_OUTCOME = re.compile(
    r"(?i)error|exception|traceback|failed|fatal|panic|denied|not found|^exit -?[1-9]"
)


def changes_state(name: str) -> bool:
    """Whether a call named ``name`` may change state (a booking, an edit, a command):
    any call but the look-ups (``get_*``, ``search_*``, ``Read``, ``Grep`` ...)."""
    return not _LOOKUP.match(name)


def parse_json(text: str) -> Any:
    """The JSON value ``text`` holds, or ``None`` when it holds none; also a Python
    literal of one, up to :data:`LITERAL_CHARS` (``{'area': 7.0686, 'unit': 'square
    meters'}``: the ``str()`` of a dict that glaive and LLaMA-Factory data log as a
    tool's result), read by :func:`ast.literal_eval`, which runs no code."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return None
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError:
        pass
    if "'" not in stripped or len(stripped) > LITERAL_CHARS:
        return None
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) and _json_like(value) else None


def _json_like(value: Any) -> bool:
    """Whether ``value`` holds only what JSON has as orjson reads it: no tuple, set,
    bytes or complex, no integer past 64 bits (``0xfff…`` of 3,600 digits, which
    ``str()`` refuses past 4,300 decimal digits), no infinite float (``1e400``)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_like(item) for item in value)
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str)


#: The longest text :func:`parse_json` reads as a Python literal (characters).
LITERAL_CHARS = 20_000


def records(value: Any, label: str) -> list[str]:
    """The records of a parsed JSON value (at most :data:`RECORDS_PER_RESULT`), each
    ``label: values`` with the label its own object's id when it has one; objects of
    one label in a row whose values all say their key are one record while it is
    within :data:`RECORD_CHARS` (``payment gift_card_1642017: amount 5700, amount
    -5700``: a payment and its refund, which a summary cut to fit had told as the
    payment alone; ``user u1: o1, delivered`` and ``user u1: o2, pending`` stay apart,
    their values no longer told apart once joined)."""
    out: list[tuple[str, list[str]]] = []
    for name, values in _walk(value, label):
        if values and out and out[-1][0] == name and _joins(name, out[-1][1], values):
            out[-1][1].extend(values)
        elif values:
            out.append((name, list(values)))
        if len(out) > RECORDS_PER_RESULT:
            break
    return [shorten(f"{n}: {', '.join(v)}", RECORD_CHARS) for n, v in out[:RECORDS_PER_RESULT]]


#: A value that says its key (``amount 5700``), not a bare one (``o1``, ``delivered``).
_KEYED = re.compile(r"[A-Za-z_]\w* \S")


def _joins(label: str, said: Sequence[str], values: Sequence[str]) -> bool:
    """Whether an object's ``values`` join the record of ``label`` that ``said`` the
    values before them (see :func:`records`)."""
    both = [*said, *values]
    if not all(_KEYED.match(v) for v in both):
        return False
    return len(label) + 2 + sum(len(v) + 2 for v in both) - 2 <= RECORD_CHARS


def _walk(value: Any, label: str) -> Iterator[tuple[str, list[str]]]:
    """``(label, values)`` of each object in ``value``, the outer one first; a nested
    object short enough is written inside its parent's record, a list of scalars too
    long for that is one record of its own."""
    if isinstance(value, list):
        flat = _flat_objects(value, label)
        if flat:
            yield label, flat  # ``passengers: Fatima Patel 1950-05-04, Omar Davis …``
            return
        if value and all(_scalar(item) for item in value):
            yield label, [str(item) for item in value]  # ``reservations: 82K959, 790JYN``
            return
        shared = _shared_states(value)
        for item in value:
            if isinstance(item, Mapping) and shared:
                item = {k: v for k, v in item.items() if k not in shared}
            yield from _walk(item, label)
        return
    if not isinstance(value, Mapping):
        if _scalar(value):
            yield label, [str(value)]
        return
    label, values, nested = _object(value, label)
    yield label, values
    for key, item in nested:
        yield from _walk(item, key)


def _object(value: Mapping[str, Any], label: str) -> tuple[str, list[str], list[tuple[str, Any]]]:
    """``(label, values, nested objects)`` of one JSON object (see :func:`_walk`)."""
    label, id_key = _label(value, label)
    values: list[str] = []
    nested: list[tuple[str, Any]] = []
    route = _route(value)
    for key, item in value.items():
        if _said(key, item, id_key, route, label):
            continue
        if _scalar(item) or isinstance(item, bool):
            if _NOTHING.fullmatch(str(item)):
                continue  # ``none`` says nothing
            if _YES_NO.fullmatch(str(item)):  # ``no`` alone says nothing: after its key
                values.append(f"{key} {str(item).lower()}")  # ``insurance yes``
            else:
                values.append(route if key == "origin" and route else _shown(str(key), item))
            continue
        inline = _inline(item) if isinstance(item, (Mapping, list)) and item else None
        if inline is not None:
            values.append(f"{key} {inline}")
        elif isinstance(item, (Mapping, list)) and item:
            nested.append((str(key), item))
    return label, values, nested


#: The key of an object that tells how a call ran, not what it found: a search API's
#: ``requestTags`` (its feature flags, moderation settings, providers' timeouts) and
#: ``costDollars``, MCP's ``_meta``, a ``debug`` or ``telemetry`` object. Exa's answer
#: to a web search gave about 400 of an 850-token summary to them, beside results that
#: said who won. Names alone, whole: a wider pattern (a leading ``_``, ``…config``,
#: ``…flags``, ``tags``, ``usage``) dropped what results are (Elasticsearch's
#: ``_source``, HAL's ``_embedded``, a ``get_config``'s ``config``, Docker's
#: ``Config``, a VM's ``tags``, a billing report's ``usage``).
_ABOUT_THE_CALL = re.compile(r"(?i)request_?tags|cost_?dollars|_meta|debug|telemetry")


def _flat_objects(items: list[Any], label: str) -> list[str]:
    """The values of each of ``items``, objects of scalars with no id of their own (a
    reservation's passengers), each object's values joined by spaces: one record of
    the list, so none of them is left out as said by another list's record of the
    same text, and one passenger reads as two do (``passengers: Omar Davis
    1982-10-19``, not ``Omar, Davis, 1982-10-19``); ``[]`` for any other list."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return []
    out = []
    for item in items:
        own, values, nested = _object(item, label)
        if own != label or nested or not values:
            return []
        out.append(" ".join(values))
    return out


def _shared_states(items: Sequence[Any]) -> set[str]:
    """The state keys (:data:`_STATUS_KEY`) that two or more sibling objects all hold
    with one value (every flight of a search ``available``): they tell nothing apart."""
    objects = [item for item in items if isinstance(item, Mapping)]
    if len(objects) < 2:
        return set()
    first = objects[0]
    return {
        str(key)
        for key, item in first.items()
        if _STATUS_KEY.search(str(key)) and all(o.get(key) == item for o in objects[1:])
    }


#: The key of a count (a plural noun: ``total_baggages``, ``passengers``), whose ``0``
#: a record leaves out: "none" is what a later turn assumes of what it is not told.
_NONE_COUNTED = re.compile(r"[a-z]s$")


def _counts(value: Any) -> bool:
    """Whether ``value`` is an object of small counts only (:data:`SMALL_COUNT`)."""
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < SMALL_COUNT
            for v in value.values()
        )
    )


def _said(key: str, item: Any, id_key: str | None, route: str, label: str) -> bool:
    """Whether an object's ``key`` says nothing its record does not: its id (in the
    label), a destination (in the route), a value the label holds (``credit_card`` of
    ``credit_card_4421486``), small counts (:func:`_counts`), or a count of none
    (:data:`_NONE_COUNTED`: ``total_baggages 0``, eight tokens for no bags), or how
    the call ran (an object under :data:`_ABOUT_THE_CALL`: ``requestTags``)."""
    if key == id_key or (key == "destination" and route) or _counts(item):
        return True
    if isinstance(item, Mapping) and _ABOUT_THE_CALL.fullmatch(str(key)):
        return True
    if item == 0 and isinstance(item, int) and _NONE_COUNTED.search(key):
        return True
    return isinstance(item, str) and bool(item) and item in label


def _label(value: Mapping[str, Any], label: str) -> tuple[str, str | None]:
    """``(label, key)``: the noun of the object's id key and the id, ``reservation
    JG7FMM`` of a ``reservation_id`` (``label`` and the id of a bare ``id``), and that
    key; else ``(label, None)``."""
    for key, item in value.items():
        if _ID_KEY.search(str(key)) and isinstance(item, (str, int)) and str(item):
            noun = _ID_KEY.sub("", str(key)).strip("_") or label
            named = str(item) if not noun or noun == str(item) else f"{noun} {item}"
            return named, str(key)
    return label, None


def _inline(value: Any) -> str | None:
    """A small nested value in one piece (``visa 7447``), or ``None`` when it is an
    object of its own or too long to be written inside its parent."""
    if isinstance(value, list) and all(_scalar(item) for item in value):
        text = " ".join(str(item) for item in value)
    elif isinstance(value, Mapping) and all(_scalar(item) for item in value.values()):
        if any(_ID_KEY.search(str(key)) for key in value):
            return None
        text = " ".join(_shown(str(key), item) for key, item in value.items())
    else:
        return None
    return text if len(text) <= 60 else None


def _shown(key: str, value: Any) -> str:
    """A value as a record shows it: a bare number after its key (``economy 121``), a
    time something happened after its key (``created_at 2024-05-15T15:00``: not the
    date of the flight), anything else alone."""
    if isinstance(value, (int, float)):
        return f"{key} {value}"
    text = _SECONDS.sub(r"\1", _SPACE.sub(" ", str(value)).strip())
    return f"{key} {text}" if _WHEN_KEY.search(key) else text


def _route(value: Mapping[str, Any]) -> str:
    """``ATL→SFO`` of an object's ``origin`` and ``destination``, else ``""``."""
    origin, destination = value.get("origin"), value.get("destination")
    if isinstance(origin, str) and isinstance(destination, str) and origin and destination:
        return f"{origin}→{destination}"
    return ""


def _scalar(value: Any) -> bool:
    return (isinstance(value, (str, int, float)) and not isinstance(value, bool)) and (
        str(value).strip() != ""
    )


def arguments_text(arguments: str) -> str:
    """The identifying arguments of a call: its scalar values in order, depth first
    (``JFK→SEA`` for an origin and destination, strings whitespace-collapsed and each
    within :data:`ARGUMENT_CHARS`), all within :data:`ACTION_ARGUMENT_CHARS`; when all
    are small values, those after their keys (:func:`_small_ones`); when the only
    argument is text of several lines, its first line (:func:`_opening`)."""
    value = parse_json(arguments) if arguments.strip() else None
    if value is None:
        return shorten(_SPACE.sub(" ", arguments), ACTION_ARGUMENT_CHARS)
    leaves = list(_leaves(value)) or _small_ones(value) or _opening(value)
    return shorten(", ".join(leaves), ACTION_ARGUMENT_CHARS)


def names_target(arguments: str) -> bool:
    """Whether a call's ``arguments`` (JSON) say what it acts on: any value its action
    shows (:func:`arguments_text`) but the first line of a text it writes
    (:func:`_opening`) or an edit's text before and after (:data:`_EDIT_KEYS`)."""
    value = parse_json(arguments) if arguments.strip() else None
    if value is None:
        return bool(arguments.strip())
    if isinstance(value, Mapping):
        edit = _edit_keys(value)
        value = {k: v for k, v in value.items() if k not in edit}
    return bool(next(_leaves(value), None) or _small_ones(value))


def _opening(value: Any) -> list[str]:
    """The first line of the first text of several lines among an arguments object's
    values, within :data:`ARGUMENT_CHARS`: what tells a call that writes text and names
    no file (SWE-agent's ``insert``, whose ``text`` goes into the open file) from one
    with no arguments; ``[]`` when it holds no such text, or when that line is prose
    (a thought), of which a one-line value shows only its facts (:func:`_told`)."""
    if not isinstance(value, Mapping):
        return []
    for key, item in value.items():
        if isinstance(item, str) and "\n" in item.strip():
            line = _SPACE.sub(" ", next(line for line in item.splitlines() if line.strip()))
            line = line.strip()
            return [shorten(line, ARGUMENT_CHARS)] if _told(line, str(key)) == line else []
    return []


def _small_ones(value: Any) -> list[str]:
    """The small values of an arguments object each after its key (``radius 4``), for
    a call whose every argument is one (:data:`_SMALL`): shown
    alone they say nothing, but left out the call reads as one with no arguments
    (``circle_area() → ok``)."""
    if not isinstance(value, Mapping):
        return []
    pairs = [(str(k), _SPACE.sub(" ", str(v)).strip()) for k, v in value.items() if _scalar(v)]
    return [f"{k} {v}" for k, v in pairs if _SMALL.fullmatch(v)]


#: What a score counts as a fact (:mod:`ctxcli.score`): a word with a digit, a number
#: of three or more digits; an amount keeps its currency sign. A number is one only
#: where a word does not go on (``59XX6W`` and ``2024-05-01`` are words, whole).
_FACT_WORD = re.compile(
    r"(?>[$€£¥]?\d[\d,.]*\d)(?![A-Za-z_-])|[$€£¥]\d|[A-Za-z0-9][A-Za-z0-9_-]{3,}"
)
#: A small value with no label (a count ``3``, ``no``, ``true``): it says nothing alone.
_SMALL = re.compile(r"(?i)\d|yes|no|true|false|none|null")
_YES_NO = re.compile(r"(?i)yes|no|true|false")
_NOTHING = re.compile(r"(?i)none|null")
#: The key of when something happened (``created_at``, ``updated_at``).
_WHEN_KEY = re.compile(r"(?i)._at$")


#: Keys whose value is what the call did, shown itself even when it has spaces: a
#: command run, a search's pattern or query, a URL, a path, a calculator's expression
#: (``calculate((1859 - 140) * 2 + …)``, which as its numbers alone, ``1859 140 1679
#: 101 …``, said nothing of what was summed).
_SAID_KEY = re.compile(
    r"(?i)^(?:cmd|command|pattern|query|url|description|expression|formula)$|path|file"
)


#: Keys of an amount or a count of what a call acts on (a payment's ``amount``,
#: ``total_baggages``), whose small value says what was paid or taken.
_COUNTED_KEY = re.compile(r"(?i)amount|price|baggage|bags|quantity|count$|passengers|nights|seats")
#: Keys of a number that sets how a tool runs (``max_output_tokens``, ``timeout``,
#: ``yield_time_ms``), not what it acted on.
_KNOB_KEY = re.compile(r"(?i)max|limit|timeout|_ms$|tokens|yield|offset|width|height|depth")


def _told(leaf: str, key: str = "") -> str:
    """How an argument (under ``key``) shows in an action: a small amount or count
    after its key (:data:`_COUNTED_KEY`: ``amount 6``; none of it, ``0``, not at all);
    ``""`` for another small unlabelled value (:data:`_SMALL`) and for text of several
    lines (code, a file's
    content, a patch: what was written, not what identifies the call); a command,
    pattern, query, URL or path (:data:`_SAID_KEY`) itself; only the facts of prose (a
    thought: longer than :data:`PROSE_CHARS` with a space); ``""`` for a number that
    sets how the tool runs (:data:`_KNOB_KEY`); else itself. Whitespace is collapsed,
    and a control character shows in caret notation (``^C`` of the ``\\u0003`` a
    terminal is sent to stop a process)."""
    if "\n" in leaf.strip():
        return ""
    leaf = _CONTROL.sub(_caret, _SPACE.sub(" ", leaf).strip())
    if len(leaf) == 1 and leaf.isdigit() and leaf != "0" and _COUNTED_KEY.search(key):
        return f"{key} {leaf}"  # ``amount 6``, ``total_baggages 2``: what was paid, taken
    if _SMALL.fullmatch(leaf) or (_KNOB_KEY.search(key) and leaf.isdigit()):
        return ""
    if " " in leaf and len(leaf) > PROSE_CHARS and not _SAID_KEY.search(key):
        return " ".join(dict.fromkeys(w for w in _FACT_WORD.findall(leaf) if _DIGIT.search(w)))
    return leaf


#: A control character other than whitespace (C0, and DEL).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _caret(match: re.Match[str]) -> str:
    """Caret notation of one control character: ``^C`` for U+0003, ``^?`` for DEL."""
    return "^" + chr(ord(match.group()) ^ 0x40)


#: A call is written as its difference from a later one of the same name when at
#: most this many of its arguments differ, out of at least :data:`DIFF_MIN_ARGUMENTS`.
DIFF_MAX_ARGUMENTS = 2
DIFF_MIN_ARGUMENTS = 4


def difference(arguments: str, later: str) -> str | None:
    """What a call's ``arguments`` change of a later call's (``later``, both JSON) as
    ``key value`` parts (``amount 5``), when they differ in a few arguments only
    (:data:`DIFF_MAX_ARGUMENTS`), or in the shape of one (:func:`_changed_key`);
    ``None`` when they are the same, differ in more, or are not JSON."""
    mine, theirs = parse_json(arguments), parse_json(later)
    if mine is None or theirs is None:
        return None
    own, other = dict(_paths(mine, ())), dict(_paths(theirs, ()))
    if len(own) < DIFF_MIN_ARGUMENTS:
        return None
    if own.keys() != other.keys():
        return _changed_key(mine, theirs)
    changed = _changed(own, other)
    if not changed or len(changed) > DIFF_MAX_ARGUMENTS:
        return None
    if any(_SPACE.search(str(value)) for _, value in changed):
        return None  # a command or text that differs: the call is told by it itself
    names = (next((p for p in reversed(path) if isinstance(p, str)), "") for path, _ in changed)
    return ", ".join(
        f"{name} {shorten(_SPACE.sub(' ', str(value)), ARGUMENT_CHARS)}".strip()
        for name, (_, value) in zip(names, changed)
    )


def _changed(
    own: Mapping[tuple[str | int, ...], Any], other: Mapping[tuple[str | int, ...], Any]
) -> list[tuple[tuple[str | int, ...], Any]]:
    """``(path, value)`` of the leaves of ``own`` that differ in ``other`` (same
    paths), but numbers that set how the tool runs (:data:`_KNOB_KEY`)."""
    return [
        (path, value)
        for path, value in own.items()
        if other[path] != value and not (_KNOB_KEY.search(str(path[-1])) and _number(value))
    ]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit())


def _changed_key(mine: Any, theirs: Any) -> str | None:
    """``payment_methods certificate_8998287, 299``: the one argument of ``mine`` (a
    JSON object) that differs from ``theirs`` (one of the same keys) in shape, all its
    values, when every other argument is the same; else ``None``."""
    if not isinstance(mine, Mapping) or not isinstance(theirs, Mapping):
        return None
    if mine.keys() != theirs.keys():
        return None
    changed = [key for key in mine if mine[key] != theirs[key]]
    if len(changed) != 1:
        return None
    told = ", ".join(_leaves(mine[changed[0]]))
    return f"{changed[0]} {shorten(told, ACTION_ARGUMENT_CHARS)}".strip()


def _paths(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """``(path, scalar)`` of every leaf of a JSON value, keys and list indexes."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _paths(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*path, i))
    else:
        yield path, value


def _leaves(value: Any, key: str = "") -> Iterator[str]:
    """How each scalar of an arguments value shows (:func:`_told`, under its key)."""
    if isinstance(value, list):
        yield from _list_leaves(value, key)
    elif isinstance(value, Mapping):
        route = _route(value)
        edit = _edit_keys(value)
        for name, item in value.items():
            if name == "destination" and route or name in edit[:1]:
                continue
            if name == "origin" and route:
                yield route
            elif name in edit:
                changed = _changed_line(str(value[edit[0]]), str(item))
                if changed:
                    yield shorten(_SPACE.sub(" ", changed), ARGUMENT_CHARS)
            else:
                yield from _leaves(item, str(name))
    elif _scalar(value):
        text = _scalar_told(str(value), key)
        if text:
            yield text


def _scalar_told(leaf: str, key: str) -> str:
    """How one scalar argument (under ``key``) shows (:func:`_told`): a path whole, up
    to :data:`RECORD_CHARS` (what was touched); other text within
    :data:`ARGUMENT_CHARS`, the long paths in it elided (:func:`_elided`)."""
    text = _told(leaf, key)
    if "/" in text and " " not in text:
        return shorten(text, RECORD_CHARS)
    if len(text) > ARGUMENT_CHARS and "/" in text:
        text = _LONG_PATH.sub(_elided, text)
    return shorten(text, ARGUMENT_CHARS)


#: A long path inside a command (``/Users/u/.codex/plugins/cache/…/SKILL.md``): of
#: three or more directories, 25 characters or more.
_LONG_PATH = re.compile(
    r"(?<![\w/.~-])([~.]?/?[\w.@-]+)/(?:[\w.@-]+/){2,}([\w.@-]+/?)(?=[\s'\")]|$)"
)


def _elided(match: re.Match[str]) -> str:
    """A long path (:data:`_LONG_PATH`) as its first directory, ``…`` and its last
    name, when that is shorter: ``sed -n '1,220p' /Users/…/SKILL.md`` says which file a
    command read, where a command cut at :data:`ARGUMENT_CHARS` ended mid-path
    (``/Users/Sample_User/.codex/plugins/cache/ope…``)."""
    whole = match.group()
    short = f"{match.group(1)}/…/{match.group(2)}"
    return short if len(whole) >= 25 and len(short) < len(whole) else whole


#: The keys of an edit's text before and after it (SWE-agent's ``search`` and
#: ``replace``, Claude Code's ``old_string`` and ``new_string``, ``str_replace``'s).
_EDIT_KEYS = (
    ("search", "replace"),
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("old_text", "new_text"),
)


def _edit_keys(value: Mapping[str, Any]) -> tuple[str, ...]:
    """The (before, after) keys of an edit's arguments (:data:`_EDIT_KEYS`) both of
    whose values are strings; ``()`` for other arguments."""
    for pair in _EDIT_KEYS:
        if all(isinstance(value.get(key), str) for key in pair):
            return pair
    return ()


def _changed_line(old: str, new: str) -> str:
    """What an edit that replaced ``old`` with ``new`` shows of it: the longest line
    of ``new`` that ``old`` does not hold (``return int(round(value.total_seconds() /
    …))``), whitespace aside; ``""`` when it holds none (a deletion)."""
    before = {line.strip() for line in old.splitlines()}
    added = [line.strip() for line in new.splitlines() if line.strip() not in before]
    return max(added, key=len, default="")


def _list_leaves(value: list[Any], key: str = "") -> Iterator[str]:
    """The leaves of a list (under ``key``), what each run of objects shares said once
    after it (:func:`_runs`): ``HAT080, HAT076 (each date 2024-05-28)``; a plan's
    steps each with its status (:func:`_steps`)."""
    steps = _steps(value)
    if steps:
        yield from steps
        return
    for start, end, keys in _runs(value):
        run = value[start:end]
        told = [leaf for item in run for leaf in _leaves(_without(item, keys), key)]
        if keys and told:
            shared = ", ".join(f"{key} {_SPACE.sub(' ', str(run[0][key])).strip()}" for key in keys)
            told[-1] += f" (each {shared})"
        yield from told


def thought(name: str, arguments: str) -> str | None:
    """The thought of a call of the "think" tool (tau-bench's; Anthropic's "The 'think'
    tool" gives it as ``{"name": "think", "input_schema": {"thought": …}}``, a tool
    that "will not obtain new information or change the database, but just append the
    thought to the log"): its ``thought`` argument, the assistant's reasoning, not an
    action; ``None`` for any other call."""
    if name != "think" or '"thought"' not in arguments:
        return None
    value = parse_json(arguments)
    said = value.get("thought") if isinstance(value, Mapping) else None
    return said if isinstance(said, str) else None


#: The key of a plan step's text: Codex's ``update_plan`` (``step``), Claude Code's
#: ``TodoWrite`` (``content``), Gemini CLI's ``write_todos`` (``description``).
_STEP_TEXT = ("step", "content", "description", "task", "title", "text")


def plan_steps(arguments: str) -> list[str]:
    """The steps of a plan update (``arguments``, JSON, holding a list of steps each
    with a status: :func:`_steps`), as its action shows them (``Run focused
    verification [pending]``); ``[]`` for any other call."""
    if "status" not in arguments:
        return []
    value = parse_json(arguments)
    lists = value.values() if isinstance(value, Mapping) else [value]
    return next(
        (steps for item in lists if isinstance(item, list) for steps in [_steps(item)] if steps), []
    )


def _steps(value: list[Any]) -> list[str]:
    """Each step of a plan or to-do list as ``text [status]`` (``Run focused
    verification [pending]``; its text within :data:`ARGUMENT_CHARS`, Claude Code's
    ``activeForm`` left out): where the run stands, which the values alone scramble;
    ``[]`` when ``value`` is no list of objects each with a ``status`` and a text."""
    out = []
    for item in value:
        if not isinstance(item, Mapping):
            return []
        status = item.get("status")
        text = next((item[k] for k in _STEP_TEXT if isinstance(item.get(k), str)), None)
        if not isinstance(status, str) or text is None:
            return []
        out.append(f"{shorten(_SPACE.sub(' ', text).strip(), ARGUMENT_CHARS)} [{status}]")
    return out


def _runs(items: Sequence[Any]) -> list[tuple[int, int, list[str]]]:
    """``(start, end, keys)`` splitting ``items`` into runs: two or more objects in a
    row that hold the same scalar values under ``keys`` (the flights of a booking on
    one date) and something else each, so an action says those values once; any other
    item alone, with no keys."""
    out: list[tuple[int, int, list[str]]] = []
    start = 0
    while start < len(items):
        end, keys = start + 1, _shared_keys(items[start : start + 2])
        while keys and end < len(items) and _shared_keys(items[start : end + 1]) == keys:
            end += 1
        out.append((start, max(end, start + 1), keys if end > start + 1 else []))
        start = max(end, start + 1)
    return out


def _shared_keys(items: Sequence[Any]) -> list[str]:
    """The keys under which every one of two or more ``items``, all objects, holds one
    scalar value told in an action, when each holds something else too; else ``[]``."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return []
    first = items[0]
    keys = [
        str(key)
        for key, item in first.items()
        if _scalar(item) and _told(str(item)) and all(o.get(key) == item for o in items[1:])
    ]
    if any(set(map(str, item)) <= set(keys) for item in items):
        return []
    return keys


def _without(item: Any, keys: Sequence[str]) -> Any:
    """``item`` without ``keys`` (said once for a run: :func:`_runs`)."""
    if not isinstance(item, Mapping) or not keys:
        return item
    return {key: value for key, value in item.items() if str(key) not in keys}


#: The state SWE-agent's shell appends to every observation, no output of the command.
_PROMPT_AFTER = re.compile(r"(?:\n\((?:Open file|Current directory): [^\n]*\))+\n?(?:bash-\$\s*)?$")


#: The lines Codex CLI's exec tools (``exec_command``, ``write_stdin``) open each
#: output with: a chunk id, the wall time, the process's exit code or the session of
#: one still running, the output's token count, then ``Output:``.
_EXEC_HEAD = re.compile(
    r"\AChunk ID: \S+\n(?:Wall time: [^\n]*\n)?"
    r"(?:Process exited with code (?P<code>-?\d+)\n"
    r"|Process running with session ID (?P<session>\d+)\n)?"
    r"(?:Original token count: \d+\n)?(?:Output:\n)?"
)
#: What :func:`without_exec_head` leaves of those lines for a process still running,
#: the outcome when no error line says more (its group: the session).
RUNNING = re.compile(r"running, session (\d+)")
_EXEC_STATUS = re.compile(rf"exit -?\d+|{RUNNING.pattern}")
#: A first line that says its tool failed (``write_stdin failed: stdin is closed``).
_FAILED = re.compile(r"\w+ failed: ").match


#: What Claude Code answers for a call the user refused: nothing was run or written.
_REJECTED = re.compile(r"\s*The user doesn't want to (?:proceed with|take) this")


def user_rejected(result: str) -> bool:
    """Whether ``result`` is Claude Code's answer to a call the user refused ("The user
    doesn't want to proceed with this tool use. The tool use was rejected …"), which
    an outcome says as ``rejected by the user``."""
    return _REJECTED.match(result) is not None


def without_exec_head(result: str) -> str:
    """``result`` without the lines Codex CLI's exec tools open it with
    (:data:`_EXEC_HEAD`: a chunk id is no fact of the run), and in their place
    ``exit N`` for a process that exited with a code other than 0, ``running, session
    N`` for one still running (the session a later ``write_stdin`` names); any other
    result as it is."""
    head = _EXEC_HEAD.match(result)
    if head is None:
        return result
    rest = result[head.end() :]
    if head["code"] not in (None, "0"):
        return f"exit {head['code']}\n{rest}"
    if head["session"]:
        return f"running, session {head['session']}\n{rest}"
    return rest


def exited_ok(result: str) -> bool:
    """Whether ``result`` opens with the lines of Codex CLI's exec tools
    (:data:`_EXEC_HEAD`) and they say the process exited with code 0: it succeeded,
    and a line of its output that names an error (``error: vi.fn(),`` of a file
    ``sed`` printed) is what it printed, no error of the call."""
    head = _EXEC_HEAD.match(result)
    return head is not None and head["code"] == "0"


#: A command whose last stage searches (``rg -n compact src``, ``git ls-files | grep
#: foo``): its exit status 1 says it selected nothing.
_SEARCH_COMMAND = re.compile(r"(?:^|[|;&]\s*)(?:rg|grep|egrep|fgrep|git grep|ag|ack)\s[^|;&]*$")


def no_match(arguments: str) -> bool:
    """Whether a call's ``arguments`` (JSON: ``cmd`` or ``command``, a string or an
    argument list) run a search as the last stage of their command, so that exit
    status 1 says it found nothing, no failure (grep(1): "Normally the exit status is
    0 if a line is selected, 1 if no lines were selected, and 2 if an error
    occurred"; ripgrep's is the same)."""
    command = command_of(arguments)
    return command is not None and _SEARCH_COMMAND.search(command.strip()) is not None


def command_of(arguments: str) -> str | None:
    """The shell command a call's ``arguments`` run (JSON: ``cmd`` or ``command``, a
    string or an argument list, whose last item is the command: ``["bash", "-lc",
    "…"]``), or ``None`` for a call that runs none."""
    if "cmd" not in arguments and "command" not in arguments:
        return None  # not parsed: a write's arguments may be a whole file
    value = parse_json(arguments)
    command = value.get("cmd", value.get("command")) if isinstance(value, dict) else None
    if isinstance(command, list):
        command = command[-1] if command and isinstance(command[-1], str) else None
    return command if isinstance(command, str) else None


def outcome(
    result: str | None,
    *,
    failed: bool = False,
    errors: Sequence[str] | None = None,
    succeeded: bool = False,
) -> str:
    """``ok``, the first error line of a call's ``result`` (``errors``, when the caller
    has them already; ``failed``: it says it failed, so its first line when no line
    names an error, as when that line says so: ``write_stdin failed: stdin is closed``),
    ``rejected by the user`` (:func:`user_rejected`),
    a process's exit code or session (:func:`without_exec_head`), or a short result
    itself (``344`` of ``python reproduce.py``, SWE-agent's ``(Open file: …)`` lines
    after it aside); ``?`` with no result. With ``succeeded`` (the process said it
    exited with code 0: :func:`exited_ok`) no line of the output is its error."""
    if result is None:
        return "?"
    if user_rejected(result):
        return "rejected by the user"
    result = _PROMPT_AFTER.sub("", result)
    said = "" if succeeded else _error_of(result, failed=failed, errors=errors)
    if said:
        return said
    head = result.strip().partition("\n")[0]
    if _EXEC_STATUS.fullmatch(head):
        return head
    short = result.strip()
    if short and len(short) <= SHORT_RESULT_CHARS and "\n" not in short and short[0] not in "[{":
        return short  # a short answer says more than "ok": calculate → 255.0
    return "ok"


def _error_of(result: str, *, failed: bool, errors: Sequence[str] | None) -> str:
    """The error :func:`outcome` says of ``result``: its first error line (of
    ``errors`` when given), else its first line when it failed or that line says so;
    ``""`` when none."""
    found = error_lines(result, limit=1) if errors is None else errors
    if found:
        return found[0]
    head = result.strip().partition("\n")[0]
    if failed or head.lower().startswith(("error", "failed", "exception")) or _FAILED(head):
        return shorten(head, 120) or "error"
    return ""


#: The most ids a look-up's outcome names (:func:`found`).
FOUND_IDS = 8


def found(result: str) -> str:
    """The ids of the objects a JSON list ``result`` holds (``HAT069, HAT083`` of a
    flight search), at most :data:`FOUND_IDS`, each once, ``+N`` for the rest; ``""``
    when it is no list of two or more objects with ids."""
    value = parse_json(result)
    if not isinstance(value, list):
        return ""
    if not value:
        return "none"  # a search that found nothing says so
    ids: list[str] = []
    for label, _ in _walk(value, ""):
        own = label.rpartition(" ")[2]
        if own and _DIGIT.search(own) and own not in ids:
            ids.append(own)
    if not ids or (len(ids) == 1 and len(value) > 1):
        return ""
    more = f" +{len(ids) - FOUND_IDS}" if len(ids) > FOUND_IDS else ""
    return ", ".join(ids[:FOUND_IDS]) + more


#: A line of a search's output that names its file: ``path:line:text`` (``rg -n``,
#: ``grep -rn``), ``path:text``, or a path alone (``rg --files``, ``ls -F``).
_HIT = re.compile(
    r"(?=[^:\s]*[A-Za-z])"  # a path has a letter: ``833.0`` is a number
    r"(?P<path>(?:[\w.~@-]+/)*[\w.@-]+\.\w{1,8}|(?:[\w.~@-]*/)+[\w.@-]+/?|[\w.@-]+/)"
    r"(?::\d+)?(?P<rest>[:-].*|$)"
)
#: A line that heads a list of hits (``Found 1 matches for "fields.py" in /src:``).
_HIT_HEAD = re.compile(r"(?:Found|Showing|Searching|Results)\b|.*:$")
#: A folder in Gemini CLI's ``list_directory`` output (``[DIR] .vscode``): ``.vscode/``.
_DIR_ENTRY = re.compile(r"^\[DIR\]\s+(\S+)$")
#: How many lines of a result :func:`hits` reads, and the files it names.
HIT_LINES = 400
HIT_FILES = 3


def hits(result: str) -> str:
    """What a search or a file list found, when every line of ``result`` (but a first
    that heads them, :data:`_HIT_HEAD`) opens with a file's path (:data:`_HIT`): ``12
    lines in 3 files: src/a.ts, src/b.ts, tests/c.ts`` (at most :data:`HIT_FILES`
    named, ``+N`` for the rest), ``2 lines in src/a.ts``; of paths alone, ``5 files:
    …`` or the one path. ``""`` for any other result: JSON, a file's text, a log. It is
    asked of every result that says ``ok``, so it stops at the first line that is no
    hit, and reads at most :data:`HIT_LINES` lines."""
    if result.lstrip()[:1] in ("{", "["):
        return ""  # JSON: the records say what it found
    if "\n(Current directory: " in result[-400:] or "\n(Open file: " in result[-400:]:
        result = _PROMPT_AFTER.sub("", result)  # the state SWE-agent appends
    found: list[re.Match[str]] = []
    headed = False
    for raw in result.split("\n", HIT_LINES)[:HIT_LINES]:
        line = _DIR_ENTRY.sub(r"\1/", raw.strip())
        if not line:
            continue
        match = _HIT.fullmatch(line)
        if match is not None:
            found.append(match)
        elif found or headed or not _HIT_HEAD.match(line):
            return ""
        else:
            headed = True  # the line that heads the list
    return _hits_told(found) if found else ""


def _hits_told(found: Sequence[re.Match[str]]) -> str:
    """:func:`hits` of the lines ``found`` (:data:`_HIT` matches, one a line)."""
    named = list(dict.fromkeys(m["path"] for m in found))
    more = f" +{len(named) - HIT_FILES}" if len(named) > HIT_FILES else ""
    some = f"{', '.join(named[:HIT_FILES])}{more}"
    if not any(m["rest"] for m in found):  # paths alone: a list of files
        return some if len(named) == 1 else f"{len(named)} files: {some}"
    count = f"{len(found)} line{'s' if len(found) > 1 else ''}"
    return f"{count} in {some}" if len(named) == 1 else f"{count} in {len(named)} files: {some}"


#: The lines of a result :func:`touched` reads.
TOUCHED_LINES = 5


def touched(result: str) -> str:
    """The first path (:data:`ctxcli.summarizers.facts.PATH`) in the first
    :data:`TOUCHED_LINES` lines of a ``result`` (``/testbed/reproduce.py`` of
    SWE-agent's ``[File: /testbed/reproduce.py (10 lines total)]``): the file a call
    that names none in its arguments changed; ``""`` when there is none."""
    head = "\n".join(result.split("\n", TOUCHED_LINES)[:TOUCHED_LINES])
    match = PATH.search(head)
    return match.group() if match else ""


def made(result: str) -> str:
    """The label of the object a JSON object ``result`` is, when it has an id
    (``reservation HATHAT`` of a booking): what a call that changed state made or
    changed, to name in its outcome; ``""`` for anything else."""
    value = parse_json(result)
    if not isinstance(value, Mapping):
        return ""
    label, key = _label(value, "")
    return label if key is not None and " " in label else ""  # a kind and its id


#: The most characters of a sub-agent's report an outcome says (:func:`report`).
REPORT_CHARS = 120
#: A fenced code block, and a line of a report that states nothing: a heading, a
#: table's row, Claude Code's trailer (``agentId: a693a87 (for resuming …)``).
_FENCE = re.compile(r"^ *```.*?(?:^ *```[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
_NOT_STATED = re.compile(r"^\s*(?:#|\||agentId:).*$", re.MULTILINE)
#: A sentence where a sub-agent says what it did or is about to do, not what it found
#: (``Now I have a comprehensive understanding of the codebase.``, ``Let me compile
#: this into a detailed overview.``).
_OWN_STEP = re.compile(
    r"(?i)^(?:now,? |ok(?:ay)?,? |great,? |perfect,? )?"
    r"(?:i(?:'ve| have| now have| will|'ll| am|'m)\b|let me\b|based on (?:my|the|this)\b)"
)
#: Markdown's bold (``**Version upgrades**``), around words only (``x**2`` stays).
_BOLD = re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])")


def runs_subagent(arguments: str) -> bool:
    """Whether a call with ``arguments`` (JSON text) runs a sub-agent, whose result is
    the report of what it found: it names a ``subagent_type`` (Claude Code's
    ``Task``)."""
    return '"subagent_type"' in arguments


def report(result: str) -> str:
    """What a sub-agent's report ``result`` says first, as its call's outcome: its
    first statement (:func:`ctxcli.summarizers.text.own_sentences`, filler out; not a
    heading, a table, code, nor a lead-in to a list ending in ``:``), bold off, within
    :data:`REPORT_CHARS` (``Next.js: 15.5.2 (upgraded from documented v14)``, where
    the action said ``ok``), none where the agent tells its own steps
    (:data:`_OWN_STEP`); ``""`` for a JSON result, and when the statement reads as
    an error (:data:`ERROR_OUTCOME`: the call would be taken for a failed one) or
    there is none."""
    if parse_json(result) is not None:
        return ""
    text = _BOLD.sub(r"\1", _NOT_STATED.sub("", _FENCE.sub("", result)))
    stated = (s for s in own_sentences(text) if not _OWN_STEP.match(s))
    said = next((s for s in stated if not s.endswith((":", "："))), "")
    return "" if ERROR_OUTCOME.search(said) else shorten(said, REPORT_CHARS)


def answer(result: str) -> str:
    """The values of a small JSON object ``result`` (or a list of that one object)
    that names no object of its own (no id: a computation's answer, ``area 7.0686,
    radius 1.5, square meters`` of ``circle_area``), within :data:`ANSWER_CHARS`: what
    a call's outcome says rather than ``ok``; ``""`` for anything else."""
    value = parse_json(result) if len(result) <= 4 * ANSWER_CHARS else None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, Mapping) or not value or _label(value, "")[1] is not None:
        return ""
    said = _own_values(value)
    return said if len(said) <= ANSWER_CHARS else ""


#: The longest answer (:func:`answer`) an outcome says, in characters.
ANSWER_CHARS = 80


def gist(result: str) -> str:
    """What a look-up's ``result`` says in its action's outcome: the ids it found
    (:func:`found`), else the values of its one object's own record (``name Mia Li,
    reservations NO6JO3 AIXC49``, within :data:`RECORD_CHARS`), so that record is not
    written again; ``""`` for anything else."""
    ids = found(result)
    value = parse_json(result) if not ids else None
    if not isinstance(value, Mapping):
        return ids
    return shorten(_own_values(value), RECORD_CHARS)


def _own_values(value: Mapping[str, Any]) -> str:
    """The values of an object's own record (:func:`_walk`'s first), joined."""
    first = next(_walk(value, ""), None)
    return ", ".join(first[1]) if first else ""


def action(name: str, arguments: str, result: str | None, *, failed: bool = False) -> str:
    """``name(identifying arguments) → outcome``."""
    return f"{name}({arguments_text(arguments)}) → {outcome(result, failed=failed)}"


def collapse(actions: Sequence[str]) -> list[tuple[str, int]]:
    """``(action, count)`` with identical actions counted once, at their last place."""
    last = {text: i for i, text in enumerate(actions)}
    counts: dict[str, int] = {}
    for text in actions:
        counts[text] = counts.get(text, 0) + 1
    return [(text, counts[text]) for i, text in enumerate(actions) if last[text] == i]
