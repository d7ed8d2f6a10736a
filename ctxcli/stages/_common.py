"""Helpers the dropping stages share."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ctxcli.model import Conversation, Message, starts_badly


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
    pinned in ``must``, the nearest user message before it is kept instead.
    """
    messages = conversation.messages
    keep = set(keep)
    if conversation.user_first or not (messages and messages[0].is_system):
        for group in groups:
            if not keep.intersection(group):
                continue
            kept = [messages[i] for i in group]
            if conversation.user_first and all(m.is_system for m in kept):
                continue
            if not starts_badly(kept):
                break
            if must and set(group) & set(must):
                # A pinned unit would open the conversation (the latest turn begins
                # with a tool call): keep the nearest user message before it as well.
                before = [i for i in range(group[0]) if messages[i].role == "user"]
                if before:
                    keep.update(next(g for g in groups if before[-1] in g))
                break
            keep.difference_update(group)
    if len(keep) == len(messages):
        return conversation, {}
    out: list[Message] = [m for i, m in enumerate(messages) if i in keep]
    return conversation.with_messages(out), {"messages_dropped": len(messages) - len(out)}
