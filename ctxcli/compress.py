"""Compress whole files: read, run the pipeline, write, count.

An input is JSON lines, one JSON array of records, or one record (see
:func:`ctxcli.jsonio.read_records`); the output has the input's shape, and each
record the format it was read in (:mod:`ctxcli.formats`). A Claude Code session log
is one conversation for the whole file. JSON lines are read, compressed and written
one record at a time, so memory does not grow with the file (stdin is read whole). A record no stage
changed is written back as the very bytes that were read; a changed one is checked
against its format's rules before it is written.
With ``jobs`` above 1, worker processes compress pieces of a JSON lines file
(:func:`ctxcli.parallel.process_map`); with a summarizer that calls a model, threads
wait on it (:func:`ctxcli.parallel.ordered_map`); either way the output is written in
input order and memory stays bounded.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, TypeVar

from ctxcli import formats, jsonio, memo, parquet
from ctxcli.config import Settings
from ctxcli.errors import (
    ConfigError,
    InputError,
    InvariantError,
    OutputError,
    WorkerError,
    where,
)
from ctxcli.formats import anthropic, claude_code
from ctxcli.formats import openai as openai_format
from ctxcli.formats._common import kind

# Re-exported where they were before ctxcli.inputs held them.
from ctxcli.inputs import Plan as Plan
from ctxcli.inputs import default_output as default_output
from ctxcli.inputs import default_stats as default_stats
from ctxcli.inputs import default_store as default_store
from ctxcli.inputs import expand_inputs as expand_inputs
from ctxcli.inputs import plan as plan
from ctxcli.model import Conversation, Message
from ctxcli.parallel import ordered_map, process_map
from ctxcli.pipeline import STAGES, Context, Result, Stage, run
from ctxcli.score import ConversationScore, FileScore, score
from ctxcli.store import StoreWriter, needs_store
from ctxcli.summarizers import Summarizer, build
from ctxcli.tokens import NullCounter, TokenCounter, encoding_name_for, knows_model

#: Entries each stats list (over budget, errors, input problems, fallbacks) holds; the
#: rest are counted under ``not_listed``.
LISTED_MAX = 10_000
#: The stats' lists of conversations, each bounded by :data:`LISTED_MAX`.
LISTS = ("over_budget", "errors", "input_problems", "fallbacks")

Warn = Callable[[str], None]
_NO_COUNT = NullCounter()
#: Warnings passed on per input file; the rest are counted (stats ``warnings``).
WARNINGS_SHOWN = 20
#: One input record after the pipeline, from any thread or process: its tally with its
#: output bytes (``None`` when unchanged), or the error it gave.
_Outcome = tuple["Tally | None", "bytes | None", "InputError | InvariantError | None"]
#: What :meth:`Compressor._book` passes on, in order: a warning, or the originals that
#: placeholders replaced with the place of their record.
_Note = str | tuple[dict[str, Any], str]


@dataclass(frozen=True, slots=True)
class Tally:
    """What one compressed conversation adds to the stats, without the conversation
    itself: its ``id`` and ``line``, message and token counts before and after (tokens
    as :attr:`Conversation.tokens`), per role
    ``[messages before, tokens before, messages after, tokens after]``, the stages'
    events, whether it stayed over budget, the originals its placeholders replaced, its
    warnings, the format rules its input already broke (``input_problems``) and, when its
    pipeline broke a rule and a safer plan was written instead, what happened
    (``fallback``, see :func:`contain`); ``messages_key``, the well-known key its
    messages were found under without ``--messages-key`` (:func:`ctxcli.formats.find`);
    ``score``, its fact retention when asked for (:mod:`ctxcli.score`)."""

    id: str | None
    line: int
    changed: bool
    messages: tuple[int, int]
    tokens: tuple[int, int]
    by_role: dict[str, list[int]]
    events: dict[str, dict[str, int]]
    over_budget: bool
    stored: dict[str, Any]
    warnings: tuple[str, ...]
    input_problems: tuple[str, ...] = ()
    fallback: Fallback | None = None
    messages_key: str | None = None
    score: ConversationScore | None = None

    @classmethod
    def of(
        cls,
        result: Result,
        input_problems: Iterable[str] = (),
        fallback: Fallback | None = None,
        messages_key: str | None = None,
        score: ConversationScore | None = None,
    ) -> Tally:
        by_role: dict[str, list[int]] = {}
        for side, conversation in ((0, result.before), (2, result.after)):
            for message in conversation.messages:
                role = "summary" if message.is_summary and message.index is None else message.role
                counts = by_role.setdefault(role, [0, 0, 0, 0])
                counts[side] += 1
                counts[side + 1] += message.tokens
        return cls(
            id=result.after.id,
            line=result.after.line,
            changed=result.changed,
            messages=(len(result.before.messages), len(result.after.messages)),
            tokens=(result.before.tokens, result.after.tokens),
            by_role=by_role,
            events={stage: dict(done) for stage, done in result.events.items()},
            over_budget=result.over_budget,
            stored=result.stored,
            warnings=tuple(result.warnings),
            input_problems=tuple(input_problems),
            fallback=fallback,
            messages_key=messages_key,
            score=score,
        )


@dataclass(frozen=True, slots=True)
class Fallback:
    """What :func:`contain` wrote for a conversation whose pipeline broke a rule or
    raised: the ``stage`` that broke it (``None`` when no one stage can be named), the
    ``rule`` (the broken rules as people read them, or what the stage raised) and what
    was ``written`` instead: ``"without <stage>"``, or ``"as read"``."""

    stage: str | None
    rule: str
    written: str

    def to_json(self) -> dict[str, Any]:
        """The entry of the stats' ``fallbacks`` list, besides the conversation's place."""
        return {"stage": self.stage, "rule": self.rule, "written": self.written}


#: Errors that are not one conversation's trouble: a setting, or an output that cannot
#: be written, fails every conversation alike. :func:`contain` passes them on.
_NOT_CONTAINED = (ConfigError, OutputError)

_T = TypeVar("_T")


def contain(
    stages: Sequence[Stage],
    attempt: Callable[[Sequence[Stage]], tuple[Result, _T]],
    as_read: Callable[[], tuple[Result, _T]],
) -> tuple[Result, _T, Fallback | None]:
    """``attempt(stages)`` (the pipeline, written back and checked) with its
    ``(result, output)``, and ``None``; or, when it raises, a safer plan: the same
    without the first stage after which the output breaks (found by running ever longer
    runs of the stages), else ``as_read()`` (the conversation unchanged), with the
    :class:`Fallback` that says so. So one conversation's trouble (an output that would
    break a rule, a stage's bug) never costs the file; the caller warns and lists it.

    Raises what ``attempt`` raises of :data:`_NOT_CONTAINED`.
    """
    try:
        return (*attempt(stages), None)
    except _NOT_CONTAINED:
        raise
    except Exception as exc:  # contained: the conversation falls back
        culprit, rule = _culprit(stages, attempt, exc)
    name = None if culprit is None else stages[culprit].name
    if culprit is not None:
        safer = [stage for i, stage in enumerate(stages) if i != culprit]
        try:
            return (*attempt(safer), Fallback(name, rule, f"without {name}"))
        except _NOT_CONTAINED:
            raise
        except Exception:  # then the conversation as read
            pass
    return (*as_read(), Fallback(name, rule, "as read"))


def _culprit(
    stages: Sequence[Stage], attempt: Callable[[Sequence[Stage]], object], error: Exception
) -> tuple[int | None, str]:
    """The position of the first stage after which the output breaks, and the rule it
    breaks there; ``(None, rule)`` with no stages. ``error`` is what the whole plan
    raised: when every shorter run of the stages passes, the last stage is the one."""
    for end in range(1, len(stages)):
        try:
            attempt(stages[:end])
        except _NOT_CONTAINED:
            raise
        except Exception as exc:
            return end - 1, _rule(exc)
    return (len(stages) - 1 if stages else None), _rule(error)


def _rule(error: BaseException) -> str:
    """The rule ``error`` says was broken, or what a stage raised."""
    if isinstance(error, InvariantError):
        return "; ".join(error.problems)
    return f"{type(error).__name__}: {error}"


@dataclass
class FileStats:
    """What one input file went through. Token figures are tokens of the run's
    encoding by the cookbook rule (messages, reply priming and ``tools``).
    ``out_of_context`` counts the messages of a session that stand before its last
    compaction (a Claude Code ``compact_boundary``, a Codex ``compacted`` line): out of
    the model's context, they are written back as read and not counted. ``score`` is
    the file's fact retention (:mod:`ctxcli.score`), when asked for."""

    input: str
    output: str
    encoding: str
    max_tokens: int | None
    stages: list[str]
    conversations: int = 0
    changed: int = 0
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    by_role: dict[str, Counter[str]] = field(default_factory=dict)
    stage_events: dict[str, Counter[str]] = field(default_factory=dict)
    over_budget: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    input_problems: list[dict[str, Any]] = field(default_factory=list)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    not_listed: Counter[str] = field(default_factory=Counter)
    messages_keys: Counter[str] = field(default_factory=Counter)
    out_of_context: int = 0
    warnings: int = 0
    elapsed_seconds: float = 0.0
    store: str | None = None
    store_entries: int = 0
    store_bytes: int = 0
    llm: dict[str, float] = field(default_factory=dict)
    score: FileScore | None = None

    def add(self, result: Result | Tally, place: Mapping[str, int] | None = None) -> None:
        """Count one compressed conversation. ``place`` names it in the over-budget and
        input-problem lists (default: its ``line``; a JSON array's record: ``record``)."""
        tally = result if isinstance(result, Tally) else Tally.of(result)
        self.conversations += 1
        self.changed += tally.changed
        self.messages_before += tally.messages[0]
        self.messages_after += tally.messages[1]
        self.tokens_before += tally.tokens[0]
        self.tokens_after += tally.tokens[1]
        for role, (mb, tb, ma, ta) in tally.by_role.items():
            counts = self.by_role.setdefault(role, Counter())
            counts["messages_before"] += mb
            counts["tokens_before"] += tb
            counts["messages_after"] += ma
            counts["tokens_after"] += ta
        for stage, events in tally.events.items():
            self.stage_events.setdefault(stage, Counter()).update(events)
        at = dict(place) if place is not None else {"line": tally.line}
        if tally.over_budget:
            self.add_entry("over_budget", {"id": tally.id, **at, "tokens": tally.tokens[1]})
        if tally.input_problems:
            self.add_entry(
                "input_problems", {"id": tally.id, **at, "problems": list(tally.input_problems)}
            )
        if tally.fallback is not None:
            self.add_entry("fallbacks", {"id": tally.id, **at, **tally.fallback.to_json()})
        if tally.messages_key is not None:
            self.messages_keys[tally.messages_key] += 1
        if tally.score is not None:
            self.score = self.score or FileScore(self.input, self.output)
            self.score.add(tally.score)

    def add_entry(self, name: str, entry: dict[str, Any]) -> None:
        """Add ``entry`` to the list ``name`` (``over_budget``, ``errors``,
        ``input_problems`` or ``fallbacks``); past :data:`LISTED_MAX` entries it is only counted, in
        ``not_listed``, so that memory stays bounded however many there are."""
        entries: list[dict[str, Any]] = getattr(self, name)
        if len(entries) < LISTED_MAX:
            entries.append(entry)
        else:
            self.not_listed[name] += 1

    def total(self, name: str) -> int:
        """How many entries the list ``name`` has, listed or not."""
        return len(getattr(self, name)) + self.not_listed[name]

    def merge(self, other: FileStats) -> None:
        """Add the conversation, message, token, role and stage counts and the
        over-budget, error and input-problem lists of ``other``, the stats of a later
        part of the same file (a worker process's piece). Warnings, store, model use and
        time are the whole file's, filled in at its end."""
        for name in (
            "conversations",
            "changed",
            "messages_before",
            "messages_after",
            "tokens_before",
            "tokens_after",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in (
            (self.by_role, other.by_role),
            (self.stage_events, other.stage_events),
        ):
            for key, counts in theirs.items():
                mine.setdefault(key, Counter()).update(counts)
        for name in LISTS:
            for entry in getattr(other, name):
                self.add_entry(name, entry)
        self.not_listed.update(other.not_listed)
        self.messages_keys.update(other.messages_keys)
        if other.score is not None:
            self.score = self.score or FileScore(self.input, self.output)
            self.score.merge(other.score)

    @property
    def ratio(self) -> float:
        """Tokens after / tokens before (1.0 for an empty file)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0

    def to_json(self) -> dict[str, Any]:
        """The stats file's content."""
        return {
            "input": self.input,
            "output": self.output,
            "encoding": self.encoding,
            "max_tokens": self.max_tokens,
            "stages": self.stages,
            "conversations": self.conversations,
            "conversations_changed": self.changed,
            "messages": {"before": self.messages_before, "after": self.messages_after},
            "tokens": {"before": self.tokens_before, "after": self.tokens_after},
            "ratio": round(self.ratio, 4),
            "by_role": {role: dict(c) for role, c in sorted(self.by_role.items())},
            "stage_events": {s: dict(c) for s, c in self.stage_events.items()},
            **({"messages_keys": dict(self.messages_keys)} if self.messages_keys else {}),
            **({"out_of_context": self.out_of_context} if self.out_of_context else {}),
            "over_budget": self.over_budget,
            "errors": self.errors,
            "input_problems": self.input_problems,
            "fallbacks": self.fallbacks,
            **({"not_listed": dict(self.not_listed)} if self.not_listed else {}),
            "warnings": self.warnings,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "store": {"path": self.store, "entries": self.store_entries, "bytes": self.store_bytes},
            **({"llm": self.llm} if self.llm else {}),
            **({"score": self.score.to_json()} if self.score is not None else {}),
        }


@dataclass
class Piece:
    """A run of JSON lines records after compression, as a worker process sends it
    back: ``output``, their output lines joined by the input's line end (none after the
    last); ``stats`` for them alone (see :meth:`FileStats.merge`); ``notes``, warnings
    and originals to store, in order; and ``error``, the error that ended the run early,
    to be raised once the notes are acted on; ``learned``, the worker's new memo
    results (see :func:`ctxcli.memo.fresh`); ``size``, the bytes of input it covers."""

    output: bytes
    stats: FileStats
    notes: list[_Note]
    error: InputError | InvariantError | None = None
    learned: dict[str, memo.Results] = field(default_factory=dict)
    size: int = 0


class Compressor:
    """Runs one :class:`Settings` over files; holds the token counter for the run.

    ``warn`` receives each warning as one line of text (the CLI prints it to stderr).
    ``summarizer`` replaces the one ``settings.summarizer`` names (the CLI builds it,
    API key included). ``jobs`` is the number of worker processes for a JSON lines file
    (``None``: one per usable core, :func:`usable_cpus`, for files of
    :data:`POOL_MIN_BYTES` or more, else 1).
    ``cache_dir`` is where the parsed tokenizer may be kept between runs (see
    :func:`ctxcli.tokens.load_encoding`; ``None``: nowhere). With ``score``, each
    file's stats also measure fact retention (:mod:`ctxcli.score`).
    Raises :class:`ConfigError` for a bad summarizer and
    :class:`ctxcli.errors.TokenizerError` for an encoding that cannot be loaded.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        warn: Warn | None = None,
        summarizer: Summarizer | None = None,
        jobs: int | None = 1,
        cache_dir: str | Path | None = None,
        score: bool = False,
    ) -> None:
        self.settings = settings
        self.score = score
        self.requested_jobs = jobs
        self.jobs = 1
        self._shape: str = "jsonl"
        self._bar: Any = None
        self._newline = b"\n"
        self._encode: Callable[[Any], bytes] = jsonio.dumps
        self.encoding = encoding_name_for(settings.model, settings.encoding)
        self._warn = warn or (lambda _: None)
        if settings.model and not settings.encoding and not knows_model(settings.model):
            self._warn(
                f"tiktoken does not know the model {settings.model!r}: counting tokens "
                f"with {self.encoding} (--encoding chooses another)"
            )
        self.counter = TokenCounter(self.encoding, cache_dir=cache_dir)
        self.format = formats.get(settings.format) if settings.format else None
        self.summarizer = summarizer or build(settings.summarizer)
        self.context = Context(settings.max_tokens, self.counter, self.summarizer)
        # Threads only pay off while waiting on a model; the extractive path stays serial.
        self.workers = getattr(self.summarizer, "concurrency", 1)
        self.warned = 0
        self._file_start = 0

    def warn(self, text: str) -> None:
        """Count one warning and pass it on; past :data:`WARNINGS_SHOWN` in a file only
        the count goes on (the stats file lists them all)."""
        self.warned += 1
        if self.warned - self._file_start > WARNINGS_SHOWN:
            return
        if self._bar is None:
            self._warn(text)
            return
        with self._bar.external_write_mode(file=self._bar.fp):  # above the bar, not over it
            self._warn(text)

    def read(
        self, record: Any, *, path: str = "<input>", line: int = 0
    ) -> tuple[formats.Found, Conversation]:
        """Read one parsed record in its format (forced, else found: see
        :func:`ctxcli.formats.find`): where its messages are, and the conversation.

        Raises :class:`InputError` for a bad record or one no format fits.
        """
        found = formats.find(record, self.settings.messages_key, self.format)
        if found is None:
            raise InputError(path, line, formats.no_fit(record, self.settings.messages_key))
        try:
            return found, found.read(record, self.counter, path=path, line=line)
        except (LookupError, TypeError):  # a --messages-key path that leads nowhere
            raise InputError(
                path, line, formats.no_fit(record, self.settings.messages_key)
            ) from None

    def conversation(self, record: Any, *, path: str = "<input>", line: int = 0) -> Result:
        """Compress one parsed record. Raises :class:`InputError` for a bad record."""
        return self._run(self.read(record, path=path, line=line)[1])

    def _run(self, conversation: Conversation) -> Result:
        result = run(conversation, self.settings.stages, self.context)
        for text in result.warnings:
            self.warn(text)
        return result

    def records(
        self,
        items: Iterable[jsonio.Record],
        path: str,
        stats: FileStats,
        store: StoreWriter | None = None,
    ) -> Iterator[tuple[bytes, bool]]:
        """``(output record, changed)`` for each input record, in input order:
        compressed here, on threads while a summarizer waits on a model, or by worker
        processes (see :meth:`_pieces`; then one ``output`` holds a piece's lines,
        joined by the input's line end), memory bounded either way. Originals replaced
        by placeholders go to ``store``.

        Raises :class:`InputError` for a bad record (unless ``on_error`` is ``keep``)
        and :class:`ConfigError` when a placeholder is written and ``store`` is None.
        """
        if self._pooled(path):
            for piece in self._pieces(path):
                stats.merge(piece.stats)
                for note in piece.notes:
                    self._apply(note, store)
                if piece.error is not None:
                    raise piece.error
                if piece.output:
                    yield piece.output, True
            return
        attempts = ordered_map(
            lambda item: (item, self._attempt(item, path, self._encode)),
            items,
            workers=self.workers,
        )
        for item, outcome in attempts:
            yield self._book(item, outcome, path, stats, lambda note: self._apply(note, store))

    def _book(
        self,
        item: jsonio.Record,
        outcome: _Outcome,
        path: str,
        stats: FileStats,
        note: Callable[[_Note], None],
    ) -> tuple[bytes, bool]:
        """Count one record's :meth:`_attempt` in ``stats`` and give its output line
        and whether it changed. Warnings and originals to store go to ``note``, in
        order. Raises the record's error unless ``on_error`` is ``keep``."""
        tally, out, error = outcome
        if error is not None or tally is None:
            assert error is not None
            if self.settings.on_error != "keep":
                raise error
            reason = error.reason if isinstance(error, InputError) else str(error)
            stats.add_entry("errors", {**_place(item), "reason": reason})
            note(f"{error} (copied unchanged)")
            return (item.raw if item.raw is not None else jsonio.dumps(item.value)), False
        for text in tally.warnings:
            note(text)
        stats.add(tally, _place(item))
        if tally.stored:
            note((tally.stored, where(path, item.line, item.index)))
        named = f" {tally.id}" if tally.id is not None else ""
        over = self._over_budget(where(path, item.line, item.index), f"conversation{named}", tally)
        if over:
            note(over)
        if out is not None:
            return out, True
        return (item.raw if item.raw is not None else jsonio.dumps(item.value)), False

    def _apply(self, note: _Note, store: StoreWriter | None) -> None:
        """Act on one note of :meth:`_book`: show a warning, or store originals."""
        if isinstance(note, str):
            self.warn(note)
        else:
            self._stash(note[0], store, note[1])

    def _pooled(self, path: str) -> bool:
        """Whether ``path`` is compressed by worker processes (see :meth:`_pieces`):
        a JSON lines file of more than :data:`CHUNK_BYTES`, with no model to call."""
        offline = self.summarizer.offline  # no client, no cache to fork
        if self.jobs < 2 or not offline or path == "-" or self._shape != "jsonl":
            return False
        try:
            return os.path.getsize(path) > CHUNK_BYTES
        except OSError:
            return False  # read here, where an unreadable file is named

    def _pieces(self, path: str) -> Iterator[Piece]:
        """The JSON lines file ``path`` compressed by :attr:`jobs` worker processes, a
        :class:`Piece` per piece of input (see :data:`CHUNK_BYTES`), in order. Each
        worker reads its pieces of the file itself and sends back only their output,
        stats and what its memos learned, which the other workers take in before their
        next piece: a text one worker read (a system prompt, a tool's schema or result,
        the earlier turns of a conversation logged at every turn) is not read again by
        the others (see :mod:`ctxcli.memo`)."""

        with jsonio.open_input(path) as stream:
            # Workers read the pieces through this open file (their copy of its
            # descriptor): the file it was, if its path is replaced during the run.
            tasks = (
                (path, stream.fileno(), start, end, first_line)
                for start, end, first_line in jsonio.chunks(stream, *_piece_sizes())
            )
            pieces = process_map(
                _piece,
                tasks,
                workers=min(self.jobs, _pieces_in(stream)),
                initializer=_start_worker,
                initargs=(self,),
                news=_news,
                learn=memo.learn,
            )
            try:
                for piece in pieces:
                    if self._bar is not None:
                        self._bar.update(piece.size)
                    yield piece
            except WorkerError as exc:
                raise WorkerError(f"{path}: {exc}") from None

    def piece(self, items: Iterable[jsonio.Record], path: str) -> Piece:
        """Compress ``items``, a run of JSON lines records, into one :class:`Piece`
        (what a worker process sends back). Stops at the first record whose error is
        raised (see :meth:`_book`)."""
        stats = FileStats(path, "", self.encoding, self.settings.max_tokens, [])
        notes: list[_Note] = []
        lines: list[bytes] = []
        error = None
        try:
            for item in items:
                out, _ = self._book(item, self._attempt(item, path), path, stats, notes.append)
                lines.append(out)
        except (InputError, InvariantError) as exc:
            error = exc
        output = self._newline.join(lines)
        return Piece(output, stats, notes, error, memo.fresh())

    def _attempt(
        self, item: jsonio.Record, path: str, encode: Callable[[Any], bytes] = jsonio.dumps
    ) -> _Outcome:
        """Parse, compress, write and check one record, on any thread or worker process
        (warnings wait in the tally). A bad record gives an error instead; an output
        that would break the transcript rules is never written: :func:`contain` writes
        a safer plan's. ``encode`` turns the written record into its output bytes and
        may refuse it, as the check does (a Parquet column that cannot hold it:
        :meth:`ctxcli.parquet.Source.encode`). Returns ``(tally, output bytes or None
        when unchanged, error)``; :func:`compress_record` is the public name."""
        place = where(path, item.line, item.index)
        try:
            record = item.parse(path)
            found, conversation = self.read(record, path=path, line=item.line or 0)
            broken = found.problems(record, conversation)
        except InputError as exc:
            return None, None, InputError(path, item.line, exc.reason, record=item.index)

        def attempt(stages: Sequence[Stage]) -> tuple[Result, bytes | None]:
            result = run(conversation, stages, self.context)
            if not result.changed:
                return result, None
            written = found.write(record, result.after)
            self._check(found, record, written, result, place, broken)
            return result, encode(written)

        result, out, fallback = contain(
            self.settings.stages, attempt, lambda: (self._as_read(conversation), None)
        )
        if broken:
            result.warnings.append(_already_broken(place, conversation, found.format, broken))
        if fallback is not None:
            result.warnings.append(_fell_back(place, conversation, fallback))
        return Tally.of(result, broken, fallback, found.implicit, self._score(result)), out, None

    def _score(self, result: Result) -> ConversationScore | None:
        """``result``'s fact retention, when asked for."""
        if not self.score:
            return None
        return score(result.before, result.after, budget=self.settings.max_tokens)

    def _as_read(self, conversation: Conversation) -> Result:
        """``conversation`` written as it was read, for :func:`contain`."""
        return Result(conversation, conversation, {}, self.context.over(conversation))

    def session(
        self,
        items: Iterable[jsonio.Record],
        path: str,
        stats: FileStats,
        store: StoreWriter | None = None,
        *,
        module: ModuleType = claude_code,
    ) -> Iterator[tuple[bytes, bool]]:
        """Output lines for a file of a whole-file format (a Claude Code session log, a
        Codex rollout: see :mod:`ctxcli.formats`), one conversation for the file. With
        ``on_error: keep`` a bad line is copied unchanged in its place and left out of
        the conversation."""
        events, lines, raw_of, bad_before = self._events(items, path, stats)
        conversation = module.read(
            events, self.counter, path=path, line=lines[0] if lines else 0, lines=lines
        )
        broken = module.problems(events, conversation)
        if broken:
            self.warn(_already_broken(path, conversation, module, broken))

        def attempt(stages: Sequence[Stage]) -> tuple[Result, list[Any]]:
            result = run(conversation, stages, self.context)
            if not result.changed:
                return result, events
            out = module.write(events, result.after)
            self._check(formats.Found(module), events, out, result, path, broken)
            return result, out

        result, out, fallback = contain(
            self.settings.stages, attempt, lambda: (self._as_read(conversation), events)
        )
        for text in result.warnings:
            self.warn(text)
        if fallback is not None:
            self.warn(_fell_back(path, conversation, fallback))
        tally = Tally.of(result, broken, fallback, score=self._score(result))
        stats.add(tally)
        stats.out_of_context += conversation.meta.get("out_of_context", 0)
        self._stash(result.stored, store, path)
        over = self._over_budget(path, f"session {result.after.label}", tally)
        if over:
            self.warn(over)
        yield from _session_lines(events, out, raw_of, bad_before)

    def _events(
        self, items: Iterable[jsonio.Record], path: str, stats: FileStats
    ) -> tuple[list[Any], list[int], dict[int, bytes], dict[int, list[bytes]]]:
        """A session log's events, their lines, the bytes each was read from (by the
        event's ``id``) and, with ``on_error: keep``, the bad lines that stood before
        each event position (raises :class:`InputError` for one otherwise)."""
        events: list[Any] = []
        lines: list[int] = []
        raw_of: dict[int, bytes] = {}
        bad_before: dict[int, list[bytes]] = {}
        for item in items:
            line = item.line or 0
            try:
                event = item.parse(path)
                if not isinstance(event, dict):
                    raise InputError(path, line, f"event is {kind(event)}, not an object")
            except InputError as exc:
                if self.settings.on_error != "keep":
                    raise
                stats.add_entry("errors", {"line": line, "reason": exc.reason})
                self.warn(f"{exc} (copied unchanged)")
                bad_before.setdefault(len(events), []).append(item.raw or b"")
                continue
            events.append(event)
            lines.append(line)
            raw_of[id(event)] = item.raw or jsonio.dumps(event)
        return events, lines, raw_of, bad_before

    def _over_budget(self, place: str, what: str, tally: Tally) -> str | None:
        """The warning for a conversation left over budget, or ``None``: when it fits,
        and when no stage that could fit it ran (``--stages placeholder`` alone drops
        nothing, so there is nothing to warn about: the stats still list it)."""
        if not tally.over_budget or not any(
            getattr(STAGES.get(name), "fits_budget", True) for name in tally.events
        ):
            return None
        return (
            f"{place}: {what} is over budget: {tally.tokens[1]} tokens > "
            f"{self.settings.max_tokens} with only what must be kept"
        )

    @staticmethod
    def _stash(stored: Mapping[str, Any], store: StoreWriter | None, place: str) -> None:
        """Send the originals that placeholders replaced to ``store``."""
        if not stored:
            return
        if store is None and not needs_store(stored):
            return  # only placeholders of an earlier run, kept as they were
        if store is None:
            raise ConfigError(
                f"{place}: placeholders need a store to restore from; give --store PATH"
            )
        store.add(stored)

    def _check(
        self,
        at: formats.Found,
        record: Any,
        out: Any,
        result: Result,
        place: str,
        known: list[str] | None = None,
    ) -> None:
        """Raise :class:`InvariantError` when ``out`` breaks a rule of its format (read
        where ``at`` says) that the input ``record`` kept (compared by reason, since
        positions move); ``known``: the input's problems, when already found."""
        module = at.format
        if module is openai_format and openai_format.writes_as_read(result.after):
            # The OpenAI writer puts the neutral messages in as they are: reading them
            # back would give ``result.after`` again, numbered by output position.
            written = result.after.with_messages(
                [Message(m.data, m.tokens, i) for i, m in enumerate(result.after.messages)]
            )
        else:
            try:  # the rules need no token counts: count nothing
                written = at.read(out, _NO_COUNT, path=place, line=0)
            except InputError as exc:
                problem = f"output could not be read back: {exc.reason}"
                raise InvariantError(f"{place}: {problem}", (problem,)) from None
        found = []
        broken = at.problems(out, written)
        if broken:  # only then is it worth knowing what the input already broke
            if known is None:
                known = at.problems(record, result.before)
            kept = Counter(_reason(p) for p in known)
            for problem in broken:
                if kept[_reason(problem)]:
                    kept[_reason(problem)] -= 1
                else:
                    found.append(problem)
        if module is anthropic:
            found += anthropic.kept_problems(result.before, result.after)
        if found:
            raise InvariantError(
                f"{place}: conversation {result.after.label}: output would break the "
                f"{module.NAME} rules: " + "; ".join(found),
                tuple(found),
            )

    def file(
        self,
        input_path: str,
        output_path: str,
        *,
        stats_path: str | None = None,
        store_path: str | None = None,
        progress: bool = False,
    ) -> FileStats:
        """Compress ``input_path`` into ``output_path`` (``-``: stdout) and the originals
        of placeholders into ``store_path`` (see :mod:`ctxcli.store`), both atomically:
        the two are moved into place only when the whole run succeeded (the store
        first). Writes the stats JSON to ``stats_path`` (if given).

        Raises :class:`InputError` for a bad line (no output is left behind),
        :class:`ConfigError` when the output or store would overwrite the input, or a
        placeholder is written with no ``store_path``, and
        :class:`ctxcli.errors.WorkerError` when a worker process cannot start or dies.
        """
        for target in (output_path, store_path):
            if (
                target
                and target != "-"
                and input_path != "-"
                and jsonio.same_file(input_path, target)
            ):
                raise ConfigError(f"{target}: the output would overwrite the input")
        if (
            store_path
            and output_path != "-"
            and not jsonio.is_stream(store_path)
            and jsonio.same_file(output_path, store_path)
        ):
            raise ConfigError(f"{store_path}: the store would overwrite the output")
        started = time.perf_counter()
        stats = FileStats(
            input=input_path,
            output=output_path,
            encoding=self.encoding,
            max_tokens=self.settings.max_tokens,
            stages=self.settings.stage_names,
            store=store_path,
        )
        if self.score:
            stats.score = FileScore(input_path, output_path, self.settings.max_tokens)
        warned = self._file_start = self.warned
        model_use = self._model_use()
        self.jobs = self._jobs_for(input_path)
        data = jsonio.read_input(input_path)
        shape, items, original = parquet.open_records(input_path, data, self.settings.messages_key)
        self._encode = original.encode if shape == "parquet" else jsonio.dumps
        bar = _progress(input_path) if progress and shape == "jsonl" else None
        self._shape, self._bar = shape, bar
        whole, items = whole_file_format(self.format, shape, items, input_path)
        items = _tracked(items, bar)  # counted as a driver reads them, not when peeked at
        driver = self.records if whole is None else functools.partial(self.session, module=whole)
        with contextlib.ExitStack() as stack:
            if bar is not None:
                stack.callback(bar.close)
            writer = stack.enter_context(jsonio.AtomicWriter(output_path))
            store = stack.enter_context(StoreWriter(store_path)) if store_path else None
            stats_file = (
                stack.enter_context(jsonio.AtomicWriter(stats_path)) if stats_path else None
            )
            newline, bom = jsonio.line_style(input_path, data)
            self._newline = newline
            sink = parquet.sink(writer, shape, original, newline=newline, bom=bom)
            for out, changed in driver(items, input_path, stats, store):
                sink.write(out, changed=changed)
            sink.close()
            if bar is not None and bar.total:
                bar.update(bar.total - bar.n)  # line ends and blank lines it missed
            if store is not None:
                stats.store_entries, stats.store_bytes = store.entries, store.bytes
                if not store.entries:
                    stats.store = None
            self._finish(stats, input_path, warned, model_use, started)
            if stats_file is not None:
                stats_file.write(jsonio.dumps_indented(stats.to_json()))
            # Everything is written: move the files into place, the output last.
            if stats_file is not None:
                stats_file.commit()
            if store is not None:
                store.commit()
            writer.commit()
        return stats

    def _finish(
        self,
        stats: FileStats,
        input_path: str,
        warned: int,
        model_use: dict[str, float] | None,
        started: float,
    ) -> None:
        """Fill in the stats known only at the end of a file: warnings, model use and
        time."""
        stats.warnings = self.warned - warned
        if stats.warnings > WARNINGS_SHOWN:
            hidden = stats.warnings - WARNINGS_SHOWN
            self._warn(f"{input_path}: {hidden} more warnings not shown; the stats list them")
        if model_use is not None:
            now = self._model_use() or {}
            # Gauges (the concurrency used) are levels, not counts: taken as they are.
            gauges = getattr(getattr(self.summarizer, "stats", None), "GAUGES", ())
            stats.llm = {k: v if k in gauges else v - model_use.get(k, 0) for k, v in now.items()}
            stats.llm["wait_seconds"] = round(stats.llm["wait_seconds"], 3)
            stats.llm["fallbacks"] = stats.stage_events.get("summary", Counter())["fallbacks"]
        stats.elapsed_seconds = time.perf_counter() - started

    def _jobs_for(self, input_path: str) -> int:
        """Worker processes for one input: as asked, or with ``jobs=None`` one per
        usable core (:func:`usable_cpus`) for a file of :data:`POOL_MIN_BYTES` or more
        and none below. 1 without ``fork``
        (the workers share the loaded tokenizer by forking)."""
        if "fork" not in multiprocessing.get_all_start_methods():
            return 1
        if self.requested_jobs is not None:
            return max(1, self.requested_jobs)
        try:
            size = os.path.getsize(input_path) if input_path != "-" else 0
        except OSError:
            size = 0
        return usable_cpus() if size >= POOL_MIN_BYTES else 1

    def _model_use(self) -> dict[str, float] | None:
        """The summarizer's model-use counters so far, if it counts any."""
        model_stats = getattr(self.summarizer, "stats", None)
        return None if model_stats is None else dict(model_stats.snapshot())


#: Where cgroup v2 states a CPU quota: ``"<quota> <period>"`` (microseconds) or
#: ``"max <period>"``.
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
#: Where cgroup v1 states one: ``cpu.cfs_quota_us`` (``-1``: none) and
#: ``cpu.cfs_period_us`` in this folder.
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")


def usable_cpus() -> int:
    """The cores this process may run on: those its CPU affinity allows (``taskset``),
    fewer when a cgroup CPU quota (a container's ``--cpus``; cgroup v2, else v1) grants
    less time than that, and at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        cores = min(cores, max(1, int(quota + 0.5)))
    return max(1, cores)


def _cgroup_cpus() -> float | None:
    """Cores' worth of time this process's cgroup grants (1.5 for ``--cpus 1.5``), or
    ``None`` for no quota, or none that can be read."""
    try:
        quota, period = CGROUP_CPU_MAX.read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (CGROUP_V1_CPU / "cpu.cfs_quota_us").read_text().strip()
            period = (CGROUP_V1_CPU / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        granted, every = int(quota), int(period)
    except ValueError:
        return None  # "max", or unreadable
    return granted / every if granted > 0 and every > 0 else None


#: Bytes of input a worker process reads and compresses at a time...
CHUNK_BYTES = 1 << 20
#: ...once past the start of the file, whose pieces are smaller, from this size up
#: (see :func:`ctxcli.jsonio.chunks`): there most texts are new, and what one worker
#: learns from them reaches the others sooner.
FIRST_CHUNK_BYTES = 1 << 17
#: Inputs smaller than this (bytes) are compressed in this process when ``jobs`` is
#: automatic: starting workers costs more than they save.
POOL_MIN_BYTES = 8_000_000

_WORKER: Compressor | None = None


def compress_record(
    compressor: Compressor,
    item: jsonio.Record,
    path: str,
    encode: Callable[[Any], bytes] = jsonio.dumps,
) -> _Outcome:
    """What one input record becomes, with no side effect: ``(tally, output bytes or
    None when unchanged, error)`` (see :meth:`Compressor._attempt`). The one per-record
    path of every engine: in this process, ``--jobs`` workers and Ray tasks
    (:mod:`ctxcli.ray_engine`); :meth:`Compressor._book` turns it into stats, warnings
    and store entries."""
    return compressor._attempt(item, path, encode)


def _start_worker(compressor: Compressor) -> None:
    """Runs first in each worker process: the (forked) compressor it works with; its
    memos start keeping what they learn for the other workers."""
    global _WORKER
    _WORKER = compressor
    memo.share(compressor.counter.text)  # its own, whatever counter was made since
    memo.track()


def _piece(task: tuple[str, int, int, int, int]) -> Piece:
    """In a worker: read one piece of the input and compress its records."""
    path, fd, start, end, first_line = task
    assert _WORKER is not None
    done = _WORKER.piece(jsonio.read_chunk(fd, start, end, first_line), path)
    done.size = end - start
    return done


def _pieces_in(stream: BinaryIO) -> int:
    """About how many pieces :meth:`Compressor._pieces` cuts the open file into (1 or
    more): no more workers than that are started."""
    size, start, pieces = os.fstat(stream.fileno()).st_size, 0, 0
    sizes = _piece_sizes()
    while start < size:
        start += jsonio.piece_size(start, *sizes)
        pieces += 1
    return max(1, pieces)


def _piece_sizes() -> tuple[int, int]:
    """``(size, first)`` for :func:`ctxcli.jsonio.chunks`: the pieces' sizes in bytes."""
    return CHUNK_BYTES, min(FIRST_CHUNK_BYTES, CHUNK_BYTES)


def _news(piece: Piece) -> dict[str, memo.Results] | None:
    """What a piece's worker learned, for the other workers (taken out of the piece)."""
    learned, piece.learned = piece.learned, {}
    return learned or None


def whole_file_format(
    format: ModuleType | None, shape: str, items: Iterator[jsonio.Record], path: str
) -> tuple[ModuleType | None, Iterator[jsonio.Record]]:
    """The whole-file format the records of ``path`` (of ``shape``, see
    :func:`ctxcli.jsonio.read_records`) are, when they are one conversation rather
    than a conversation each (a Claude Code session, a Codex rollout, a Gemini
    checkpoint: see :mod:`ctxcli.formats`): ``format`` when forced, else found by
    :func:`ctxcli.formats.detect_file` from the first records; ``None`` otherwise.
    Returns that and the records, the first ones included."""
    if format is not None:
        return (format if getattr(format, "WHOLE_FILE", False) else None), items
    if shape not in ("jsonl", "array"):
        return None, items
    head = list(itertools.islice(items, formats.HEAD_RECORDS))
    found = formats.detect_file([item.peek(path) for item in head])
    return found, itertools.chain(head, items)


def _progress(path: str) -> Any:
    from tqdm import tqdm

    total = os.path.getsize(path) if path != "-" else None
    return tqdm(total=total, unit="B", unit_scale=True, desc=Path(path).name, leave=False)


def _tracked(items: Iterator[jsonio.Record], bar: Any) -> Iterator[jsonio.Record]:
    for item in items:
        if bar is not None:
            bar.update(len(item.raw or b"") + 1)
        yield item


def _already_broken(
    place: str, conversation: Conversation, module: ModuleType, problems: list[str]
) -> str:
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    return (
        f"{place}: conversation {conversation.label} already breaks the {module.NAME} rules "
        f"in the input ({shown}); compressed as it is, not repaired"
    )


def _session_lines(
    events: list[Any],
    out: list[Any],
    raw_of: dict[int, bytes],
    bad_before: dict[int, list[bytes]],
) -> Iterator[tuple[bytes, bool]]:
    """A session's output lines: each event of ``out`` as the bytes it was read from
    (else its JSON, changed), the bad lines kept with ``on_error: keep`` in their
    places before the events they stood before."""
    position = {id(event): e for e, event in enumerate(events)}
    for event in out:
        at = position.get(id(event))
        for bad in bad_before.pop(at, []) if at is not None else []:
            yield bad, False
        read_as = raw_of.get(id(event))
        yield (read_as, False) if read_as is not None else (jsonio.dumps(event), True)
    for raws in bad_before.values():
        for raw in raws:
            yield raw, False


def _fell_back(place: str, conversation: Conversation, fallback: Fallback) -> str:
    by = f"the {fallback.stage} stage" if fallback.stage else "the pipeline"
    return (
        f"{place}: conversation {conversation.label}: {by} broke a rule ({fallback.rule}); "
        f"written {fallback.written}"
    )


def _place(item: jsonio.Record) -> dict[str, int]:
    return {"record": item.index} if item.index is not None else {"line": item.line or 0}


def _reason(problem: str) -> str:
    """A problem without the position it names ("message 3: x" -> "x")."""
    return problem.partition(": ")[2] or problem
