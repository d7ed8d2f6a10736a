"""ctxcli: compress LLM conversation transcripts to a token budget, in batch.

The command line is a thin skin over these functions; a Python user can do all it
does::

    import ctxcli
    records = ctxcli.compress_records(records, max_tokens=2000)  # in their own format
    stats = ctxcli.compress_file("logs.jsonl", max_tokens=2000)  # logs.compressed.jsonl
    ctxcli.count_tokens("logs.jsonl")                            # as compress counts
    for problem in ctxcli.validate_file("logs.compressed.jsonl"):
        print(problem)
    ctxcli.restore_file("logs.compressed.jsonl", "logs.restored.jsonl")
    [skill.name for skill in ctxcli.list_skills()], ctxcli.show_skill("read_file").body

Errors are :class:`CtxcliError` (subclasses in :mod:`ctxcli.errors`); problems a check
finds are :class:`Problem`. The parts stay importable from their modules:
:mod:`ctxcli.compress` (``Compressor``, ``FileStats``), :mod:`ctxcli.config`
(``resolve``, ``Settings``), :mod:`ctxcli.pipeline` (``run``, ``STAGES``, ``Context``),
:mod:`ctxcli.formats` (``FORMATS``), :mod:`ctxcli.model`, :mod:`ctxcli.tokens`,
:mod:`ctxcli.skills`. Importing ``ctxcli`` loads none of them (nor tiktoken or YAML).
"""

from __future__ import annotations

import importlib
from typing import Any

from ctxcli.api import (
    compress_file,
    compress_records,
    count_tokens,
    list_skills,
    restore_file,
    show_skill,
    validate_file,
)
from ctxcli.errors import CtxcliError
from ctxcli.problems import Problem

__all__ = [
    "CtxcliError",
    "Problem",
    "compress_file",
    "compress_records",
    "count_tokens",
    "list_skills",
    "restore_file",
    "show_skill",
    "validate_file",
]

#: Names the package exported before it had the functions above, importable still
#: (on first use) where they are: ``ctxcli.Compressor`` is
#: :class:`ctxcli.compress.Compressor`.
_EARLIER = {
    "Compressor": "ctxcli.compress",
    "FileStats": "ctxcli.compress",
    "Counting": "ctxcli.count",
    "Scoring": "ctxcli.scoring",
    "Settings": "ctxcli.config",
    "resolve": "ctxcli.config",
    "ConfigError": "ctxcli.errors",
    "InputError": "ctxcli.errors",
    "InvariantError": "ctxcli.errors",
    "StoreError": "ctxcli.errors",
    "SummaryError": "ctxcli.errors",
    "Conversation": "ctxcli.model",
    "Message": "ctxcli.model",
    "STAGES": "ctxcli.pipeline",
    "Context": "ctxcli.pipeline",
    "Result": "ctxcli.pipeline",
    "run": "ctxcli.pipeline",
    "TokenCounter": "ctxcli.tokens",
    "FORMATS": "ctxcli.formats",
}


def __getattr__(name: str) -> Any:
    if name not in _EARLIER:
        raise AttributeError(f"module 'ctxcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EARLIER[name]), name)
    globals()[name] = value
    return value
