"""The ``summary`` stage: fold older messages into summary messages."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ctxcli.errors import SummaryError
from ctxcli.model import (
    SEAL_DIGITS,
    Conversation,
    Message,
    latest_turn,
    seal,
    summary_header,
    tool_names,
    units,
)
from ctxcli.placeholders import placeholder_texts, shown_text
from ctxcli.stages import plan
from ctxcli.stages.placeholder import cleared_calls, content_id, placeholder_ids, render, widen
from ctxcli.store import with_originals
from ctxcli.summarizers.extractive import EXTRACTIVE, language, message_text

if TYPE_CHECKING:
    from ctxcli.stages.base import Context

#: What a summary's seal adds to its header line, costed before the seal is known.
_SEAL_LIKE = " #" + "0" * SEAL_DIGITS
#: The fewest tokens a summary body is given, even when the kept messages already
#: fill the budget (the priority stage may then drop the summary).
MIN_SUMMARY_TOKENS = 32
_FOLDED = re.compile(r"(\d+) earlier messages? folded|已折叠较早的 (\d+) 条消息")
_EXTRACTIVE = EXTRACTIVE
#: What the summary stage may turn into placeholders, by position: the message with
#: them, and the originals they replaced (``{id: original}``).
Compacted = dict[int, tuple[Message, dict[str, Any]]]


@dataclass(frozen=True)
class Summary:
    """When the conversation is over budget, fold older messages into summaries, each
    standing where its messages were, so the output reads in the order things happened.

    How much is folded is the budget's call (:mod:`ctxcli.stages.plan`): the verbatim
    tail is as long as fits beside the summaries' reserve, large tool results and call
    arguments in it become placeholders (naming the facts they omit) before whole
    messages are folded, and the summaries get the room that is left, so that a larger
    budget never keeps a shorter tail nor gives a summary less room. Before the latest user turn
    (:func:`ctxcli.model.latest_turn`) the oldest messages are folded first into one
    summary right after the leading system messages; then, in an agent run (the user
    gave a task, the agent then made tool calls), the steps after that turn, oldest
    first, whole units only, the kept tail opening with a unit that is not a tool
    result, into a second summary right after the turn; the last unit is always kept.
    So a chat gets one summary after the system prompt, a single-task run (nothing
    before the task) one after the task, and a run after a chat both. A system message
    is never folded (one among the older messages stays where it is), nor is the
    latest user turn. Steps are not folded for formats whose turns alternate, where
    the summary would be a second user turn in a row, unless their writer joins it to
    that turn (``Conversation.joins_user``: Gemini, ShareGPT), nor when the
    latest turn opens with an assistant call (Anthropic tool results read beside the
    user's text). An earlier ctxcli summary among the messages folded on one side is
    merged into that side's new summary, never stacked; a side with nothing new to
    fold is left as it is, its summary included. Tokens the summaries leave unused
    lengthen the kept placeholders' previews.

    ``keep_last`` (``None``: the budget decides) keeps at most that many non-system
    messages in the tail, and folds steps only when more than that follow the task.
    ``max_tokens`` (``None``: no cap) caps the summaries together (tokens, header lines
    included; a header, about 15 tokens with the seal that closes it
    (:func:`ctxcli.model.seal`), comes whole even past a smaller bound). The two
    summaries share their room in proportion to the tokens each side folds at most,
    but at least a quarter each (:func:`ctxcli.stages.plan.split`), and each gets at
    least :data:`MIN_SUMMARY_TOKENS` (or ``max_tokens`` split between them, when that
    is less), taken from the other's share where it can spare it (:func:`_floored`). A
    summary whose body comes out empty is not written and its messages stay.

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
    keep_last: int | None = None
    role: Literal["user", "system"] = "user"
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.role not in ("user", "system"):
            raise ValueError(f"role must be 'user' or 'system', not {self.role!r}")
        if (self.keep_last is not None and self.keep_last < 0) or (
            self.max_tokens is not None and self.max_tokens < 1
        ):
            raise ValueError("keep_last must be 0 or more and max_tokens 1 or more")

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        if not context.over(conversation):
            return conversation, {}
        return _planned_again_on_fallback(self._apply, conversation, context)

    def _apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        """:meth:`apply` with ``context``'s summarizer, for a conversation over budget."""
        role = conversation.summary_role or self.role
        frame = context.counter.message({"role": role, "content": ""})
        layout = self._layout(conversation, role)
        compacted = _compacted(conversation.messages, layout.compacts, context)
        cuts = plan.chain(
            layout.compacts, layout.befores, layout.steps, layout.coster(compacted, frame)
        )
        cap = _room_cap(layout, cuts, context, self.max_tokens)
        out, events = self._fold(conversation, (layout, cuts, compacted, role), cap, context)
        out = _shrunk(conversation, out, (context, events, self.max_tokens), _summarize)
        return _finish(conversation, out, context, events), events

    def _fold(
        self,
        conversation: Conversation,
        folding: tuple[_Layout, list[plan.Cut], Compacted, str],
        cap: int | None,
        context: Context,
    ) -> tuple[list[Message], dict[str, int]]:
        """The messages with the first cut that fits the budget beside the summaries'
        reserve (``cap``: at most that, tokens) folded into summaries, and the stage's
        events."""
        layout, cuts, compacted, role = folding
        messages = conversation.messages
        parts, shares, current = _taken(layout, cuts, compacted, cap, context)
        events: dict[str, int] = {}
        _add(events, "results_compacted", sum(a is not b for a, b in zip(current, messages)))
        written = self._write(conversation, parts, (role, shares), context, events)
        if parts[1] and parts[1][0] in written:
            events["steps_summarized"] = sum(not messages[i].is_summary for i in parts[1])
        return _assemble(current, parts, written), events

    def _write(
        self,
        conversation: Conversation,
        parts: list[list[int]],
        role_shares: tuple[str, list[int]],
        context: Context,
        events: dict[str, int],
    ) -> dict[int, Message]:
        """The summary of each part that is not empty, by the position of its first
        message, each within its share (tokens, header included)."""
        messages = conversation.messages
        role, shares = role_shares
        if not any(parts):
            return {}
        # A summary gets a few tokens, whatever is left, but never more than max_tokens.
        cap = self.max_tokens
        floor = MIN_SUMMARY_TOKENS
        if cap is not None:
            floor = min(floor, cap // sum(map(bool, parts)) or 1)
        written: dict[int, Message] = {}
        for part, share in zip(parts, _floored(shares, parts, floor)):
            if not part:
                continue
            folded = [messages[i] for i in part]
            summary, fell_back = _summarize(conversation, folded, (role, share), context)
            _add(events, "fallbacks", int(fell_back))
            if summary is None:
                # Nothing worth keeping fits: a summary would only hide what was dropped.
                _add(events, "summaries_skipped", 1)
                continue
            written[part[0]] = summary
            fresh = sum(not m.is_summary for m in folded)
            _add(events, "messages_summarized", fresh)
            _add(events, "summaries_written", 1)
            _add(events, "summaries_merged", len(folded) - fresh)
        return written

    def _layout(self, conversation: Conversation, role: str) -> _Layout:
        """Where the folds may end (see :class:`_Layout`)."""
        messages = conversation.messages
        groups = units(messages)
        turn = latest_turn(messages, groups)
        lead = next((i for i, m in enumerate(messages) if not m.is_system), len(messages))
        first = None  # with ``keep_last``, steps are folded only past the last ones
        if self.keep_last is not None and _steps_allowed(conversation, turn):
            first = self._steps_start(conversation, groups, turn) or turn[-1] + 1
        after, steps = _step_ends(conversation, groups, turn, first)
        if not conversation.summaries:  # compaction only: no fold, so no summary
            return _Layout(
                conversation, lead, after, [lead], [after], _compacts(messages, groups, turn)
            )
        start = lead if self.keep_last is None else self._tail_start(messages, groups, turn, role)
        barred = _barred_after(conversation, role, len(steps) > 1, lead)
        befores = _before_ends(messages, groups, turn, (start, lead), barred, len(steps) > 1)
        chat = role == "user" and len(steps) <= 1 and self.keep_last is None
        if chat and not conversation.alternating and turn and befores[-1] < turn[0]:
            # The last resort, after every other cut: fold up to the latest user turn
            # even if the summary then meets it (two user messages, which OpenAI takes
            # and Anthropic merges), rather than leave the budget to the priority stage.
            befores.append(turn[0])
        return _Layout(conversation, lead, after, befores, steps, _compacts(messages, groups, turn))

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
        second user turn in a row) unless their writer joins it to the user's
        (``conversation.joins_user``), nor when the latest turn opens with other messages
        than the user's own (an Anthropic tool result read beside the user's text),
        which would then open the output.
        """
        messages = conversation.messages
        if not _steps_allowed(conversation, turn) or self.keep_last is None:
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
        assert self.keep_last is not None
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
            start = _away_from_user(messages, groups, start, turn_start)
        return start


def _summarize(
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
    fresh = [_original(m, context.stored) for m in folded if not m.is_summary]
    previous = "\n".join(_body(m) for m in earlier) or None
    count = _entries(m for m in folded if not m.is_summary)
    count += sum(_folded_count(m) for m in earlier)
    counter = context.counter
    role, bound = role_bound
    # The header is in the body's language, foreseen as the extractive summarizer
    # picks it; its cost is reserved before the body, with the seal's.
    hint = _users_language(conversation)
    foreseen = _EXTRACTIVE.language_of(fresh, previous=previous, hint=hint)
    header_cost = counter.text(summary_header(count, foreseen) + _SEAL_LIKE) + 1
    body_bound = max(1, bound - header_cost)
    summarizer = context.summarizer or _EXTRACTIVE
    body, fell_back = _body_of(conversation, fresh, (previous, body_bound, hint), context)
    if not body.strip():
        return None, fell_back
    # The extractive body is in the foreseen language (its labels say so, whatever
    # tool names it quotes); a model's body is in whatever language it wrote.
    extractive = summarizer is _EXTRACTIVE or fell_back
    header = summary_header(count, foreseen if extractive else language([body]))
    if counter.text(header + _SEAL_LIKE) + 1 > header_cost:  # a model wrote in
        header = summary_header(count, foreseen)  # another language
    data = {"role": role, "content": seal(header, body)}
    return Message(data, counter.message(data), None, True), fell_back


def _planned_again_on_fallback(
    apply: Callable[[Conversation, Context], tuple[Conversation, Mapping[str, int]]],
    conversation: Conversation,
    context: Context,
) -> tuple[Conversation, Mapping[str, int]]:
    """``apply(conversation, context)``; when a model summarizer failed there (a
    ``fallbacks`` event), what ``apply`` makes of it with the extractive summarizer,
    planned for that one, with the same ``fallbacks``: the model's plan folds more to
    give its summary room, which the extraction filled less (the agent sample at 1,500
    tokens came out at 935 tokens and 47 facts, where the extractive run keeps 1,430 and
    76). The originals the first plan stored are forgotten."""
    if context.summarizer in (None, _EXTRACTIVE):  # nothing to fall back from
        return apply(conversation, context)
    stored = dict(context.stored)
    out, events = apply(conversation, context)
    if not events.get("fallbacks"):
        return out, events
    context.stored.clear()
    context.stored.update(stored)
    out, again = apply(conversation, dataclasses.replace(context, summarizer=None))
    return out, {**again, "fallbacks": events["fallbacks"]}


def _cap(
    conversation: Conversation,
    widest: list[list[int]],
    context: Context,
    caps: tuple[int | None, int],
) -> int | None:
    """The cap on the summaries' room (tokens): the stage's ``max_tokens`` (first of
    ``caps``), or, with the extractive summarizer, what its summaries of the most
    folded cut's ``widest`` parts take with no bound if that is less
    (:meth:`ctxcli.summarizers.extractive.Extractive.measure`, headers included): a
    function of the conversation alone, so the plan's rules hold, and summaries with
    little to say leave the rest of the budget to the verbatim tail. Measuring stops
    past ``limit`` (second of ``caps``, :func:`ctxcli.stages.plan.telling`), as a cap
    of that or more gives the plan the same cut and rooms. Another summarizer (a
    model) is not asked twice."""
    max_tokens, limit = caps
    if context.summarizer not in (None, _EXTRACTIVE):
        return max_tokens
    messages = conversation.messages
    counter = context.counter
    need = 0
    hint = _users_language(conversation)
    for part in filter(None, widest):
        if need > limit:
            break
        folded = [messages[i] for i in part]
        fresh = [_original(m, context.stored) for m in folded if not m.is_summary]
        previous = "\n".join(_body(m) for m in folded if m.is_summary) or None
        room = limit - need
        body = _EXTRACTIVE.measure(fresh, previous=previous, counter=counter, bound=room, hint=hint)
        lang = _EXTRACTIVE.language_of(fresh, previous=previous, hint=hint)  # measure's
        need += counter.text(summary_header(len(folded), lang) + _SEAL_LIKE) + 8 + body
    need = max(min(need, limit), MIN_SUMMARY_TOKENS)
    return need if max_tokens is None else min(need, max_tokens)


def _room_cap(
    layout: _Layout, cuts: list[plan.Cut], context: Context, max_tokens: int | None
) -> int | None:
    """The cap on the summaries' room: what those of the most folded cut need
    (:func:`_cap`, within the stage's ``max_tokens``), or what those of the cut that
    cap makes the plan take need, when less: the tail then keeps what the smaller
    summary leaves (tau-bench at 3000 used a median 0.946 of the budget, 0.989 so).
    Only where one summary is written: with two, the room each gets from a larger
    budget's cut (:func:`ctxcli.stages.plan.rooms`) could shrink. Where the most
    folded cut writes two and the cut that cap makes the plan take does too, the
    last cut that writes one (:func:`_one_sided`) is tried the same way: it is taken
    when it fits beside what its one summary needs (a Claude Code session kept the
    same 1,405 tokens at every budget from 1500 to 3000, the tail it could keep at
    3000 missing the two summaries' reserve by 19 tokens, with one summary to write)."""
    assert context.max_tokens is not None  # over budget
    budget = context.max_tokens
    limit = plan.telling(cuts, budget)
    widest = layout.parts(cuts[-1])
    cap = _cap(layout.conversation, widest, context, (max_tokens, limit))
    first = plan.first_fit(cuts, budget, cap)
    if cap is None or first == len(cuts) - 1 and not all(cuts[-1].sides):
        return cap
    if not all(cuts[-1].sides):
        narrower = _cap(layout.conversation, layout.parts(cuts[first]), context, (cap, limit))
        return cap if narrower is None else narrower
    one = _one_sided(cuts, first)
    if one is None:
        return cap
    narrower = _cap(layout.conversation, layout.parts(cuts[one]), context, (cap, limit))
    if narrower is None or plan.first_fit(cuts, budget, narrower) > one:
        return cap
    return narrower


def _one_sided(cuts: list[plan.Cut], first: int) -> int | None:
    """The last of ``cuts`` before ``first`` (the cut the plan takes) that writes one
    summary, when ``first`` writes two and the last cut before it that does not write
    two writes one (not none); else ``None``."""
    if not all(cuts[first].sides):
        return None
    one = next((k for k in range(first - 1, -1, -1) if not all(cuts[k].sides)), None)
    return one if one is not None and any(cuts[one].sides) else None


def _taken(
    layout: _Layout,
    cuts: list[plan.Cut],
    compacted: Compacted,
    cap: int | None,
    context: Context,
) -> tuple[list[list[int]], list[int], list[Message]]:
    """The parts the first cut that fits folds, the summaries' rooms (tokens), and the
    messages with the placeholders that cut compacts in place."""
    assert context.max_tokens is not None
    messages = layout.conversation.messages
    taken = plan.first_fit(cuts, context.max_tokens, cap)
    # Each side's share of the room is fixed by what the most folded cut folds on it,
    # so that neither side's room shrinks as the budget grows.
    weights = [sum(messages[i].tokens for i in part) for part in layout.parts(cuts[-1])]
    parts = layout.parts(cuts[taken])
    shares = plan.rooms(cuts, taken, context.max_tokens, cap, weights)
    chosen = layout.compacts[: cuts[taken].compacted]
    kept = {i: compacted[i] for i in chosen if i in compacted}
    current = _with_compacted(messages, kept, {i for p in parts for i in p}, context)
    return parts, shares, current


def _step_ends(
    conversation: Conversation, groups: list[list[int]], turn: list[int], first: int | None
) -> tuple[int, list[int]]:
    """Where the fold of the steps after the latest user turn starts, and where it
    may end: the first end folds the least (nothing, or up to ``first``, where
    ``keep_last`` lets it end; ``None``: no ``keep_last``), the others are the later
    starts of units that may open a tail."""
    messages = conversation.messages
    if not _steps_allowed(conversation, turn):
        return len(messages), [len(messages)]
    after = turn[-1] + 1
    if first == after:
        return after, [after]
    first = after if first is None else first
    ends = [g[0] for g in groups if first < g[0] and _opens_tail(messages[g[0]])]
    return after, [first, *ends]


def _body_of(
    conversation: Conversation,
    fresh: list[Mapping[str, Any]],
    previous_bound: tuple[str | None, int, str],
    context: Context,
) -> tuple[str, bool]:
    """The summary body of ``fresh`` by the configured summarizer within the bound
    (tokens), or by the extractive one when that fails (a warning says so; the flag
    is then true); ``previous_bound``: the earlier summaries' body, the bound and the
    user's language (:func:`_users_language`, the extractive summarizer's hint).
    Raises :class:`SummaryError` when the extractive summarizer fails."""
    previous, bound, hint = previous_bound
    summarizer = context.summarizer or _EXTRACTIVE
    counter = context.counter
    try:
        if summarizer is _EXTRACTIVE:
            return _EXTRACTIVE.summarize(
                fresh, previous=previous, max_tokens=bound, counter=counter, hint=hint
            ), False
        return summarizer.summarize(
            fresh, previous=previous, max_tokens=bound, counter=counter
        ), False
    except SummaryError as exc:
        if summarizer is _EXTRACTIVE:
            raise
        context.warnings.append(
            f"conversation {conversation.label}: summary failed ({exc}); "
            "used the extractive summary instead"
        )
    body = _EXTRACTIVE.summarize(
        fresh, previous=previous, max_tokens=bound, counter=counter, hint=hint
    )
    return body, True


def _users_language(conversation: Conversation) -> str:
    """The language (``"en"`` or ``"zh"``, :func:`ctxcli.summarizers.text.language`)
    of the user's own messages in ``conversation`` (no summary): what the extractive
    summary of folded messages that hold no request (steps alone: a call and its JSON
    result) writes its labels in, and not English for a Chinese chat."""
    messages = conversation.messages
    return language(message_text(m.data) for m in messages if m.role == "user" and not m.is_summary)


def _away_from_user(
    messages: Sequence[Message], groups: list[list[int]], start: int, turn_start: int
) -> int:
    """``start`` moved so that a tail after a user summary does not open with a user
    message: past older user messages, but back one unit before the latest one, which
    is never folded."""
    starts = [g[0] for g in groups]
    while start < turn_start and messages[start].role == "user":
        start = next((s for s in starts if s > start), len(messages))
    while start < len(messages) and messages[start].role == "user":
        earlier = [s for s in starts if s < start]
        if not earlier:
            break
        start = earlier[-1]
    return start


def _add(events: dict[str, int], name: str, count: int) -> None:
    if count:
        events[name] = events.get(name, 0) + count


@dataclass(frozen=True)
class _Layout:
    """Where the summary stage's folds may end in ``conversation``: the fold before
    the latest user turn runs from ``lead`` (the first non-system message) to one of
    ``befores``, the fold of the steps after that turn from ``after`` to one of
    ``steps`` (the first of each is the least the stage folds: nothing, or what
    ``keep_last`` asks for); ``compacts`` are the tool results that may become
    placeholders (:func:`ctxcli.stages.plan.compactable`)."""

    conversation: Conversation
    lead: int
    after: int
    befores: list[int]
    steps: list[int]
    compacts: list[int]

    def parts(self, cut: plan.Cut) -> list[list[int]]:
        """The non-system messages ``cut`` folds before the latest user turn and after
        it; a side with nothing new (an earlier summary only) is left empty."""
        messages = self.conversation.messages
        sides = [
            [i for i in range(self.lead, cut.before) if not messages[i].is_system],
            [i for i in range(self.after, cut.steps) if not messages[i].is_system],
        ]
        return [p if any(not messages[i].is_summary for i in p) else [] for p in sides]

    def coster(
        self, compacted: Compacted, frame: int
    ) -> Callable[[int, int, int], tuple[int, tuple[bool, bool]]]:
        """``cost(compacted, before, steps)``: the tokens a cut keeps, with ``frame``
        tokens per summary it writes (see :class:`ctxcli.stages.plan.Cut`)."""
        messages = self.conversation.messages
        folds = [0]  # tokens of the non-system messages before position i
        fresh = [0]  # how many of them are not earlier summaries
        for message in messages:
            folds.append(folds[-1] + (0 if message.is_system else message.tokens))
            fresh.append(fresh[-1] + int(not message.is_system and not message.is_summary))
        saving = {i: messages[i].tokens - m.tokens for i, (m, _) in compacted.items()}
        whole = self.conversation.tokens

        def cost(count: int, before: int, steps: int) -> tuple[int, tuple[bool, bool]]:
            kept = whole
            sides = [False, False]
            for k, (a, b) in enumerate(((self.lead, before), (self.after, steps))):
                if b > a and fresh[b] > fresh[a]:  # a part with nothing new stays as is
                    kept -= folds[b] - folds[a] - frame
                    sides[k] = True
            folded = range(self.lead, before), range(self.after, steps)
            kept -= sum(
                saving[i]
                for i in self.compacts[:count]
                if i in saving and i not in folded[0] and i not in folded[1]
            )
            return kept, (sides[0], sides[1])

        return cost


def _before_ends(
    messages: Sequence[Message],
    groups: list[list[int]],
    turn: list[int],
    start_lead: tuple[int, int],
    barred: int,
    steps: bool,
) -> list[int]:
    """Where the fold before the latest user turn may end: ``start`` (the least it
    folds), then each later unit start up to that turn, but, from ``barred`` on
    (:func:`_barred_after`), those where the kept part opens with a user message,
    system messages aside (they stay where they are, the summary before them). What
    comes before a task is folded only when a summary of it saves tokens."""
    start, lead = start_lead
    limit = turn[0] if turn else len(messages) - 1
    opens = [""] * (len(messages) + 1)  # the role of the first non-system message from i
    for i in range(len(messages) - 1, -1, -1):
        opens[i] = opens[i + 1] if messages[i].is_system else messages[i].role
    ends = [
        g[0]
        for g in groups
        if start < g[0] <= limit and not (g[0] >= barred and opens[g[0]] == "user")
    ]
    before = sum(m.tokens for m in messages[lead:limit] if not m.is_system)
    if steps and before <= 2 * MIN_SUMMARY_TOKENS:
        return [start]
    return [start, *ends]


def _barred_after(conversation: Conversation, role: str, steps: bool, lead: int) -> int:
    """The position past which the fold before the latest user turn may not end at a
    user message (which the summary would then meet): where the format's writer joins
    the two (``conversation.joins_user``), the first system message from ``lead`` (the
    fold's start), which stays where it is, between them; else in a chat (no
    ``steps``) with a user summary, ``lead``; else none (the end of the messages)."""
    messages = conversation.messages
    if conversation.joins_user:
        systems = (i for i in range(lead, len(messages)) if messages[i].is_system)
        return next(systems, len(messages))
    return lead if role == "user" and not steps else len(messages)


def _compacts(messages: Sequence[Message], groups: list[list[int]], turn: list[int]) -> list[int]:
    """The tool results the summary stage may turn into placeholders
    (:func:`ctxcli.stages.plan.compactable`), but those of the latest user turn (read
    beside the user's text) and of the last unit."""
    if not groups:
        return []
    last = groups[-1][0]
    end = min(turn[0], last) if turn else last
    found = plan.compactable(messages, last)
    return [i for i in found if i < end or (turn and turn[-1] < i)]


def _with_compacted(
    messages: Sequence[Message], compacted: Compacted, fold: set[int], context: Context
) -> list[Message]:
    """``messages`` with the ``compacted`` placeholders (by position) in place of their
    results and call arguments, but where they are folded (the summary reads the
    original); their originals go to ``context.stored``."""
    current = list(messages)
    for i, (new, originals) in compacted.items():
        if i not in fold:
            context.stored.update(originals)
            current[i] = new
    return current


#: :func:`_summarize`: a summary of messages with a role, within a bound.
_Rewriter = Callable[
    ["Conversation", list["Message"], tuple[str, int], "Context"], tuple["Message | None", bool]
]


def _shrunk(
    conversation: Conversation,
    out: list[Message],
    context_events: tuple[Context, dict[str, int], int | None],
    summarize: _Rewriter,
) -> list[Message]:
    """``out`` with the earlier summaries it kept as they were (the fold of a side with
    nothing new leaves it as is) rewritten by ``summarize`` (:func:`_summarize`)
    into the room the other messages leave, each a share by its size (at most the
    stage's ``max_tokens``, third of ``context_events``), when ``out`` is over budget:
    else the priority stage drops them whole (an output compressed again at a smaller
    budget, where the summaries are all there is to fold). A summary whose share is
    under :data:`MIN_SUMMARY_TOKENS`, or whose rewrite does not fit it, stays as it
    was; the event ``summaries_shrunk`` counts the rewrites."""
    context, events, cap = context_events
    assert context.max_tokens is not None
    before = {id(m) for m in conversation.messages}
    kept = [i for i, m in enumerate(out) if m.is_summary and id(m) in before]
    whole = conversation.with_messages(out)
    if not kept or not context.over(whole):
        return out
    frames = {i: context.counter.message({"role": out[i].role, "content": ""}) for i in kept}
    sizes = {i: out[i].tokens - frames[i] for i in kept}
    room = (
        context.max_tokens - whole.tokens + sum(out[i].tokens for i in kept) - sum(frames.values())
    )
    shrunk = list(out)
    for i in kept:
        share = room * sizes[i] // sum(sizes.values())
        share = share if cap is None else min(share, cap)
        if MIN_SUMMARY_TOKENS <= share < sizes[i]:
            shrunk[i] = _rewritten(
                conversation, out[i], (share, frames[i]), (context, events), summarize
            )
    return shrunk


def _rewritten(
    conversation: Conversation,
    old: Message,
    share_frame: tuple[int, int],
    context_events: tuple[Context, dict[str, int]],
    summarize: _Rewriter,
) -> Message:
    """The summary ``old`` written again within its share (tokens, with ``frame``
    more for the message: ``share_frame``) by ``summarize``, or ``old`` when the
    rewrite does not fit (:func:`_shrunk`)."""
    (share, frame), (context, events) = share_frame, context_events
    summary, fell_back = summarize(conversation, [old], (old.role, share), context)
    if summary is None or summary.tokens > share + frame:
        return old
    _add(events, "summaries_shrunk", 1)
    _add(events, "fallbacks", int(fell_back))
    return summary


def _finish(
    conversation: Conversation, out: list[Message], context: Context, events: dict[str, int]
) -> Conversation:
    """``conversation`` with ``out`` for its messages (itself when nothing changed),
    the budget's spare tokens given to its placeholders' previews
    (:func:`ctxcli.stages.placeholder.widen`)."""
    assert context.max_tokens is not None
    spare = context.max_tokens - conversation.with_messages(out).tokens
    if spare > 0:
        _add(events, "previews_widened", widen(out, spare, context))
    if len(out) == len(conversation.messages) and all(
        a is b for a, b in zip(out, conversation.messages)
    ):
        return conversation
    return conversation.with_messages(out)


def _assemble(
    messages: list[Message], parts: list[list[int]], written: Mapping[int, Message]
) -> list[Message]:
    """``messages`` with each part that got a summary replaced by it, where the part
    began."""
    gone = {i for part in parts if part and part[0] in written for i in part}
    out: list[Message] = []
    for i, message in enumerate(messages):
        if i in written:
            out.append(written[i])
        if i not in gone:
            out.append(message)
    return out


def _steps_allowed(conversation: Conversation, turn: list[int]) -> bool:
    """Whether steps after the latest user turn may be folded: not for formats whose
    turns must alternate (the summary would be a second user turn in a row) unless
    their writer joins it to that turn (``conversation.joins_user``: Gemini, whose
    writer makes it one more text part of the turn's Content, after any function
    responses it opens with; ShareGPT, more of the turn's text), and there only when
    no system message, which stays where it is, comes right after the turn; nor, in
    another format, when that turn opens with other messages than the user's own (an
    Anthropic tool result read beside the user's text), which would then open the
    output."""
    messages = conversation.messages
    if conversation.joins_user:  # but not past a system message right after the turn
        return bool(turn) and not (
            turn[-1] + 1 < len(messages) and messages[turn[-1] + 1].is_system
        )
    return not conversation.alternating and bool(turn) and messages[turn[0]].role == "user"


def _compacted(
    messages: Sequence[Message], positions: Sequence[int], context: Context
) -> Compacted:
    """The tool results at ``positions`` as placeholders, and the assistant messages
    there with their long call arguments as placeholders
    (:func:`ctxcli.stages.placeholder.cleared_calls`), where that is smaller, but those
    of the tools in ``context.whole_tools``, each with the originals it replaced (into
    ``context.stored`` when used: :func:`_with_compacted`)."""
    counter = context.counter
    names = tool_names([m.data for m in messages]) if positions else {}
    held: set[str] | None = None  # the conversation's own placeholders, when needed
    out: Compacted = {}
    for i in positions:
        message = messages[i]
        if message.role == "assistant":
            if held is None:
                held = set().union(*map(placeholder_ids, messages))
            new, originals = cleared_calls(message, plan.COMPACT_OVER, context, held)
        elif names.get(i, "") in context.whole_tools:
            continue
        else:
            content = message.data.get("content")
            tokens = counter.content(content)
            tool = names.get(i, "")
            text = render(content, tool=tool, tokens=tokens, head=100, tail=50, facts=True)
            new = message.replace({**message.data, "content": text}, counter)
            originals = {content_id(content): content}
        if new.tokens < message.tokens:
            out[i] = new, originals
    return out


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


def _floored(shares: Sequence[int], parts: Sequence[Sequence[int]], floor: int) -> list[int]:
    """Each written summary's share (tokens), at least ``floor``; what raising one to it
    adds is taken from the other's share above ``floor``, so the two still fit the room
    where it holds both floors. The deduction only falls as the shares grow, so
    neither share shrinks as the budget grows."""
    out = [max(floor, share) if part else share for share, part in zip(shares, parts)]
    for k, other in ((0, 1), (1, 0)):
        if parts[k] and parts[other] and shares[k] < floor:
            out[other] = max(floor, out[other] - (floor - shares[k]))
    return out


def _original(message: Message, stored: Mapping[str, Any]) -> Mapping[str, Any]:
    """The data of ``message`` with each placeholder in it (a tool result, call
    arguments) replaced by its original when the placeholder stage replaced it earlier
    in this run (from ``stored``), so that the summary reads what the tool said or was
    given, not the placeholder's head and tail; or, when an earlier run replaced it
    (its original is in that run's store), by what the placeholder shows
    (:func:`ctxcli.placeholders.shown_text`: its error lines and facts, where the
    placeholder itself reads as nothing, a failed test run as ``ok`` and a call as
    ``Edit()``): :func:`ctxcli.store.with_originals`."""
    if not placeholder_texts(message):
        return message.data
    restored: Mapping[str, Any] = with_originals(message.data, stored, shown_text)
    return restored
