"""The rules every compressed transcript keeps, as one reusable check.

:func:`problems` compares a conversation before and after compression and lists
each broken rule; :func:`check` raises on the first list that is not empty. The
pipeline runs it on every output, and the tests run it on every case.

1. A tool call and its results are one unit: no tool result without the call before
   it, no call without a result for each id (parallel calls stay whole), no window
   that starts with a tool result. Legacy ``function_call`` pairs by adjacency.
2. ``system`` and ``developer`` messages are never dropped or changed.
3. The latest user message is never dropped or changed, and the last message is never
   dropped (an agent run can go on long past its latest user message; the units
   between may go whole, the current state may not).
4. Messages keep their relative order; a message no stage changed is the same dict.
5. The output fits the budget, or it is reported over budget.

A rule the input already broke (a log that ends on an unanswered call, say) is not
held against the output.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxcli.errors import InvariantError
from ctxcli.model import Conversation, Message, latest_user_index, opens_badly
from ctxcli.problems import Problem


def pairing_problems(messages: Sequence[Message]) -> list[Problem]:
    """Tool-pairing problems of one message list (rule 1).

    A message is named by its position in the input (``Message.index``), so the same
    problem reads the same before and after compression; a message a stage wrote is
    named by its position here (``new``). Rules: ``result-without-call`` (and
    ``result-without-call-id`` for a result naming no call),
    ``function-result-without-call``, ``call-without-result``,
    ``function-call-without-result``.
    """
    found: list[Problem] = []
    open_ids: set[str] = set()
    open_at = (-1, False)  # where the open calls stand: (position, new)
    function_open = False
    for here, message in enumerate(messages):
        # Positions, not Problems: most messages break no rule (one made only then).
        at = (here, True) if message.index is None else (message.index, False)
        role = message.role
        if role == "tool":
            for call_id in message.result_ids or (None,):
                if call_id not in open_ids:
                    rule = (
                        "result-without-call" if call_id is not None else "result-without-call-id"
                    )
                    detail = f"tool result {str(call_id)!r} without its call"
                    found.append(Problem(rule, detail, at[0], new=at[1]))
                open_ids.discard(str(call_id))
            continue
        if role == "function":
            if not function_open:
                found.append(Problem("function-result-without-call", _NO_CALL, at[0], new=at[1]))
            function_open = False
            continue
        if open_ids or function_open:
            found += _unanswered(open_at, open_ids, function_open)
        open_ids = set(message.call_ids)
        function_open = message.calls_function
        open_at = at
    return found + _unanswered(open_at, open_ids, function_open)


_NO_CALL = "function result without a function_call"


def _unanswered(at: tuple[int, bool], open_ids: set[str], function_open: bool) -> list[Problem]:
    """The calls still open at the message ``at`` (its position, and whether it is
    new) names, as problems there."""
    found = []
    if open_ids:
        detail = f"tool calls {sorted(open_ids)} have no result"
        found.append(Problem("call-without-result", detail, at[0], new=at[1]))
    if function_open:
        detail = "function_call has no result"
        found.append(Problem("function-call-without-result", detail, at[0], new=at[1]))
    return found


def problems(
    before: Conversation, after: Conversation, *, max_tokens: int | None = None
) -> list[Problem]:
    """Every rule ``after`` breaks that ``before`` kept; ``[]`` when all hold.

    ``max_tokens`` is the budget in tokens (``None``: do not check it). Rules: those of
    :func:`pairing_problems`, ``out-of-order``, ``unmarked-change``, ``must-keep``,
    ``last-dropped``, ``bad-opening``, ``over-budget``.
    """
    found: list[Problem] = []
    broken = pairing_problems(after.messages)
    if broken:  # only then is it worth knowing what the input already broke
        known_before = set(pairing_problems(before.messages))
        found += [p for p in broken if p not in known_before]
    found += _order_problems(before, after) + _kept_problems(before, after)
    first = before.user_first
    if opens_badly(after.messages, user_first=first) and not opens_badly(
        before.messages, user_first=first
    ):
        opening = [m for m in after.messages if not (first and m.is_system)]
        found.append(Problem("bad-opening", f"output starts with a {opening[0].role} message"))
    if max_tokens is not None and after.tokens > max_tokens:
        detail = f"{after.tokens} tokens exceed the budget of {max_tokens}"
        found.append(Problem("over-budget", detail))
    return found


def _order_problems(before: Conversation, after: Conversation) -> list[Problem]:
    """Rule 4: input messages in their order, an unchanged one the very dict read."""
    found = []
    last = -1
    for message in after.messages:
        if message.index is None:
            continue
        if message.index <= last:
            found.append(Problem("out-of-order", f"message {message.index} is out of order"))
        last = message.index
        if not message.changed and message.data is not before.messages[message.index].data:
            detail = f"message {message.index} differs but is not marked changed"
            found.append(Problem("unmarked-change", detail))
    return found


def _kept_problems(before: Conversation, after: Conversation) -> list[Problem]:
    """Rules 2 and 3: system and developer messages and the latest user message kept
    as they are, the last message kept."""
    originals = before.messages
    kept = {m.index for m in after.messages if m.index is not None}
    unchanged = {m.index for m in after.messages if m.index is not None and not m.changed}
    must = {i for i, m in enumerate(originals) if m.is_system}
    latest = latest_user_index(originals)
    if latest is not None:
        must.add(latest)
    found = []
    for i in sorted(must - unchanged):
        what = "dropped" if i not in kept else "changed"
        detail = f"message {i} ({originals[i].role}) was {what} but must be kept as is"
        found.append(Problem("must-keep", detail))
    if originals and len(originals) - 1 not in kept:
        detail = f"the last message ({len(originals) - 1}) was dropped"
        found.append(Problem("last-dropped", detail))
    return found


def check(before: Conversation, after: Conversation, *, max_tokens: int | None = None) -> None:
    """Raise :class:`InvariantError` naming the conversation if any rule is broken."""
    found = problems(before, after, max_tokens=max_tokens)
    if found:
        raise InvariantError(
            f"conversation {after.label}: output would break the transcript rules: "
            + "; ".join(map(str, found)),
            tuple(found),
        )
