"""The ``window`` stage: keep the most recent messages, whole units only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ctxcli.model import Conversation, pinned, units
from ctxcli.stages._common import keep_only
from ctxcli.tokens import REPLY_PRIMING

if TYPE_CHECKING:
    from ctxcli.stages.base import Context


@dataclass(frozen=True)
class Window:
    """Keep at most ``keep_last`` non-system messages from the end, fewer when the
    budget (tokens) needs it; drop the rest.

    A tool call and its results count and go together, so the window never starts
    inside a group. System messages, the latest user message and the last unit are
    always kept (they may exceed ``keep_last`` or the budget; the pipeline then
    reports the conversation over budget). The window grows from the end and stops at
    the first unit that does not fit, so what is kept is contiguous apart from those.
    """

    name: ClassVar[str] = "window"
    fits_budget: ClassVar[bool] = True
    keep_last: int = 10

    def __post_init__(self) -> None:
        if self.keep_last < 0:
            raise ValueError("keep_last must be 0 or more")

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        messages = conversation.messages
        groups = units(messages)
        must = pinned(messages, groups)
        keep = set(must)
        used = sum(messages[i].tokens for i in keep) + REPLY_PRIMING + conversation.extra_tokens
        count = sum(1 for i in keep if not messages[i].is_system)
        budget = context.max_tokens
        for group in reversed(groups):
            if keep.issuperset(group):
                continue
            cost = sum(messages[i].tokens for i in group)
            if count + len(group) > self.keep_last or (budget is not None and used + cost > budget):
                break
            keep.update(group)
            used += cost
            count += len(group)
        return keep_only(conversation, keep, groups, must)
