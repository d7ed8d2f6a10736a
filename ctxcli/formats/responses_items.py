"""A bare Responses API item list as a file: a JSON array of items, or a JSON lines
file of one item a line (what a client logs as it goes).

The *record* of this format is the whole file, the list of its items (see
:mod:`ctxcli.formats`), read, written back and checked as
:mod:`ctxcli.formats.responses` does a request's ``input``; the output is the same
kind of file. A JSON line holding a whole item list is a record of
:mod:`ctxcli.formats.responses` itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcli.formats import responses
from ctxcli.formats.base import no_kept_problems, rewrites
from ctxcli.model import Conversation
from ctxcli.problems import Problem
from ctxcli.tokens import TokenCounter

NAME = "responses-items"
DEFAULT_KEY = "input"
#: Its writer rebuilds the entries (see :meth:`ctxcli.formats.base.Format.writes_as_read`).
writes_as_read = rewrites
#: No rules beyond :func:`problems` (:meth:`ctxcli.formats.base.Format.kept_problems`).
kept_problems = no_kept_problems


def detect(record: Any, messages_key: str | None = None) -> bool:
    """True for an item (see :func:`ctxcli.formats.responses.is_items`)."""
    return responses.is_items([record])


def detect_head(head: Sequence[Any]) -> bool:
    """True when a file's first records are all Responses items, one of them typed
    (a message may leave its ``type`` out: OpenAI's function-calling guide's list opens
    with ``{"role": "user", "content": …}``; :func:`ctxcli.formats.responses.is_items`)."""
    return responses.is_items(list(head)) and all(
        isinstance(r, Mapping) and responses.is_item(r) for r in head
    )


def read(
    record: Sequence[Any],
    counter: TokenCounter,
    *,
    path: str,
    line: int,
    messages_key: str | None = None,
    lines: Sequence[int] | None = None,
) -> Conversation:
    """Read the items in order (raises what :func:`ctxcli.formats.responses.read`
    raises)."""
    return responses.read({"input": list(record)}, counter, path=path, line=line)


def write(
    record: Sequence[Any], conversation: Conversation, *, messages_key: str | None = None
) -> list[Any]:
    """The items rebuilt from ``conversation``; those kept as they were are the very
    objects read."""
    return [item for item, _ in responses.written_items(conversation)]


def problems(record: Sequence[Any], conversation: Conversation) -> list[Problem]:
    """The Responses rules (:func:`ctxcli.formats.responses.problems`)."""
    return responses.problems({"input": list(record)}, conversation)
