"""Compress many inputs as a Ray Data pipeline (``ctxcli compress --engine ray``).

The pipeline: a dataset of the inputs; ``flat_map`` reads each into pieces (about
:data:`PIECE_BYTES` of JSON lines cut at line ends, counted so every record keeps its
line; a Parquet row group; a whole-file session in one piece); ``map_batches`` puts
each piece's records through :func:`ctxcli.compress.compress_record`, the per-record
path of every engine, and books them as :meth:`ctxcli.compress.Compressor.piece`
does, on a worker; the driver takes the pieces in input order
(``preserve_order``) and, as a local run does, merges their stats
(:meth:`ctxcli.compress.FileStats.merge`), shows their warnings, stores their
originals and writes each output atomically. So outputs, stats, stores and warnings
are a local run's. A task whose worker dies is run again by Ray (``max_retries``);
its piece is written once, when it arrives.

Paths may be remote (``s3://bucket/key``, any scheme pyarrow's filesystems know):
read on the workers; outputs, stats and stores are written to a staging folder and
uploaded when the run has succeeded. A JSON array or one-object file (a tau-bench
array, a SWE-agent trajectory) is one piece, compressed on a worker as the local path
compresses it (:func:`_whole`). ``--summarizer llm`` is not offered here: the key
would travel to every worker.

:func:`compress_dataset` is the entry point for a ``ray.data.Dataset`` of records.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import logging
import os
import pickle
import signal
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli import drivers, formats, jsonio, parquet
from ctxcli import inputs as inputs_module
from ctxcli.compress import (
    Compressor,
    FileStats,
    Piece,
    Plan,
    commit_outputs,
    compress_record,
    open_writers,
    planned,
)
from ctxcli.config import Settings
from ctxcli.errors import ConfigError, InputError, InvariantError

#: Bytes of JSON lines a task compresses.
PIECE_BYTES = 1 << 20
#: Times Ray runs a task again whose worker died (Ray Data's own default is forever).
MAX_RETRIES = 3


def require() -> Any:
    """The ``ray`` module with Ray Data; raises :class:`ConfigError` saying what to
    install."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ConfigError("--engine ray needs Ray Data: pip install 'ctxcli[ray]'") from None
    return ray


def start(address: str | None = None, *, num_cpus: int | None = None) -> None:
    """Connect to Ray: the cluster at ``address`` (``auto``: the one this machine
    belongs to), else a local Ray started for the run; nothing when already connected."""
    ray = require()
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # stderr is for ctxcli's lines
    ray.data.DataContext.get_current().enable_progress_bars = False
    if not ray.is_initialized():
        ray.init(
            address=address, num_cpus=num_cpus, include_dashboard=False, logging_level="warning"
        )


@dataclass(frozen=True)
class Job:
    """What every task needs: the run's ``settings``, the input ``paths`` by position,
    the bytes of a JSON lines piece, and ``kill_once``, a test hook: a file whose
    absence makes the first compressing task create it and kill its own worker."""

    settings: Settings
    paths: tuple[str, ...]
    piece_bytes: int = PIECE_BYTES
    kill_once: str | None = None


_COMPRESSORS: dict[bytes, Compressor] = {}


def _compressor(job: Job) -> Compressor:
    """This worker process's compressor for ``job``'s settings, built once (tokenizer
    and memos stay warm across its tasks)."""
    key = pickle.dumps(job.settings)
    if key not in _COMPRESSORS:
        _COMPRESSORS.clear()
        _COMPRESSORS[key] = Compressor(job.settings, jobs=1)
    return _COMPRESSORS[key]


def _read(row: dict[str, Any], job: Job) -> list[dict[str, Any]]:
    """Reading: the pieces of input ``row["file"]``, each a row: a Parquet row group,
    about ``job.piece_bytes`` of JSON lines, or a whole JSON array or object file (or
    session), which :func:`_whole` compresses as the local path does."""
    file = row["file"]
    path = job.paths[file]
    if parquet.is_parquet(path):
        return _parquet_pieces(file, path)
    fs, inner = parquet.filesystem_of(path)
    with fs.open_input_stream(inner) as stream:
        head, ended = _head(stream, job.piece_bytes)
        if job.settings.format is None:
            if not jsonio.looks_like_lines(ended):
                return [_row(file, "whole", 1, head + stream.read(), b"")]
            if _is_session(head, full=len(head) == len(ended)):
                data = head + stream.read()
                return [_row(file, "session", 1, data, _newline(data))]
        return list(_jsonl_pieces(file, _Prefixed(head, stream), job))


