"""A memo for functions of one text that holds no texts.

``functools.lru_cache`` keeps every argument alive: a cache of 65,536 tool results of
8 KB each would hold half a gigabyte. :class:`TextMemo` keys results by the text's
hash and length instead (Python caches a string's hash, so this costs one lookup),
and forgets everything when it is full, so memory stays bounded whatever the input.
A repeated text (the system prompt in every record) is computed once per fill.

Worker processes (forked, so they hash strings alike) pass one another the results
of the memos made with ``share_as``: see :func:`track`, :func:`fresh` and
:func:`learn`. A text the other worker already read is then not read again.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Results = dict[tuple[Hashable, ...], Any]

#: By default, results for texts shorter than this (characters) are not shared:
#: counting the tokens of a short text again costs about what passing the count on
#: would. A memo whose function costs more per text shares from fewer characters
#: (``share_from``).
SHARED_MIN_CHARS = 256
#: The memos whose results worker processes share, by name (held weakly: a memo no
#: one else uses is not kept for sharing).
_SHARED: weakref.WeakValueDictionary[str, TextMemo[Any]] = weakref.WeakValueDictionary()


class TextMemo(Generic[T]):
    """``memo(text, *extra)`` is ``func(text, *extra)``, computed once per distinct
    ``(extra, text)`` while at most ``size`` results are held.

    ``share_as`` names a memo whose results may be passed to another process (its
    ``func`` must give the same result for a text in every process, and picklable
    values), for texts of at least ``share_from`` characters (default
    :data:`SHARED_MIN_CHARS`); a later memo of the same name takes its place until
    :func:`share` puts this one back.

    Two different texts of the same length and hash would share a result; with 64-bit
    hashes that takes billions of distinct texts in one fill, far past ``size``.
    """

    def __init__(
        self,
        func: Callable[..., T],
        size: int = 1 << 17,
        *,
        share_as: str | None = None,
        share_from: int | None = None,
    ) -> None:
        self.func = func
        self.size = size
        self._results: dict[tuple[Hashable, ...], T] = {}
        self._fresh: dict[tuple[Hashable, ...], T] | None = None
        self.share_as = share_as
        self.share_from = SHARED_MIN_CHARS if share_from is None else share_from
        share(self)

    def __call__(self, text: str, *extra: Hashable) -> T:
        key = (hash(text), len(text), *extra)
        if key in self._results:  # not try/except: a miss, the common case, raises nothing
            return self._results[key]
        value = self.func(text, *extra)
        if len(self._results) >= self.size:
            self._results.clear()
        self._results[key] = value
        if self._fresh is not None and len(text) >= self.share_from:
            self._fresh[key] = value
        return value

    def _learn(self, results: Mapping[tuple[Hashable, ...], T]) -> None:
        if len(self._results) + len(results) > self.size:
            self._results.clear()
        self._results.update(results)


def share(memo: TextMemo[Any]) -> None:
    """Make ``memo`` the one shared under its ``share_as`` name (none: no change)."""
    if memo.share_as is not None:
        _SHARED[memo.share_as] = memo


def track() -> None:
    """Start keeping the new results of the shared memos for :func:`fresh`."""
    for memo in _SHARED.values():
        memo._fresh = {}


def fresh() -> dict[str, Results]:
    """The results the shared memos computed since the last call (after
    :func:`track`), by memo name; memos with none are left out."""
    found: dict[str, Results] = {}
    for name, memo in _SHARED.items():
        if memo._fresh:
            found[name] = memo._fresh
            memo._fresh = {}
    return found


def learn(results: Mapping[str, Results]) -> None:
    """Take in results from :func:`fresh` of another process (names this process
    does not know are skipped)."""
    for name, known in results.items():
        memo = _SHARED.get(name)
        if memo is not None:
            memo._learn(known)
