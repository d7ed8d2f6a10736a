"""Gemini CLI ``/chat save`` checkpoints: a bare JSON array of Gemini Contents.

``~/.gemini/tmp/<project>/checkpoint-<tag>.json`` holds the chat's history as the
API's ``contents`` (see :mod:`ctxcli.formats.gemini`): one conversation a file. The
*record* of this format is the whole file, the list of its Contents (see
:mod:`ctxcli.formats`), read, written back and checked as
:mod:`ctxcli.formats.gemini` does the ``contents`` of a request; the output is the
same kind of array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli.formats import gemini
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.model import Conversation
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "gemini-checkpoint"
DEFAULT_KEY = "parts"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for a file's first item that is a Content (a ``parts`` list and a Gemini
    role) and no record of another format."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("parts"), list)
        and record.get("role") in gemini.ROLES
        and not {"messages", "contents", "type"} & set(record)
    )


def detect_head(head: Sequence[Any]) -> bool:
    """True when a file's first record is a Content (:func:`detect`)."""
    return detect(head[0])


def read(
    record: Sequence[Any],
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
    lines: Sequence[int] | None = None,
) -> Conversation:
    """Read a checkpoint (its Contents in order) into the neutral model.

    Raises :class:`ctxcli.errors.InputError` for a Content that is not one (see
    :func:`ctxcli.formats.gemini.check_contents`).
    """
    gemini.check_contents(record, path, line)
    return gemini.conversation_of(record, counter, line=line)


def write(
    record: Sequence[Any], conversation: Conversation, *, messages_key: str | None = None
) -> list[Any]:
    """The checkpoint's Contents rebuilt from ``conversation``; those kept as they
    were are the very objects read."""
    return gemini.written(conversation)


def problems(record: Sequence[Any], conversation: Conversation) -> list[Problem]:
    """The Gemini rules (:func:`ctxcli.formats.gemini.content_problems`)."""
    return gemini.content_problems(conversation.meta.get("entries", ()))
