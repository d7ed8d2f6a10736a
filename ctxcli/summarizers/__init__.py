"""Summarizers turn folded messages into the text of one summary message.

A summarizer has one method::

    summarize(messages, *, previous, max_tokens, counter) -> str

``messages`` are the folded OpenAI-style message dicts (oldest first, without the
earlier summary), ``previous`` the body of an earlier ctxcli summary to merge (or
``None``), ``max_tokens`` the bound on the returned text in tokens of ``counter``.
It returns the summary body (the stage adds the ``[ctxcli summary]`` header) and
raises :class:`ctxcli.errors.SummaryError` when it cannot produce a usable one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ctxcli.tokens import TokenCounter


class Summarizer(Protocol):
    """See the module docstring."""

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str: ...
