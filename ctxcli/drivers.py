"""The drivers of one input file: its records one at a time (JSON lines, a JSON array,
Parquet rows), or its events as one conversation (a whole-file format), each output
line yielded in input order.

The state of one file's run (its shape, line end, progress bar, stats, store and
warnings) lives in a :class:`FileRun`, made for that file and dropped after it; each
record goes through :func:`ctxcli.record.compress_record`, which keeps none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli import formats, jsonio, pool
from ctxcli.errors import ConfigError, InputError
from ctxcli.formats.base import WholeFile
from ctxcli.parallel import ordered_map
from ctxcli.record import (
    Note,
    Recipe,
    already_broken,
    book,
    compress_record,
    compress_session,
    fell_back,
    over_budget,
)
from ctxcli.stats import FileStats, Tally
from ctxcli.store import StoreWriter, needs_store

Warn = Callable[[str], None]
#: Warnings passed on per input file; the rest are counted (stats ``warnings``).
WARNINGS_SHOWN = 20


class Shown:
    """The warnings of one file: each counted, the first ``limit`` (``None``: all)
    passed on to ``emit``, written above ``bar`` (a tqdm progress bar) rather than over
    it."""

    def __init__(self, emit: Warn, bar: Any = None, *, limit: int | None = WARNINGS_SHOWN) -> None:
        self.emit, self.bar, self.count, self.limit = emit, bar, 0, limit

    def __call__(self, text: str) -> None:
        self.count += 1
        if self.limit is not None and self.count > self.limit:
            return
        if self.bar is None:
            self.emit(text)
            return
        with self.bar.external_write_mode(file=self.bar.fp):  # above the bar, not over it
            self.emit(text)


@dataclass
class FileRun:
    """One input file's run: the ``recipe`` of every record, the ``path``, its
    ``shape`` (see :func:`ctxcli.jsonio.read_records`), the ``stats`` it fills in,
    the ``store`` of originals (``None``: none given), where warnings go (``warn``),
    how a written record becomes bytes (``encode``), the input's line end
    (``newline``), its progress ``bar`` (or ``None``), worker processes (``jobs``, see
    :mod:`ctxcli.pool`) and summarizer threads (``threads``, while a model is waited
    on), and whether its summarizer calls no model (``offline``)."""

    recipe: Recipe
    path: str
    stats: FileStats
    store: StoreWriter | None = None
    warn: Warn = field(default=lambda _: None)
    shape: str = "jsonl"
    encode: Callable[[Any], bytes] = jsonio.dumps
    newline: bytes = b"\n"
    bar: Any = None
    jobs: int = 1
    threads: int = 1
    offline: bool = True

    def note(self, note: Note) -> None:
        """Act on one note of :func:`ctxcli.record.book`: warn, or store originals."""
        if isinstance(note, str):
            self.warn(note)
        else:
            stash(note[0], self.store, note[1])


def stash(stored: Mapping[str, Any], store: StoreWriter | None, place: str) -> None:
    """Send the originals that placeholders replaced to ``store``. Raises
    :class:`ConfigError` for new originals with no store to keep them."""
    if not stored:
        return
    if store is None and not needs_store(stored):
        return  # only placeholders of an earlier run, kept as they were
    if store is None:
        raise ConfigError(
            f"{place}: the tool results placeholders replaced need a store to be kept in "
            "(for `ctxcli restore`), and from stdin to stdout there is no file to put it "
            "beside; give --store PATH, or --stages without placeholder"
        )
    store.add(stored)


def records(run: FileRun, items: Iterable[jsonio.Record]) -> Iterator[tuple[bytes, bool]]:
    """``(output record, changed)`` for each input record, in input order: compressed
    here, on threads while a summarizer waits on a model, or by worker processes (see
    :mod:`ctxcli.pool`; then one ``output`` holds a piece's lines, joined by the
    input's line end), memory bounded either way. Originals replaced by placeholders
    go to the run's store.

    Raises :class:`InputError` for a bad record (unless ``on_error`` is ``keep``) and
    :class:`ConfigError` when a placeholder is written and there is no store.
    """
    if pool.pooled(run.jobs, run.offline, run.path, run.shape):
        worker = pool.Worker(run.recipe, run.newline)
        for piece in pool.pieces(worker, run.path, run.jobs, run.bar):
            run.stats.merge(piece.stats)
            for note in piece.notes:
                run.note(note)
            if piece.error is not None:
                raise piece.error
            if piece.output:
                yield piece.output, True
        return
    recipe, path = run.recipe, run.path
    attempts = ordered_map(
        lambda item: (item, compress_record(recipe, item, path, run.encode)),
        items,
        workers=run.threads,
    )
    for item, outcome in attempts:
        yield book(recipe.settings, item, outcome, path, run.stats, run.note)


def session(
    run: FileRun, items: Iterable[jsonio.Record], format: WholeFile
) -> Iterator[tuple[bytes, bool]]:
    """Output lines for a file of a whole-file ``format`` (a Claude Code session log, a
    Codex rollout: see :mod:`ctxcli.formats`), one conversation for the file, and a
    warning when it holds no message of that format (one forced on another's file).
    With ``on_error: keep`` a bad line is copied unchanged in its place and left out
    of the conversation."""
    events, lines, raw_of, bad_before = _events(run, items)
    done = compress_session(run.recipe, events, lines, run.path, format)
    conversation, result = done.conversation, done.result
    nothing = formats.none_read(format, events, conversation, run.path, "--format")
    if nothing:
        run.warn(nothing)
    if done.broke:
        run.warn(already_broken(run.path, conversation, format, done.broke))
    for text in result.warnings:
        run.warn(text)
    if done.fallback is not None:
        run.warn(fell_back(run.path, conversation, done.fallback))
    tally = Tally.of(result, done.broke, done.fallback, score=run.recipe.measure(result))
    run.stats.add(tally)
    run.stats.out_of_context += conversation.meta.get("out_of_context", 0)
    stash(result.stored, run.store, run.path)
    over = over_budget(run.recipe.settings, run.path, f"session {result.after.label}", tally)
    if over:
        run.warn(over)
    yield from _session_lines(events, done.out, raw_of, bad_before)


def _events(
    run: FileRun, items: Iterable[jsonio.Record]
) -> tuple[list[Any], list[int], dict[int, bytes], dict[int, list[bytes]]]:
    """A session log's events, their lines, the bytes each was read from (by the
    event's ``id``) and, with ``on_error: keep``, the bad lines that stood before each
    event position (raises :class:`InputError` for one otherwise)."""
    events: list[Any] = []
    lines: list[int] = []
    raw_of: dict[int, bytes] = {}
    bad_before: dict[int, list[bytes]] = {}
    for item, event in formats.events(items, run.path):
        line = item.line or 0
        if isinstance(event, InputError):
            if run.recipe.settings.on_error != "keep":
                raise event
            run.stats.add_entry("errors", {"line": line, "reason": event.reason})
            run.warn(f"{event} (copied unchanged)")
            bad_before.setdefault(len(events), []).append(item.raw or b"")
            continue
        events.append(event)
        lines.append(line)
        raw_of[id(event)] = item.raw or jsonio.dumps(event)
    return events, lines, raw_of, bad_before


def _session_lines(
    events: list[Any],
    out: list[Any],
    raw_of: dict[int, bytes],
    bad_before: dict[int, list[bytes]],
) -> Iterator[tuple[bytes, bool]]:
    """A session's output lines: each event of ``out`` as the bytes it was read from
    (else its JSON, changed), the bad lines kept with ``on_error: keep`` in their
    places before the events they stood before."""
    position = {id(event): e for e, event in enumerate(events)}
    for event in out:
        at = position.get(id(event))
        for bad in bad_before.pop(at, []) if at is not None else []:
            yield bad, False
        read_as = raw_of.get(id(event))
        yield (read_as, False) if read_as is not None else (jsonio.dumps(event), True)
    for raws in bad_before.values():
        for raw in raws:
            yield raw, False


def progress(path: str) -> Any:
    """A progress bar over the bytes of ``path`` (tqdm, on stderr)."""
    from tqdm import tqdm

    total = os.path.getsize(path) if path != "-" else None
    return tqdm(total=total, unit="B", unit_scale=True, desc=Path(path).name, leave=False)


def tracked(items: Iterator[jsonio.Record], bar: Any) -> Iterator[jsonio.Record]:
    """``items``, moving ``bar`` by each one's bytes as a driver reads it."""
    for item in items:
        if bar is not None:
            bar.update(len(item.raw or b"") + 1)
        yield item
