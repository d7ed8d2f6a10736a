"""The ``priority`` stage: drop whole units by class until the budget holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ctxcli.model import Conversation, Message, pinned, units
from ctxcli.stages._common import keep_only

if TYPE_CHECKING:
    from ctxcli.stages.base import Context

CLASSES = ("assistant", "user", "tool", "function", "summary")
#: The classes the stage drops by default, first to last.
DEFAULT_ORDER = ("assistant", "user", "tool", "summary")


@dataclass(frozen=True)
class Priority:
    """While the conversation is over budget, drop whole units, lowest class first and
    oldest first within a class. What one drop leaves unused stays unused: a unit
    dropped before a large one that alone would have been enough is not taken back,
    for at a larger budget that large one alone goes, and the unit taken back at the
    smaller budget would be lost at the larger (issue 15: a larger budget never keeps
    fewer facts; no take-back can keep to that, whatever its order).

    ``order`` lists the classes from first to drop to last. A unit's class is the role
    of its first message, so an assistant message with its tool calls and results is
    ``assistant``; a standalone ``tool`` message is ``tool``; a ctxcli summary is
    ``summary``. Classes left out of ``order`` are never dropped; system messages, the
    latest user message and the last unit never are either. When what must be kept is
    over the budget by itself, only that is left, summaries too dropped: taking them
    back there (they did, once) kept more facts at a budget too small than at one that
    fits what must be kept and no summary (77 tokens at a budget of 40, 45 at 60:
    issue 15's larger budget that never keeps fewer facts), and the over-budget
    warning's "with only what must be kept" was not so.
    """

    name: ClassVar[str] = "priority"
    fits_budget: ClassVar[bool] = True
    order: tuple[str, ...] = DEFAULT_ORDER

    def __post_init__(self) -> None:
        order = (self.order,) if isinstance(self.order, str) else tuple(self.order)
        unknown = [c for c in order if c not in CLASSES]
        if unknown:
            raise ValueError(
                f"unknown class {unknown[0]!r} in order; classes: {', '.join(CLASSES)}"
            )
        twice = next((c for k, c in enumerate(order) if c in order[:k]), None)
        if twice is not None:  # as --stages refuses a stage named twice
            raise ValueError(f"class {twice!r} is in order twice; name each once")
        object.__setattr__(self, "order", order)

    @property
    def spared(self) -> tuple[str, ...]:
        """The classes of :data:`DEFAULT_ORDER` this ``order`` leaves out, which it
        never drops (``--priority-order tool`` spares assistant, user and summary
        units)."""
        return tuple(c for c in DEFAULT_ORDER if c not in self.order)

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        if not context.over(conversation):
            return conversation, {}
        assert context.max_tokens is not None
        messages = conversation.messages
        groups = units(messages)
        must = pinned(messages, groups)
        total = conversation.tokens
        keep = set(range(len(messages)))
        for group in self._candidates(messages, groups, must):
            if total <= context.max_tokens:
                break
            keep.difference_update(group)
            total -= sum(messages[i].tokens for i in group)
        return keep_only(conversation, keep, groups, must)

    def _candidates(
        self, messages: Sequence[Message], groups: list[list[int]], must: set[int]
    ) -> list[list[int]]:
        """The units that may be dropped, in the order they go: by class (``order``),
        then oldest first."""
        rank = {cls: i for i, cls in enumerate(self.order)}
        candidates = []
        for group in groups:
            if must.intersection(group):
                continue
            head = messages[group[0]]
            cls = "summary" if head.is_summary else head.role
            if cls in rank:
                candidates.append((rank[cls], group[0], group))
        return [group for _, _, group in sorted(candidates)]