def _head(stream: Any, size: int) -> tuple[bytes, bytes]:
    """The first ``size`` bytes of ``stream`` or more, up to a line end or the end of the
    file, and the part of them that ends at a line end (all of them at the end)."""
    head = bytes(stream.read(size))
    while b"\n" not in head:
        block = bytes(stream.read(size))
        if not block:
            return head, head
        head += block
    return head, head[: head.rfind(b"\n") + 1]


def _row(
    file: int, kind: str, first: int, data: bytes, newline: bytes, piece: int = 0
) -> dict[str, Any]:
    """One piece as a row of the pipeline's dataset."""
    return {"file": file, "piece": piece, "kind": kind, "first": first, "data": data} | {
        "newline": newline
    }


class _Prefixed:
    """A stream that gives ``head`` (bytes already read from ``stream``) first."""

    def __init__(self, head: bytes, stream: Any) -> None:
        self.head, self.stream = head, stream

    def read(self, size: int) -> bytes:
        if self.head:
            block, self.head = self.head[:size], self.head[size:]
            return block
        return bytes(self.stream.read(size))


def _parquet_pieces(file: int, path: str) -> list[dict[str, Any]]:
    pq = parquet.require().parquet
    fs, inner = parquet.filesystem_of(path)
    data = pq.ParquetFile(fs.open_input_file(inner))
    pieces, first = [], 0
    for group in range(max(1, data.num_row_groups)):
        table = (
            data.read_row_group(group) if data.num_row_groups else data.schema_arrow.empty_table()
        )
        batches = table.to_batches(max_chunksize=parquet.BATCH_ROWS)
        blob = parquet.to_ipc(batches, data.schema_arrow)
        pieces.append(
            {"file": file, "piece": group, "kind": "parquet", "first": first, "data": blob}
            | {"newline": b""}
        )
        first += table.num_rows
    return pieces


def _jsonl_pieces(file: int, stream: Any, job: Job) -> Iterator[dict[str, Any]]:
    """Pieces of about ``job.piece_bytes`` of JSON lines that end at line ends, each
    with the line it starts on."""
    carry, line, piece, newline = b"", 1, 0, b"\n"
    while True:
        block = stream.read(job.piece_bytes)
        data = carry + block
        cut = len(data) if not block else data.rfind(b"\n") + 1
        if block and cut == 0:
            carry = data
            continue
        if cut or piece == 0:
            newline = _newline(data) if piece == 0 else newline
            yield _row(file, "jsonl", line, data[:cut], newline, piece)
            piece += 1
        line += data.count(b"\n", 0, cut)
        carry = data[cut:]
        if not block:
            return


def _is_session(data: bytes, *, full: bool) -> bool:
    """Whether JSON lines ``data`` (a file's start) open a whole-file format."""
    lines = jsonio.chunk_records(
        data if full else data[: data.rfind(b"\n") + 1], 1, file_start=True
    )
    head = [_peek(r) for r in lines[: formats.HEAD_RECORDS]]
    return formats.detect_file(head) is not None


def _peek(item: jsonio.Record) -> Any:
    try:
        return item.parse("")
    except InputError:
        return None


def _compress(batch: dict[str, Any], job: Job) -> dict[str, Any]:
    """Compressing: each piece of ``batch`` (columns ``file``, ``piece``, ``kind``,
    ``first``, ``data``) as a pickled :class:`ctxcli.compress.Piece`."""
    if job.kill_once and not os.path.exists(job.kill_once):
        Path(job.kill_once).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    compressor = _compressor(job)
    done = []
    columns = (batch[k] for k in ("file", "kind", "first", "data", "newline"))
    for file, kind, first, data, newline in zip(*columns):
        path = job.paths[int(file)]
        piece = _piece(compressor, path, str(kind), int(first), bytes(data), bytes(newline))
        done.append(pickle.dumps(piece))
    return {"file": batch["file"], "piece": batch["piece"], "result": done}


