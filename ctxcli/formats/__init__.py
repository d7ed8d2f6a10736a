"""Transcript formats: each reads records into the neutral model and writes them back.

Each format is a module with ``NAME``, ``DEFAULT_KEY`` (where its messages live) and

- ``detect(record, messages_key=None) -> bool``: a cheap look at one parsed record;
- ``read(record, counter, *, path, line, messages_key=None) -> Conversation``,
  raising :class:`ctxcli.errors.InputError` for what it cannot read;
- ``write(record, conversation, *, messages_key=None)``: the record in this format
  again; a message no stage changed is written as the very entry that was read;
- ``problems(record, conversation) -> list[str]``: the rules of the format the record
  breaks (what ``ctxcli validate`` prints).

A format whose ``WHOLE_FILE`` is true (Claude Code sessions, Codex rollouts, Gemini
CLI checkpoints) reads a whole file as one record, the list of its lines' objects
(or of a JSON array's items): ``read`` and ``write`` take that list (``read`` also
their line numbers as ``lines``), and :func:`detect_file` tells one from a file's
first record.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ctxcli.errors import ConfigError
from ctxcli.formats import (
    anthropic,
    claude_code,
    codex,
    gemini,
    gemini_checkpoint,
    gemini_cli,
    openai,
    responses,
    sharegpt,
)
from ctxcli.formats._common import kind

#: Format name -> adapter module, in the order :func:`detect` tries them.
FORMATS: dict[str, ModuleType] = {
    m.NAME: m
    for m in (
        claude_code,
        codex,
        gemini_checkpoint,
        sharegpt,
        anthropic,
        gemini,
        gemini_cli,
        responses,
        openai,
    )
}


def get(name: str) -> ModuleType:
    """The adapter called ``name``. Raises :class:`ConfigError` naming the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(FORMATS)
        raise ConfigError(f"unknown format {name!r}; known formats: {known}") from None


def detect_file(first: Any) -> ModuleType | None:
    """The whole-file format (see the module docstring) whose ``detect`` accepts
    ``first``, a file's first record; ``None`` when none does."""
    return next(
        (m for m in FORMATS.values() if getattr(m, "WHOLE_FILE", False) and m.detect(first)),
        None,
    )


def detect(record: Any, messages_key: str | None = None) -> ModuleType | None:
    """The first record format whose ``detect`` accepts ``record``; else the OpenAI
    format for a record that has a list under ``messages_key`` (or ``messages``), so
    that its reader names the faulty message; else ``None``. Whole-file formats are
    found by :func:`detect_file`."""
    for module in FORMATS.values():
        if getattr(module, "WHOLE_FILE", False):
            continue
        if module.detect(record, messages_key):
            return module
    if isinstance(record, dict) and isinstance(record.get(messages_key or "messages"), list):
        return FORMATS["openai"]
    return None


def no_fit(record: Any, messages_key: str | None = None) -> str:
    """Why no format fits ``record``: the reason an error gives."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {kind(record)}"
    keys = ", ".join(map(repr, list(record)[:8]))
    if messages_key:
        return f"no format fits: {messages_key!r} holds no list of messages (keys: {keys})"
    return (
        "no format fits this record: no 'messages' list of role objects (OpenAI, "
        "Anthropic) and no 'conversations' list of from/value turns (ShareGPT); "
        f"keys: {keys}; --messages-key names another key"
    )
