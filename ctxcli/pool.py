"""Worker processes for a large JSON lines file (``--jobs``): how many, on which
pieces of the file, and what each sends back (a :class:`Piece`).

Each worker reads its pieces of the file itself (through the driver's open
descriptor) and sends back only their output, stats and what its memos learned, which
the other workers take in before their next piece: a text one worker read (a system
prompt, a tool's schema or result, the earlier turns of a conversation logged at every
turn) is not read again by the others (see :mod:`ctxcli.memo`).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ctxcli import jsonio, memo
from ctxcli.errors import InputError, InvariantError, WorkerError
from ctxcli.parallel import process_map
from ctxcli.record import Note, Recipe, book, compress_record
from ctxcli.stats import FileStats

#: Where cgroup v2 states a CPU quota: ``"<quota> <period>"`` (microseconds) or
#: ``"max <period>"``.
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
#: Where cgroup v1 states one: ``cpu.cfs_quota_us`` (``-1``: none) and
#: ``cpu.cfs_period_us`` in this folder.
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
#: Bytes of input a worker process reads and compresses at a time...
CHUNK_BYTES = 1 << 20
#: ...once past the start of the file, whose pieces are smaller, from this size up
#: (see :func:`ctxcli.jsonio.chunks`): there most texts are new, and what one worker
#: learns from them reaches the others sooner.
FIRST_CHUNK_BYTES = 1 << 17
#: Inputs smaller than this (bytes) are compressed in this process when ``jobs`` is
#: automatic: starting workers costs more than they save.
POOL_MIN_BYTES = 8_000_000


@dataclass
class Piece:
    """A run of JSON lines records after compression, as a worker process sends it
    back: ``output``, their output lines joined by the input's line end (none after the
    last); ``stats`` for them alone (see :meth:`FileStats.merge`); ``notes``, warnings
    and originals to store, in order; and ``error``, the error that ended the run early,
    to be raised once the notes are acted on; ``learned``, the worker's new memo
    results (see :func:`ctxcli.memo.fresh`); ``size``, the bytes of input it covers."""

    output: bytes
    stats: FileStats
    notes: list[Note]
    error: InputError | InvariantError | None = None
    learned: dict[str, memo.Results] = field(default_factory=dict)
    size: int = 0


@dataclass(frozen=True)
class Worker:
    """What a worker process compresses with: the run's :class:`Recipe` and the
    input's line end."""

    recipe: Recipe
    newline: bytes = b"\n"


_WORKER: Worker | None = None


def usable_cpus() -> int:
    """The cores this process may run on: those its CPU affinity allows (``taskset``),
    fewer when a cgroup CPU quota (a container's ``--cpus``; cgroup v2, else v1) grants
    less time than that, and at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        cores = min(cores, max(1, int(quota + 0.5)))
    return max(1, cores)


def _cgroup_cpus() -> float | None:
    """Cores' worth of time this process's cgroup grants (1.5 for ``--cpus 1.5``), or
    ``None`` for no quota, or none that can be read."""
    try:
        quota, period = CGROUP_CPU_MAX.read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (CGROUP_V1_CPU / "cpu.cfs_quota_us").read_text().strip()
            period = (CGROUP_V1_CPU / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        granted, every = int(quota), int(period)
    except ValueError:
        return None  # "max", or unreadable
    return granted / every if granted > 0 and every > 0 else None


def jobs_for(requested: int | None, input_path: str) -> int:
    """Worker processes for one input: as ``requested``, or with ``None`` one per
    usable core (:func:`usable_cpus`) for a file of :data:`POOL_MIN_BYTES` or more and
    none below. 1 without ``fork`` (the workers share the loaded tokenizer by
    forking)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if requested is not None:
        return max(1, requested)
    try:
        size = os.path.getsize(input_path) if input_path != "-" else 0
    except OSError:
        size = 0
    return usable_cpus() if size >= POOL_MIN_BYTES else 1


