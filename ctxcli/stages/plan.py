"""How much room the summary stage gives the verbatim tail and the summaries.

For a conversation over budget the summary stage considers a fixed chain of cuts,
from the least lossy to the most (:func:`chain`): first the large tool results and
tool-call arguments in the kept part become placeholders, oldest first
(:func:`compactable`); then the
messages before the latest user turn are folded, oldest unit first; then the steps
after it. The cut taken at budget ``B`` is the first whose kept messages fit beside
the summary's reserve :func:`reserve` (``2B // 5``, at least
:data:`MIN_RESERVE`, at most the stage's cap); the summaries get the room the cut
leaves, but never more than any larger budget would give them (:func:`rooms`). So as
the budget grows the tail never gets shorter, a result once kept whole stays whole,
and the summaries' room never shrinks: with a summarizer that keeps a prefix of a
fixed ranking (see :mod:`ctxcli.summarizers`), a larger budget never keeps fewer
facts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxcli.model import Message
from ctxcli.stages.placeholder import TOOL_ROLES, looks_like, reports_error

#: The fewest tokens the summaries are reserved, whatever the budget.
MIN_RESERVE = 64
#: Tool results of more tokens than this become placeholders in the kept tail before
#: whole messages are folded.
COMPACT_OVER = 200


@dataclass(frozen=True)
class Cut:
    """One point of the chain: the first ``compacted`` of the compactable results are
    placeholders, messages ``lead..before`` and ``after..steps`` are folded (empty
    ranges fold nothing), and ``kept`` is what the rest costs (tokens, with a frame
    per summary and the conversation's fixed tokens); ``sides`` says which of the two
    summaries it writes."""

    compacted: int
    before: int
    steps: int
    kept: int
    #: Whether it writes the summary before the latest user turn, and the one after.
    sides: tuple[bool, bool] = (False, False)


def reserve(budget: int, cap: int | None) -> int:
    """Tokens the tail must leave the summaries at ``budget``: two fifths, at least
    :data:`MIN_RESERVE`, at most ``cap``. ``budget - reserve(budget)`` never falls as
    ``budget`` grows."""
    share = max(MIN_RESERVE, budget * 2 // 5)
    return share if cap is None else min(cap, share)


def telling(cuts: Sequence[Cut], budget: int) -> int:
    """The largest cap on the summaries' room (tokens) that can change what
    :func:`first_fit` and :func:`rooms` give at ``budget`` with ``cuts``: any cap of at
    least this gives the same cut and rooms as any other such cap, or none.

    Why: a cap ``c`` enters only as ``min(c, x)``. In :func:`first_fit`, ``x`` is the
    uncapped reserve at ``budget``. In :func:`rooms`, ``x`` is what the cut taken
    leaves, at most ``budget`` less the fewest tokens a cut keeps, or a larger
    budget's share, which only bounds a share no larger than that; and a larger
    budget ``b`` (an earlier cut's :func:`entry`) is looked at only while its reserve
    is under what the cut taken leaves, where every such cap gives the same reserve,
    so the same ``b``."""
    return max(reserve(budget, None), budget - min(cut.kept for cut in cuts))


def compactable(messages: Sequence[Message], last_unit: int) -> list[int]:
    """Positions of the messages worth a placeholder in the kept tail, not in the last
    unit (from ``last_unit`` on: the state the model goes on from): the tool results
    over :data:`COMPACT_OVER` tokens, not already one and not reporting an error; the
    assistant messages whose tool calls may hold arguments over it (a file an agent
    wrote, an edit; the summary stage replaces only those arguments), but the latest
    such message: the most recent calls stay as they were, even with an answer after
    them (in Claude Code they share their turn with its thinking)."""
    calling = {i for i, m in enumerate(messages) if _calls(m)}
    calling.discard(max(calling, default=-1))
    return [
        i
        for i, m in enumerate(messages[:last_unit])
        if m.tokens > COMPACT_OVER
        and (
            i in calling
            or (
                m.role in TOOL_ROLES
                and m.data.get("content") is not None
                and not looks_like(m.data.get("content"))
                and not reports_error(m.data)
            )
        )
    ]


def _calls(message: Message) -> bool:
    """Whether ``message`` is an assistant's that makes tool calls."""
    data = message.data
    return message.role == "assistant" and bool(data.get("tool_calls") or data.get("function_call"))


def first_fit(cuts: Sequence[Cut], budget: int, cap: int | None) -> int:
    """Index of the first cut whose kept messages fit beside the summaries' reserve,
    else the last."""
    free = budget - reserve(budget, cap)
    return next((k for k, cut in enumerate(cuts) if cut.kept <= free), len(cuts) - 1)


def entry(kept: int, cap: int | None) -> int:
    """The least budget at which ``kept`` tokens fit beside the reserve."""
    low, high = kept, 2 * kept + MIN_RESERVE + (cap or 0) + 4
    while low < high:
        mid = (low + high) // 2
        if mid - reserve(mid, cap) >= kept:
            high = mid
        else:
            low = mid + 1
    return low


def split(room: int, weights: Sequence[int], sides: tuple[bool, bool]) -> list[int]:
    """``room`` (tokens) between the two summaries ``sides`` says are written: by
    ``weights``, but at least a quarter each (tool output swells the steps, while the
    requests that led to the task are short and matter as much); one alone gets it
    all."""
    if not all(sides):
        return [room if side else 0 for side in sides]
    first = room * weights[0] // max(1, sum(weights))
    first = min(max(first, room // 4), room - room // 4)
    return [first, room - first]


def rooms(
    cuts: Sequence[Cut], taken: int, budget: int, cap: int | None, weights: Sequence[int]
) -> list[int]:
    """Tokens for each of the two summaries at ``budget`` with cut ``taken``: what the
    cut leaves (within ``cap``), split by :func:`split`, but for each summary no more
    than a larger budget, taking an earlier cut that still writes it, would give it;
    what that holds back goes to a summary no earlier cut writes (its messages are all
    in the tail there). So no summary's room shrinks as the budget grows."""
    cut = cuts[taken]
    left = max(0, budget - cut.kept if cap is None else min(cap, budget - cut.kept))
    shares = split(left, weights, cut.sides)
    caps: list[int | None] = [None, None]
    for earlier in reversed(cuts[:taken]):
        start = entry(earlier.kept, cap)
        if reserve(start, cap) >= left:
            break  # every earlier cut leaves at least as much
        room = start - earlier.kept if cap is None else min(cap, start - earlier.kept)
        for k, share in enumerate(split(room, weights, earlier.sides)):
            if earlier.sides[k] and cut.sides[k]:
                held = caps[k]
                caps[k] = share if held is None else min(held, share)
    out = [share if held is None else min(share, held) for share, held in zip(shares, caps)]
    free = [k for k in (0, 1) if cut.sides[k] and caps[k] is None]
    if free:
        out[free[0]] += left - sum(out)
    return out


def chain(
    compacts: Sequence[int],
    befores: Sequence[int],
    steps: Sequence[int],
    cost: Callable[[int, int, int], tuple[int, tuple[bool, bool]]],
) -> list[Cut]:
    """The cuts in order: nothing done, each compaction, each fold before the latest
    user turn, then each fold of the steps after it (the task's own steps stay
    longest); ``befores``/``steps`` are the candidate ends of the two folds (the first of each
    folds the least), ``cost(compacted, before, steps)`` prices a cut and says which
    summaries it writes. Each cut folds
    or compacts all that the one before it did."""
    n = len(compacts)
    points = [(k, befores[0], steps[0]) for k in range(n + 1)]
    points += [(n, b, steps[0]) for b in befores[1:]]
    points += [(n, befores[-1], s) for s in steps[1:]]
    return [Cut(k, b, s, *cost(k, b, s)) for k, b, s in points]
