"""ctxcli: compress LLM conversation transcripts to a token budget, in batch.

The command line is a thin skin over this API::

    from ctxcli import Compressor, resolve
    compressor = Compressor(resolve(stages="window,priority", max_tokens=2000))
    result = compressor.conversation({"messages": [...]})
    result.after.messages, result.over_budget
"""

from ctxcli.compress import Compressor, FileStats
from ctxcli.config import Settings, resolve
from ctxcli.errors import ConfigError, CtxcliError, InputError, InvariantError, SummaryError
from ctxcli.formats import FORMATS
from ctxcli.invariants import problems
from ctxcli.model import Conversation, Message
from ctxcli.pipeline import STAGES, Context, Result, run
from ctxcli.tokens import TokenCounter
from ctxcli.validate import Problem, validate_file

__all__ = [
    "FORMATS",
    "STAGES",
    "Compressor",
    "ConfigError",
    "Context",
    "Conversation",
    "CtxcliError",
    "FileStats",
    "InputError",
    "InvariantError",
    "Message",
    "Problem",
    "Result",
    "Settings",
    "SummaryError",
    "TokenCounter",
    "problems",
    "resolve",
    "run",
    "validate_file",
]
