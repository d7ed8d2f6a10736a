"""Reading and writing JSON lines: the one place JSON is parsed and written.

Reading knows the file and line of every record, accepts a UTF-8 byte order mark,
CRLF line ends and blank lines. Writing goes to a temporary file in the target's
folder that is renamed over the target only when the whole run succeeded, so a
failed run leaves no half-written output.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal

import orjson

from ctxcli.errors import InputError, OutputError

BOM = b"\xef\xbb\xbf"


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for every non-blank line of ``path`` (``-`` is
    stdin). Line numbers are 1-based; ``raw_line`` has no line end.

    Raises :class:`InputError` when the file cannot be opened.
    """
    stream: IO[bytes] = sys.stdin.buffer if path == "-" else open_input(path)
    with contextlib.ExitStack() as stack:
        if path != "-":
            stack.enter_context(stream)
        for number, line in enumerate(stream, start=1):
            if number == 1 and line.startswith(BOM):
                line = line[len(BOM) :]
            line = line.rstrip(b"\r\n")
            if line.strip():
                yield number, line


Shape = Literal["jsonl", "array", "object"]


@dataclass(frozen=True, slots=True)
class Record:
    """One record of an input file, before it is parsed (JSON lines) or after.

    ``line`` is its 1-based line for JSON lines (``None`` otherwise); ``index`` its
    0-based position in a JSON array (``None`` otherwise). ``raw`` is its own bytes
    (a JSON lines line, or the whole file of a one-record file); ``value`` the parsed
    record for the shapes that are parsed whole.
    """

    line: int | None
    index: int | None
    raw: bytes | None
    value: Any = None

    def parse(self, path: str) -> Any:
        """The record's JSON value. Raises :class:`InputError` naming file and line."""
        if self.raw is not None and self.index is None and self.value is None:
            return loads(self.raw, path, self.line)
        return self.value

    def peek(self, path: str) -> Any:
        """The record's JSON value, or ``None`` when it is not JSON (for a look at a
        file's first records, before the reading that names a bad line)."""
        try:
            return self.parse(path)
        except InputError:
            return None


def read_records(
    path: str, data: bytes | None = None
) -> tuple[Shape, Iterator[Record], bytes | None]:
    """Open ``path`` (``-``: stdin; or ``data``, the bytes read from it: see
    :func:`read_input`, or from a remote file) and say which of the three input shapes
    it has:

    - ``jsonl``: one record a line (read lazily, line by line);
    - ``array``: one JSON array of records (parsed whole);
    - ``object``: one JSON object spread over the file (a SWE-agent ``.traj``).

    The first non-blank lines decide: when the first, or else (it not opening an
    array) both the second and third, is a JSON object on its own, the file is JSON
    lines (so are the first two being whole JSON arrays); otherwise the whole file is
    parsed, and a file that is not one JSON text is
    read as JSON lines after all (so a broken line is reported by number).
    Returns the shape, the records and, for the shapes parsed whole, the file's bytes.
    Raises :class:`InputError` when the file cannot be read.
    """
    given = data is not None or is_stream(path)  # stdin, a pipe, or a remote file's bytes
    if given:
        data = (read_input(path) if data is None else data) or b""
        lines = _split(data)
    else:
        data = b""
        lines = iter_lines(path)
    first, *after = [line for _, line in itertools.islice(lines, 3)] + [b"", b"", b""]
    if isinstance(lines, Generator):
        lines.close()
    _refuse_packed(path, first)
    if _looks_like_lines(first, after):
        # JSON lines, perhaps with a broken first line (two whole objects follow it, as
        # no JSON text spread over lines has them), or of arrays (Responses item lists,
        # a line each): no need to read the file whole.
        return "jsonl", _jsonl(path, data, given), None
    if not given:
        with open_input(path) as stream:
            data = stream.read()
    body = data[len(BOM) :] if data.startswith(BOM) else data
    try:
        whole = loads(body, path, None)
    except NumberError:
        raise
    except InputError as exc:
        _refuse_broken_text(path, body, (first, after), exc)
        return "jsonl", _jsonl(path, data, True), None
    if isinstance(whole, list):
        return "array", _array_records(data, whole), data
    return "object", iter([Record(1, None, body.strip(), whole)]), data


