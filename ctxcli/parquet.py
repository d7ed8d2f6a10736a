"""Parquet datasets in and out: one row a record, one column its messages.

A row is read as the record of its JSON-like columns (null, bool, numbers, strings,
lists and structs of those); a struct field or column that is null reads as an absent
key, since Arrow cannot tell the two apart. The messages column (``--messages-key``'s
first step, else the first of :data:`MESSAGE_COLUMNS` the file has) is a list of
structs, or JSON text, which is parsed (a bad one is an error of that row, as a bad
line is). Columns of other types (binary, timestamps, maps ...) are not part of the
record and are written back as they were.

Output has the input's schema (its metadata included) and row order: a row no stage
changed is the input's row; in a changed one only the columns whose value changed are
written again, in their own type. A value that type cannot hold (a placeholder string
where a struct column holds a list of content blocks, a field the struct lacks) is an
:class:`ctxcli.errors.InvariantError` raised by :meth:`Source.encode` inside the
record's containment (:func:`ctxcli.compress.contain`): that conversation is written
with a safer plan, and named in a warning and the stats' ``fallbacks``.

pyarrow is optional (``pip install 'ctxcli[parquet]'``); :func:`require` says so.
Paths with a scheme (``s3://bucket/key``) go through pyarrow's filesystems
(:func:`pyarrow.fs.FileSystem.from_uri`; S3 settings such as ``AWS_ENDPOINT_URL`` come
from the environment, as the AWS SDK reads them).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ctxcli import formats, jsonio
from ctxcli.errors import ConfigError, InputError, InvariantError
from ctxcli.problems import Problem

SUFFIX = ".parquet"
#: Columns that hold the messages when ``--messages-key`` names none, in order.
MESSAGE_COLUMNS = ("messages", "conversations", *formats.WELL_KNOWN_KEYS)
#: Rows read, compressed and written at a time.
BATCH_ROWS = 1024


def require() -> Any:
    """The ``pyarrow`` module; raises :class:`ConfigError` saying what to install."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ConfigError(
            "reading and writing Parquet needs pyarrow: pip install 'ctxcli[parquet]'"
        ) from None
    return pyarrow


def is_parquet(path: str) -> bool:
    """Whether ``path`` names a Parquet file (by its ``.parquet`` suffix)."""
    return path.lower().endswith(SUFFIX)


def filesystem_of(path: str, filesystem: Any = None) -> tuple[Any, str]:
    """``(pyarrow filesystem, path in it)`` for ``path``: ``filesystem`` when given,
    else the one its scheme names (``s3://``), else the local one."""
    pa = require()
    if filesystem is not None:
        return filesystem, path.split("://", 1)[-1] if "://" in path else path
    if "://" in path:
        fs, inner = pa.fs.FileSystem.from_uri(path)
        return fs, str(inner)
    return pa.fs.LocalFileSystem(), path


@dataclass(frozen=True, slots=True)
class Row(jsonio.Record):
    """A Parquet row as an input record (``index``: its 0-based row number): its JSON-like
    columns in ``value``, the messages still JSON text when ``json_column`` names it."""

    json_column: str | None = None

    def parse(self, path: str) -> Any:
        """The record; raises :class:`InputError` for messages that are not JSON."""
        if self.json_column is None or not isinstance(self.value.get(self.json_column), str):
            return self.value
        try:
            messages = jsonio.loads(self.value[self.json_column], path, None)
        except InputError as exc:
            reason = f"column {self.json_column!r}: {exc.reason}"
            raise InputError(path, None, reason, record=self.index) from None
        return {**self.value, self.json_column: messages}


