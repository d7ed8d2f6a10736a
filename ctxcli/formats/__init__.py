"""Transcript formats: each reads records into the neutral model and writes them back.

Each format is a module implementing :class:`ctxcli.formats.base.Format` (``NAME``,
``DEFAULT_KEY``, ``detect``, ``read``, ``write``, ``problems``, ``writes_as_read``,
``kept_problems``); :data:`FORMATS` holds them by name, typed.

A format of :data:`WHOLE_FILES` (Claude Code sessions, Codex rollouts, Gemini CLI
checkpoints: :class:`ctxcli.formats.base.WholeFile`) reads a whole file as one
record, the list of its lines' objects (or of a JSON array's items): ``read`` and
``write`` take that list (``read`` also their line numbers as ``lines``), and
:func:`detect_file` tells one from a file's first records. :func:`whole_file_of` and
:func:`events` are the one detection and the one event loop that ``compress``,
``count`` and ``validate`` share.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli import jsonio
from ctxcli.errors import ConfigError, InputError
from ctxcli.formats import (
    anthropic,
    claude_code,
    codex,
    gemini,
    gemini_checkpoint,
    gemini_cli,
    openai,
    responses,
    responses_items,
    sharegpt,
)
from ctxcli.formats._common import kind
from ctxcli.formats.base import Format, WholeFile
from ctxcli.model import Conversation
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

_WHOLE_FILES: tuple[WholeFile, ...] = (claude_code, codex, gemini_checkpoint, responses_items)
_RECORDS: tuple[Format, ...] = (sharegpt, anthropic, gemini, gemini_cli, responses, openai)
#: Format name -> adapter module, whole-file formats first, then record formats in
#: the order :func:`detect` tries them.
FORMATS: dict[str, Format] = {f.NAME: f for f in (*_WHOLE_FILES, *_RECORDS)}
#: The whole-file formats among them, in the order :func:`detect_file` tries them.
WHOLE_FILES: dict[str, WholeFile] = {f.NAME: f for f in _WHOLE_FILES}


def get(name: str) -> Format:
    """The adapter called ``name``. Raises :class:`ConfigError` naming the known ones,
    and, for a report's format (``json``: what ``--format`` means to ``count`` and
    ``score``), what ``--format`` means here."""
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(FORMATS)
        hint = _REPORT_HINT if name in _REPORT_FORMATS else ""
        raise ConfigError(f"unknown format {name!r}; known formats: {known}{hint}") from None


#: The report formats of ``count`` and ``score`` (their ``--format``; their transcripts'
#: is ``--input-format``), which a user may give ``compress`` or ``validate`` too.
_REPORT_FORMATS = frozenset({"table", "json", "csv"})
_REPORT_HINT = (
    " (here --format names the transcripts' format; json, csv and table are the report "
    "formats of count and score)"
)


#: How many of a file's first records :func:`detect_file` looks at.
HEAD_RECORDS = 20


def detect_file(head: Sequence[Any]) -> WholeFile | None:
    """The whole-file format (see the module docstring) of a file whose first records
    (up to :data:`HEAD_RECORDS`, parsed; ``None`` for a line that is not JSON) are
    ``head``: the first whose ``detect_head`` accepts the ones that are JSON; ``None``
    when none fits. A broken line among them decides nothing: the session it is in is
    still read as one, and the line named as bad there (it had made the file's first
    line "no format fits this record", and ``on_error: keep`` copy all of them)."""
    parsed = [record for record in head if record is not None]
    if not parsed:
        return None
    return next((f for f in _WHOLE_FILES if f.detect_head(parsed)), None)


def whole_file_of(
    format: Format | None, shape: str, items: Iterator[jsonio.Record], path: str
) -> tuple[WholeFile | None, Iterator[jsonio.Record]]:
    """The whole-file format the records of ``path`` (of ``shape``, see
    :func:`ctxcli.jsonio.read_records`) are, when they are one conversation rather
    than a conversation each: ``format``'s when forced, else found by
    :func:`detect_file` from the first records; ``None`` otherwise. Returns that and
    the records, the first ones included."""
    if format is not None:
        return WHOLE_FILES.get(format.NAME), items
    if shape not in ("jsonl", "array"):
        return None, items
    head = list(itertools.islice(items, HEAD_RECORDS))
    found = detect_file([item.peek(path) for item in head])
    return found, itertools.chain(head, items)


def events(
    items: Iterable[jsonio.Record], path: str
) -> Iterator[tuple[jsonio.Record, dict[str, Any] | InputError]]:
    """Each record of a whole-file format's file with its event (a JSON object), or
    the :class:`InputError` that says why it is none (not JSON, not an object)."""
    for item in items:
        try:
            event = item.parse(path)
        except InputError as exc:
            yield item, exc
            continue
        if not isinstance(event, dict):
            yield item, InputError(path, item.line, f"event is {kind(event)}, not an object")
            continue
        yield item, event


def none_read(
    format: WholeFile, events: Sequence[Any], conversation: Conversation, path: str, flag: str
) -> str | None:
    """The warning for a file of ``events`` read as the whole-file ``format`` into a
    ``conversation`` with no message (the format forced, by ``flag``, on another
    format's file, which would be written back or counted as empty without a word);
    ``None`` otherwise."""
    if events and not conversation.messages:
        return f"{path}: no message read as {format.NAME} (is {flag} right?)"
    return None


def read_file(
    format: WholeFile,
    events: Sequence[Any],
    counter: TokenCounter,
    *,
    path: str,
    lines: Sequence[int],
) -> Conversation:
    """The events of a whole-file ``format`` (their ``lines``) as one conversation,
    named by the first line (raises what ``format.read`` raises)."""
    return format.read(events, counter, path=path, line=lines[0] if lines else 0, lines=lines)


def detect(record: Any, messages_key: str | None = None) -> Format | None:
    """The first record format whose ``detect`` accepts ``record``; else the OpenAI
    format for a record that has a list under ``messages_key`` (or ``messages``), so
    that its reader names the faulty message; else ``None``. Whole-file formats are
    found by :func:`detect_file`."""
    for module in _RECORDS:
        if module.detect(record, messages_key):
            return module
    if isinstance(record, dict) and isinstance(record.get(messages_key or "messages"), list):
        return FORMATS["openai"]
    return None


#: Keys that hold the messages of well-known logs (SWE-agent ``history``, tau-bench
#: ``traj``, Hugging Face ``conversations`` ...), tried when a record has no
#: ``messages`` and no format finds its messages under its own key.
WELL_KNOWN_KEYS = ("history", "traj", "trajectory", "conversations", "input", "contents")


@dataclass(frozen=True)
class Found:
    """Where a record's messages are and in which format: ``format``; ``key``, the
    key its ``read`` and ``write`` take (``None``: the format's own); ``path``, the
    keys and list positions from the record to the object holding ``key`` (empty:
    the record itself; see :func:`split_key`); ``implicit``, the well-known key the
    messages were found under without ``--messages-key`` (for the stats)."""

    format: Format
    key: str | None = None
    path: tuple[str | int, ...] = ()
    implicit: str | None = None
    #: The record is a bare list (of Responses items), read as ``{key: record}``.
    bare: bool = False

    def view(self, record: Any) -> Any:
        """The object the format reads: the record, or what ``path`` leads to (a list
        of messages reached by a position is read as ``{"messages": ...}``). Raises
        ``LookupError`` or ``TypeError`` when the path leads nowhere."""
        if self.bare:
            return {self.key: record}
        if not self.path:
            return record
        for step in self.path:
            record = record[step]
        return record if isinstance(record, Mapping) else {"messages": record}

    def read(self, record: Any, counter: TokenCounter, *, path: str, line: int) -> Conversation:
        """The format's ``read`` of :meth:`view` (raises what it raises)."""
        view = self.view(record)
        return self.format.read(view, counter, path=path, line=line, messages_key=self.key)

    def write(self, record: Any, conversation: Conversation) -> Any:
        """``record`` with the messages at this place written from ``conversation``
        (the containers on the way copied, the rest shared)."""
        written = self.format.write(self.view(record), conversation, messages_key=self.key)
        if self.bare:
            return written[self.key]
        return _put(record, self.path, written) if self.path else written

    def problems(self, record: Any, conversation: Conversation) -> list[Problem]:
        """The format's ``problems`` of :meth:`view`."""
        return self.format.problems(self.view(record), conversation)


def _put(value: Any, path: tuple[str | int, ...], written: Any) -> Any:
    if not path:
        return written if isinstance(value, Mapping) else written["messages"]
    copy: Any = dict(value) if isinstance(value, Mapping) else list(value)
    copy[path[0]] = _put(value[path[0]], path[1:], written)
    return copy


def split_key(messages_key: str) -> tuple[tuple[str | int, ...], str | None]:
    """``--messages-key`` as a path: ``"a.b.-1"`` is ``record["a"]["b"][-1]`` (a list
    position is a whole number, negative from the end). Returns the path to the
    object holding the messages and the key there (``None`` when the path ends on a
    list position: the messages are that element)."""
    steps: list[str | int] = [
        int(part) if part.lstrip("-").isdigit() else part for part in messages_key.split(".")
    ]
    last = steps[-1]
    if isinstance(last, int):
        return tuple(steps), None
    return tuple(steps[:-1]), last


def find(
    record: Any, messages_key: str | None = None, format: Format | None = None
) -> Found | None:
    """The format (``format`` when given) and place of ``record``'s messages: under
    ``messages_key`` (a key or a dotted path, see :func:`split_key`); else where
    :func:`detect` finds them; else, for a record without ``messages``, under the one
    :data:`WELL_KNOWN_KEYS` key that holds messages of some format. ``None`` when
    nothing fits."""
    if messages_key:
        path, key = split_key(messages_key)
        if format is not None:
            return Found(format, key, path)
        try:
            view = Found(FORMATS["openai"], key, path).view(record)
        except (LookupError, TypeError):
            return None
        module = detect(view, key)
        return None if module is None else Found(module, key, path)
    if format is not None:
        return Found(format)
    if responses.is_items(record):
        return Found(responses, responses.DEFAULT_KEY, bare=True)
    module = detect(record)
    if module is not None:
        return Found(module)
    if not isinstance(record, Mapping) or "messages" in record:
        return None
    fits = [
        Found(m, k, implicit=k)
        for k in WELL_KNOWN_KEYS
        if isinstance(record.get(k), list)
        and (m := detect(record, k)) is not None
        and m.detect(record, k)
    ]
    return fits[0] if len(fits) == 1 else None


def no_fit(record: Any, messages_key: str | None = None) -> str:
    """Why no format fits ``record``, with what would help: the reason an error gives."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {kind(record)}"
    keys = ", ".join(map(repr, list(record)[:8])) or "none (an empty object)"
    tried = ", ".join(f.NAME for f in _RECORDS)
    if messages_key:
        return (
            f"no format fits: {messages_key!r} holds no list of messages of any format "
            f"({tried}); keys: {keys}"
        )
    hint = next((f"try --messages-key {k}" for k, v in record.items() if _messages_like(v)), "")
    whole = detect_file([record])
    if whole is not None:
        hint = (
            f"try --format {whole.NAME} (--input-format for count and score; a whole file "
            "is one session)"
        )
    return f"no format fits this record (tried {tried}); keys: {keys}; " + (
        hint or "--format or --messages-key (a dotted path: a.b.-1) says where to look"
    )


def _messages_like(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value[:3])
    )