def _refuse_broken_text(
    path: str, body: bytes, head: tuple[bytes, list[bytes]], exc: InputError
) -> None:
    """Raise for a file that is one JSON text, broken (``exc``: what parsing it whole
    raised), and not JSON lines with broken lines, by its first non-blank lines
    (``head``: the first and those after it): an array (no JSON lines file opens with
    one; the error of the whole text says where), or an object spread over lines
    (:func:`_spread_object`)."""
    first, after = head
    if first.lstrip().startswith(b"["):
        raise InputError(path, None, f"not a JSON array: {exc.reason}") from None
    if _spread_object(first, after[0], body):
        raise _broken_object(path, body, exc) from None


#: How many lines of a file that opens with ``{`` and does not parse are looked at for
#: a whole record, which tells JSON lines from one object spread over lines.
_RECORD_LOOKS = 50


def _spread_object(first: bytes, second: bytes, body: bytes) -> bool:
    """Whether a file (``body``) whose first non-blank lines are ``first`` and
    ``second`` (neither a JSON object on its own) is one JSON object spread over lines
    (a SWE-agent ``.traj``, a Gemini CLI session): it opens with ``{``, its second
    line opens no record of its own, and none of its first :data:`_RECORD_LOOKS`
    lines after the first is a whole record, as JSON lines whose first records hold
    raw line ends (pasted text split them) go on with whole ones. A pretty-printed
    object with such a line is read as JSON lines, each line named, as it always was."""
    if not (first.lstrip().startswith(b"{") and second and not second.lstrip().startswith(b"{")):
        return False
    lines = body.split(b"\n", _RECORD_LOOKS + 1)[1 : _RECORD_LOOKS + 1]
    return not any(_is_object(line) or _is_array(line) for line in lines)


