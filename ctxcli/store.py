"""The placeholder store, and ``restore``: putting the originals back.

A store is a JSONL file, one original per line::

    {"id": "3f2a9c0d1e4b5a67", "content": <the original content: a string, or a list of parts>}

written by ``compress`` beside its output (:func:`ctxcli.compress.default_store`), each
id once (identical contents are stored once), atomically together with the output.
Ids are those of :func:`ctxcli.stages.placeholder.content_id`; reading a store checks
every content against its id, so a store edited by hand cannot restore the wrong text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxcli import jsonio
from ctxcli.errors import StoreError
from ctxcli.stages.placeholder import ARGUMENTS_KEY, content_id, parse, parse_arguments

#: How every placeholder text begins (see :mod:`ctxcli.stages.placeholder`).
PLACEHOLDER_START = "[ctxcli placeholder "


class StoreWriter:
    """Append originals to a store file written atomically (see :class:`AtomicWriter`).

    ``entries`` and ``bytes`` say how many originals and bytes were written so far.
    Raises :class:`StoreError` when two different kinds of content (a string and a list)
    share an id, which happens only if a string is exactly a list's canonical JSON.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._writer = jsonio.AtomicWriter(target)
        self._kinds: dict[str, bool] = {}
        self.entries = 0
        self.bytes = 0

    def add(self, stored: Mapping[str, Any]) -> None:
        """Write each ``{id: content}`` not written before."""
        for key, content in stored.items():
            is_text = isinstance(content, str)
            seen = self._kinds.get(key)
            if seen is not None:
                if seen != is_text:
                    raise StoreError(
                        f"{self.target}: id {key} names both a string and a list of parts; "
                        "rerun without the placeholder stage for this input"
                    )
                continue
            self._kinds[key] = is_text
            line = jsonio.dumps({"id": key, "content": content}) + b"\n"
            self._writer.write(line)
            self.entries += 1
            self.bytes += len(line)

    def commit(self) -> None:
        """Move the store into place; a store with no entries is not written at all."""
        if self.entries:
            self._writer.commit()
        else:
            self._writer.abort()

    def abort(self) -> None:
        self._writer.abort()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self.abort()


def load_store(path: str) -> dict[str, Any]:
    """Read a store into ``{id: original}``.

    Raises :class:`InputError` for an unreadable file or bad JSON (naming the line) and
    :class:`StoreError` for a line that is not ``{"id", "content"}`` or whose content
    does not hash to its id.
    """
    store: dict[str, Any] = {}
    for line, raw in jsonio.iter_lines(path):
        entry = jsonio.loads(raw, path, line)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            raise StoreError(f'{path}:{line}: expected {{"id": ..., "content": ...}}')
        if "content" not in entry or content_id(entry["content"]) != entry["id"]:
            raise StoreError(f"{path}:{line}: content does not match its id {entry['id']}")
        store[entry["id"]] = entry["content"]
    return store


@dataclass
class RestoreStats:
    """What :func:`restore_file` did: records read and changed, placeholders restored
    and the characters they brought back (strings: their length; lists: their JSON's)."""

    input: str
    output: str
    store: str
    records: int = 0
    changed: int = 0
    placeholders: int = 0
    chars: int = 0
    missing: list[str] = field(default_factory=list)


def restore_record(record: Any, store: Mapping[str, Any]) -> tuple[Any, list[str], list[str]]:
    """``record`` with every placeholder in it replaced by its original, whatever the
    record's format: the walk goes through every JSON value and replaces a string that
    is a whole placeholder (a tool result), tool-call arguments that hold one
    (``{"ctxcli_placeholder": ...}`` as a JSON string or an object), and nothing else;
    a summary that quotes a placeholder is left alone.

    Returns ``(record, restored ids, problems)``; ``record`` is the very object given
    when nothing was restored. ``problems`` names ids missing from the store and text
    that starts like a placeholder but cannot be read as one.
    """
    restored: list[str] = []
    problems: list[str] = []

    def lookup(match: Any, current: Any, *, as_object: bool = False) -> Any:
        key = match.group("id")
        if key not in store:
            problems.append(key)
            return current
        restored.append(key)
        original = store[key]
        if as_object and isinstance(original, str):
            try:
                return json.loads(original)
            except ValueError:
                return original
        return original

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            match = parse(value) or parse_arguments(value)
            if match:
                return lookup(match, value)
            if value.startswith(PLACEHOLDER_START):
                problems.append(f"unreadable placeholder {value[:60]!r}")
            return value
        if isinstance(value, Mapping):
            if list(value) == [ARGUMENTS_KEY]:
                match = parse(value[ARGUMENTS_KEY])
                if match:
                    return lookup(match, value, as_object=True)
            items = {k: walk(v) for k, v in value.items()}
            return value if all(items[k] is value[k] for k in value) else items
        if isinstance(value, list):
            walked = [walk(v) for v in value]
            return value if all(a is b for a, b in zip(walked, value)) else walked
        return value

    out = walk(record)
    return out, restored, problems


def restore_file(input_path: str, output_path: str, store_path: str) -> RestoreStats:
    """Restore ``input_path`` (a compressed file, any format and shape ``compress``
    writes) into ``output_path`` (``-``: stdout) atomically, from the store at
    ``store_path``.

    A record without placeholders is written as the very bytes read. Raises
    :class:`StoreError` naming every placeholder the store cannot resolve (no output is
    left behind, stdout included) or when the output would replace the input or the
    store, and what :func:`load_store` and :func:`jsonio.read_records` raise.
    """
    for other, what in ((input_path, "input"), (store_path, "store")):
        if output_path != "-" and other != "-" and jsonio.same_file(output_path, other):
            raise StoreError(f"{output_path}: the output would overwrite the {what}")
    store = load_store(store_path)
    stats = RestoreStats(input=input_path, output=output_path, store=store_path)
    shape, items, original = jsonio.read_records(input_path)
    results = _restored(items, input_path, store, stats)
    if output_path == "-" or shape != "jsonl":
        results = iter(list(results))  # check everything before the first byte goes out
    with jsonio.AtomicWriter(output_path) as writer:
        newline, bom = jsonio.line_style(input_path)
        sink = jsonio.RecordSink(writer, shape, original, newline=newline, bom=bom)
        for out, changed in results:
            if not stats.missing:  # after the first, only name the rest
                sink.write(out, changed=changed)
        if stats.missing:
            shown = ", ".join(stats.missing[:10])
            more = f" and {len(stats.missing) - 10} more" if len(stats.missing) > 10 else ""
            raise StoreError(
                f"{input_path}: {len(stats.missing)} placeholder(s) cannot be restored from "
                f"{store_path}: {shown}{more}"
            )
        sink.close()
        writer.commit()
    return stats


def _restored(
    items: Iterator[jsonio.Record], path: str, store: Mapping[str, Any], stats: RestoreStats
) -> Iterator[tuple[bytes, bool]]:
    for item in items:
        stats.records += 1
        if (
            item.raw is not None
            and item.value is None
            and PLACEHOLDER_START.encode() not in item.raw
        ):
            yield item.raw, False
            continue
        record = item.parse(path)
        new, restored, problems = restore_record(record, store)
        where = f"line {item.line}" if item.line is not None else f"record {item.index}"
        stats.missing += [f"{key} ({where})" for key in problems]
        if not restored:
            yield (item.raw if item.raw is not None else jsonio.dumps(record)), False
            continue
        stats.changed += 1
        stats.placeholders += len(restored)
        for key in restored:
            content = store[key]
            stats.chars += len(content) if isinstance(content, str) else len(jsonio.dumps(content))
        yield jsonio.dumps(new), True