@dataclass
class Source:
    """One Parquet input being read: ``schema`` (pyarrow), ``column`` (the messages),
    ``json_text`` (whether it holds JSON text), ``json_like`` (the columns records hold)
    and ``pending``, the input batches whose output rows are not all written yet."""

    path: str
    file: Any
    schema: Any
    column: str
    json_text: bool
    json_like: frozenset[str]
    pending: deque[Any] = field(default_factory=deque)

    def rows(self) -> Iterator[Row]:
        """The records of the file, in order, a batch at a time: each batch is kept in
        :attr:`pending` until :class:`Sink` has written its rows."""
        return self.rows_of(self.file.iter_batches(batch_size=BATCH_ROWS, use_threads=False))

    def rows_of(self, batches: Iterable[Any], first: int = 0) -> Iterator[Row]:
        """The records of ``batches`` (of this schema), the first one row ``first``."""
        index = first
        column = self.column if self.json_text else None
        names = sorted(self.json_like)
        for batch in batches:
            self.pending.append(batch)
            for row in batch.select(names).to_pylist():
                yield Row(None, index, None, _without_nulls(row), column)
                index += 1

    def encode(self, record: Any) -> bytes:
        """``record`` as JSON, after checking that every column can hold its value.
        Raises :class:`InvariantError` naming the columns that cannot."""
        pa = require()
        problems = [
            Problem("not-a-column", f"key {key!r} is not a column")
            for key in record
            if key not in self.json_like
        ]
        for name in sorted(self.json_like & set(record)):
            try:
                held = self._cell(name, record[name])
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                detail = f"column {name!r} cannot hold the output: {exc}"
                problems.append(Problem("column-type", detail))
                continue
            if name == self.column and self.json_text:
                continue  # JSON text holds any record
            if jsonio.dumps(_without_nulls(held.to_pylist()[0])) != jsonio.dumps(record[name]):
                detail = (
                    f"column {name!r} ({self.schema.field(name).type}) cannot hold the output "
                    "(a field or value its type lacks)"
                )
                problems.append(Problem("column-type", detail))
        if problems:
            raise InvariantError("; ".join(map(str, problems)), tuple(problems))
        return jsonio.dumps(record)

    def _cell(self, name: str, value: Any) -> Any:
        """A one-element array of ``value`` in column ``name``'s type."""
        pa = require()
        kind = self.schema.field(name).type
        if name == self.column and self.json_text and value is not None:
            value = jsonio.dumps(value).decode()
        return pa.array([value], type=kind)

    def assemble(self, batch: Any, outputs: list[tuple[bytes, bool]]) -> Any:
        """The output batch for input ``batch``: its rows, with the columns of each
        changed output record (JSON, see :meth:`encode`) whose values changed written
        again."""
        pa = require()
        changed = [
            (i, jsonio.loads(out, self.path, None)) for i, (out, c) in enumerate(outputs) if c
        ]
        if not changed:
            return batch
        columns = []
        for name, column in zip(batch.schema.names, batch.columns):
            new = [
                (i, record.get(name))
                for i, record in changed
                if name in self.json_like and self._differs(column, i, name, record.get(name))
            ]
            if new:
                values = pa.concat_arrays([self._cell(name, v) for _, v in new])
                index = list(range(len(column)))
                for k, (i, _) in enumerate(new):
                    index[i] = len(column) + k
                column = pa.concat_arrays([column, values]).take(pa.array(index))
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    def _differs(self, column: Any, i: int, name: str, value: Any) -> bool:
        old = _without_nulls(column[i].as_py())
        if name == self.column and self.json_text and isinstance(old, str):
            with contextlib.suppress(InputError):
                old = jsonio.loads(old, self.path, None)
        return jsonio.dumps(old) != jsonio.dumps(value)


def open_source(path: str, messages_key: str | None = None, *, filesystem: Any = None) -> Source:
    """Open the Parquet file ``path`` for :meth:`Source.rows`.

    Raises :class:`InputError` when it cannot be read and :class:`ConfigError` when no
    column holds the messages (naming the columns there are)."""
    pa = require()
    fs, inner = filesystem_of(path, filesystem)
    try:
        file = pa.parquet.ParquetFile(fs.open_input_file(inner))
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, None, f"cannot read as Parquet: {exc}") from None
    return source_of(path, file.schema_arrow, messages_key, file=file)


def source_of(
    path: str, schema: Any, messages_key: str | None = None, *, file: Any = None
) -> Source:
    """The :class:`Source` of rows of ``schema`` (of ``file``, if any); raises
    :class:`ConfigError` when no column holds the messages."""
    pa = require()
    json_like = frozenset(f.name for f in schema if _json_like(f.type))
    wanted = [messages_key.split(".")[0]] if messages_key else list(MESSAGE_COLUMNS)
    column = next((name for name in wanted if name in schema.names), None)
    if column is None or column not in json_like:
        there = ", ".join(f"{f.name} ({f.type})" for f in schema)
        raise ConfigError(
            f"{path}: no column holds the messages (tried {', '.join(wanted)}; "
            f"columns: {there}); --messages-key names it"
        )
    json_text = pa.types.is_string(schema.field(column).type) or pa.types.is_large_string(
        schema.field(column).type
    )
    return Source(path, file, schema, column, json_text, json_like)