def _broken_object(path: str, body: bytes, exc: InputError) -> InputError:
    """The error for a JSON object spread over lines that does not parse: at the line
    and column where the parser stopped, or of the first byte that is not UTF-8 (read
    as JSON lines, it had been "line 1: unexpected end of data", and ``validate`` had
    listed every line of the file)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = body.count(b"\n", 0, bad.start) + 1
        column = bad.start - (body.rfind(b"\n", 0, bad.start) + 1) + 1
        return InputError(path, line, f"not valid UTF-8 (at byte {column} of the line)")
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError as bad:
        return InputError(path, bad.lineno, f"invalid JSON: {bad.msg}: column {bad.colno}")
    return InputError(path, None, exc.reason)


def looks_like_lines(head: bytes) -> bool:
    """Whether a file that starts with ``head`` (its first bytes, ending at a line end
    or the file's end) is JSON lines, as :func:`read_records` decides from its first
    non-blank lines; ``head`` need not hold the whole file."""
    first, *after = [line for _, line in itertools.islice(_split(head), 3)] + [b"", b"", b""]
    return _looks_like_lines(first, after)


def _looks_like_lines(first: bytes, after: list[bytes]) -> bool:
    """Whether a file whose first non-blank lines are ``first`` and ``after`` is JSON
    lines (see :func:`read_records`)."""
    return (
        not first
        or _is_object(first)
        or (not first.lstrip().startswith(b"[") and all(map(_is_object, after[:2])))
        or (_is_array(first) and _is_array(after[0]))
    )


def _array_records(data: bytes, whole: list[Any]) -> Iterator[Record]:
    """The records of a JSON array file, each with the bytes it was read from when
    :func:`array_spans` finds them all."""
    spans = array_spans(data)
    raws: list[bytes | None] = (
        [data[a:b] for a, b in spans] if len(spans) == len(whole) else [None] * len(whole)
    )
    return (Record(None, i, raws[i], value) for i, value in enumerate(whole))


#: A JSON string (with its escapes) or one of the characters that open, close or
#: separate values: all :func:`array_spans` needs to see.
_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')


def array_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte spans ``[start, end)`` of the elements of the JSON array that ``data`` (a
    valid JSON text) holds, white space around them left out; ``[]`` when it holds
    no array. Strings are skipped whole, so brackets inside them do not count."""
    spans: list[tuple[int, int]] = []
    depth, start = 0, -1
    for match in _STRUCTURE.finditer(data):
        char = data[match.start()]
        if char == 0x22:  # a string
            continue
        if char in b"[{":
            depth += 1
            if depth == 1 and char == 0x5B:
                start = match.end()
        elif char in b"]}":
            depth -= 1
            if depth == 0:
                spans += _trimmed(data, start, match.start())
                break
        elif depth == 1 and start >= 0:  # a comma between elements
            spans += _trimmed(data, start, match.start())
            start = match.end()
    return spans if start >= 0 else []


def _trimmed(data: bytes, begin: int, end: int) -> list[tuple[int, int]]:
    """``[(begin, end)]`` without the white space at either end; ``[]`` if nothing is
    left."""
    while begin < end and data[begin] in b" \t\r\n":
        begin += 1
    while end > begin and data[end - 1] in b" \t\r\n":
        end -= 1
    return [(begin, end)] if begin < end else []


def restyle(value: Any, original: bytes, span: tuple[int, int]) -> bytes:
    """``value`` as JSON in the style of the text it replaces, ``original[span]``:
    indented by the same step, each line after the first by the indentation of the
    line the text starts on, with ``": "`` after keys when the original has it, and
    non-ASCII characters as they are unless the file escapes them all."""
    sample = original[span[0] : span[1]]
    escape = b"\\u" in original and not _NON_ASCII.search(original)
    if b"\n" not in sample:
        if b'": ' not in sample:
            return dumps(value)
        return std_dumps(value, ensure_ascii=escape).encode()
    line_start = original.rfind(b"\n", 0, span[0]) + 1
    base = original[line_start : span[0]]
    base = base[: len(base) - len(base.lstrip())]
    second = sample.split(b"\n", 2)[1]
    step = (len(second) - len(second.lstrip(b" "))) - len(base)
    text = std_dumps(value, indent=step if step > 0 else 2, ensure_ascii=escape)
    return text.replace("\n", "\n" + base.decode()).encode()


_NON_ASCII = re.compile(rb"[\x80-\xff]")


def read_input(path: str) -> bytes | None:
    """All of stdin for ``path`` ``-``, or all of a named pipe (:func:`is_stream`):
    they can be read only once, so pass the bytes on to :func:`read_records` and
    :func:`line_style`; ``None`` for a file, read as needed. Raises
    :class:`InputError` when the pipe cannot be opened."""
    if path == "-":
        return sys.stdin.buffer.read()
    if is_stream(path):
        with open_input(path) as stream:
            return stream.read()
    return None


def _is_array(line: bytes) -> bool:
    return isinstance(_shape_of(line), list)


def _is_object(line: bytes) -> bool:
    return isinstance(_shape_of(line), dict)


def _shape_of(line: bytes) -> Any:
    """``line`` parsed for its shape alone, ``None`` when it is no JSON: a ``NaN`` or a
    number too large for a double (which the standard library reads) still make an
    object an object, so that a file whose first line has one is read as JSON lines
    and that line named as bad (with ``--on-error keep``, copied as a broken line
    elsewhere is; it had ended the run, read as a whole file of a bad number)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


#: The first bytes of a compressed file, the name of its compression and the command
#: that writes its text to stdout: read as text, a gzip file said "not valid UTF-8
#: (at byte 2 of the line)".
_PACKED = (
    (b"\x1f\x8b", "gzip", "zcat"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstdcat"),
    (b"BZh", "bzip2", "bzcat"),
    (b"\xfd7zXZ\x00", "xz", "xzcat"),
)


#: The byte order marks of the Unicode encodings that are not UTF-8, longest first
#: (UTF-32's little-endian mark opens with UTF-16's).
_WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)


def _refuse_packed(path: str, first: bytes) -> None:
    """Raise :class:`InputError` when ``first`` (the first line of ``path``) opens a
    compressed file (:data:`_PACKED`) or a text in UTF-16 or UTF-32
    (:data:`_WIDE_MARKS`), saying how to read its text."""
    wide = next((name for mark, name in _WIDE_MARKS if first.startswith(mark)), None)
    if wide:  # read as UTF-8 it was 'not valid UTF-8 (at byte 1)', which says not why
        source = path if path != "-" else "FILE"
        raise InputError(
            path,
            None,
            f"is {wide} (its byte order mark says so), not UTF-8; convert it first "
            f"(`iconv -f {wide[:6]} -t UTF-8 {source}` writes it as UTF-8)",
        )
    packed = next((p for p in _PACKED if first.startswith(p[0])), None)
    if packed:
        _, name, unpack = packed
        source = path if path != "-" else "FILE"
        raise InputError(
            path,
            None,
            f"is {name}-compressed; decompress it first "
            f"(`{unpack} {source}` writes its text; - reads stdin)",
        )


def _jsonl(path: str, data: bytes, given: bool) -> Iterator[Record]:
    lines = _split(data) if given else iter_lines(path)
    return (Record(number, None, raw) for number, raw in lines)


def _split(data: bytes) -> Iterator[tuple[int, bytes]]:
    # As files are read: on "\n" only (a lone "\r" may stand inside a JSON string).
    return ((r.line or 0, r.raw or b"") for r in chunk_records(data, 1, file_start=True))


def chunk_records(data: bytes, first_line: int, *, file_start: bool) -> list[Record]:
    """The JSON lines records in ``data``, a piece of a file that begins at line
    ``first_line`` (1-based) and ends after a line end; ``file_start`` when it is the
    file's beginning (where a byte order mark may stand). Blank lines are skipped but
    counted, as :func:`iter_lines` does."""
    if file_start and data.startswith(BOM):
        data = data[len(BOM) :]
    records = []
    for number, line in enumerate(data.split(b"\n"), start=first_line):
        line = line.rstrip(b"\r")
        if line.strip():
            records.append(Record(number, None, line))
    return records


def open_input(path: str) -> BinaryIO:
    """``path`` opened for reading bytes. Raises :class:`InputError` when it cannot be."""
    try:
        return open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None


def chunks(stream: BinaryIO, size: int, first: int | None = None) -> Iterator[tuple[int, int, int]]:
    """Split a JSON lines file, read from the start of ``stream``, into pieces of about
    ``size`` bytes that end at line ends: ``(start, end, first line)`` each, so that
    another process can read ``[start, end)`` itself with :func:`read_chunk`. Only
    line ends are looked at here.

    With ``first`` (bytes, at most ``size``), the pieces start that small and grow: each
    is about a quarter of the bytes before it, between ``first`` and ``size``. (Workers
    that share what they learn pass it on after each piece; small pieces at the start,
    where most texts are new, pass it on sooner.)

    Raises ``ValueError`` when ``size`` or ``first`` is below 1.
    """
    if size < 1 or (first is not None and first < 1):
        raise ValueError("piece sizes must be 1 byte or more")
    start, line = 0, 1
    while True:
        want = piece_size(start, size, first)
        data = stream.read(want)
        if not data:
            return
        data += stream.readline()  # up to the end of the line the piece cut into
        end = start + len(data)
        yield start, end, line
        line += data.count(b"\n")
        start = end


def piece_size(start: int, size: int, first: int | None = None) -> int:
    """Bytes :func:`chunks` reads for a piece from byte ``start`` (then to the line's
    end): ``size``, or with ``first`` a quarter of ``start``, between the two."""
    return size if first is None else min(size, max(first, start // 4))


def read_chunk(fd: int, start: int, end: int, first_line: int) -> list[Record]:
    """The records of bytes ``[start, end)`` of the file open as ``fd``, as
    :func:`chunks` found them. Reading through the descriptor the pieces were cut from
    (inherited by a forked worker) reads that very file, even if its path has since been
    replaced or removed."""
    data = os.pread(fd, end - start, start)
    return chunk_records(data, first_line, file_start=start == 0)


def line_style(path: str, data: bytes | None = None) -> tuple[bytes, bool]:
    """How the JSON lines file ``path`` ends its lines (``b"\\r\\n"`` when its first
    line does, else ``b"\\n"``) and whether it starts with a UTF-8 byte order mark, so
    that an output can be written in the same style. For stdin (``-``) ``data`` is what
    was read from it (see :func:`read_input`). Unreadable paths give ``(b"\\n", False)``."""
    if path == "-" or data is not None:
        end = (data or b"").find(b"\n")
        crlf = end > 0 and data is not None and data[end - 1 : end] == b"\r"
        return (b"\r\n" if crlf else b"\n"), bool(data and data.startswith(BOM))
    try:
        with open(path, "rb") as stream:
            start = block = stream.read(1 << 16)
            before = b""  # the byte before ``block``
            while block and b"\n" not in block:  # a long first line, a block at a time
                before = block[-1:]
                block = stream.read(1 << 20)
    except OSError:
        return b"\n", False
    end = block.find(b"\n")
    crlf = end >= 0 and (block[end - 1 : end] if end else before) == b"\r"
    return (b"\r\n" if crlf else b"\n"), start.startswith(BOM)


class RecordSink:
    """Writes output records in the input's shape to an :class:`AtomicWriter`.

    JSON lines are written as they come, each ended by ``newline``, after a byte
    order mark when ``bom`` (see :func:`line_style`: an unchanged line comes back as
    the bytes read). An array or one-record file is written as ``original`` (the
    input's bytes) with each changed record's text replaced by its new JSON in the
    file's style (:func:`restyle`), so a record no stage changed keeps its very text,
    indentation and all, and a run that changes nothing gives back the very file.
    """

    def __init__(
        self,
        writer: AtomicWriter,
        shape: Shape,
        original: bytes | None = None,
        *,
        newline: bytes = b"\n",
        bom: bool = False,
    ):
        self.writer = writer
        self.shape = shape
        self.original = original
        self.newline = newline
        self._held: list[bytes] = []
        self._flags: list[bool] = []
        self._changed = False
        if bom and shape == "jsonl":
            writer.write(BOM)

    def write(self, record: bytes, *, changed: bool = True) -> None:
        """Add one output record (its JSON text, no line end)."""
        if self.shape == "jsonl":
            self.writer.write(record + self.newline)
            return
        self._held.append(record)
        self._flags.append(changed)
        self._changed = self._changed or changed

    def _joined(self, original: bytes, spans: list[tuple[int, int]]) -> bytes:
        """The held records as an array in the style of ``original``'s (its opening,
        its separator between the first two elements, its closing), unchanged records
        as read: for a whole-file format whose output has fewer records."""
        if self.shape != "array" or not spans:
            return b",\n".join(self._held) + b"\n"
        first = spans[0]
        between = original[first[1] : spans[1][0]] if len(spans) > 1 else b",\n"
        held = [_restyled(r, c, original, first) for r, c in zip(self._held, self._flags)]
        return original[: first[0]] + between.join(held) + original[spans[-1][1] :]

    def close(self) -> None:
        """Write what is held (array and one-record shapes)."""
        if self.shape == "jsonl":
            return
        original = self.original or b""
        spans = array_spans(original) if self.shape == "array" else [_body_span(original)]
        if not self._changed and self.original is not None and len(spans) == len(self._held):
            self.writer.write(self.original)
            return
        if len(spans) != len(self._held):  # a whole-file format dropped some
            self.writer.write(self._joined(original, spans))
            return
        out, at = [], 0
        for (start, end), (record, changed) in zip(spans, zip(self._held, self._flags)):
            out += [original[at:start], _restyled(record, changed, original, (start, end))]
            at = end
        out.append(original[at:])
        self.writer.write(b"".join(out))


def _restyled(record: bytes, changed: bool, original: bytes, span: tuple[int, int]) -> bytes:
    return restyle(loads(record, "", None), original, span) if changed else record


def _body_span(data: bytes) -> tuple[int, int]:
    """The span of a one-record file's JSON text, without a BOM or white space."""
    start = len(BOM) if data.startswith(BOM) else 0
    body = data[start:]
    start += len(body) - len(body.lstrip())
    return start, start + len(body.strip())


def loads(raw: bytes | str, path: str, line: int | None) -> Any:
    """Parse one JSON text. Raises :class:`InputError` naming ``path:line``.

    orjson first; the standard library for what orjson refuses but JSON allows (a
    lone surrogate escape such as ``"\\ud83d"``), which is then kept as that escape.
    Numbers are held to RFC 8259 (section 6) and to what a double holds: ``NaN``,
    ``Infinity`` and ``-Infinity`` are not JSON, and a number too large for a double
    (``1e999``) is read as infinity by most parsers; each is an error naming the line
    (in a text of several lines, the line of the number).
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _refused_by_orjson(raw, path, line, exc)
    if not _has_long_digits(raw):
        return value
    try:  # an integer past 64 bits, which orjson had read as a float
        with deeper_recursion(DEEP_RECURSION_LIMIT):  # as deep as orjson reads
            return _std_loads(raw)
    except _NotJsonNumber as bad:
        raise NumberError(path, line, str(bad)) from None


#: orjson reads an integer past 64 bits as a float (``12345678901234567890123`` as
#: ``1.2345678901234568e+22``, written back so: the record changed), and a run of 19
#: digits may be one already (``-9999999999999999999``); a text with such a run (in a
#: string too: telling is dearer than reading such a rare line twice) is read by the
#: standard library, which keeps every integer exact.
_LONG_DIGITS = 19
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_DIGITS_AS_ZERO_TEXT = str.maketrans("123456789", "000000000")


def _has_long_digits(raw: bytes | str) -> bool:
    """Whether ``raw`` holds a run of :data:`_LONG_DIGITS` digits or more (about 1 ms
    for 1 MB: every digit made ``0``, then one search)."""
    if isinstance(raw, bytes):
        return b"0" * _LONG_DIGITS in raw.translate(_DIGITS_AS_ZERO)
    return "0" * _LONG_DIGITS in raw.translate(_DIGITS_AS_ZERO_TEXT)


def _refused_by_orjson(
    raw: bytes | str, path: str, line: int | None, exc: orjson.JSONDecodeError
) -> Any:
    """:func:`loads` of a text orjson refused (see there): read by the standard library
    when JSON allows it, else :class:`InputError`."""
    if isinstance(raw, bytes):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            where = f"at byte {bad.start + 1}" + (" of the line" if line else "")
            raise InputError(path, line, f"not valid UTF-8 ({where})") from None
    try:
        return _std_loads(raw)
    except _NotJsonNumber as bad:
        at = exc.lineno if line is None else line
        raise NumberError(path, at, f"{bad} (column {exc.colno})") from None
    except (ValueError, UnicodeDecodeError):
        # In a line, orjson's own "line 1" is no news: the column is.
        said = str(exc) if line is None else f"{exc.msg}: column {exc.colno}"
        raise InputError(path, line, f"invalid JSON: {said}") from None
    except RecursionError:
        raise InputError(path, line, "invalid JSON: nested too deeply") from None


def _std_loads(raw: bytes | str) -> Any:
    """``raw`` read by the standard library with :func:`loads`'s rules for numbers
    (raising :class:`_NotJsonNumber`), integers exact."""
    return json.loads(raw, parse_constant=_not_json, parse_float=_finite, parse_int=_in_double)


class NumberError(InputError):
    """A number that JSON does not allow or a double cannot hold (see :func:`loads`);
    it names the line of the number, in a file parsed whole as well."""


class _NotJsonNumber(ValueError):
    """A number :func:`loads` refuses; its text is the reason."""


def _not_json(text: str) -> Any:
    raise _NotJsonNumber(f"{text} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _NotJsonNumber(f"number {text[:40]} is too large for a double")
    return value


#: Digits past which an integer is beyond the largest double (about 1.8e308).
_DOUBLE_DIGITS = 309


def _in_double(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > _DOUBLE_DIGITS or (digits == _DOUBLE_DIGITS and abs(int(text)) > _MAX_DOUBLE):
        raise _NotJsonNumber(f"number {text[:40]}... ({digits} digits) is too large for a double")
    return int(text)


_MAX_DOUBLE = int(sys.float_info.max)


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """One JSON text, compact, non-ASCII as UTF-8; lone surrogates as ``\\uXXXX``;
    keys sorted with ``sort_keys``. Integers past 64 bits, and values nested past
    orjson's limit (254 levels), as deep as :func:`loads` reads (1,024), are written
    by the standard library."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:  # an integer past 64 bits, a lone surrogate, nesting past 254
        compact = {"separators": (",", ":"), "sort_keys": sort_keys}
        try:
            return std_dumps(value, ensure_ascii=False, **compact).encode()
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 holds it
            return std_dumps(value, **compact).encode()


def compact(text: str) -> str:
    """JSON ``text`` written again by :func:`dumps` (no spaces, escapes of non-ASCII
    decoded, integers exact); any other text as it is."""
    try:
        return dumps(loads(text, "text", None)).decode()
    except InputError:
        return text


def std_dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` of the standard library, for what orjson does
    not write (lone surrogates, nesting past 254 levels), as deep as :func:`loads`
    reads (1,024 levels)."""
    with deeper_recursion(DEEP_RECURSION_LIMIT):
        return json.dumps(value, **options)


#: Python's recursion limit while JSON read up to orjson's depth limit (1,024 levels)
#: is written or pickled: each level takes about two.
DEEP_RECURSION_LIMIT = 5000


_deeper_lock = threading.Lock()
_deeper_inside: list[int] = []  # the limits asked for by the blocks now open
_deeper_base = 0  # the limit before the first of them


@contextlib.contextmanager
def deeper_recursion(limit: int) -> Iterator[None]:
    """Raise Python's recursion limit (one for the whole process) to at least
    ``limit`` for the block; safe on several threads at once: the limit goes back only
    when the last block open on any thread ends."""
    global _deeper_base
    with _deeper_lock:
        if not _deeper_inside:
            _deeper_base = sys.getrecursionlimit()
        _deeper_inside.append(limit)
        sys.setrecursionlimit(max([_deeper_base, *_deeper_inside]))
    try:
        yield
    finally:
        with _deeper_lock:
            _deeper_inside.remove(limit)
            sys.setrecursionlimit(max([_deeper_base, *_deeper_inside]))


#: Bytes of stdout output held in memory before the rest is spooled to a temporary
#: file (in ``TMPDIR``); see :class:`AtomicWriter`.
SPOOL_BYTES = 64 << 20


class AtomicWriter:
    """Write a file whole or not at all: to ``.<name>.ctxcli-<pid>-*.tmp`` beside it,
    renamed over ``target`` by :meth:`commit` (over the file a symlink ``target``
    leads to: the link stays). Such files that a killed run left for the
    same target (their process is gone) are removed first.

    ``-`` is stdout, all or nothing as well: the output is spooled (up to
    :data:`SPOOL_BYTES` in memory, the rest in a temporary file) and copied to stdout
    by :meth:`commit`, so a pipeline reading it gets the whole output or none of it.
    A device or named pipe is written to as it goes.

    A new file gets the mode a plain ``open()`` would give it, a replaced one keeps
    its own; with ``like`` (the input it is made from, or the inputs), it is readable
    by no one that file is not readable by: a store of the tool results of a log only
    its owner may read is no wider (it was 0644 beside a 0600 log).

    Use :meth:`commit` after the last write and :meth:`abort` on failure (the context
    manager calls ``abort`` if an exception escapes).
    """

    def __init__(self, target: str, *, like: str | Sequence[str] | None = None) -> None:
        self.target = target
        self._tmp: str | None = None
        self._own = False
        self._spooled = target == "-"
        if self._spooled:
            self.stream: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
            return
        with _naming(target):
            if is_stream(target):
                # A device or pipe (/dev/null, a FIFO) cannot be replaced: write to it,
                # appending: /dev/stdout of '>> log.jsonl' opened with "wb" emptied the
                # log, and '-o - --stats /dev/stdout' lost the output to the stats.
                self.stream = open(target, "ab")  # noqa: SIM115
                self._own = True
                return
            # A symlink is written through, as --in-place does: replaced, it became a
            # plain file, and the temporary file beside its target could not always be
            # renamed over a link in another folder (another filesystem).
            self._real = os.path.realpath(target)
            if os.path.islink(self._real):  # a loop: realpath stops on a link
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), target)
            folder = Path(self._real).parent
            folder.mkdir(parents=True, exist_ok=True)
            prefix = temporary_prefix(self._real)
            remove_stale(folder, prefix)
            fd, self._tmp = tempfile.mkstemp(
                prefix=f"{prefix}{os.getpid()}-", suffix=".tmp", dir=folder
            )
            os.fchmod(fd, _mode_for(self._real, like))
            self.stream = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        """Add ``data`` to the file (raises :class:`OutputError` naming it)."""
        with _naming(self.target):
            self.stream.write(data)

    def commit(self) -> None:
        """Flush and move the finished file into place."""
        with _naming(self.target):
            if self._spooled:
                self.stream.seek(0)
                shutil.copyfileobj(self.stream, sys.stdout.buffer, 1 << 20)
                sys.stdout.buffer.flush()
                self.stream.close()
                return
            self.stream.flush()
            if self._tmp is None:
                if self._own:
                    self.stream.close()
                return
            os.fsync(self.stream.fileno())
            self.stream.close()
            os.replace(self._tmp, self._real)
            self._tmp = None

    def written(self) -> str:
        """Flush and close the temporary file, not moved into place, and give its path
        (for what reads it whole before the target changes: a store added to); only
        for a file target. :meth:`abort` removes it."""
        assert self._tmp is not None, "only a file is written to a temporary file"
        with _naming(self.target):
            self.stream.flush()
            self.stream.close()
        return self._tmp

    def abort(self) -> None:
        """Remove the temporary file; the target is left as it was. Never raises: it
        runs while another error is on its way (closing flushes what is buffered, which
        fails again on a full disk)."""
        if self._own or self._spooled or self._tmp is not None:
            with contextlib.suppress(OSError):
                self.stream.close()
        if self._tmp is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)
        self._tmp = None

    def __enter__(self) -> AtomicWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self.abort()


def temporary_prefix(target: str) -> str:
    """How the names of the temporary files for ``target`` open, before the writing
    process's id: ``.<name>.ctxcli-`` (:class:`AtomicWriter`, and ``--in-place``'s)."""
    return f".{Path(target).name}.ctxcli-"


def remove_stale(folder: Path, prefix: str) -> None:
    """Remove the temporary files ``<prefix><pid>-*.tmp`` in ``folder`` whose process is
    gone (a run killed before it could clean up: SIGKILL, a power cut). Files of a
    process still running, or of another user's, are left."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            pid = name[len(prefix) :].partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: it exists
    return True


@contextlib.contextmanager
def _naming(target: str) -> Iterator[None]:
    """Turn an OS error while writing ``target`` into :class:`OutputError`."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc}") from None


def same_file(a: str, b: str) -> bool:
    """True when paths ``a`` and ``b`` name one file (hard and symbolic links
    included); for paths that do not exist yet, when they resolve alike."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def is_stream(target: str) -> bool:
    """True for ``-``, for a name of an open file of the process (:data:`_FD_PATH`:
    ``/dev/stdout``, whatever it leads to) and for an existing path that is not a
    regular file or folder (a device such as ``/dev/null``, a named pipe, the
    ``/dev/fd/N`` of a shell's ``<(zcat runs.jsonl.gz)``): written to as it is, never
    replaced; read only once, whole (:func:`read_input`)."""
    if target == "-" or _FD_PATH.fullmatch(os.path.normpath(target)):
        return True
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


#: A name of one of the process's open files (``/dev/stdout``, ``/dev/fd/3``): a stream
#: whatever it leads to. ``-o /dev/stdout > out.jsonl`` led to a regular file, and the
#: store and stats went beside the name, into ``/dev``.
_FD_PATH = re.compile(r"/dev/(?:stdin|stdout|stderr|fd/\d+)|/proc/(?:self|thread-self|\d+)/fd/\d+")


#: The read bits of a file's mode, the bits :func:`_mode_for` takes from an input.
_READ_BITS = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


def _mode_for(target: str, like: str | Sequence[str] | None) -> int:
    """The permission bits of a file written to ``target`` (see :class:`AtomicWriter`):
    its own when it exists, else what a plain ``open()`` gives; readable by no one
    each of ``like`` that is a regular file (``-``: stdin, when it is one) is not
    readable by. Only the read bits: a copy of a read-only log (0444) gave read-only
    outputs, which a user then could not edit."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    for source in [like] if isinstance(like, str) else like or ():
        with contextlib.suppress(OSError):  # ``-``: stdin, a file when '< file' gave it
            found = os.fstat(sys.stdin.fileno()) if source == "-" else os.stat(source)
            if stat.S_ISREG(found.st_mode):
                mode &= stat.S_IMODE(found.st_mode) | ~_READ_BITS
    return mode


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dumps_indented(value: Any) -> bytes:
    """``value`` as JSON indented by 2, with a final line end (the stats files)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
