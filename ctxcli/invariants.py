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


def pairing_problems(messages: Sequence[Message]) -> list[str]:
    """Tool-pairing problems of one message list (rule 1), as readable strings.

    A message is named by its position in the input (``Message.index``), so the same
    problem reads the same before and after compression; a message a stage wrote is
    named by its position here.
    """
    found: list[str] = []
    open_ids: set[str] = set()
    open_at: int | str = -1
    function_open = False
    for here, message in enumerate(messages):
        pos: int | str = message.index if message.index is not None else f"{here} (new)"
        role = message.role
        if role == "tool":
            for call_id in message.result_ids or ("None",):
                if call_id not in open_ids:
                    found.append(f"message {pos}: tool result {call_id!r} without its call")
                open_ids.discard(call_id)
            continue
        if role == "function":
            if not function_open:
                found.append(f"message {pos}: function result without a function_call")
            function_open = False
            continue
        if open_ids:
            found.append(f"message {open_at}: tool calls {sorted(open_ids)} have no result")
        if function_open:
            found.append(f"message {open_at}: function_call has no result")
        open_ids = set(message.call_ids)
        function_open = message.calls_function
        open_at = pos
    if open_ids:
        found.append(f"message {open_at}: tool calls {sorted(open_ids)} have no result")
    if function_open:
        found.append(f"message {open_at}: function_call has no result")
    return found


def problems(
    before: Conversation, after: Conversation, *, max_tokens: int | None = None
) -> list[str]:
    """Every rule ``after`` breaks that ``before`` kept; ``[]`` when all hold.

    ``max_tokens`` is the budget in tokens (``None``: do not check it).
    """
    found: list[str] = []
    broken = pairing_problems(after.messages)
    if broken:  # only then is it worth knowing what the input already broke
        known_before = set(pairing_problems(before.messages))
        found += [p for p in broken if p not in known_before]

    originals = before.messages
    last = -1
    kept: set[int] = set()
    for message in after.messages:
        if message.index is None:
            continue
        if message.index <= last:
            found.append(f"message {message.index} is out of order")
        last = message.index
        kept.add(message.index)
        if not message.changed and message.data is not originals[message.index].data:
            found.append(f"message {message.index} differs but is not marked changed")

    unchanged = {m.index for m in after.messages if m.index is not None and not m.changed}
    must = {i for i, m in enumerate(originals) if m.is_system}
    latest = latest_user_index(originals)
    if latest is not None:
        must.add(latest)
    for i in sorted(must - unchanged):
        what = "dropped" if i not in kept else "changed"
        found.append(f"message {i} ({originals[i].role}) was {what} but must be kept as is")
    if originals and len(originals) - 1 not in kept:
        found.append(f"the last message ({len(originals) - 1}) was dropped")

    first = before.user_first
    if opens_badly(after.messages, user_first=first) and not opens_badly(
        originals, user_first=first
    ):
        opening = [m for m in after.messages if not (first and m.is_system)]
        found.append(f"output starts with a {opening[0].role} message")
    if max_tokens is not None and after.tokens > max_tokens:
        found.append(f"{after.tokens} tokens exceed the budget of {max_tokens}")
    return found


def check(before: Conversation, after: Conversation, *, max_tokens: int | None = None) -> None:
    """Raise :class:`InvariantError` naming the conversation if any rule is broken."""
    found = problems(before, after, max_tokens=max_tokens)
    if found:
        raise InvariantError(
            f"conversation {after.label}: output would break the transcript rules: "
            + "; ".join(found),
            tuple(found),
        )