def _piece(
    compressor: Compressor, path: str, kind: str, first: int, data: bytes, newline: bytes
) -> Piece:
    """One piece's records through :func:`ctxcli.compress.compress_record`, booked as
    :meth:`ctxcli.compress.Compressor.piece` books them; ``output`` is the piece's
    output lines, each ended (JSON lines), or its output batches (Arrow IPC)."""
    stats = FileStats(path, "", compressor.encoding, compressor.settings.max_tokens, [])
    notes: list[Any] = []
    if kind == "session":
        return _session(compressor, path, data, newline, stats, notes)
    if kind == "whole":
        return _whole(compressor, path, data, stats, notes)
    outputs: list[tuple[bytes, bool]] = []
    source: parquet.Source | None = None
    items: Iterable[jsonio.Record]
    encode: Callable[[Any], bytes] = jsonio.dumps
    if kind == "parquet":
        schema, batches = parquet.from_ipc(data)
        source = parquet.source_of(path, schema, compressor.settings.messages_key)
        items, encode = source.rows_of(batches, first), source.encode
    else:
        items = jsonio.chunk_records(data, first, file_start=first == 1)
    error = None
    try:
        for item in items:
            outcome = compress_record(compressor, item, path, encode)
            outputs.append(compressor._book(item, outcome, path, stats, notes.append))
    except (InputError, InvariantError) as exc:
        error = exc
    if source is None:
        output = _bom(data, first) + b"".join(out + newline for out, _ in outputs)
    else:
        output = _assembled(source, outputs, error)
    return Piece(output, stats, notes, error)


def _assembled(source: parquet.Source, outputs: list[tuple[bytes, bool]], error: Any) -> bytes:
    batches, at = [], 0
    if error is None:
        for batch in source.pending:
            batches.append(source.assemble(batch, outputs[at : at + batch.num_rows]))
            at += batch.num_rows
    return parquet.to_ipc(batches, source.schema)


def _newline(data: bytes) -> bytes:
    """The line end of the first line of ``data`` (see :func:`ctxcli.jsonio.line_style`)."""
    end = data.find(b"\n")
    return b"\r\n" if end > 0 and data[end - 1 : end] == b"\r" else b"\n"


def _bom(data: bytes, first: int) -> bytes:
    """The byte order mark a file's output starts with when its input does."""
    return jsonio.BOM if first == 1 and data.startswith(jsonio.BOM) else b""


class _Notes:
    """A store for a worker: the originals become notes, stored by the driver."""

    def __init__(self, notes: list[Any], path: str) -> None:
        self.notes, self.path = notes, path

    def add(self, stored: Any) -> None:
        self.notes.append((dict(stored), self.path))


def _session(
    compressor: Compressor,
    path: str,
    data: bytes,
    newline: bytes,
    stats: FileStats,
    notes: list[Any],
) -> Piece:
    """A whole-file session through :meth:`ctxcli.compress.Compressor.session`."""
    items = jsonio.chunk_records(data, 1, file_start=True)
    module = formats.detect_file([_peek(r) for r in items[: formats.HEAD_RECORDS]])
    compressor.warn = notes.append  # type: ignore[method-assign,assignment]
    error = None
    try:
        lines = list(compressor.session(items, path, stats, _Notes(notes, path), module=module))  # type: ignore[arg-type]
    except (InputError, InvariantError) as exc:
        lines, error = [], exc
    finally:
        del compressor.warn
    output = _bom(data, 1) + b"".join(out + newline for out, _ in lines)
    return Piece(output, stats, notes, error)


