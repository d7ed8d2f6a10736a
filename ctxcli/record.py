"""Compress one record: read it in its format, run the pipeline, check the output
against the format's rules and write it back, with no state kept between records.

:func:`compress_record` is the one per-record path of every engine (this process,
``--jobs`` workers, Ray tasks); :func:`compress_session` is the same for a file of a
whole-file format, one conversation for the file. Both take a :class:`Recipe`, what
every record of a run shares, and return what happened as data: the caller (a driver
of :mod:`ctxcli.drivers`) counts it, warns and stores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ctxcli import formats, jsonio
from ctxcli.config import Settings
from ctxcli.errors import ConfigError, InputError, InvariantError, OutputError, where
from ctxcli.formats.base import Format, WholeFile
from ctxcli.model import Conversation, Message
from ctxcli.pipeline import STAGES, Context, Result, Stage, run
from ctxcli.problems import Problem
from ctxcli.stages.placeholder import settle_store
from ctxcli.stats import Fallback, FileStats, Tally
from ctxcli.tokens import NullCounter, TokenCounter

if TYPE_CHECKING:
    from ctxcli.score import ConversationScore

_NO_COUNT = NullCounter()
#: One input record after the pipeline, from any thread or process: its tally with its
#: output bytes (``None`` when unchanged), or the error it gave.
Outcome = tuple["Tally | None", "bytes | None", "InputError | InvariantError | None"]
#: What :func:`book` passes on, in order: a warning, or the originals that placeholders
#: replaced with the place of their record.
Note = str | tuple[dict[str, Any], str]


@dataclass(frozen=True)
class Recipe:
    """What compressing any record of a run takes: the ``settings`` (stages, budget,
    ``messages_key``), the token ``counter``, the stages' shared ``context``, the
    ``format`` forced by the settings (``None``: found per record) and whether to
    measure fact retention (``score``, :mod:`ctxcli.score`)."""

    settings: Settings
    counter: TokenCounter
    context: Context
    format: Format | None = None
    score: bool = False

    @property
    def encoding(self) -> str:
        """The name of the run's tiktoken encoding."""
        return self.counter.encoding_name

    def measure(self, result: Result) -> ConversationScore | None:
        """``result``'s fact retention, when asked for."""
        if not self.score:
            return None
        from ctxcli.score import score  # only for a run that asks for it

        return score(result.before, result.after, budget=self.settings.max_tokens)

    def as_read(self, conversation: Conversation) -> Result:
        """``conversation`` written as it was read, for :func:`contain`."""
        return Result(conversation, conversation, {}, self.context.over(conversation))


def read(
    recipe: Recipe, record: Any, *, path: str = "<input>", line: int = 0
) -> tuple[formats.Found, Conversation]:
    """Read one parsed record in its format (forced, else found: see
    :func:`ctxcli.formats.find`): where its messages are, and the conversation.

    Raises :class:`InputError` for a bad record or one no format fits.
    """
    key = recipe.settings.messages_key
    found = formats.find(record, key, recipe.format)
    if found is None:
        raise InputError(path, line, formats.no_fit(record, key))
    try:
        return found, found.read(record, recipe.counter, path=path, line=line)
    except (LookupError, TypeError):  # a --messages-key path that leads nowhere
        raise InputError(path, line, formats.no_fit(record, key)) from None


def compress_record(
    recipe: Recipe,
    item: jsonio.Record,
    path: str,
    encode: Callable[[Any], bytes] = jsonio.dumps,
) -> Outcome:
    """Parse, compress, write and check one record, on any thread or worker process
    (warnings wait in the tally). A bad record gives an error instead; an output that
    would break the transcript rules is never written: :func:`contain` writes a safer
    plan's. ``encode`` turns the written record into its output bytes and may refuse
    it, as the check does (a Parquet column that cannot hold it:
    :meth:`ctxcli.parquet.Source.encode`). Returns ``(tally, output bytes or None when
    unchanged, error)``."""
    place = where(path, item.line, item.index)
    try:
        record = item.parse(path)
        found, conversation = read(recipe, record, path=path, line=item.line or 0)
        broken = found.problems(record, conversation)
    except InputError as exc:
        return None, None, InputError(path, item.line, exc.reason, record=item.index)

    def attempt(stages: Sequence[Stage]) -> tuple[Result, bytes | None]:
        result = settle_store(run(conversation, stages, recipe.context))
        if not result.changed:
            return result, None
        written = found.write(record, result.after)
        check(found, record, written, result, place, broken)
        return result, encode(written)

    result, out, fallback = contain(
        recipe.settings.stages, attempt, lambda: (recipe.as_read(conversation), None)
    )
    if broken:
        result.warnings.append(already_broken(place, conversation, found.format, broken))
    if fallback is not None:
        result.warnings.append(fell_back(place, conversation, fallback))
    tally = Tally.of(result, broken, fallback, found.implicit, recipe.measure(result))
    return tally, out, None


def book(
    settings: Settings,
    item: jsonio.Record,
    outcome: Outcome,
    path: str,
    stats: FileStats,
    note: Callable[[Note], None],
) -> tuple[bytes, bool]:
    """Count one record's :func:`compress_record` outcome in ``stats`` and give its
    output line and whether it changed. Warnings and originals to store go to
    ``note``, in order. Raises the record's error unless ``on_error`` is ``keep``."""
    tally, out, error = outcome
    as_read = item.raw if item.raw is not None else jsonio.dumps(item.value)
    if error is not None or tally is None:
        assert error is not None
        if settings.on_error != "keep":
            raise error
        reason = error.reason if isinstance(error, InputError) else str(error)
        stats.add_entry("errors", {**place_of(item), "reason": reason})
        note(f"{error} (copied unchanged)")
        return as_read, False
    for text in tally.warnings:
        note(text)
    stats.add(tally, place_of(item))
    if tally.stored:
        note((tally.stored, where(path, item.line, item.index)))
    named = f" {tally.id}" if tally.id is not None else ""
    over = over_budget(settings, where(path, item.line, item.index), f"conversation{named}", tally)
    if over:
        note(over)
    return (out, True) if out is not None else (as_read, False)


