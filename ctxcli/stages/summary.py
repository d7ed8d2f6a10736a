"""The ``summary`` stage: fold older messages into one summary message."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from ctxcli.errors import SummaryError
from ctxcli.model import (
    SUMMARY_MARKER,
    Conversation,
    Message,
    latest_turn,
    units,
)
from ctxcli.summarizers.extractive import Extractive, language, message_text
from ctxcli.tokens import REPLY_PRIMING

if TYPE_CHECKING:
    from ctxcli.pipeline import Context

#: The fewest tokens a summary body is given, even when the kept messages already
#: fill the budget (the priority stage may then drop the summary).
MIN_SUMMARY_TOKENS = 32
_FOLDED = re.compile(r"(\d+) earlier messages? folded|已折叠较早的 (\d+) 条消息")
_EXTRACTIVE = Extractive()


@dataclass(frozen=True)
class Summary:
    """When the conversation is over budget, replace the messages older than the last
    ``keep_last`` with one summary message right after the leading system messages.

    Never folds a system message (one found among the older messages stays where it
    is) or the latest user turn (:func:`ctxcli.model.latest_turn`). What comes after
    that turn is folded only in an agent run, where more than ``keep_last`` non-system
    messages follow it (the user gave one task, the agent then made many tool calls):
    then the steps before the last ``keep_last`` are folded too, whole units only, the
    kept tail opening with a unit that is not a tool result, and the one summary
    stands right after the latest user turn (system prompt, task, summary of what came
    before and after the task up to the tail, the tail); the last unit is always kept.
    Not for formats whose turns alternate (ShareGPT), where the summary would be a
    second user turn in a row, nor when the latest turn opens with an assistant call
    (Anthropic tool results read beside the user's text). An earlier ctxcli summary
    among the folded messages is merged into the new one, never stacked. ``max_tokens``
    bounds the summary body (tokens), and so does what is left of the budget.

    ``role`` is ``user`` by default: several providers reject a system message after
    the first. With ``user``, a summary before the latest user turn comes with a kept
    tail that does not start with a user message (older user messages are folded too),
    so no two user messages meet; one after the turn follows the user's task, which
    OpenAI accepts and the Anthropic Messages API merges into one user turn.
    """

    name: ClassVar[str] = "summary"
    keep_last: int = 6
    role: Literal["user", "system"] = "user"
    max_tokens: int = 400

    def __post_init__(self) -> None:
        if self.role not in ("user", "system"):
            raise ValueError(f"role must be 'user' or 'system', not {self.role!r}")
        if self.keep_last < 0 or self.max_tokens < 1:
            raise ValueError("keep_last must be 0 or more and max_tokens 1 or more")

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        if not context.over(conversation):
            return conversation, {}
        messages = conversation.messages
        groups = units(messages)
        turn = latest_turn(messages, groups)
        frame = context.counter.message({"role": self.role, "content": ""})
        lead = 0
        while lead < len(messages) and messages[lead].is_system:
            lead += 1
        steps_start = self._steps_start(conversation, groups, turn)
        steps = steps_start is not None
        start = self._tail_start(messages, groups, turn) if steps_start is None else steps_start
        if context.max_tokens is not None:
            start = self._make_room(
                conversation, start, groups, turn, frame, context.max_tokens, steps=steps
            )
        # One summary: after the leading system messages, or, once steps after the
        # latest user turn are folded, right after that turn, so the task is read before
        # the steps it led to (what came before the task goes into the same summary).
        place = turn[-1] + 1 if steps else lead
        kept_turn = set(turn) if steps else set()
        fold = {i for i in range(lead, start) if not messages[i].is_system and i not in kept_turn}
        folded = [messages[i] for i in sorted(fold)]
        earlier = [m for m in folded if m.is_summary]
        fresh = [m for m in folded if not m.is_summary]
        if not fresh:
            return conversation, {}
        rest = [m for i, m in enumerate(messages) if i not in fold]
        bound = self.max_tokens
        if context.max_tokens is not None:
            left = context.max_tokens - sum(m.tokens for m in rest) - REPLY_PRIMING
            left -= conversation.extra_tokens + frame
            bound = max(MIN_SUMMARY_TOKENS, min(bound, left))
        previous = "\n".join(_body(m) for m in earlier) or None
        count = len(fresh) + sum(_folded_count(m) for m in earlier)
        events = {"messages_summarized": len(fresh), "summaries_written": 1}
        if earlier:
            events["summaries_merged"] = len(earlier)
        counter = context.counter
        # The header is in the body's language, foreseen from the folded text (the
        # extractive summarizer writes in it); its cost is reserved before the body.
        foreseen = language([previous or "", *(message_text(m.data) for m in fresh)])
        header_cost = counter.text(_header(count, foreseen)) + 1
        folded_dicts = [m.data for m in fresh]
        body_bound = max(1, bound - header_cost)
        summarizer = context.summarizer or _EXTRACTIVE
        try:
            body = summarizer.summarize(
                folded_dicts, previous=previous, max_tokens=body_bound, counter=counter
            )
        except SummaryError as exc:
            if summarizer is _EXTRACTIVE:
                raise
            context.warnings.append(
                f"conversation {conversation.label}: summary failed ({exc}); "
                "used the extractive summary instead"
            )
            events["fallbacks"] = 1
            body = _EXTRACTIVE.summarize(
                folded_dicts, previous=previous, max_tokens=body_bound, counter=counter
            )
        if not body.strip():
            # Nothing worth keeping fits: a summary would only hide what was dropped.
            return conversation, {"summaries_skipped": 1}
        header = _header(count, language([body]))
        if counter.text(header) + 1 > header_cost:  # a model wrote in another language
            header = _header(count, foreseen)
        data = {"role": self.role, "content": f"{header}\n{body}" if body else header}
        summary = Message(data, counter.message(data), None, True)
        out: list[Message] = []
        for i, message in enumerate(messages):
            if i == place:
                out.append(summary)
            if i not in fold:
                out.append(message)
        if steps:
            after = [i for i in fold if i > turn[-1] and not messages[i].is_summary]
            events["steps_summarized"] = len(after)
        return conversation.with_messages(out), events

    def _make_room(
        self,
        conversation: Conversation,
        start: int,
        groups: list[list[int]],
        turn: list[int],
        frame: int,
        budget: int,
        *,
        steps: bool = False,
    ) -> int:
        """A later tail start when what is kept from ``start`` on leaves no room for a
        summary: the first unit start (up to the latest user turn, or up to the last
        unit when ``steps`` after that turn are folded) whose kept part plus a summary
        of :func:`_reserve` tokens and its ``frame`` fits ``budget`` (tokens), else the
        latest one. Folding more beats keeping a tail whole and then dropping units
        unsummarized."""
        messages = conversation.messages
        if steps:
            candidates = [g[0] for g in groups if g[0] >= start and _opens_tail(messages[g[0]])]
        else:
            limit = turn[0] if turn else len(messages) - 1
            candidates = [
                g[0]
                for g in groups
                if start <= g[0] <= limit
                and not (self.role == "user" and messages[g[0]].role == "user")
            ]
        if not candidates:
            return start
        fixed = REPLY_PRIMING + conversation.extra_tokens + frame
        fixed += _reserve(self.max_tokens, budget)
        kept_after = [0] * (len(messages) + 1)  # tokens of messages[i:]
        for i in range(len(messages) - 1, -1, -1):
            kept_after[i] = kept_after[i + 1] + messages[i].tokens
        systems_before = [0]  # tokens of the system messages before i (kept, not folded)
        for message in messages:
            systems_before.append(systems_before[-1] + (message.tokens if message.is_system else 0))
        for candidate in candidates:
            # With steps folded, the latest user turn is kept before the tail.
            turn_before = sum(
                messages[i].tokens for i in turn if i < candidate and not messages[i].is_system
            )
            if systems_before[candidate] + turn_before + kept_after[candidate] + fixed <= budget:
                return candidate
        return candidates[-1]

    def _steps_start(
        self, conversation: Conversation, groups: list[list[int]], turn: list[int]
    ) -> int | None:
        """Position of the first kept message when steps after the latest user turn are
        folded as well, else ``None`` (fold as before it only).

        They are when more than ``keep_last`` non-system messages follow that turn (a
        single-task agent run: one user message, then many tool calls): the tail is the
        last ``keep_last`` of them, moved back to the start of a unit that does not open
        with a tool result or a summary, and always holds the last unit. Not for formats
        whose turns must alternate (``conversation.alternating``: the summary would be a
        second user turn in a row), nor when the latest turn opens with other messages
        than the user's own (an Anthropic tool result read beside the user's text),
        which would then open the output.
        """
        messages = conversation.messages
        if conversation.alternating or not turn or messages[turn[0]].role != "user":
            return None
        after = turn[-1] + 1
        steps = [i for i in range(after, len(messages)) if not messages[i].is_system]
        if len(steps) <= self.keep_last:
            return None
        first = steps[-self.keep_last] if self.keep_last else len(messages)
        starts = [g[0] for g in groups if after < g[0] <= first and _opens_tail(messages[g[0]])]
        return starts[-1] if starts else None

    def _tail_start(
        self, messages: Sequence[Message], groups: list[list[int]], turn: list[int]
    ) -> int:
        """Position of the first kept message: the last ``keep_last`` non-system
        messages, moved back to a unit's start and never past the latest user turn."""
        unit_start = {}
        for group in groups:
            for i in group:
                unit_start[i] = group[0]
        others = [i for i, m in enumerate(messages) if not m.is_system]
        if not others:
            return len(messages)
        start = others[-self.keep_last] if 0 < self.keep_last <= len(others) else others[0]
        if self.keep_last == 0:
            start = len(messages)
        turn_start = turn[0] if turn else len(messages)
        start = min(start, turn_start)
        start = unit_start.get(start, start)
        if self.role == "user":
            starts = [g[0] for g in groups]
            # Fold older user messages too, so the tail does not open with one ...
            while start < turn_start and messages[start].role == "user":
                start = next((s for s in starts if s > start), len(messages))
            # ... but the latest user message is never folded: keep one unit more.
            while start < len(messages) and messages[start].role == "user":
                earlier = [s for s in starts if s < start]
                if not earlier:
                    break
                start = earlier[-1]
        return start