def _whole(
    compressor: Compressor, path: str, data: bytes, stats: FileStats, notes: list[Any]
) -> Piece:
    """A JSON array or object file (or a whole-file session in one) compressed as
    :meth:`ctxcli.compress.Compressor.file` does, its output in memory; warnings and
    originals become ``notes``."""
    shape, items, original = parquet.open_records(path, data, compressor.settings.messages_key)
    whole, items = formats.whole_file_of(compressor.format, shape, items, path)
    newline, bom = jsonio.line_style(path, data)
    run = compressor._file_run(stats, _all_warnings(notes), shape, original, newline, None)
    run.store = _Notes(notes, path)  # type: ignore[assignment]
    lines = drivers.records(run, items) if whole is None else drivers.session(run, items, whole)
    buffer = io.BytesIO()
    sink = parquet.sink(buffer, shape, original, newline=newline, bom=bom)  # type: ignore[arg-type]
    try:
        for out, changed in lines:
            sink.write(out, changed=changed)
        sink.close()
    except (InputError, InvariantError) as exc:
        return Piece(b"", stats, notes, exc)
    return Piece(buffer.getvalue(), stats, notes, None)


def _all_warnings(notes: list[Any]) -> drivers.Shown:
    """Every warning of a file as a note: the driver shows and counts them, as for the
    pieces of a JSON lines file."""
    return drivers.Shown(notes.append, limit=None)


def pipeline(job: Job) -> Any:
    """The Ray Data pipeline of ``job``: a dataset of pickled pieces in input order
    (columns ``file``, ``piece``, ``result``)."""
    ray = require()
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    files = ray.data.from_items(
        [{"file": i} for i in range(len(job.paths))], override_num_blocks=max(1, len(job.paths))
    )
    retries = {"max_retries": MAX_RETRIES}
    with warnings.catch_warnings():  # Ray 2.60 names no max_retries parameter yet
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        pieces = files.flat_map(_read, fn_kwargs={"job": job}, **retries)
        return pieces.map_batches(_compress, batch_size=1, fn_kwargs={"job": job}, **retries)


def compress_files(
    compressor: Compressor,
    plans: list[Plan],
    *,
    kill_once: str | None = None,
) -> list[FileStats]:
    """Compress every input of ``plans`` as :meth:`ctxcli.compress.Compressor.file` would
    (same outputs, stats, stores and warnings, through ``compressor``), the records on
    Ray (connect first: :func:`start`). Raises what ``file`` raises; an output already
    written stays (each is whole).

    Raises :class:`ConfigError` for a summarizer that calls a model."""
    if not compressor.summarizer.offline:
        raise ConfigError("--engine ray takes the extractive summarizer only")
    on_ray = [p for p in plans if p.input != "-"]
    job = Job(compressor.settings, tuple(p.input for p in on_ray), kill_once=kill_once)
    results: dict[str, FileStats] = {}
    with tempfile.TemporaryDirectory(prefix="ctxcli-ray-") as staging:
        stream = _by_file(pipeline(job).iter_rows()) if on_ray else iter(())
        for index, item in enumerate(on_ray):
            results[item.input] = _write(compressor, item, next(stream), Path(staging, str(index)))
        for item in plans:
            if item.input not in results:
                results[item.input] = planned(compressor, item)
    return [results[p.input] for p in plans]


def _by_file(rows: Iterable[dict[str, Any]]) -> Iterator[Iterator[Piece]]:
    """The pieces of each input in turn (rows arrive in input order)."""
    rows = iter(rows)
    pending: list[dict[str, Any]] = []
    file = 0
    while True:

        def pieces(of: int) -> Iterator[Piece]:
            while True:
                row = pending.pop() if pending else next(rows, None)
                if row is None or int(row["file"]) != of:
                    if row is not None:
                        pending.append(row)
                    return
                yield pickle.loads(row["result"])

        yield pieces(file)
        file += 1


