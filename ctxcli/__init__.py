"""ctxcli: compress LLM conversation transcripts to a token budget, in batch.

The command line is a thin skin over this API::

    from ctxcli import Compressor, resolve
    compressor = Compressor(resolve(stages="window,priority", max_tokens=2000))
    result = compressor.conversation({"messages": [...]})
    result.after.messages, result.over_budget
    ctxcli.Counting(resolve(model="gpt-4o")).file("logs.jsonl").tokens  # as compress counts
    ctxcli.Scoring(resolve(max_tokens=2000)).file("a.jsonl", "a.compressed.jsonl").ratio()

Skills (``ctxcli skills``) have their own API in :mod:`ctxcli.skills`: ``list_skills``,
``get_skill``, ``load_detail``, ``scan_skills``, ``export_skills``.

Names are imported on first use, so ``ctxcli --help`` starts without loading the
pipeline or tiktoken.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "Compressor": "ctxcli.compress",
    "FileStats": "ctxcli.compress",
    "Counting": "ctxcli.count",
    "Scoring": "ctxcli.scoring",
    "Settings": "ctxcli.config",
    "resolve": "ctxcli.config",
    "ConfigError": "ctxcli.errors",
    "CtxcliError": "ctxcli.errors",
    "InputError": "ctxcli.errors",
    "InvariantError": "ctxcli.errors",
    "StoreError": "ctxcli.errors",
    "SummaryError": "ctxcli.errors",
    "problems": "ctxcli.invariants",
    "Conversation": "ctxcli.model",
    "Message": "ctxcli.model",
    "STAGES": "ctxcli.pipeline",
    "Context": "ctxcli.pipeline",
    "Result": "ctxcli.pipeline",
    "run": "ctxcli.pipeline",
    "restore_file": "ctxcli.store",
    "TokenCounter": "ctxcli.tokens",
    "FORMATS": "ctxcli.formats",
    "Problem": "ctxcli.validate",
    "validate_file": "ctxcli.validate",
}

__all__ = [
    "FORMATS",
    "Compressor",
    "ConfigError",
    "Context",
    "Conversation",
    "Counting",
    "CtxcliError",
    "FileStats",
    "InputError",
    "InvariantError",
    "Message",
    "Problem",
    "Result",
    "STAGES",
    "Scoring",
    "Settings",
    "StoreError",
    "SummaryError",
    "TokenCounter",
    "problems",
    "resolve",
    "restore_file",
    "run",
    "validate_file",
]

if TYPE_CHECKING:
    from ctxcli.compress import Compressor, FileStats
    from ctxcli.config import Settings, resolve
    from ctxcli.count import Counting
    from ctxcli.errors import (
        ConfigError,
        CtxcliError,
        InputError,
        InvariantError,
        StoreError,
        SummaryError,
    )
    from ctxcli.formats import FORMATS
    from ctxcli.invariants import problems
    from ctxcli.model import Conversation, Message
    from ctxcli.pipeline import STAGES, Context, Result, run
    from ctxcli.scoring import Scoring
    from ctxcli.store import restore_file
    from ctxcli.tokens import TokenCounter
    from ctxcli.validate import Problem, validate_file


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ctxcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
