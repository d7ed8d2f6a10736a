"""Count the tokens of transcripts, as ``compress`` counts them before compressing.

Files are read as :meth:`ctxcli.compress.Compressor.file` reads them (the shapes of
:func:`ctxcli.parquet.open_records`, Parquet included, each record by
:meth:`ctxcli.compress.Compressor.read`, a Claude Code session log as one
conversation), and a conversation's tokens are
:attr:`ctxcli.model.Conversation.tokens`: the cookbook rule of :mod:`ctxcli.tokens`
for every message, the reply priming and the record's ``tools``. So a file's total is
the ``tokens before`` of ``compress`` with the same model or encoding. One
:class:`ctxcli.tokens.TokenCounter` serves the whole run, so a text repeated across
records and files is encoded once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli import formats, jsonio, parquet
from ctxcli.compress import Compressor
from ctxcli.config import Settings, resolve
from ctxcli.errors import InputError
from ctxcli.formats.base import WholeFile
from ctxcli.model import Conversation

#: The name of the part of a conversation's tokens no message holds: the reply
#: priming (:data:`ctxcli.tokens.REPLY_PRIMING`) and the record's ``tools``.
OVERHEAD = "overhead"


@dataclass(frozen=True)
class ConversationCount:
    """One conversation: where it is (``line`` in a JSON lines file, ``record`` in a
    JSON array, both ``None`` for a one-record file), its ``id``, its message count,
    its ``tokens``, and those tokens by message role plus :data:`OVERHEAD`
    (``by_role`` sums to ``tokens``)."""

    id: str | None
    line: int | None
    record: int | None
    messages: int
    tokens: int
    by_role: dict[str, int]

    @classmethod
    def of(cls, conversation: Conversation, item: jsonio.Record) -> ConversationCount:
        roles: Counter[str] = Counter()
        for message in conversation.messages:
            roles[message.role] += message.tokens
        roles[OVERHEAD] = conversation.tokens - sum(roles.values())
        return cls(
            conversation.id,
            item.line,
            item.index,
            len(conversation.messages),
            conversation.tokens,
            dict(roles),
        )


@dataclass
class FileCount:
    """One input file's totals (``conversations``, ``messages``, ``tokens``, tokens
    ``by_role``), with each conversation's :class:`ConversationCount` in
    ``items`` when asked for."""

    path: str
    conversations: int = 0
    messages: int = 0
    tokens: int = 0
    by_role: Counter[str] = field(default_factory=Counter)
    items: list[ConversationCount] = field(default_factory=list)

    def add(self, counted: ConversationCount, *, keep: bool) -> None:
        self.conversations += 1
        self.messages += counted.messages
        self.tokens += counted.tokens
        self.by_role.update(counted.by_role)
        if keep:
            self.items.append(counted)


def total(counts: list[FileCount]) -> FileCount:
    """The sum of ``counts`` (``path`` ``total``, no items)."""
    whole = FileCount("total")
    for count in counts:
        whole.conversations += count.conversations
        whole.messages += count.messages
        whole.tokens += count.tokens
        whole.by_role.update(count.by_role)
    return whole


class Counting:
    """Counts files as a :class:`ctxcli.compress.Compressor` of ``settings`` reads
    them (its :meth:`~ctxcli.compress.Compressor.read`, its token counter): the
    encoding, the format forced or detected, the messages key. ``warn`` and
    ``cache_dir`` are the compressor's.

    ``report`` names what a bad record is left out of, in the warning that says so
    with ``on_error: keep``.

    Raises :class:`ctxcli.errors.ConfigError` for an unknown format and
    :class:`ctxcli.errors.TokenizerError` for an encoding that cannot be loaded.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        warn: Callable[[str], None] | None = None,
        cache_dir: str | Path | None = None,
        report: str = "the counts",
    ) -> None:
        self.reader = Compressor(settings or resolve(), warn=warn, cache_dir=cache_dir)
        self.report = report
        self.counter = self.reader.counter
        self.encoding = self.reader.encoding

    def file(self, path: str, *, per_conversation: bool = False) -> FileCount:
        """Count ``path`` (``-``: stdin). Raises :class:`InputError` naming the file
        and line of a record that cannot be read (as ``compress`` does)."""
        counted = FileCount(path)
        for item in self.conversations(path):
            counted.add(item, keep=per_conversation)
        return counted

    def conversations(self, path: str) -> Iterator[ConversationCount]:
        """Each conversation of ``path`` counted, in file order."""
        for item, conversation in self.read(path):
            yield ConversationCount.of(conversation, item)

    def read(self, path: str) -> Iterator[tuple[jsonio.Record, Conversation]]:
        """Each conversation of ``path`` as ``compress`` reads it, in file order, with
        the record it was read from (a whole-file session: its first line's). Raises
        :class:`InputError` for a bad record; with the settings' ``on_error: keep`` it
        is left out instead, with a warning naming it (as ``compress`` copies it
        unchanged)."""
        shape, items, _ = parquet.open_records(path, None, self.reader.settings.messages_key)
        whole, items = formats.whole_file_of(self.reader.format, shape, items, path)
        if whole is not None:
            yield self._session(whole, list(items), path)
            return
        for item in items:
            try:
                conversation = self._read(item, path)
            except InputError as exc:
                self._skip(exc)
                continue
            yield item, conversation

    def _skip(self, error: InputError) -> None:
        """Raise ``error``, or with ``on_error: keep`` warn that its record is left out."""
        if self.reader.settings.on_error != "keep":
            raise error
        self.reader.warn(f"{error}; left out of {self.report}")

    def _read(self, item: jsonio.Record, path: str) -> Conversation:
        record = item.parse(path)
        try:
            return self.reader.read(record, path=path, line=item.line or 0)[1]
        except InputError as exc:  # named as compress names it: by record in an array
            raise InputError(path, item.line, exc.reason, record=item.index) from None

    def _session(
        self, format: WholeFile, items: list[jsonio.Record], path: str
    ) -> tuple[jsonio.Record, Conversation]:
        events: list[Any] = []
        lines: list[int] = []  # each event's line, a bad one's left out with it
        for item, event in formats.events(items, path):
            if isinstance(event, InputError):
                self._skip(event)
            else:
                events.append(event)
                lines.append(item.line or 0)
        conversation = formats.read_file(format, events, self.counter, path=path, lines=lines)
        nothing = formats.none_read(format, events, conversation, path, "--input-format")
        if nothing:
            self.reader.warn(nothing)
        return (items[0] if items else jsonio.Record(None, None, None)), conversation


