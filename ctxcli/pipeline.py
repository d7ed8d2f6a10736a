"""The loop that runs the stages: :func:`run` folds a conversation through them in
order, then checks the result against the transcript invariants
(:mod:`ctxcli.invariants`) before anything is written.

The stage protocol and :class:`Context` are in :mod:`ctxcli.stages.base`, the
registry (:data:`STAGES`, :func:`build_stage`) in :mod:`ctxcli.stages`; they are
re-exported here. What a run's placeholder store keeps is the caller's step:
:func:`ctxcli.stages.placeholder.settle_store`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxcli.invariants import check
from ctxcli.model import Conversation
from ctxcli.stages import DEFAULT_STAGES, STAGES, build_stage
from ctxcli.stages.base import Context, Stage

__all__ = ["DEFAULT_STAGES", "STAGES", "Context", "Result", "Stage", "build_stage", "run"]


@dataclass
class Result:
    """One conversation after the pipeline: the output, the input, and what happened.

    ``events`` maps stage name to its counters; ``over_budget`` is true when the output
    still exceeds the budget (it then holds only what must be kept); ``stored`` maps the
    id of each original a stage replaced restorably to that original (what the stages
    put in :attr:`Context.stored`; :func:`ctxcli.stages.placeholder.settle_store` makes
    it the store's content for this conversation); ``warnings`` are what the stages
    warned about.
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
    context = dataclasses.replace(context, warnings=[], stored={})
    current = conversation
    events: dict[str, Counter[str]] = {}
    for stage in stages:
        current, done = stage.apply(current, context)
        events.setdefault(stage.name, Counter()).update(done)
    over = context.over(current)
    check(conversation, current, max_tokens=None if over else context.max_tokens)
    return Result(conversation, current, events, over, context.stored, context.warnings)
