"""Reading and writing JSON lines: the one place JSON is parsed and written.

Reading knows the file and line of every record, accepts a UTF-8 byte order mark,
CRLF line ends and blank lines. Writing goes to a temporary file in the target's
folder that is renamed over the target only when the whole run succeeded, so a
failed run leaves no half-written output.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ctxcli.errors import InputError

BOM = b"\xef\xbb\xbf"


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for every non-blank line of ``path`` (``-`` is
    stdin). Line numbers are 1-based; ``raw_line`` has no line end.

    Raises :class:`InputError` when the file cannot be opened.
    """
    try:
        stream: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    with contextlib.ExitStack() as stack:
        if path != "-":
            stack.enter_context(stream)
        for number, line in enumerate(stream, start=1):
            if number == 1 and line.startswith(BOM):
                line = line[len(BOM) :]
            line = line.rstrip(b"\r\n")
            if line.strip():
                yield number, line


def loads(raw: bytes | str, path: str, line: int | None) -> Any:
    """Parse one JSON text. Raises :class:`InputError` naming ``path:line``.

    orjson first; the standard library for what orjson refuses but JSON allows (a
    lone surrogate escape such as ``"\\ud83d"``), which is then kept as that escape.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise InputError(path, line, f"invalid JSON: {exc}") from None


def dumps(value: Any) -> bytes:
    """One JSON text, compact, non-ASCII as UTF-8; lone surrogates as ``\\uXXXX``."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


class AtomicWriter:
    """Write a file whole or not at all: to ``<target>.tmp-*`` beside it, renamed over
    ``target`` by :meth:`commit`. ``-`` writes to stdout directly.

    Use :meth:`commit` after the last write and :meth:`abort` on failure (the context
    manager calls ``abort`` if an exception escapes).
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._tmp: str | None = None
        if target == "-":
            self.stream: IO[bytes] = sys.stdout.buffer
            return
        folder = Path(target).resolve().parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=folder)
        self.stream = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        self.stream.write(data)

    def commit(self) -> None:
        """Flush and move the finished file into place."""
        if self._tmp is None:
            self.stream.flush()
            return
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        os.replace(self._tmp, self.target)
        self._tmp = None

    def abort(self) -> None:
        """Remove the temporary file; the target is left as it was."""
        if self._tmp is None:
            return
        self.stream.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)
        self._tmp = None

    def __enter__(self) -> AtomicWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self.abort()


def write_json(target: str, value: Any) -> None:
    """Write ``value`` as indented JSON to ``target`` atomically."""
    with AtomicWriter(target) as writer:
        writer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
        writer.commit()