def to_ipc(batches: Iterable[Any], schema: Any) -> bytes:
    """``batches`` as Arrow IPC stream bytes (to pass between processes)."""
    pa = require()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as stream:
        for batch in batches:
            stream.write_batch(batch)
    return bytes(sink.getvalue())


def from_ipc(data: bytes) -> tuple[Any, list[Any]]:
    """``(schema, batches)`` of Arrow IPC stream bytes."""
    pa = require()
    reader = pa.ipc.open_stream(pa.py_buffer(data))
    return reader.schema, list(reader)


def _json_like(kind: Any) -> bool:
    """Whether Arrow type ``kind`` holds only what JSON holds (so it round-trips)."""
    t = require().types
    if t.is_null(kind) or t.is_boolean(kind) or t.is_integer(kind) or t.is_floating(kind):
        return True
    if t.is_string(kind) or t.is_large_string(kind):
        return True
    if t.is_list(kind) or t.is_large_list(kind):
        return _json_like(kind.value_type)
    if t.is_struct(kind):
        return all(_json_like(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _without_nulls(value: Any) -> Any:
    """``value`` with the null entries of every object in it left out."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


class Sink:
    """Writes output rows in input order as Parquet, with ``source``'s schema, to an
    :class:`ctxcli.jsonio.AtomicWriter`: the same calls as
    :class:`ctxcli.jsonio.RecordSink` (``write(record, changed=...)``, then ``close``)."""

    def __init__(self, writer: jsonio.AtomicWriter, source: Source) -> None:
        pa = require()
        self.source = source
        self._outputs: list[tuple[bytes, bool]] = []
        self._file = pa.parquet.ParquetWriter(_Stream(writer), source.schema)

    def write(self, record: bytes, *, changed: bool = True) -> None:
        """Add the next output record (its JSON; ignored when unchanged)."""
        self._outputs.append((record, changed))
        while not self.source.pending[0].num_rows:
            self.source.pending.popleft()
        batch = self.source.pending[0]
        if len(self._outputs) == batch.num_rows:
            self.write_batch(self.source.assemble(batch, self._outputs))
            self.source.pending.popleft()
            self._outputs = []

    def write_batch(self, batch: Any) -> None:
        """Add output rows already assembled (see :meth:`Source.assemble`)."""
        self._file.write_batch(batch)

    def close(self) -> None:
        """Write the file's footer (after the empty batches of a file of no rows)."""
        while self.source.pending and not self.source.pending[0].num_rows:
            self.source.pending.popleft()
        self._file.close()


class _Stream:
    """The file-like view of an :class:`ctxcli.jsonio.AtomicWriter` that pyarrow writes
    to (write errors stay :class:`ctxcli.errors.OutputError`)."""

    def __init__(self, writer: jsonio.AtomicWriter) -> None:
        self._writer = writer
        self._at = 0
        self.closed = False

    def write(self, data: Any) -> int:
        if self._writer.stream.closed:
            # The output was aborted: pyarrow closing its writer when it is collected
            # writes the footer to nothing.
            return len(data)
        self._writer.write(bytes(data))
        self._at += len(data)
        return len(data)

    def tell(self) -> int:
        return self._at

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def open_records(
    path: str, data: bytes | None = None, messages_key: str | None = None
) -> tuple[str, Iterator[jsonio.Record], Any]:
    """:func:`ctxcli.jsonio.read_records` for every input, Parquet included: a
    ``.parquet`` file gives ``("parquet", its rows, its Source)``."""
    if path != "-" and is_parquet(path):
        source = open_source(path, messages_key)
        return "parquet", source.rows(), source
    return jsonio.read_records(path, data)


def sink(
    writer: jsonio.AtomicWriter, shape: str, original: Any, *, newline: bytes, bom: bool
) -> jsonio.RecordSink | Sink:
    """The sink for what :func:`open_records` read: :class:`Sink` for Parquet, else
    :class:`ctxcli.jsonio.RecordSink`."""
    if shape == "parquet":
        return Sink(writer, original)
    return jsonio.RecordSink(writer, shape, original, newline=newline, bom=bom)  # type: ignore[arg-type]
