"""GitHub Actions workflow commands: ``::warning file=…,line=…::message`` lines.

A step's output lines of this form become annotations on the file and line they
name (GitHub's "Workflow commands for GitHub Actions", ``warning`` / ``error``
messages). Values are escaped as the runner's toolkit escapes them
(``@actions/core`` ``command.ts``): ``%``, CR and LF in the message; those and ``:``
and ``,`` in a property.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Level = Literal["notice", "warning", "error"]


def enabled(environ: Mapping[str, str]) -> bool:
    """True inside GitHub Actions (the runner sets ``GITHUB_ACTIONS=true``)."""
    return environ.get("GITHUB_ACTIONS") == "true"


def command(level: Level, message: str, *, file: str | None = None, line: int | None = None) -> str:
    """One workflow command line; ``file`` ``-`` (stdin) is left out, as is a line
    without a file."""
    props = []
    if file and file != "-":
        props.append(f"file={_property(file)}")
        if line:
            props.append(f"line={line}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{_data(message)}"


def line_in(text: str, path: str) -> int | None:
    """The line a ctxcli warning about ``path`` names: warnings open with their place
    as :func:`ctxcli.errors.where` writes it, ``path:LINE: ...``; ``None`` otherwise."""
    prefix = f"{path}:"
    if not text.startswith(prefix):
        return None
    digits, colon, _ = text[len(prefix) :].partition(":")
    return int(digits) if colon and digits.isdigit() else None


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")