def pooled(jobs: int, offline: bool, path: str, shape: str) -> bool:
    """Whether ``path`` (of ``shape``) is compressed by ``jobs`` worker processes (see
    :func:`pieces`): a JSON lines file of more than :data:`CHUNK_BYTES`, with no model
    to call (``offline``: no client, no cache to fork)."""
    if jobs < 2 or not offline or path == "-" or shape != "jsonl":
        return False
    try:
        return os.path.getsize(path) > CHUNK_BYTES
    except OSError:
        return False  # read here, where an unreadable file is named


def pieces(worker: Worker, path: str, jobs: int, bar: Any = None) -> Iterator[Piece]:
    """The JSON lines file ``path`` compressed by ``jobs`` worker processes, a
    :class:`Piece` per piece of input (see :data:`CHUNK_BYTES`), in order (see the
    module docstring); ``bar``, a progress bar, moves by each piece's size. Raises
    :class:`WorkerError` naming ``path`` when a worker cannot start or dies."""
    with jsonio.open_input(path) as stream:
        # Workers read the pieces through this open file (their copy of its
        # descriptor): the file it was, if its path is replaced during the run.
        tasks = (
            (path, stream.fileno(), start, end, first_line)
            for start, end, first_line in jsonio.chunks(stream, *_piece_sizes())
        )
        done = process_map(
            _piece,
            tasks,
            workers=min(jobs, _pieces_in(stream)),
            initializer=_start_worker,
            initargs=(worker,),
            news=_news,
            learn=memo.learn,
        )
        try:
            for piece in done:
                if bar is not None:
                    bar.update(piece.size)
                yield piece
        except WorkerError as exc:
            raise WorkerError(f"{path}: {exc}") from None


def piece(worker: Worker, items: Iterable[jsonio.Record], path: str) -> Piece:
    """Compress ``items``, a run of JSON lines records, into one :class:`Piece` (what a
    worker process sends back). Stops at the first record whose error is raised (see
    :func:`ctxcli.record.book`)."""
    settings = worker.recipe.settings
    stats = FileStats(path, "", worker.recipe.encoding, settings.max_tokens, [])
    notes: list[Note] = []
    lines: list[bytes] = []
    error = None
    try:
        for item in items:
            outcome = compress_record(worker.recipe, item, path)
            out, _ = book(settings, item, outcome, path, stats, notes.append)
            lines.append(out)
    except (InputError, InvariantError) as exc:
        error = exc
    return Piece(worker.newline.join(lines), stats, notes, error, memo.fresh())


def _start_worker(worker: Worker) -> None:
    """Runs first in each worker process: the (forked) worker it works with; its memos
    start keeping what they learn for the other workers."""
    global _WORKER
    _WORKER = worker
    memo.share(worker.recipe.counter.text)  # its own, whatever counter was made since
    memo.track()


def _piece(task: tuple[str, int, int, int, int]) -> Piece:
    """In a worker: read one piece of the input and compress its records."""
    path, fd, start, end, first_line = task
    assert _WORKER is not None
    done = piece(_WORKER, jsonio.read_chunk(fd, start, end, first_line), path)
    done.size = end - start
    return done


def _pieces_in(stream: BinaryIO) -> int:
    """About how many pieces :func:`pieces` cuts the open file into (1 or more): no
    more workers than that are started."""
    size, start, count = os.fstat(stream.fileno()).st_size, 0, 0
    sizes = _piece_sizes()
    while start < size:
        start += jsonio.piece_size(start, *sizes)
        count += 1
    return max(1, count)


def _piece_sizes() -> tuple[int, int]:
    """``(size, first)`` for :func:`ctxcli.jsonio.chunks`: the pieces' sizes in bytes."""
    return CHUNK_BYTES, min(FIRST_CHUNK_BYTES, CHUNK_BYTES)


def _news(done: Piece) -> dict[str, memo.Results] | None:
    """What a piece's worker learned, for the other workers (taken out of the piece)."""
    learned, done.learned = done.learned, {}
    return learned or None