def _reserve(summary_max: int, budget: int) -> int:
    """Tokens the tail must leave for the summary: an eighth of the budget, at least
    twice :data:`MIN_SUMMARY_TOKENS`, at most the summary's own bound."""
    return min(summary_max, max(2 * MIN_SUMMARY_TOKENS, budget // 8))


def _opens_tail(message: Message) -> bool:
    """True when a kept tail after a folded step may open with ``message``: not a tool
    or function result (its call would be folded), not an earlier summary (which is
    merged, never stacked)."""
    return not message.is_summary and message.role not in ("tool", "function")


def _body(message: Message) -> str:
    content = str(message.data.get("content") or "")
    return content.split("\n", 1)[1] if "\n" in content else ""


def _folded_count(message: Message) -> int:
    match = _FOLDED.search(str(message.data.get("content") or ""))
    if not match:
        return 1
    return int(match.group(1) or match.group(2))


def _header(count: int, lang: str) -> str:
    """A summary's first line (what :data:`ctxcli.model.SUMMARY_MARKER` starts and a
    later run recognises it by), in English or Chinese."""
    if lang == "zh":
        return f"{SUMMARY_MARKER} 已折叠较早的 {count} 条消息。"
    return f"{SUMMARY_MARKER} {count} earlier message{'' if count == 1 else 's'} folded."
