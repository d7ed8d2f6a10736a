"""The placeholder store, and ``restore``: putting the originals back.

A store is a JSONL file, one original per line::

    {"id": "3f2a9c0d1e4b5a67", "content": <the original content: a string, or a list of parts>}

written by ``compress`` beside its output (:func:`ctxcli.compress.default_store`), each
id once (identical contents are stored once), atomically together with the output.
Ids are those of :func:`ctxcli.stages.placeholder.content_id`; reading a store checks
every content against its id, so a store edited by hand cannot restore the wrong text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxcli import jsonio
from ctxcli.errors import StoreError
from ctxcli.stages.placeholder import TOOL_ROLES, content_id, parse, parse_arguments


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
    """``record`` with every placeholder in its messages replaced by its original.

    Returns ``(record, restored ids, missing ids)``; ``record`` is the very object given
    when nothing was restored. Only ``tool`` / ``function`` contents and tool-call
    arguments are looked at, as only those are ever replaced.
    """
    messages = record.get("messages") if isinstance(record, Mapping) else None
    if not isinstance(messages, list):
        return record, [], []
    restored: list[str] = []
    missing: list[str] = []

    def lookup(match: Any, current: Any) -> Any:
        key = match.group("id")
        if key not in store:
            missing.append(key)
            return current
        restored.append(key)
        return store[key]

    out = []
    for message in messages:
        new = message
        if isinstance(message, Mapping):
            match = parse(message.get("content")) if message.get("role") in TOOL_ROLES else None
            if match:
                new = {**message, "content": lookup(match, message.get("content"))}
            if message.get("role") == "assistant":
                new = _restore_calls(new, lookup)
        out.append(new)
    if not restored:
        return record, restored, missing
    return {**record, "messages": out}, restored, missing


def _restore_calls(message: Mapping[str, Any], lookup: Any) -> Mapping[str, Any]:
    def fix(function: Any) -> Any:
        if not isinstance(function, Mapping):
            return function
        match = parse_arguments(function.get("arguments"))
        if not match:
            return function
        return {**function, "arguments": lookup(match, function.get("arguments"))}

    out = dict(message)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {**c, "function": fix(c.get("function"))} if isinstance(c, Mapping) else c
            for c in calls
        ]
    if isinstance(message.get("function_call"), Mapping):
        out["function_call"] = fix(message["function_call"])
    return out if out != message else message


def restore_file(input_path: str, output_path: str, store_path: str) -> RestoreStats:
    """Restore ``input_path`` (a compressed JSONL file) into ``output_path`` (``-``:
    stdout) atomically, from the store at ``store_path``.

    A line without placeholders is written as the very bytes read. Raises
    :class:`StoreError` naming every placeholder the store cannot resolve (no output is
    left behind), and what :func:`load_store` and :func:`jsonio.iter_lines` raise.
    """
    store = load_store(store_path)
    stats = RestoreStats(input=input_path, output=output_path, store=store_path)
    lines = _restored_lines(input_path, store, stats)
    if output_path == "-":
        lines = iter(list(lines))  # stdout cannot be taken back: check everything first
    with jsonio.AtomicWriter(output_path) as writer:
        for out in lines:
            if stats.missing and output_path == "-":
                break
            writer.write(out + b"\n")
        if stats.missing:
            shown = ", ".join(stats.missing[:10])
            more = f" and {len(stats.missing) - 10} more" if len(stats.missing) > 10 else ""
            raise StoreError(
                f"{input_path}: {len(stats.missing)} placeholder(s) not in the store "
                f"{store_path}: {shown}{more}"
            )
        writer.commit()
    return stats


def _restored_lines(path: str, store: Mapping[str, Any], stats: RestoreStats) -> Iterator[bytes]:
    for line, raw in jsonio.iter_lines(path):
        stats.records += 1
        if b"ctxcli placeholder" not in raw:
            yield raw
            continue
        record = jsonio.loads(raw, path, line)
        new, restored, missing = restore_record(record, store)
        stats.missing += [f"{key} (line {line})" for key in missing]
        if not restored:
            yield raw
            continue
        stats.changed += 1
        stats.placeholders += len(restored)
        for key in restored:
            original = store[key]
            stats.chars += (
                len(original) if isinstance(original, str) else len(jsonio.dumps(original))
            )
        yield jsonio.dumps(new)