def over_budget(settings: Settings, place: str, what: str, tally: Tally) -> str | None:
    """The warning for a conversation left over budget, or ``None``: when it fits, and
    when no stage that could fit it ran (``--stages placeholder`` alone drops nothing,
    so there is nothing to warn about: the stats still list it). It says what was left:
    only what must be kept, or the classes a ``--priority-order`` spares."""
    if not tally.over_budget or not any(
        getattr(STAGES.get(name), "fits_budget", True) for name in tally.events
    ):
        return None
    spared = [c for stage in settings.stages for c in getattr(stage, "spared", ())]
    why = (
        f"(--priority-order never drops {', '.join(spared)} units)"
        if spared
        else "with only what must be kept"
    )
    return f"{place}: {what} is over budget: {tally.tokens[1]} tokens > {settings.max_tokens} {why}"


def place_of(item: jsonio.Record) -> dict[str, int]:
    """Where ``item`` is, for the stats' lists: its ``record`` index or ``line``."""
    return {"record": item.index} if item.index is not None else {"line": item.line or 0}


@dataclass(frozen=True)
class Session:
    """A whole-file session after :func:`compress_session`: the ``conversation`` read,
    the rules its input already ``broke``, the pipeline's ``result``, the events to
    write (``out``) and the ``fallback`` taken, if any."""

    conversation: Conversation
    broke: list[Problem]
    result: Result
    out: list[Any]
    fallback: Fallback | None


def compress_session(
    recipe: Recipe, events: list[Any], lines: list[int], path: str, format: WholeFile
) -> Session:
    """Read the events of a whole-file ``format`` (their ``lines``) as one
    conversation, run the pipeline and write them back, checked as
    :func:`compress_record` checks a record. Raises :class:`InputError` for events the
    format cannot read."""
    conversation = formats.read_file(format, events, recipe.counter, path=path, lines=lines)
    broken = format.problems(events, conversation)

    def attempt(stages: Sequence[Stage]) -> tuple[Result, list[Any]]:
        result = settle_store(run(conversation, stages, recipe.context))
        if not result.changed:
            return result, events
        out = format.write(events, result.after)
        check(formats.Found(format), events, out, result, path, broken)
        return result, out

    result, out, fallback = contain(
        recipe.settings.stages, attempt, lambda: (recipe.as_read(conversation), events)
    )
    return Session(conversation, broken, result, out, fallback)


def check(
    at: formats.Found,
    record: Any,
    out: Any,
    result: Result,
    place: str,
    known: list[Problem] | None = None,
) -> None:
    """Raise :class:`InvariantError` when ``out`` breaks a rule of its format (read
    where ``at`` says) that the input ``record`` kept (compared by rule and detail,
    since positions move); ``known``: the input's problems, when already found."""
    format = at.format
    if format.writes_as_read(result.after):
        # The writer put the neutral messages in as they are: reading them back
        # would give ``result.after`` again, numbered by output position.
        written = result.after.with_messages(
            [Message(m.data, m.tokens, i) for i, m in enumerate(result.after.messages)]
        )
    else:
        try:  # the rules need no token counts: count nothing
            written = at.read(out, _NO_COUNT, path=place, line=0)
        except InputError as exc:
            problem = Problem("unreadable-output", f"output could not be read back: {exc.reason}")
            raise InvariantError(f"{place}: {problem}", (problem,)) from None
    found = _new(
        at.problems(out, written),
        lambda: at.problems(record, result.before) if known is None else known,
    )
    found += format.kept_problems(result.before, result.after)
    if found:
        raise InvariantError(
            f"{place}: conversation {result.after.label}: output would break the "
            f"{format.NAME} rules: " + "; ".join(map(str, found)),
            tuple(found),
        )


def _new(broken: list[Problem], known: Callable[[], list[Problem]]) -> list[Problem]:
    """The problems of ``broken`` beyond those ``known()`` lists (asked only when
    ``broken`` is not empty), compared by rule and detail: positions move."""
    if not broken:
        return []
    kept = Counter(p.anywhere for p in known())
    found = []
    for problem in broken:
        if kept[problem.anywhere]:
            kept[problem.anywhere] -= 1
        else:
            found.append(problem)
    return found


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
        return "; ".join(map(str, error.problems))
    return f"{type(error).__name__}: {error}"


def already_broken(
    place: str, conversation: Conversation, format: Format, problems: list[Problem]
) -> str:
    """The warning for a conversation whose input already breaks ``format``'s rules."""
    shown = "; ".join(map(str, problems[:3])) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    return (
        f"{place}: conversation {conversation.label} already breaks the {format.NAME} rules "
        f"in the input ({shown}); compressed as it is, not repaired"
    )


def fell_back(place: str, conversation: Conversation, fallback: Fallback) -> str:
    """The warning for a conversation written by a safer plan (see :func:`contain`)."""
    by = f"the {fallback.stage} stage" if fallback.stage else "the pipeline"
    return (
        f"{place}: conversation {conversation.label}: {by} broke a rule ({fallback.rule}); "
        f"written {fallback.written}"
    )