def _write(compressor: Compressor, item: Plan, pieces: Iterator[Piece], staging: Path) -> FileStats:
    """Book and write one input's pieces as :meth:`ctxcli.compress.Compressor.file`
    does (store, then stats, then output moved into place; a named local store added
    to, a remote one replaced), staging remote targets."""
    local = _Staged(item, staging)
    stats = FileStats(
        input=item.input,
        output=item.output,
        encoding=compressor.encoding,
        max_tokens=compressor.settings.max_tokens,
        stages=compressor.settings.stage_names,
        store=item.store,
    )
    warned = compressor._file_start = compressor.warned
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        adding = item.adds_to_store and local.store == item.store  # not staged
        writer, store, stats_file = open_writers(
            stack,
            item.input,
            (local.output or item.output, local.store, local.stats),
            adding=adding,
        )
        sink = _Output(writer, parquet.is_parquet(item.input))
        for piece in pieces:
            stats.merge(piece.stats)
            for note in piece.notes:
                compressor._apply(note, store)
            if piece.error is not None:
                raise piece.error
            sink.write(piece.output)
        sink.close()
        compressor._finish(stats, item.input, warned, None, started)
        commit_outputs(stats, stats_file, store, writer)
    local.upload()
    return stats


class _Output:
    """An output's pieces in order: JSON lines as they are, Parquet batches through
    one :class:`ctxcli.parquet.Sink`."""

    def __init__(self, writer: jsonio.AtomicWriter, is_parquet: bool) -> None:
        self.writer, self.is_parquet = writer, is_parquet
        self.sink: parquet.Sink | None = None

    def write(self, output: bytes) -> None:
        if not self.is_parquet:
            self.writer.write(output)
            return
        schema, batches = parquet.from_ipc(output)
        if self.sink is None:
            self.sink = parquet.Sink(
                self.writer, parquet.Source("", None, schema, "", False, frozenset())
            )
        for batch in batches:
            self.sink.write_batch(batch)

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()


class _Staged:
    """Where a plan's files are written here: local targets as they are, remote ones
    (``s3://...``) in ``staging``, uploaded by :meth:`upload` once all are written."""

    def __init__(self, item: Plan, staging: Path) -> None:
        self.remote: list[tuple[str, str]] = []  # uploaded in this order
        self.store = self._local(item.store, staging)
        self.stats = self._local(item.stats, staging)
        self.output = self._local(item.output, staging)

    def _local(self, target: str | None, staging: Path) -> str | None:
        if target is None or "://" not in target:
            return target
        staging.mkdir(parents=True, exist_ok=True)
        here = str(staging / target.rsplit("/", 1)[-1])
        self.remote.append((here, target))
        return here

    def upload(self) -> None:
        """Copy the staged files to their remote targets (store, stats, output last)."""
        for here, target in self.remote:
            if not os.path.exists(here):
                continue  # a store with no entries is not written
            fs, inner = parquet.filesystem_of(target)
            with open(here, "rb") as data, fs.open_output_stream(inner) as out:
                while chunk := data.read(1 << 20):
                    out.write(chunk)


def plan_remote(inputs: Iterable[str], *, out_dir: str | None, restorable: bool) -> list[Plan]:
    """:func:`ctxcli.compress.plan` for inputs that may be remote: each input (a file,
    a folder's files of :data:`ctxcli.inputs.DEFAULT_GLOBS`, a glob) with its output,
    stats and store beside it or in ``out_dir``. Local-only runs use ``compress.plan``."""
    plans = []
    for path in _expand(inputs):
        folder, _, name = path.rpartition("/")
        stem, dot, suffix = name.rpartition(".")
        stem, suffix = (stem, f".{suffix}") if dot else (name, ".jsonl")
        where = (out_dir or folder).rstrip("/")
        output = f"{where}/{stem}.compressed{suffix}"
        stats = inputs_module.beside(output, "stats.json")
        store = inputs_module.beside(output, "store.jsonl") if restorable else None
        plans.append(Plan(input=path, output=output, stats=stats, store=store))
    return plans


def _matches(fs: Any, pattern: str, scheme: str, item: str) -> list[str]:
    """The files of ``fs`` that the glob ``pattern`` matches (``fnmatch`` rules, so a
    ``*`` may stand for folders too), sorted, without ctxcli's own outputs."""
    pa = parquet.require()
    wild = min(pattern.find(char) for char in "*?[" if char in pattern)
    base = pattern[:wild].rpartition("/")[0]
    found = sorted(
        scheme + f.path
        for f in fs.get_file_info(pa.fs.FileSelector(base, recursive=True))
        if f.type == pa.fs.FileType.File
        and fnmatch.fnmatchcase(f.path, pattern)
        and not inputs_module.is_own_output(f.path.rsplit("/", 1)[-1])
    )
    if not found:
        raise ConfigError(f"{item}: no file matches")
    return found


