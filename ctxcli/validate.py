"""Check transcript files against the rules of their formats (``ctxcli validate``).

Each record is read in its format (forced, else detected as ``compress`` does) and
checked by that format's ``problems`` (:mod:`ctxcli.formats`): tool pairing and
order, first-message rules, thinking blocks, session links. A record that cannot be
read at all is a problem too (rule ``unreadable``). Each is a
:class:`ctxcli.problems.Problem` naming its file, line or record and format.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ctxcli import formats, jsonio, parquet
from ctxcli.errors import InputError
from ctxcli.formats.base import Format, WholeFile
from ctxcli.inputs import find_inputs
from ctxcli.problems import Problem as Problem  # ctxcli.Problem is read from here
from ctxcli.tokens import NullCounter, TokenCounter


def validate_file(
    path: str,
    *,
    format: str | None = None,
    messages_key: str | None = None,
    counter: TokenCounter | None = None,
) -> Iterator[Problem]:
    """Yield every problem of every record in ``path`` (``-``: stdin; a folder: each
    transcript in it, found as ``compress`` finds them, and the compressed ones too,
    :func:`ctxcli.inputs.find_inputs`),
    in file order. A number JSON does not allow where the file's shape is decided is
    listed too, and the file left there.

    Raises :class:`ctxcli.errors.ConfigError` for an unknown ``format`` or a folder
    with no transcripts, and :class:`InputError` when a file cannot be opened.
    """
    module = formats.get(format) if format else None
    counter = counter or NullCounter()  # the rules need no token counts
    paths = [f.path for f in find_inputs([path], outputs=True)] if os.path.isdir(path) else [path]
    for each in paths:
        yield from _file(each, module, messages_key, counter)


def _file(
    path: str, module: Format | None, messages_key: str | None, counter: TokenCounter
) -> Iterator[Problem]:
    """The problems of one file (see :func:`validate_file`)."""
    try:
        shape, items, _ = parquet.open_records(path, None, messages_key)
    except jsonio.NumberError as exc:  # raised by the look at the first lines
        yield Problem("unreadable", exc.reason, path=path, line=exc.line)
        return
    whole, items = formats.whole_file_of(module, shape, items, path)
    if whole is not None:
        yield from _session(path, items, counter, whole)
        return
    for item in items:
        yield from _record(path, item, module, messages_key, counter)


def _record(
    path: str,
    item: jsonio.Record,
    module: Format | None,
    messages_key: str | None,
    counter: TokenCounter,
) -> Iterator[Problem]:
    """The problems of one record, each naming its place in ``path``."""
    at = {"path": path, "line": item.line, "record": item.index}
    try:
        record = item.parse(path)
        found = formats.find(record, messages_key, module)
        if found is None:
            raise InputError(path, item.line, formats.no_fit(record, messages_key))
        conversation = found.read(record, counter, path=path, line=item.line or 0)
    except InputError as exc:
        yield Problem("unreadable", exc.reason).at(**at)
        return
    except (LookupError, TypeError):  # a --messages-key path that leads nowhere
        yield Problem("unreadable", formats.no_fit(record, messages_key)).at(**at)
        return
    for problem in found.problems(record, conversation):
        yield problem.at(**at, scope=found.format.NAME)


def _session(
    path: str, items: Iterator[jsonio.Record], counter: TokenCounter, module: WholeFile
) -> Iterator[Problem]:
    events, lines = [], []
    for item, event in formats.events(items, path):
        if isinstance(event, InputError):
            yield Problem("unreadable", event.reason, path=path, line=item.line)
            continue
        events.append(event)
        lines.append(item.line or 0)
    try:
        conversation = formats.read_file(module, events, counter, path=path, lines=lines)
    except InputError as exc:
        yield Problem("unreadable", exc.reason, path=path, line=exc.line)
        return
    for problem in module.problems(events, conversation):
        yield problem.at(path=path, scope=module.NAME)
