"""What a run tells about its files: a :class:`Tally` per compressed conversation, a
:class:`FileStats` per input file (the stats file's content), and the
:class:`Fallback` written when a conversation's pipeline broke a rule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxcli.pipeline import Result
from ctxcli.problems import Problem

if TYPE_CHECKING:
    from ctxcli.score import ConversationScore, FileScore

#: Entries each stats list (over budget, errors, input problems, fallbacks) holds; the
#: rest are counted under ``not_listed``.
LISTED_MAX = 10_000
#: The stats' lists of conversations, each bounded by :data:`LISTED_MAX`.
LISTS = ("over_budget", "errors", "input_problems", "fallbacks")


@dataclass(frozen=True, slots=True)
class Tally:
    """What one compressed conversation adds to the stats, without the conversation
    itself: its ``id`` and ``line``, message and token counts before and after (tokens
    as :attr:`Conversation.tokens`), per role
    ``[messages before, tokens before, messages after, tokens after]``, the stages'
    events, whether it stayed over budget, the originals its placeholders replaced, its
    warnings, the format rules its input already broke (``input_problems``) and, when its
    pipeline broke a rule and a safer plan was written instead, what happened
    (``fallback``, see :func:`ctxcli.record.contain`); ``messages_key``, the well-known key its
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
    input_problems: tuple[Problem, ...] = ()
    fallback: Fallback | None = None
    messages_key: str | None = None
    score: ConversationScore | None = None

    @classmethod
    def of(
        cls,
        result: Result,
        input_problems: Iterable[Problem] = (),
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
    """What :func:`ctxcli.record.contain` wrote for a conversation whose pipeline broke a rule or
    raised: the ``stage`` that broke it (``None`` when no one stage can be named), the
    ``rule`` (the broken rules as people read them, or what the stage raised) and what
    was ``written`` instead: ``"without <stage>"``, or ``"as read"``."""

    stage: str | None
    rule: str
    written: str

    def to_json(self) -> dict[str, Any]:
        """The entry of the stats' ``fallbacks`` list, besides the conversation's place."""
        return {"stage": self.stage, "rule": self.rule, "written": self.written}


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
                "input_problems",
                {"id": tally.id, **at, "problems": [str(p) for p in tally.input_problems]},
            )
        if tally.fallback is not None:
            self.add_entry("fallbacks", {"id": tally.id, **at, **tally.fallback.to_json()})
        if tally.messages_key is not None:
            self.messages_keys[tally.messages_key] += 1
        if tally.score is not None:
            self.score = self.score or _file_score(self.input, self.output)
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
        """Add the conversation, message, token (and out-of-context), role and stage
        counts and the over-budget, error and input-problem lists of ``other``, the
        stats of a later part of the same file (a worker process's piece). Warnings,
        store, model use and time are the whole file's, filled in at its end."""
        for name in (
            "conversations",
            "changed",
            "messages_before",
            "messages_after",
            "tokens_before",
            "tokens_after",
            "out_of_context",
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
            self.score = self.score or _file_score(self.input, self.output)
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


def _file_score(path: str, compressed: str) -> FileScore:
    """An empty :class:`ctxcli.score.FileScore` (imported only by a run that scores)."""
    from ctxcli.score import FileScore

    return FileScore(path, compressed)
