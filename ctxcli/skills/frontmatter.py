"""A skill file's front matter: the YAML between its first two ``---`` lines, read
without reading the body after it."""

from __future__ import annotations

import dataclasses
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ctxcli import yamlio
from ctxcli.errors import SkillError, YamlError
from ctxcli.jsonio import BOM
from ctxcli.problems import Problem, Severity

MAX_FRONT_MATTER_BYTES = yamlio.MAX_BYTES
#: Bytes of the first read; most front matter fits, so most files cost one ``read()``.
FIRST_CHUNK = 512
#: Bytes a read grows to at most, for long front matter (the size bound still holds).
LAST_CHUNK = 16 * 1024

KeyLines = dict[tuple[str, ...], int]


@dataclass(frozen=True)
class FrontMatter:
    """The parsed front matter of one file and where its body starts.

    ``data`` is the YAML mapping as ``yaml.safe_load`` builds it. ``body_offset`` is in bytes
    from the start of the file (BOM included); ``body_line`` is the 1-based file line of the
    first body line. ``bytes_read`` counts every byte the process read from the file, which
    is at least ``body_offset`` and, because reads are chunked, a little more.
    ``key_lines`` maps a key path such as ``("name",)`` or ``("parameters", "path")`` to its
    1-based file line, so later checks can point at the line.
    """

    data: dict[str, Any]
    body_offset: int
    body_line: int
    bytes_read: int
    key_lines: KeyLines


def problem_at(
    rule: str, path: Path, line: int | None, detail: str, severity: Severity = "error"
) -> Problem:
    """A problem of a skill file, in the validator's text form (``PATH:LINE: error:
    detail``)."""
    return Problem(rule, detail, path=str(path), line=line, severity=severity, labelled=True)


class FrontMatterError(SkillError):
    """A skill file's front matter cannot be read; ``problem`` says where and why. The
    error's text is the problem's without its severity (``PATH:LINE: detail``)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(dataclasses.replace(problem, labelled=False)))

    def __reduce__(self) -> tuple[object, ...]:
        return FrontMatterError, (self.problem,)


def _error(rule: str, path: Path, line: int | None, detail: str) -> FrontMatterError:
    return FrontMatterError(problem_at(rule, path, line, detail))


class _ChunkReader:
    """Lines from an unbuffered binary file, reading small chunks and counting the bytes."""

    def __init__(self, raw: io.RawIOBase) -> None:
        self._raw = raw
        self._buffer = b""
        self._chunk = FIRST_CHUNK
        self.bytes_read = 0

    def readline(self) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line, self._buffer = self._buffer[: end + 1], self._buffer[end + 1 :]
                return line
            data = self._raw.read(self._chunk)
            if not data:
                line, self._buffer = self._buffer, b""
                return line
            self.bytes_read += len(data)
            self._buffer += data
            self._chunk = min(self._chunk * 2, LAST_CHUNK)


def _is_fence(line: bytes) -> bool:
    return line.rstrip() == b"---"


def read_front_matter(path: str | os.PathLike[str]) -> FrontMatter:
    """Read the front matter of one skill file, stopping at the closing ``---`` line.

    The body is never read (beyond the rest of the last chunk of at most 16 KiB, usually
    under 512 bytes). A UTF-8 BOM and CRLF line ends are accepted.

    Raises :class:`FrontMatterError`, as ``PATH:LINE: message`` with file line numbers,
    when the file does not start with ``---``, the front matter is not closed within
    ``MAX_FRONT_MATTER_BYTES`` bytes, is not UTF-8, is not valid YAML within the bounds
    of :mod:`ctxcli.yamlio` (no aliases, nesting at most 100 deep) or is not a mapping;
    and as ``PATH: message`` when the file cannot be opened.
    """
    file = Path(path)
    try:
        # Unbuffered so the byte count is what the process asked the OS for.
        with open(file, "rb", buffering=0) as raw:
            reader = _ChunkReader(raw)
            lines, consumed = _fenced(reader, file)
    except OSError as error:
        raise _error("unreadable", file, None, f"cannot read: {error.strerror or error}") from error
    raw_yaml = b"".join(lines)
    try:
        text = raw_yaml.decode("utf-8")
    except UnicodeDecodeError as error:
        line = 2 + raw_yaml.count(b"\n", 0, error.start)
        raise _error("not-utf8", file, line, "front matter is not valid UTF-8") from error
    data, key_lines = _parse_yaml(text, file, first_line=2)
    return FrontMatter(
        data=data,
        body_offset=consumed,
        body_line=len(lines) + 3,
        bytes_read=reader.bytes_read,
        key_lines=key_lines,
    )


def _fenced(reader: _ChunkReader, path: Path) -> tuple[list[bytes], int]:
    """The lines between the two fences, and the bytes read up to the second one's end."""
    first = reader.readline()
    consumed = len(first)
    first = first.removeprefix(BOM)
    if not _is_fence(first):
        raise _error(
            "no-front-matter", path, 1, "no front matter: the file must start with a '---' line"
        )
    lines: list[bytes] = []
    while True:
        line = reader.readline()
        if not line:
            raise _error("unclosed", path, 1, "front matter is not closed with a '---' line")
        consumed += len(line)
        if _is_fence(line):
            return lines, consumed
        if consumed > MAX_FRONT_MATTER_BYTES:
            raise _error(
                "too-long",
                path,
                1,
                f"front matter is longer than {MAX_FRONT_MATTER_BYTES} bytes"
                " (no closing '---' line within it)",
            )
        lines.append(line)


def _parse_yaml(text: str, path: Path, *, first_line: int) -> tuple[dict[str, Any], KeyLines]:
    """Bounded ``yaml.safe_load`` (:func:`ctxcli.yamlio.parse`: no aliases, a size and
    depth bound) plus the file line of each top-level and parameter key."""
    try:
        document = yamlio.parse(text, path=str(path), first_line=first_line)
    except YamlError as error:
        line = error.line if error.line is not None else first_line
        raise _error(
            "invalid-yaml", path, line, f"invalid YAML in front matter: {error.reason}"
        ) from error
    data = document.data
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise _error(
            "not-a-mapping",
            path,
            first_line,
            f"front matter must be a YAML mapping of fields, not {kind}",
        )
    return data, _key_lines(document.node, first_line)


def _key_lines(node: Any, first_line: int) -> KeyLines:
    """The file line of each top-level key of ``node``, of each key under
    ``parameters``, and of each key of a parameter's mapping (its ``type``)."""
    lines: KeyLines = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        for key, value in node.value if isinstance(node, yaml.MappingNode) else ():
            if isinstance(key, yaml.ScalarNode):
                keys = path + (key.value,)
                lines[keys] = first_line + key.start_mark.line
                if keys[0] == "parameters" and len(keys) < 3:
                    walk(value, keys)

    walk(node, ())
    return lines
