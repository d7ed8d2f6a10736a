"""The stage protocol and the :class:`Context` every stage shares: a leaf module,
imported by the stages, the registry (:mod:`ctxcli.stages`) and the pipeline alike.

A stage is a small frozen dataclass of its options with one method::

    apply(conversation, context) -> (conversation, events)

where ``events`` counts what it did (``{"messages_dropped": 3}``) for the stats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ctxcli.model import Conversation
from ctxcli.tokens import TokenCounter

if TYPE_CHECKING:
    from ctxcli.summarizers import Summarizer


@dataclass
class Context:
    """What every stage shares for a run: the budget (tokens per conversation, ``None``
    for no budget), the token counter and the summarizer, and the tools whose results
    and call arguments no stage turns into placeholders (``whole_tools``: the
    placeholder stage's ``exclude_tools``, which the summary stage's compaction of the
    kept tail keeps to as well).

    ``stored`` (originals a stage replaced restorably, ``{id: content}``) and
    ``warnings`` belong to one conversation: :func:`ctxcli.pipeline.run` gives each its
    own, so runs on several threads never mix them, and moves them onto the
    :class:`ctxcli.pipeline.Result`.
    """

    max_tokens: int | None
    counter: TokenCounter
    summarizer: Summarizer | None = None
    whole_tools: frozenset[str] = frozenset()
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
