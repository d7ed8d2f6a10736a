"""The ``summary`` stage: fold older messages into summary messages."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ctxcli.errors import SummaryError
from ctxcli.model import (
    SEAL_DIGITS,
    SUMMARY_MARKER,
    Conversation,
    Message,
    latest_turn,
    seal,
    units,
)
from ctxcli.stages.placeholder import parse as parse_placeholder
from ctxcli.summarizers.extractive import EXTRACTIVE, language, message_text
from ctxcli.tokens import REPLY_PRIMING

if TYPE_CHECKING:
    from ctxcli.pipeline import Context

#: What a summary's seal adds to its header line, costed before the seal is known.
_SEAL_LIKE = " #" + "0" * SEAL_DIGITS
#: The fewest tokens a summary body is given, even when the kept messages already
#: fill the budget (the priority stage may then drop the summary).
MIN_SUMMARY_TOKENS = 32
_FOLDED = re.compile(r"(\d+) earlier messages? folded|已折叠较早的 (\d+) 条消息")
_EXTRACTIVE = EXTRACTIVE


@dataclass(frozen=True)
class Summary:
    """When the conversation is over budget, fold older messages into summaries, each
    standing where its messages were, so the output reads in the order things happened.

    Before the latest user turn (:func:`ctxcli.model.latest_turn`), the messages older
    than the last ``keep_last`` are folded into one summary right after the leading
    system messages. After that turn, steps are folded only in an agent run, where more
    than ``keep_last`` non-system messages follow it (the user gave a task, the agent
    then made many tool calls): the steps before the last ``keep_last`` go, whole units
    only, the kept tail opening with a unit that is not a tool result, into a second
    summary right after the turn; the last unit is always kept. So a chat gets one
    summary after the system prompt, a single-task run (nothing before the task) one
    after the task, and a run after a chat both: system prompt, what led to the task,
    what the task answers (kept while it fits), the task, its folded steps, the tail.
    A system message is never folded (one among the older messages stays where it is),
    nor is the latest user turn. Steps are not folded for formats whose turns alternate
    (ShareGPT), where the summary would be a second user turn in a row, nor when the
    latest turn opens with an assistant call (Anthropic tool results read beside the
    user's text). An earlier ctxcli summary among the messages folded on one side is
    merged into that side's new summary, never stacked; a side with nothing new to
    fold is left as it is, its summary included.

    ``max_tokens`` bounds the summaries together (tokens, header lines included; a
    header, about 15 tokens with the seal that closes it (:func:`ctxcli.model.seal`),
    comes whole even past a smaller bound), and so does what
    is left of the budget after the kept messages and a frame per summary; each
    summary gets a share in proportion to the tokens it folds, but at least a quarter
    and at least :data:`MIN_SUMMARY_TOKENS` (or ``max_tokens`` split between them, when
    that is less), and what the first leaves goes to the second. A summary whose body
    comes out empty is not written and its messages stay.

    ``role`` is ``user`` by default: several providers reject a system message after
    the first. With ``user``, a chat's summary comes with a kept tail that does not
    start with a user message (older user messages are folded too), so no two user
    messages meet; a steps summary follows the user's task, which OpenAI accepts and
    the Anthropic Messages API merges into one user turn, and so may the summary before
    it when the budget leaves no room for what the task answers. With ``system``, both
    summaries are system messages (in Anthropic, ShareGPT and Claude Code records a
    summary is a user message whatever ``role`` says:
    :attr:`ctxcli.model.Conversation.summary_role`): OpenAI accepts system messages
    anywhere, but chat templates that take one only as the first message (Qwen's,
    served by vLLM or llama.cpp) reject either summary, the steps summary after the
    user's task as well; keep ``user`` for those.
    """

    name: ClassVar[str] = "summary"
    fits_budget: ClassVar[bool] = True
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
        role = conversation.summary_role or self.role
        frame = context.counter.message({"role": role, "content": ""})
        lead = 0
        while lead < len(messages) and messages[lead].is_system:
            lead += 1
        start = self._tail_start(messages, groups, turn, role)
        # The steps folded after the latest user turn run from ``after`` to ``end``.
        steps_start = self._steps_start(conversation, groups, turn)
        after = turn[-1] + 1 if steps_start is not None else len(messages)
        end = after if steps_start is None else steps_start
        if context.max_tokens is not None:
            start, end = self._make_room(
                conversation, (start, after, end), groups, turn, (role, frame), context.max_tokens
            )
        # Each summary stands where its messages were: what came before the latest user
        # turn right after the leading system messages, the steps after that turn at
        # the first of them, so the task is read after what led to it and before the
        # steps it led to. A part with nothing new (an earlier summary only) stays as is.
        parts = [
            [i for i in range(lead, start) if not messages[i].is_system],
            [i for i in range(after, end) if not messages[i].is_system],
        ]
        parts = [p for p in parts if any(not messages[i].is_summary for i in p)]
        if not parts:
            return conversation, {}
        fold = {i for part in parts for i in part}
        rest = sum(m.tokens for i, m in enumerate(messages) if i not in fold)
        total = self.max_tokens
        if context.max_tokens is not None:
            left = context.max_tokens - rest - REPLY_PRIMING - conversation.extra_tokens
            total = min(total, left - frame * len(parts))
        # ``max_tokens`` bounds the bodies together: each part gets a share in proportion
        # to the tokens it folds, but at least a quarter (tool output swells the steps,
        # while the requests that led to the task are short and matter as much), and
        # what the first summary leaves goes to the second.
        weights = [sum(messages[i].tokens for i in part) for part in parts]
        events: dict[str, int] = {}
        written: dict[int, Message] = {}
        # Even with the budget all but spent a summary gets a few tokens (priority may
        # drop it then), but never more than ``max_tokens`` grants.
        floor = min(MIN_SUMMARY_TOKENS, max(1, self.max_tokens // len(parts)))
        for k, part in enumerate(parts):
            share = total
            if k < len(parts) - 1:
                share = total * weights[k] // sum(weights)
                share = min(max(share, total // 4), total - total // 4)
            folded = [messages[i] for i in part]
            summary, fell_back = self._summarize(
                conversation, folded, (role, max(floor, share)), context
            )
            _add(events, "fallbacks", int(fell_back))
            if summary is None:
                # Nothing worth keeping fits: a summary would only hide what was dropped.
                _add(events, "summaries_skipped", 1)
                continue
            total -= summary.tokens - frame
            written[part[0]] = summary
            fresh = sum(not m.is_summary for m in folded)
            _add(events, "messages_summarized", fresh)
            _add(events, "summaries_written", 1)
            _add(events, "summaries_merged", len(folded) - fresh)
            if part[0] >= after:
                events["steps_summarized"] = fresh
        if not written:
            return conversation, events
        gone = {i for part in parts if part[0] in written for i in part}
        out: list[Message] = []
        for i, message in enumerate(messages):
            if i in written:
                out.append(written[i])
            if i not in gone:
                out.append(message)
        return conversation.with_messages(out), events

    def _summarize(
        self,
        conversation: Conversation,
        folded: list[Message],
        role_bound: tuple[str, int],
        context: Context,
    ) -> tuple[Message | None, bool]:
        """One summary message of ``folded`` (earlier summaries among them merged), with
        the role and within the bound (tokens, header and seal included) of
        ``role_bound``; ``None`` when the body comes out empty.
        The flag is true when the configured summarizer failed and the extractive one
        stood in (a warning says so). Raises :class:`SummaryError` when the extractive
        summarizer fails."""
        earlier = [m for m in folded if m.is_summary]
        fresh = [_original(m.data, context.stored) for m in folded if not m.is_summary]
        previous = "\n".join(_body(m) for m in earlier) or None
        count = _entries(m for m in folded if not m.is_summary)
        count += sum(_folded_count(m) for m in earlier)
        counter = context.counter
        role, bound = role_bound
        # The header is in the body's language, foreseen as the extractive summarizer
        # picks it; its cost is reserved before the body, with the seal's.
        foreseen = _EXTRACTIVE.language_of(fresh, previous=previous)
        header_cost = counter.text(_header(count, foreseen) + _SEAL_LIKE) + 1
        body_bound = max(1, bound - header_cost)
        summarizer = context.summarizer or _EXTRACTIVE
        fell_back = False
        try:
            body = summarizer.summarize(
                fresh, previous=previous, max_tokens=body_bound, counter=counter
            )
        except SummaryError as exc:
            if summarizer is _EXTRACTIVE:
                raise
            context.warnings.append(
                f"conversation {conversation.label}: summary failed ({exc}); "
                "used the extractive summary instead"
            )
            fell_back = True
            body = _EXTRACTIVE.summarize(
                fresh, previous=previous, max_tokens=body_bound, counter=counter
            )
        if not body.strip():
            return None, fell_back
        # The extractive body is in the foreseen language (its labels say so, whatever
        # tool names it quotes); a model's body is in whatever language it wrote.
        extractive = summarizer is _EXTRACTIVE or fell_back
        header = _header(count, foreseen if extractive else language([body]))
        if counter.text(header + _SEAL_LIKE) + 1 > header_cost:  # a model wrote in
            header = _header(count, foreseen)  # another language
        data = {"role": role, "content": seal(header, body)}
        return Message(data, counter.message(data), None, True), fell_back

    def _make_room(
        self,
        conversation: Conversation,
        bounds: tuple[int, int, int],
        groups: list[list[int]],
        turn: list[int],
        role_frame: tuple[str, int],
        budget: int,
    ) -> tuple[int, int]:
        """Later ``(start, end)`` when the kept messages leave no room for the summaries.

        ``bounds`` is ``(start, after, end)``: the fold before the latest user turn ends
        at ``start``, the fold of the steps after that turn runs from ``after`` to
        ``end`` (``after == end`` when no steps are folded); ``turn`` is that turn's
        positions; ``role_frame`` the summaries' role and the tokens each costs beyond
        its text. Returns the first pair whose kept messages plus that frame per
        summary and :func:`_reserve` tokens fit ``budget`` (tokens), else the last pair:
        ``end`` is tried first, then each later unit start that may open a tail (the
        steps tail is what ``keep_last`` asks for); for each, ``start``, then each later
        unit start up to the latest user turn (what that user message answers is kept
        while it fits). Folding more beats keeping a tail whole and then dropping units
        unsummarized."""
        messages = conversation.messages
        start, after, end = bounds
        role, frame = role_frame
        steps = end > after
        limit = turn[0] if turn else len(messages) - 1
        # In a chat a user summary is never followed by a user message (see the class);
        # once steps are folded one follows the user's task anyway, so one may precede it.
        lone_user = role == "user" and not steps
        befores = [
            g[0]
            for g in groups
            if start <= g[0] <= limit and not (lone_user and messages[g[0]].role == "user")
        ] or [start]
        ends = [end]
        if steps:
            ends += [g[0] for g in groups if g[0] > end and _opens_tail(messages[g[0]])]
        pairs = [(before_end, steps_end) for steps_end in ends for before_end in befores]
        fixed = REPLY_PRIMING + conversation.extra_tokens + _reserve(self.max_tokens, budget)
        folds = [0]  # tokens of the non-system messages before position i
        fresh = [0]  # how many of them are not earlier summaries
        for message in messages:
            folds.append(folds[-1] + (0 if message.is_system else message.tokens))
            fresh.append(fresh[-1] + int(not message.is_system and not message.is_summary))
        lead = next((i for i, m in enumerate(messages) if not m.is_system), len(messages))
        whole = sum(m.tokens for m in messages)
        for before_end, steps_end in pairs:
            kept = whole + fixed
            for a, b in ((lead, before_end), (after, steps_end)):
                if b > a and fresh[b] > fresh[a]:  # a part with nothing new stays as is
                    kept -= folds[b] - folds[a] - frame
            if kept <= budget:
                return before_end, steps_end
        return pairs[-1]

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
        self, messages: Sequence[Message], groups: list[list[int]], turn: list[int], role: str
    ) -> int:
        """Position of the first kept message: the last ``keep_last`` non-system
        messages, moved back to a unit's start and never past the latest user turn nor
        the last unit (kept whatever ``keep_last`` says, with no user message too);
        ``role`` is the summary's."""
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
        start = min(start, turn_start, groups[-1][0])
        start = unit_start.get(start, start)
        if role == "user":
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


def _add(events: dict[str, int], name: str, count: int) -> None:
    if count:
        events[name] = events.get(name, 0) + count


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
    """An earlier summary's text after its header line (string or text parts)."""
    content = message_text(message.data)
    return content.split("\n", 1)[1] if "\n" in content else ""


def _entries(messages: Iterable[Message]) -> int:
    """How many messages of the input's format ``messages`` are: one per source entry
    (an Anthropic or Claude Code user entry with two tool results and text is one),
    a message without one counting alone. The summary header counts these, as a reader
    of the file would."""
    seen: set[int] = set()
    alone = 0
    for message in messages:
        if message.entry is None:
            alone += 1
        else:
            seen.add(message.entry)
    return alone + len(seen)


def _folded_count(message: Message) -> int:
    """How many messages an earlier summary's header says it folded (1 if it says
    none: then it is taken for one message)."""
    match = _FOLDED.search(message_text(message.data).split("\n", 1)[0])
    if not match:
        return 1
    return int(match.group(1) or match.group(2))


def _header(count: int, lang: str) -> str:
    """A summary's first line, in English or Chinese, before its seal (see
    :func:`ctxcli.model.seal`, by which a later run recognises the summary)."""
    if lang == "zh":
        return f"{SUMMARY_MARKER} 已折叠较早的 {count} 条消息。"
    return f"{SUMMARY_MARKER} {count} earlier message{'' if count == 1 else 's'} folded."


def _original(data: Mapping[str, Any], stored: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool result the placeholder stage replaced earlier in this run, with its
    original content back (from ``stored``), so that the summary reads what the tool
    said, not the placeholder's head and tail; any other message as it is."""
    match = parse_placeholder(data.get("content"))
    if match is None or match.group("id") not in stored:
        return data
    return {**data, "content": stored[match.group("id")]}
