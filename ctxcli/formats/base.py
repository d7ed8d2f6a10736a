"""What every transcript format provides (:class:`Format`), and what a whole-file
format adds (:class:`WholeFile`). Each format module implements one of them with its
module-level names; :data:`ctxcli.formats.FORMATS` holds them, typed, so that mypy
checks every call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ctxcli.model import Conversation
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter


class Format(Protocol):
    """A transcript format: reads a record into the neutral model and writes it back.

    ``NAME`` names it (``--format``); ``DEFAULT_KEY`` is where its messages live.
    """

    NAME: str
    DEFAULT_KEY: str

    def detect(self, record: Any, messages_key: str | None = None) -> bool:
        """A cheap look at one parsed record: is it of this format?"""
        ...

    def read(
        self,
        record: Any,
        counter: TokenCounter,
        *,
        path: str,
        line: int,
        messages_key: str | None = None,
    ) -> Conversation:
        """The record as a conversation; raises :class:`ctxcli.errors.InputError` for
        what it cannot read (naming ``path`` and ``line``)."""
        ...

    def write(
        self, record: Any, conversation: Conversation, *, messages_key: str | None = None
    ) -> Any:
        """The record in this format again; a message no stage changed is written as
        the very entry that was read."""
        ...

    def problems(self, record: Any, conversation: Conversation) -> list[Problem]:
        """The rules of the format the record breaks (what ``ctxcli validate`` prints)."""
        ...

    def writes_as_read(self, conversation: Conversation) -> bool:
        """Whether ``write`` puts ``conversation``'s messages in as they are, so that
        reading the output back would only give them again: the check need not."""
        ...

    def kept_problems(self, before: Conversation, after: Conversation) -> list[Problem]:
        """Rules the output must keep beyond those ``problems`` reads back from it,
        comparing the conversation ``before`` and ``after`` the pipeline."""
        ...


class WholeFile(Format, Protocol):
    """A format whose whole file is one conversation (Claude Code sessions, Codex
    rollouts, Gemini CLI checkpoints): ``read`` and ``write`` take the list of its
    lines' objects (or of a JSON array's items), ``read`` also their line numbers."""

    def read(
        self,
        record: Any,
        counter: TokenCounter,
        *,
        path: str,
        line: int,
        messages_key: str | None = None,
        lines: Sequence[int] | None = None,
    ) -> Conversation:
        """The file's events as one conversation (see :meth:`Format.read`)."""
        ...

    def detect_head(self, head: Sequence[Any]) -> bool:
        """Whether a file whose first records (parsed; ``None`` for a line that is
        not JSON) are ``head`` is of this format."""
        ...


def rewrites(conversation: Conversation) -> bool:
    """:meth:`Format.writes_as_read` of a format whose writer rebuilds its entries."""
    return False


def no_kept_problems(before: Conversation, after: Conversation) -> list[Problem]:
    """:meth:`Format.kept_problems` of a format with no rules beyond ``problems``."""
    return []
