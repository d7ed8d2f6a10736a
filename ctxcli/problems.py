"""One type for everything ctxcli finds wrong: a broken API rule in a conversation, a
bad skill file, a record that no format reads.

A :class:`Problem` is data: callers compare its ``rule`` and its position, never its
text. Its text form (``str(problem)``) is what users read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from ctxcli.errors import where as _where

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One broken rule.

    ``rule`` is a short stable name (``"result-without-call"``), ``detail`` the words a
    user reads (``"tool result 'call_1' without its call"``). ``message`` is the
    0-based index of the message the problem is about inside its conversation, or
    ``None`` for the conversation (or file) as a whole. ``path``, ``line`` (1-based,
    JSON lines) and ``record`` (0-based, JSON array) say where the conversation is,
    once a caller knows (written as :func:`ctxcli.errors.where` writes them).
    ``severity`` is ``error`` unless the rule only warns; ``labelled`` problems say it
    in their text, as linters do (``path:line: error: detail``: the skills validator).
    """

    rule: str
    detail: str
    message: int | None = None
    path: str | None = None
    line: int | None = None
    record: int | None = None
    severity: Severity = "error"
    labelled: bool = False

    def at(self, **where: object) -> Problem:
        """The same problem with ``where`` (any of ``message``, ``path``, ``line``,
        ``record``) set; raises :class:`TypeError` for another field name."""
        return dataclasses.replace(self, **where)  # type: ignore[arg-type]

    @property
    def reason(self) -> str:
        """The text inside its conversation: ``message 3: <detail>`` or the detail."""
        if self.message is None:
            return self.detail
        return f"message {self.message}: {self.detail}"

    def __str__(self) -> str:
        reason = f"{self.severity}: {self.reason}" if self.labelled else self.reason
        if self.path is None:
            return reason
        return f"{_where(self.path, self.line, self.record)}: {reason}"