#: Roles in the order their columns come; other roles follow, sorted.
ROLE_ORDER = ("system", "developer", "user", "assistant", "tool", "function")


def role_columns(counts: list[FileCount]) -> list[str]:
    """The roles met in ``counts``, in :data:`ROLE_ORDER` then by name, and
    :data:`OVERHEAD` last."""
    met = {role for count in counts for role in count.by_role if role != OVERHEAD}
    known = [r for r in ROLE_ORDER if r in met]
    return [*known, *sorted(met - set(known)), OVERHEAD]


def rows(
    counts: list[FileCount], *, per_conversation: bool = False, by_role: bool = False
) -> tuple[list[str], list[list[Any]]]:
    """``(header, rows)`` of the report: a row per file (per conversation with
    ``per_conversation``: where it is, ``line N`` or ``record N``, and its id), a
    token column per role with ``by_role``, and a ``total`` row last."""
    roles = role_columns(counts) if by_role else []
    header = ["file", "convs", "msgs", "tokens", *roles]
    if per_conversation:
        header = ["file", "conversation", "id", "msgs", "tokens", *roles]
    body: list[list[Any]] = []
    for count in counts:
        if not per_conversation:
            body.append([count.path, count.conversations, count.messages, count.tokens])
            body[-1] += [count.by_role.get(r, 0) for r in roles]
            continue
        for item in count.items:
            place = f"record {item.record}" if item.record is not None else f"line {item.line or 1}"
            row = [count.path, place, item.id or "", item.messages, item.tokens]
            body.append(row + [item.by_role.get(r, 0) for r in roles])
    whole = total(counts)
    last: list[Any] = ["total", whole.conversations, whole.messages, whole.tokens]
    if per_conversation:
        convs = f"{whole.conversations:,} conversation{'' if whole.conversations == 1 else 's'}"
        last = ["total", convs, "", whole.messages, whole.tokens]
    body.append(last + [whole.by_role.get(r, 0) for r in roles])
    return header, body


def render(
    counts: list[FileCount],
    fmt: str = "table",
    *,
    per_conversation: bool = False,
    by_role: bool = False,
) -> str:
    """The report as ``table`` (aligned, numbers with thousands separators), ``csv``
    (the same rows, plain numbers) or ``json`` (``{"files": [...], "total": {...}}``,
    each file with its ``items``, one per conversation, when ``per_conversation``)."""
    if fmt == "json":
        return _json(counts, per_conversation=per_conversation, by_role=by_role)
    header, body = rows(counts, per_conversation=per_conversation, by_role=by_role)
    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerows([header, *body])
        return out.getvalue().rstrip("\n")
    cells = [header, *[[f"{v:,}" if isinstance(v, int) else str(v) for v in r] for r in body]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [i for i, v in enumerate(body[-1]) if isinstance(v, int)]
    lines = []
    for row in cells:
        line = [
            c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(line).rstrip())
    return "\n".join(lines)


def _json(counts: list[FileCount], *, per_conversation: bool, by_role: bool) -> str:
    def summary(count: FileCount) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": count.path,
            "conversations": count.conversations,
            "messages": count.messages,
            "tokens": count.tokens,
        }
        if by_role:
            out["by_role"] = dict(sorted(count.by_role.items()))
        return out

    files = []
    for count in counts:
        entry = summary(count)
        if per_conversation:
            entry["items"] = [
                {
                    "id": item.id,
                    "line": item.line,
                    "record": item.record,
                    "messages": item.messages,
                    "tokens": item.tokens,
                    **({"by_role": item.by_role} if by_role else {}),
                }
                for item in count.items
            ]
        files.append(entry)
    whole = summary(total(counts))
    del whole["file"]
    return jsonio.dumps_indented({"files": files, "total": whole}).decode().rstrip("\n")
