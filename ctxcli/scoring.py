"""Score a compressed file against its original: both read as ``compress`` reads
them, paired conversation by conversation, each scored by :func:`ctxcli.score.score`.

Apart from :mod:`ctxcli.score` because reading goes through :mod:`ctxcli.count` and
so :mod:`ctxcli.compress`, which scores with :mod:`ctxcli.score` itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ctxcli import jsonio
from ctxcli.config import Settings
from ctxcli.count import Counting
from ctxcli.errors import InputError
from ctxcli.model import Conversation
from ctxcli.score import ConversationScore, FileScore, score


class Scoring:
    """Scores compressed files against their originals, both read as a
    :class:`ctxcli.count.Counting` of ``settings`` reads them (so as ``compress``
    does); ``settings.max_tokens`` is the budget. ``warn`` and ``cache_dir`` are the
    reader's. With ``settings.on_error`` ``keep``, a record that cannot be read is left
    out of the score, on either side, with a warning: ``compress --on-error keep``
    copies a bad line to its output unchanged, so the two still pair up."""

    def __init__(
        self,
        settings: Settings,
        *,
        warn: Callable[[str], None] | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:

        self.reader = Counting(settings, warn=warn, cache_dir=cache_dir, report="the score")
        self.budget = settings.max_tokens

    def pairs(self, original: str, compressed: str) -> Iterator[ConversationScore]:
        """Each conversation of ``original`` scored against the one in the same place
        of ``compressed``, in file order. Raises :class:`InputError` when the files
        hold different numbers of conversations, or conversations of different ids in
        one place, and for a record that cannot be read."""
        left, right = self.reader.read(original), self.reader.read(compressed)
        for place, pair in enumerate(itertools.zip_longest(left, right)):
            (item, before), (_, after) = _paired(pair, place, original, compressed, left, right)
            if before.id is not None and after.id is not None and before.id != after.id:
                raise InputError(
                    compressed,
                    None,
                    f"conversation {place + 1} is {after.id!r}, but {before.id!r} in "
                    f"{original}: the files do not pair up",
                )
            yield score(before, after, budget=self.budget, line=item.line, record=item.index)

    def file(self, original: str, compressed: str, *, per_conversation: bool = False) -> FileScore:
        """The :class:`FileScore` of ``compressed`` against ``original``."""
        scored = FileScore(original, compressed, self.budget)
        for item in self.pairs(original, compressed):
            scored.add(item, keep=per_conversation)
        return scored


Read = tuple[jsonio.Record, Conversation]


def _paired(
    pair: tuple[Read | None, Read | None],
    place: int,
    original: str,
    compressed: str,
    left: Iterable[Read],
    right: Iterable[Read],
) -> tuple[Read, Read]:
    """``pair`` when both sides are there; else raises the :class:`InputError` that
    says how many conversations each file holds (reading the rest of the longer)."""
    first, second = pair
    if first is not None and second is not None:
        return first, second
    if first is None:
        counts = (place, place + 1 + sum(1 for _ in right))
    else:
        counts = (place + 1 + sum(1 for _ in left), place)
    raise InputError(
        compressed,
        None,
        f"holds {counts[1]:,} conversations but {original} holds {counts[0]:,}: "
        "score pairs conversations in file order, so the files must hold as many",
    )
