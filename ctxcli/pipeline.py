"""The stage protocol, the ``STAGES`` registry and the loop that runs them.

A stage is a small frozen dataclass of its options with one method::

    apply(conversation, context) -> (conversation, events)

where ``events`` counts what it did (``{"messages_dropped": 3}``) for the stats. The
pipeline folds a conversation through the stages in order, then checks the result
against the transcript invariants (:mod:`ctxcli.invariants`) before anything is
written.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ctxcli.errors import ConfigError
from ctxcli.invariants import check
from ctxcli.model import Conversation
from ctxcli.stages.placeholder import (
    content_id,
    looks_like,
    placeholder_ids,
    placeholder_texts,
    verbatim_ids,
)
from ctxcli.tokens import TokenCounter

if TYPE_CHECKING:
    from ctxcli.summarizers import Summarizer


@dataclass
class Context:
    """What every stage shares for a run: the budget (tokens per conversation, ``None``
    for no budget), the token counter and the summarizer.

    ``stored`` (originals a stage replaced restorably, ``{id: content}``) and
    ``warnings`` belong to one conversation: :func:`run` gives each its own, so runs
    on several threads never mix them, and moves them onto the :class:`Result`.
    """

    max_tokens: int | None
    counter: TokenCounter
    summarizer: Summarizer | None = None
    warnings: list[str] = field(default_factory=list)
    stored: dict[str, Any] = field(default_factory=dict)

    def over(self, conversation: Conversation) -> bool:
        """True when ``conversation`` does not fit the budget."""
        return self.max_tokens is not None and conversation.tokens > self.max_tokens


class Stage(Protocol):
    """What a stage provides; see the module docstring."""

    name: ClassVar[str]
    #: Whether the stage can drop or fold messages to fit the budget; a conversation
    #: left over budget is warned about only when one that can has run.
    fits_budget: ClassVar[bool]

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]: ...


def _registry() -> dict[str, type[Any]]:
    from ctxcli.stages.placeholder import Placeholder
    from ctxcli.stages.priority import Priority
    from ctxcli.stages.summary import Summary
    from ctxcli.stages.window import Window

    return {cls.name: cls for cls in (Window, Placeholder, Summary, Priority)}


#: Stage name -> options dataclass. The single place a stage is registered.
STAGES: dict[str, type[Any]] = _registry()

DEFAULT_STAGES = ("placeholder", "summary", "priority")


def build_stage(name: str, options: Mapping[str, Any] | None = None) -> Stage:
    """Make stage ``name`` with ``options`` (its dataclass fields).

    Raises :class:`ConfigError` naming the known stages or the stage's known options.
    """
    try:
        cls = STAGES[name]
    except KeyError:
        known = ", ".join(sorted(STAGES))
        raise ConfigError(f"unknown stage {name!r}; known stages: {known}") from None
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options or {}) - fields)
    if unknown:
        raise ConfigError(
            f"stage {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options: {', '.join(sorted(fields))}"
        )
    try:
        stage: Stage = cls(**(options or {}))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"stage {name!r}: {exc}") from None
    return stage


@dataclass
class Result:
    """One conversation after the pipeline: the output, the input, and what happened.

    ``events`` maps stage name to its counters; ``over_budget`` is true when the output
    still exceeds the budget (it then holds only what must be kept); ``stored`` maps the
    id of each original a stage replaced restorably to that original (the store's
    content for this conversation); ``warnings`` are what the stages warned about.
    """

    before: Conversation
    after: Conversation
    events: dict[str, Counter[str]]
    over_budget: bool
    stored: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.after.messages != self.before.messages


def run(conversation: Conversation, stages: Sequence[Stage], context: Context) -> Result:
    """Fold ``conversation`` through ``stages`` and check the invariants.

    Raises :class:`ctxcli.errors.InvariantError` if the output would break a rule of
    the transcript format (a bug in a stage: such output is never written).
    """
    # Placeholder-like text the input holds where placeholders go is stored as its own
    # original, whatever the stages: restore then tells it from a placeholder whose
    # store was lost (see ctxcli.store.restore_record).
    as_read = {content_id(t): t for m in conversation.messages for t in placeholder_texts(m)}
    context = dataclasses.replace(context, warnings=[], stored=as_read)
    current = conversation
    events: dict[str, Counter[str]] = {}
    for stage in stages:
        current, done = stage.apply(current, context)
        events.setdefault(stage.name, Counter()).update(done)
    over = context.over(current)
    check(conversation, current, max_tokens=None if over else context.max_tokens)
    stored = context.stored
    if stored:  # only what the output still refers to: a later stage may drop some
        held = [placeholder_ids(m) for m in current.messages if m.changed and m.index is not None]
        as_is = [verbatim_ids(m) for m in current.messages if m.index is not None]
        kept = set().union(*held, *as_is)
        written = any(not looks_like(value) for value in stored.values())
        stored = {key: value for key, value in stored.items() if key in kept}
        if written:
            events.setdefault("placeholder", Counter())["placeholders_kept"] = sum(map(bool, held))
    return Result(conversation, current, events, over, stored, context.warnings)