def _expand(inputs: Iterable[str]) -> list[str]:
    """Remote inputs as files: a file, a folder's inputs (sorted), a glob's matches."""
    pa = parquet.require()
    paths: list[str] = []
    for item in inputs:
        fs, inner = parquet.filesystem_of(item)
        scheme = item.split("://", 1)[0] + "://"
        if any(char in inner for char in "*?["):
            paths += _matches(fs, inner, scheme, item)
            continue
        info = fs.get_file_info(inner)
        if info.type == pa.fs.FileType.File:
            paths.append(item)
            continue
        if info.type != pa.fs.FileType.Directory:
            raise ConfigError(f"{item}: no such file or directory")
        found = sorted(
            scheme + f.path
            for f in fs.get_file_info(pa.fs.FileSelector(inner))
            if f.type == pa.fs.FileType.File and _is_input(f.path.rsplit("/", 1)[-1])
        )
        if not found:
            kinds = " or ".join(inputs_module.DEFAULT_GLOBS)
            raise ConfigError(f"{item}: no {kinds} files in this directory")
        paths += found
    return paths


def _is_input(name: str) -> bool:
    """Whether a folder's file ``name`` is an input (:data:`ctxcli.inputs.DEFAULT_GLOBS`,
    not one of ctxcli's own outputs)."""
    globs = inputs_module.DEFAULT_GLOBS
    return any(fnmatch.fnmatchcase(name, g) for g in globs) and not inputs_module.is_own_output(
        name
    )


def compress_dataset(dataset: Any, settings: Settings, *, store_column: str | None = None) -> Any:
    """``dataset`` (a ``ray.data.Dataset`` of records: a messages column of structs or
    JSON text and any others, as :mod:`ctxcli.parquet` reads them) compressed by
    ``settings``, lazily, in the same columns and order; each record goes through
    :func:`ctxcli.compress.compress_record`. With the placeholder stage,
    ``store_column`` names a column added for each row's originals (JSON text of
    ``{id: original}``, the lines of a store). Stats and warnings stay on the workers.

    Raises :class:`ConfigError` for the placeholder stage without ``store_column``."""
    if "placeholder" in settings.stage_names and store_column is None:
        raise ConfigError("the placeholder stage needs store_column= for the originals")
    job = Job(settings, ())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        return dataset.map_batches(
            _compress_table,
            batch_format="pyarrow",
            fn_kwargs={"job": job, "store_column": store_column},
            max_retries=MAX_RETRIES,
        )


def _compress_table(table: Any, job: Job, store_column: str | None) -> Any:
    """One batch of :func:`compress_dataset`: its records compressed, its columns kept."""
    pa = parquet.require()
    compressor = _compressor(job)
    source = parquet.source_of("<dataset>", table.schema, job.settings.messages_key)
    stats = FileStats("<dataset>", "", compressor.encoding, job.settings.max_tokens, [])
    outputs, stored = [], []
    for item in source.rows_of(table.to_batches()):
        notes: list[Any] = []
        outcome = compress_record(compressor, item, "<dataset>", source.encode)
        outputs.append(compressor._book(item, outcome, "<dataset>", stats, notes.append))
        originals = {k: v for n in notes if not isinstance(n, str) for k, v in n[0].items()}
        stored.append(jsonio.dumps(originals).decode() if originals else None)
    batches, at = [], 0
    for batch in source.pending:
        batches.append(source.assemble(batch, outputs[at : at + batch.num_rows]))
        at += batch.num_rows
    out = pa.Table.from_batches(batches, schema=table.schema)
    if store_column is not None:
        out = out.append_column(store_column, pa.array(stored, type=pa.string()))
    return out


__all__ = ["Job", "compress_dataset", "compress_files", "pipeline", "plan_remote", "start"]
