"""Helpers the dropping stages share."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ctxcli.model import Conversation, Message, side, starts_badly


def keep_only(
    conversation: Conversation,
    keep: Collection[int],
    groups: Sequence[Sequence[int]],
    must: Collection[int],
) -> tuple[Conversation, dict[str, int]]:
    """``conversation`` with only the positions in ``keep``, plus its events.

    Where the input opens with a system message nothing more is needed (unless the
    format wants a user message first all the same: ``conversation.user_first``);
    where it does not, leading units that are not user messages are dropped too, so
    the output never opens with an assistant or tool message; when such a unit is
    pinned in ``must``, the nearest user message before it is kept as well.
    """
    messages = conversation.messages
    keep = set(keep)
    if conversation.user_first or not (messages and messages[0].is_system):
        _open_well(conversation, keep, groups, must)
    if conversation.alternating:
        _alternate(messages, keep, groups, must)
    if len(keep) == len(messages):
        return conversation, {}
    out: list[Message] = [m for i, m in enumerate(messages) if i in keep]
    return conversation.with_messages(out), {"messages_dropped": len(messages) - len(out)}


def _open_well(
    conversation: Conversation,
    keep: set[int],
    groups: Sequence[Sequence[int]],
    must: Collection[int],
) -> None:
    """Drop leading units from ``keep`` until the kept messages open well (see
    :func:`keep_only`)."""
    messages = conversation.messages
    for group in groups:
        if not keep.intersection(group):
            continue
        kept = [messages[i] for i in group]
        if conversation.user_first and all(m.is_system for m in kept):
            continue
        if not starts_badly(kept):
            return
        if must and set(group) & set(must):
            # A pinned unit would open the conversation (the latest turn begins
            # with a tool call): keep the nearest user message before it as well.
            before = [i for i in range(group[0]) if messages[i].role == "user"]
            if before:
                keep.update(next(g for g in groups if before[-1] in g))
            return
        keep.difference_update(group)


def _alternate(
    messages: Sequence[Message],
    keep: set[int],
    groups: Sequence[Sequence[int]],
    must: Collection[int],
) -> None:
    """Drop more from ``keep`` until no two kept messages of one side meet where the
    input had them apart (for formats whose turns alternate): of such a pair the older
    unit goes, or the newer when the older is pinned in ``must``."""
    unit_of = {i: group for group in groups for i in group}
    while True:
        kept = [i for i in sorted(keep) if not messages[i].is_system]
        pair = next(
            (
                (a, b)
                for a, b in zip(kept, kept[1:])
                if b != a + 1 and side(messages[a]) == side(messages[b])
            ),
            None,
        )
        if pair is None:
            return
        for candidate in pair:
            unit = unit_of[candidate]
            if not set(unit) & set(must):
                keep.difference_update(unit)
                break
        else:
            return  # both pinned: nothing more to do
