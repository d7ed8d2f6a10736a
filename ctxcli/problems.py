"""One type for everything ctxcli finds wrong: a broken API rule in a conversation, a
bad skill file, a record that no format reads.

A :class:`Problem` is data: callers compare its ``rule`` and its position, never its
text. Its text form (``str(problem)``) is what users read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One broken rule.

    ``rule`` is a short stable name (``"result-without-call"``), ``detail`` the words a
    user reads (``"tool result 'call_1' without its call"``). ``message`` is the
    0-based index of the message the problem is about inside its conversation, or
    ``None`` for the conversation (or file) as a whole; ``unit`` says what that index
    counts when a format names its entries otherwise (``"turn"``, ``"content"``,
    ``"item"``, ``"line"``: a session event's line), ``block`` the block inside it, and
    ``new`` that the message is one a stage wrote (its index is its output position).
    ``path``, ``line`` (1-based, JSON lines) and ``record`` (0-based, JSON array) say
    where the conversation is, once a caller knows (written as :func:`where` writes
    them); ``scope``, the format whose rule it is, when a caller names it (``ctxcli
    validate``). ``severity`` is ``error`` unless the rule only warns; ``labelled``
    problems say it in their text, as linters do (``path:line: error: detail``: the
    skills validator).
    """

    rule: str
    detail: str
    message: int | None = None
    path: str | None = None
    line: int | None = None
    record: int | None = None
    severity: Severity = "error"
    unit: str = "message"
    block: int | None = None
    new: bool = False
    scope: str | None = None
    labelled: bool = False

    def at(self, **where: object) -> Problem:
        """The same problem with ``where`` (any of its fields: ``message``, ``unit``,
        ``path``, ``line``, ``record``, ``scope`` ...) set; raises :class:`TypeError`
        for a name that is no field."""
        return dataclasses.replace(self, **where)  # type: ignore[arg-type]

    @property
    def position(self) -> str | None:
        """How the text names the message: ``message 3``, ``message 4 (new)``,
        ``message 2 block 1``, ``turn 5`` ...; ``None`` for the whole conversation."""
        if self.message is None:
            return None
        new = " (new)" if self.new else ""
        block = f" block {self.block}" if self.block is not None else ""
        return f"{self.unit} {self.message}{new}{block}"

    @property
    def anywhere(self) -> tuple[str, str]:
        """The problem wherever it stands: its rule and detail (positions move when a
        conversation is compressed; a problem with no position keeps its text)."""
        return self.rule, self.detail

    @property
    def reason(self) -> str:
        """The text inside its file: ``[<scope>: ]<position>: <detail>``."""
        position = self.position
        text = self.detail if position is None else f"{position}: {self.detail}"
        return text if self.scope is None else f"{self.scope}: {text}"

    def __str__(self) -> str:
        reason = f"{self.severity}: {self.reason}" if self.labelled else self.reason
        if self.path is None:
            return reason
        return f"{where(self.path, self.line, self.record)}: {reason}"


def where(path: str, line: int | None, record: int | None = None) -> str:
    """How messages name a place in an input: ``path:line`` for a JSON lines file,
    ``path[record N]`` (0-based) for an item of a JSON array, else ``path``."""
    if record is not None:
        return f"{path}[record {record}]"
    return f"{path}:{line}" if line is not None else path
