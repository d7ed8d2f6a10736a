"""Check transcript files against the rules of their formats (``ctxcli validate``).

Each record is read in its format (forced, else detected as ``compress`` does) and
checked by that format's ``problems`` (:mod:`ctxcli.formats`): tool pairing and
order, first-message rules, thinking blocks, session links. A record that cannot be
read at all is a problem too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ctxcli import formats, jsonio, parquet
from ctxcli.errors import InputError, where
from ctxcli.formats.base import WholeFile
from ctxcli.tokens import NullCounter, TokenCounter


@dataclass(frozen=True)
class Problem:
    """One broken rule: the file, the line (JSON lines) or record index (JSON array)
    of the record, and the reason (which names the message inside the record)."""

    path: str
    line: int | None
    record: int | None
    reason: str

    def __str__(self) -> str:
        return f"{where(self.path, self.line, self.record)}: {self.reason}"


def validate_file(
    path: str,
    *,
    format: str | None = None,
    messages_key: str | None = None,
    counter: TokenCounter | None = None,
) -> Iterator[Problem]:
    """Yield every problem of every record in ``path`` (``-``: stdin), in file order.

    Raises :class:`ctxcli.errors.ConfigError` for an unknown ``format`` and
    :class:`InputError` when the file cannot be opened.
    """
    module = formats.get(format) if format else None
    counter = counter or NullCounter()  # the rules need no token counts
    shape, items, _ = parquet.open_records(path, None, messages_key)
    whole, items = formats.whole_file_of(module, shape, items, path)
    if whole is not None:
        yield from _session(path, items, counter, whole)
        return
    for item in items:
        try:
            record = item.parse(path)
            found = formats.find(record, messages_key, module)
            if found is None:
                raise InputError(path, item.line, formats.no_fit(record, messages_key))
            conversation = found.read(record, counter, path=path, line=item.line or 0)
        except InputError as exc:
            yield Problem(path, item.line, item.index, exc.reason)
            continue
        except (LookupError, TypeError):  # a --messages-key path that leads nowhere
            yield Problem(path, item.line, item.index, formats.no_fit(record, messages_key))
            continue
        for reason in found.problems(record, conversation):
            yield Problem(path, item.line, item.index, f"{found.format.NAME}: {reason}")


def _session(
    path: str, items: Iterator[jsonio.Record], counter: TokenCounter, module: WholeFile
) -> Iterator[Problem]:
    events, lines = [], []
    for item, event in formats.events(items, path):
        if isinstance(event, InputError):
            yield Problem(path, item.line, None, event.reason)
            continue
        events.append(event)
        lines.append(item.line or 0)
    try:
        conversation = formats.read_file(module, events, counter, path=path, lines=lines)
    except InputError as exc:
        yield Problem(path, exc.line, None, exc.reason)
        return
    for reason in module.problems(events, conversation):
        yield Problem(path, None, None, f"{module.NAME}: {reason}")
