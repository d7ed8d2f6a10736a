"""The exceptions ctxcli raises. Only ``cli.py`` turns them into exit codes."""

from __future__ import annotations

from ctxcli.problems import Problem
from ctxcli.problems import where as where


class CtxcliError(Exception):
    """Base class of every error ctxcli raises on purpose."""


class InputError(CtxcliError):
    """A line or record of an input file cannot be used; names the file and line."""

    def __init__(self, path: str, line: int | None, reason: str, *, record: int | None = None):
        self.path = path
        self.line = line
        self.record = record
        self.reason = reason
        super().__init__(f"{where(path, line, record)}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled from worker processes (``--jobs``): rebuild from the same arguments.
        return _input_error, (self.path, self.line, self.reason, self.record)


def _input_error(path: str, line: int | None, reason: str, record: int | None) -> InputError:
    return InputError(path, line, reason, record=record)


class OutputError(CtxcliError):
    """An output file cannot be written (a missing or read-only folder, a full disk)."""


class ConfigError(CtxcliError):
    """A setting, stage name or config file is invalid."""


class UsageError(ConfigError):
    """Command-line options that cannot go together (``-o`` with several inputs,
    ``--in-place`` with ``-o``): the command's usage error, exit status 2 as Click
    gives its own."""


class TokenizerError(CtxcliError):
    """A tiktoken encoding is unknown or its BPE file cannot be loaded."""


class SkillError(CtxcliError):
    """A skill file is missing, malformed or unsafe to read."""


class SummaryError(CtxcliError):
    """A summarizer could not produce a usable summary."""


class InvariantError(CtxcliError):
    """Compressed output would break a transcript rule (a bug: never written).

    ``problems`` lists the broken rules (:class:`ctxcli.problems.Problem`; ``str()`` of
    each is the text a person reads); the message names the conversation as well."""

    def __init__(self, message: str, problems: tuple[Problem, ...] = ()) -> None:
        self.problems = problems or (Problem("invariant", message),)
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return InvariantError, (str(self), self.problems)


class StoreError(CtxcliError):
    """A placeholder store is unreadable, inconsistent, or lacks a needed original."""


class WorkerError(CtxcliError):
    """A worker process died (killed, out of memory) or could not send its result."""


class YamlError(CtxcliError):
    """A YAML text is invalid or breaks a bound of :mod:`ctxcli.yamlio` (aliases, size,
    depth); names the file and, where known, the line. The reason is without either."""

    def __init__(self, path: str, line: int | None, reason: str):
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(f"{where(path, line)}: invalid YAML: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return YamlError, (self.path, self.line, self.reason)
