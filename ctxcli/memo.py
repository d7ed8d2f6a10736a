"""A memo for functions of one text that holds no texts.

``functools.lru_cache`` keeps every argument alive: a cache of 65,536 tool results of
8 KB each would hold half a gigabyte. :class:`TextMemo` keys results by the text's
hash and length instead (Python caches a string's hash, so this costs one lookup),
and forgets everything when it is full, so memory stays bounded whatever the input.
A repeated text (the system prompt in every record) is computed once per fill.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class TextMemo(Generic[T]):
    """``memo(text, *extra)`` is ``func(text, *extra)``, computed once per distinct
    ``(extra, text)`` while at most ``size`` results are held.

    Two different texts of the same length and hash would share a result; with 64-bit
    hashes that takes billions of distinct texts in one fill, far past ``size``.
    """

    def __init__(self, func: Callable[..., T], size: int = 1 << 17) -> None:
        self.func = func
        self.size = size
        self._results: dict[tuple[Hashable, ...], T] = {}

    def __call__(self, text: str, *extra: Hashable) -> T:
        key = (hash(text), len(text), *extra)
        try:
            return self._results[key]
        except KeyError:
            pass
        value = self.func(text, *extra)
        if len(self._results) >= self.size:
            self._results.clear()
        self._results[key] = value
        return value
