"""The placeholder store, and ``restore``: putting the originals back.

A store is a JSONL file, one original per line::

    {"id": "3f2a9c0d1e4b5a67", "content": <the original content: a string, or a list of parts>}

written by ``compress`` beside its output (:func:`ctxcli.compress.default_store`), each
id once (identical contents are stored once), atomically together with the output.
Ids are those of :func:`ctxcli.placeholders.content_id`; reading a store checks
every content against its id, so a store edited by hand cannot restore the wrong text.
An entry whose content itself looks like a placeholder (:func:`is_verbatim`) records
placeholder-like text the compressed input already held; restore leaves that text as
it is (see :func:`restore_record` for the whole rule).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli import jsonio, parquet
from ctxcli.errors import StoreError
from ctxcli.formats import gemini, gemini_cli, responses
from ctxcli.placeholders import (
    ARGUMENTS_KEY,
    ID_HEX,
    PLACEHOLDER_START,
    TOOL_ROLES,
    arguments_text,
    content_id,
    held_as,
    looks_like,
    parse,
)


class StoreWriter:
    """Append originals to a store file written atomically (see :class:`AtomicWriter`).

    ``entries`` and ``bytes`` say how many originals and bytes were written so far,
    :func:`is_verbatim` entries included: a store with only those is written too, so
    that ``restore`` knows the output's placeholder-like texts for the input's own
    (with no store it could not tell them from placeholders whose store was lost).
    With ``adding`` (a file named by ``--store``, which other outputs may share), the
    store is added to (:func:`add_to_store`), never replaced, and ``entries`` and
    ``bytes`` are then those it holds after :meth:`commit`. Raises
    :class:`StoreError` when two different kinds of content (a string and a list)
    share an id (since :data:`ctxcli.placeholders.PARTS_PREFIX`, only a string equal
    to the JSON of a list an earlier ctxcli stored, when added to that store), and,
    ``adding``, for a file that is no store (:func:`refuse_foreign`).
    """

    def __init__(self, target: str, *, like: str | None = None, adding: bool = False) -> None:
        self.target = target
        self._like = like
        self._adding = adding and not jsonio.is_stream(target)
        if self._adding:
            refuse_foreign(target)
        self._writer = jsonio.AtomicWriter(target, like=like)
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
        """Move the store into place, or add its entries to the one there
        (``adding``); a store with no entries is not written at all."""
        if not self.entries:
            self._writer.abort()
        elif self._adding:
            try:
                new = self._writer.written()
                self.entries, self.bytes = add_to_store(new, self.target, like=self._like)
            finally:
                self._writer.abort()
        else:
            self._writer.commit()

    def abort(self) -> None:
        self._writer.abort()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self.abort()


#: The id that opens a store's line as :class:`StoreWriter` writes it (compact JSON,
#: ``id`` first).
_ENTRY_ID = re.compile(rb'^\{"id":"([0-9a-f]+)"', re.MULTILINE)


def add_to_store(new: str, store: str, *, like: str | None = None) -> tuple[int, int]:
    """Write ``store`` as its entries so far (if it exists) followed by those of the
    file ``new`` it does not hold yet (by id: a run again adds nothing twice; an entry
    held damaged, cut short or edited, is not held, and is replaced by this run's),
    atomically, its mode no wider than ``like``'s (the input: see
    :class:`ctxcli.jsonio.AtomicWriter`); return the entries and bytes it then holds.
    A damaged entry had blocked its original for good: ``--in-place`` rewrote the
    input, and ``restore`` refused the store.

    The store is read and replaced under :func:`_folder_lock`, so runs adding to one
    store at once (a CI matrix compressing its fixtures in place) each add theirs: two
    that both read the store before either replaced it had kept only the last one's
    originals, and the other's placeholders could never be restored."""
    with _folder_lock(store):
        try:
            held = Path(store).read_bytes()
        except FileNotFoundError:
            held = b""
        if held and not held.endswith(b"\n"):
            held += b"\n"
        try:
            held, added = _kept_and_added(held, Path(new).read_bytes())
        except StoreError as clash:
            raise StoreError(f"{store}: {clash}") from None
        with jsonio.AtomicWriter(store, like=like) as writer:
            writer.write(held + added)
            writer.commit()
    data = held + added
    return data.count(b"\n"), len(data)


@contextlib.contextmanager
def _folder_lock(path: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the folder of ``path`` (its real path) while
    inside, waiting for any other holder (a process or thread): the folder, not the
    file, as the file is replaced (a lock on the old one would not exclude a run that
    opened the new one) and a lock file would be left beside the user's files. Where
    there is no ``flock`` (Windows), the folder cannot be opened (write and search
    permission only), or the file system refuses a lock on a folder (NFS may:
    ``EBADF``), nothing is locked, as before."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    folder = os.path.dirname(os.path.realpath(path))
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a folder one may write to but not read (mode 0300): unlocked
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _kept_and_added(held: bytes, new: bytes) -> tuple[bytes, bytes]:
    """The lines of a store's ``held`` entries to keep, and those of ``new`` to add:
    every new entry the store does not hold sound (:func:`_entry`: in any spacing or
    key order), and every held line but a damaged entry (cut short, edited) of an
    original ``new`` has, which that one replaces. Raises :class:`StoreError` for a
    new entry whose id a held one has with another kind of content
    (:func:`_refuse_kind_clash`)."""
    old = held.splitlines(keepends=True)
    entries = [_entry(line) for line in old]
    known = {key: kind for key, kind in entries if key is not None and kind is not None}
    lines = new.splitlines(keepends=True)
    ids = [_written_id(line) for line in lines]
    _refuse_kind_clash(known, zip(ids, lines))
    adding = [(key, line) for key, line in zip(ids, lines) if key is None or key not in known]
    fresh = {key for key, _ in adding}
    kept = (line for line, (key, _) in zip(old, entries) if key is None or key not in fresh)
    return b"".join(kept), b"".join(line for _, line in adding)


def _written_id(line: bytes) -> bytes | None:
    """The id of a line :class:`StoreWriter` wrote (``None`` for any other line)."""
    m = _ENTRY_ID.match(line)
    return m[1] if m else None


def _entry(line: bytes) -> tuple[bytes | None, str | None]:
    """A store's ``line`` as ``(id, kind of its content)`` (:func:`_kind`), the kind
    ``None`` when the entry is not sound (its content does not hash to its id, as
    :func:`load_store` asks: one cut short or edited must not be taken for the
    original it was); ``(None, None)`` for a line with no id to read, and the id read
    off the line's start for one that does not parse."""
    try:
        entry = json.loads(line)
    except ValueError:
        m = _ENTRY_ID.match(line)
        return (m[1] if m else None), None
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        return None, None
    key = entry["id"].encode()
    if "content" not in entry or not held_as(entry["content"], entry["id"]):
        return key, None
    return key, _kind(entry["content"])


def _kind(content: Any) -> str:
    """What ``content`` is, as an error names it: a string, a list of parts, an object."""
    if isinstance(content, str):
        return "a string"
    return "a list of parts" if isinstance(content, list) else "an object"


def _refuse_kind_clash(
    known: Mapping[bytes, str], lines: Iterable[tuple[bytes | None, bytes]]
) -> None:
    """Raise :class:`StoreError` for one of ``lines`` (new entries with their ids, as
    :class:`StoreWriter` writes them) whose id a held entry has (``known``: its kind by
    id) with another kind of content: a list or object an earlier ctxcli stored under
    the id of the string that is its JSON (before
    :data:`ctxcli.placeholders.PARTS_PREFIX`), which would restore in its place."""
    for key, line in lines:
        if key is None or key not in known:
            continue
        kind = _written_kind(line)
        if kind != known[key]:
            raise StoreError(
                f"id {key.decode()} is held as {known[key]} by an earlier ctxcli's entry "
                f"and is {kind} in this run (the same JSON); give this run another --store"
            )


#: Where the content of a line :class:`StoreWriter` wrote begins (compact, ``id`` first).
_CONTENT_AT = len('{"id":"') + ID_HEX + len('","content":')


def _written_kind(line: bytes) -> str:
    """:func:`_kind` of the content of a line :class:`StoreWriter` wrote, by its first
    byte (no need to parse what this run wrote)."""
    first = line[_CONTENT_AT : _CONTENT_AT + 1]
    return "a string" if first == b'"' else "a list of parts" if first == b"[" else "an object"


def refuse_foreign(path: str) -> None:
    """Raise :class:`StoreError` when ``path``, where a store is to be written or added
    to, is a file that holds something else (its first line no ``{"id", "content"}``
    entry): a transcript named with ``--store``, or any file that happens to have the
    name ``--in-place`` gives its store, would be replaced or appended to. A missing
    or empty file, a device and a store are fine."""
    if jsonio.is_stream(path):
        return
    try:
        with open(path, "rb") as file:
            first = file.readline(1 << 20).strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return
    except OSError:
        return  # unreadable: writing it says why
    try:
        entry = json.loads(first) if first else None
    except ValueError:
        entry = None
    if first and not (isinstance(entry, dict) and "id" in entry and "content" in entry):
        raise StoreError(
            f'{path}: exists and is no ctxcli store (its first line is no {{"id", "content"}} '
            "entry): move it, or give the store another name with --store"
        )


def load_store(path: str) -> dict[str, Any]:
    """Read a store into ``{id: original}``.

    Raises :class:`InputError` for an unreadable file or bad JSON (naming the line) and
    :class:`StoreError` for a line that is not ``{"id", "content"}`` or whose content
    does not hash to its id.
    """
    store: dict[str, Any] = {}
    for line, raw in jsonio.iter_lines(path):
        entry = jsonio.loads(raw, path, line)
        if (
            not isinstance(entry, Mapping)
            or not isinstance(entry.get("id"), str)
            or "content" not in entry
        ):  # a transcript given as the store has ids, and messages, not content
            raise StoreError(
                f'{path}:{line}: expected {{"id": ..., "content": ...}}: no ctxcli store'
            )
        if not held_as(entry["content"], entry["id"]):
            raise StoreError(f"{path}:{line}: content does not match its id {entry['id']}")
        store[entry["id"]] = entry["content"]
    return store


@dataclass
class RestoreStats:
    """What :func:`restore_file` did: records read and changed, placeholders restored
    and the characters they brought back (strings: their length; lists: their JSON's),
    ``earlier``: placeholders of an earlier run that stay (they were in the compressed
    run's input; that run's store restores them), and whether the store file was
    missing (``store_missing``: read as an empty store)."""

    input: str
    output: str
    store: str
    records: int = 0
    changed: int = 0
    placeholders: int = 0
    chars: int = 0
    missing: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    store_missing: bool = False


def restore_record(
    record: Any, store: Mapping[str, Any], kept: list[str] | None = None
) -> tuple[Any, list[str], list[str]]:
    """``record`` with every placeholder in it replaced by its original, whatever the
    record's format.

    The rule: restore looks only where the placeholder stage writes placeholders, and
    only at text that looks like one (begins ``[ctxcli placeholder ``):

    - the whole string ``content`` of a tool result, or its one LLaMA-Factory part's
      ``value``: a message whose ``role`` is ``tool`` or ``function`` (OpenAI,
      SWE-agent, LLaMA-Factory), a ``tool_result`` block (Anthropic, Claude Code), a
      ShareGPT turn ``from`` ``observation`` or ``tool`` (its ``value``), the
      ``output`` of a Responses API call's output item or of an ``mcp_call`` (which
      holds its own output); the text of a Gemini
      ``functionResponse``'s ``response`` that is ``{"output" | "error": text}``
      (:func:`ctxcli.formats.gemini.response_of` puts the original back), and of the
      one ``functionResponse`` of a Gemini CLI tool call's ``result`` (whose original
      may be the whole result, other parts beside the response);
    - tool-call arguments that are ``{"ctxcli_placeholder": <text>}``: as JSON text in
      ``tool_calls[].function.arguments`` or ``function_call.arguments``, as an object
      in a ``tool_use`` block's ``input``, inside a ShareGPT ``function_call`` turn or
      a LLaMA-Factory ``tool_call`` part (the value written anew: same JSON), as
      JSON text in a Responses ``function_call``'s or ``mcp_call``'s ``arguments`` (a
      ``custom_tool_call``'s ``input``).

    There, a readable placeholder whose id is in the store is replaced by its original;
    text the store holds as its own original (content equal to the text, see
    :func:`is_verbatim`: it was in the compressed run's input as it is) stays; any
    other is a problem: a readable placeholder's id (the store is wrong or cut short)
    or ``unreadable placeholder '...'``. Everything else, placeholder-like or not (a
    user or assistant quoting a placeholder, a summary), is left alone and is no
    problem. An original is put back as it is, never searched again.

    The id comes first: when a compressed input already held a placeholder and the
    run replaced that same original in another record of the file (a stored id is
    per file, and identical contents give identical placeholder texts), that
    placeholder is put back too, so restore then gives back more than that run took,
    never other text. Within one conversation the stage avoids this (see
    :mod:`ctxcli.stages.placeholder`), so there ``compress`` then ``restore`` gives
    back the input exactly.

    Returns ``(record, restored ids, problems)``; ``record`` is the very object given
    when nothing was restored. The ids of placeholders that stay (an earlier run's, see
    above) are added to ``kept`` when given.
    """
    restorer = _Restorer(store, kept)
    return restorer.walk(record), restorer.restored, restorer.problems


class _Restorer:
    """One :func:`restore_record` call: the ``store``, the ids ``restored`` and the
    ``problems`` met so far, and ``kept``, where the ids of placeholders that stay go."""

    def __init__(
        self,
        store: Mapping[str, Any],
        kept: list[str] | None,
        missing: Callable[[re.Match[str]], Any] | None = None,
    ) -> None:
        self.store, self.kept, self.missing = store, kept, missing
        self.restored: list[str] = []
        self.problems: list[str] = []

    def original(self, text: Any) -> Any:
        """The original for ``text`` at a placeholder place, or ``_KEEP``."""
        if not looks_like(text):
            return _KEEP
        match = parse(text)
        if match and match.group("id") in self.store:
            self.restored.append(match.group("id"))
            return self.store[match.group("id")]
        if self.store.get(content_id(text)) == text:
            if self.kept is not None:
                self.kept.append(match.group("id") if match else content_id(text))
            return _KEEP
        if match and self.missing is not None:
            return self.missing(match)
        self.problems.append(
            match.group("id") if match else f"unreadable placeholder {text[:60]!r}"
        )
        return _KEEP

    def arguments(self, value: Any, *, as_object: bool) -> Any:
        """Call arguments (JSON text, or the object of a ``tool_use`` block) restored."""
        if as_object:
            inner = value.get(ARGUMENTS_KEY) if isinstance(value, Mapping) else None
            if not (isinstance(value, Mapping) and list(value) == [ARGUMENTS_KEY]):
                return value
        else:
            inner = arguments_text(value)
        found = self.original(inner)
        if found is _KEEP:
            return value
        if as_object and isinstance(found, str):
            try:
                return json.loads(found)
            except ValueError:
                return found
        return found

    def place(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """The placeholder places of ``value`` with what they restore to."""
        out = {**self._results(value), **self._calls(value)}
        return {k: v for k, v in out.items() if v is not _KEEP and k in value}

    def _results(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """The tool-result places of ``value`` (see :func:`restore_record`)."""
        out: dict[str, Any] = {}
        if value.get("role") in TOOL_ROLES or value.get("type") == "tool_result":
            out["content"] = self._content(value.get("content"))
        if value.get("from") in _SHAREGPT_RESULTS:
            out["value"] = self.original(value.get("value"))
        if value.get("type") in responses.OUTPUTS or value.get("type") == "mcp_call":
            out["output"] = self.original(value.get("output"))
        answer = gemini.field(value, "functionResponse")
        if isinstance(answer, Mapping):
            out[gemini.key(value, "functionResponse")] = _gemini_answer(answer, self.original)
        if isinstance(value.get("result"), list):
            out["result"] = _gemini_result(value["result"], self.original)
        return out

    def _content(self, content: Any) -> Any:
        """A tool result's ``content`` restored: a placeholder text, or one
        LLaMA-Factory part holding it (``[{"type": "text", "value": …}]``, as
        :func:`ctxcli.formats.openai.write` puts one in a record of such parts), whose
        original is the whole content; ``_KEEP`` for any other."""
        if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
            text = content[0].get("value")
            if not isinstance(text, str):
                return _KEEP
            found = self.original(text)
            if isinstance(found, str):
                return [{**content[0], "value": found}]
            return found
        return self.original(content)

    def _calls(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """The tool-call argument places of ``value`` (see :func:`restore_record`)."""
        out: dict[str, Any] = {}
        kind = value.get("type")
        if kind in _RESPONSES_ARGUMENTS:
            key = _RESPONSES_ARGUMENTS[kind]
            out[key] = self.arguments(value.get(key), as_object=False)
        if kind == "tool_use" and "input" in value:
            out["input"] = self.arguments(value["input"], as_object=True)
        if "args" in value and "name" in value:  # Gemini's functionCall, a CLI toolCall
            out["args"] = self.arguments(value["args"], as_object=True)
        if value.get("from") == "function_call" or value.get("type") == "tool_call":
            out["value"] = _sharegpt_call(value.get("value"), self.arguments)
        function = value.get("function_call")
        if isinstance(function, Mapping) and "arguments" in function:
            out["function_call"] = _with_arguments(function, self.arguments)
        calls = value.get("tool_calls")
        if isinstance(calls, list):
            new_calls = [self._call(c) for c in calls]
            if any(a is not b for a, b in zip(new_calls, calls)):
                out["tool_calls"] = new_calls
        return out

    def _call(self, call: Any) -> Any:
        """One ``tool_calls`` entry, its arguments restored (the very entry if none)."""
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            return call
        function = _with_arguments(call["function"], self.arguments)
        return call if function is call["function"] else {**call, "function": function}

    def walk(self, value: Any) -> Any:
        """``value`` with every placeholder place in it restored (the very object when
        nothing is)."""
        if isinstance(value, Mapping):
            done = self.place(value)
            items = {k: done[k] if k in done else self.walk(v) for k, v in value.items()}
            return value if all(items[k] is value[k] for k in value) else items
        if isinstance(value, list):
            walked = [self.walk(v) for v in value]
            return value if all(a is b for a, b in zip(walked, value)) else walked
        return value


def with_originals(
    value: Any, store: Mapping[str, Any], missing: Callable[[re.Match[str]], Any]
) -> Any:
    """``value`` with each placeholder at a place :func:`restore_record` restores (a
    tool result, call arguments) replaced by its original from ``store``, or, for one
    whose original is not there (an earlier run's), by ``missing(match)``; the very
    object when nothing is replaced."""
    return _Restorer(store, None, missing).walk(value)


_KEEP: Any = object()
_SHAREGPT_RESULTS = frozenset({"observation", "tool"})
#: Where a Responses API call item holds its arguments, by its type.
_RESPONSES_ARGUMENTS = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "mcp_call": "arguments",
}


def _gemini_answer(answer: Mapping[str, Any], restore: Any) -> Any:
    """A Gemini ``functionResponse`` with its ``response`` restored, or ``_KEEP``."""
    value = answer.get("response")
    text = gemini.response_content(value)
    found = restore(text) if text is not value else _KEEP
    if found is _KEEP:
        return _KEEP
    return {**answer, "response": gemini.response_of(value, found)}


def _gemini_result(result: list[Any], restore: Any) -> Any:
    """A Gemini CLI tool call's ``result`` (its one ``functionResponse`` part holding a
    placeholder) restored: the original result when a list was stored, else the part
    with its response restored; the very list when it stays (never searched again);
    ``_KEEP`` for any other list."""
    answer = gemini_cli.single_response(result)
    if answer is None or not looks_like(gemini.response_content(answer.get("response"))):
        return _KEEP
    found = restore(gemini.response_content(answer["response"]))
    if found is _KEEP:
        return result
    if isinstance(found, list):
        return found
    part = result[0]
    new = {**answer, "response": gemini.response_of(answer["response"], found)}
    return [{**part, gemini.key(part, "functionResponse"): new}]


def _with_arguments(function: Mapping[str, Any], restore: Any) -> Any:
    """``function`` (``{name, arguments}``) with its arguments restored, or the very
    object when they stay."""
    value = function.get("arguments")
    new = restore(value, as_object=False)
    return function if new is value else {**function, "arguments": new}


def _sharegpt_call(value: Any, restore: Any) -> Any:
    """A ShareGPT ``function_call`` turn's or a LLaMA-Factory ``tool_call`` part's
    value (JSON text of ``{name, arguments}``, the arguments an object or JSON text)
    with its arguments restored, or ``_KEEP``. The value is written anew: the same
    JSON, not the same spacing."""
    if not isinstance(value, str) or ARGUMENTS_KEY not in value:
        return _KEEP
    try:
        call = json.loads(value)
    except ValueError:
        return _KEEP
    if not isinstance(call, dict) or not isinstance(call.get("arguments"), (Mapping, str)):
        return _KEEP
    new = restore(call["arguments"], as_object=isinstance(call["arguments"], Mapping))
    if new is call["arguments"]:
        return _KEEP
    return jsonio.dumps({**call, "arguments": new}).decode()


def is_verbatim(content: Any) -> bool:
    """True for a store entry that holds placeholder-like text as its own original
    (:func:`ctxcli.placeholders.looks_like`): the input of the run that wrote
    the store had that text where placeholders go, and ``restore`` leaves it there.
    The placeholder stage never replaces such text, so no other original looks so."""
    return looks_like(content)


def needs_store(stored: Mapping[str, Any]) -> bool:
    """True when ``stored`` (``{id: original}``) holds an original a placeholder
    replaced, not only :func:`is_verbatim` entries (which matter only beside those)."""
    return any(not is_verbatim(content) for content in stored.values())


def restore_file(input_path: str, output_path: str, store_path: str) -> RestoreStats:
    """Restore ``input_path`` (a compressed file, any format and shape ``compress``
    writes) into ``output_path`` (``-``: stdout) atomically, from the store at
    ``store_path``.

    A record without placeholders is written as the very bytes read; a missing store
    file counts as an empty store (compress writes none when it replaced nothing). Raises
    :class:`StoreError` naming every placeholder the store cannot resolve (no output is
    left behind, stdout included) or when the output would replace the input or the
    store, and what :func:`load_store` and :func:`jsonio.read_records` raise.
    """
    for other, what in ((input_path, "input"), (store_path, "store")):
        if output_path != "-" and other != "-" and jsonio.same_file(output_path, other):
            raise StoreError(f"{output_path}: the output would overwrite the {what}")
    # No store file: compress writes none when it replaced nothing, so a file without
    # placeholders restores as it is; one with placeholders names the missing file.
    absent = store_path != "-" and not Path(store_path).exists()
    store = {} if absent else load_store(store_path)
    stats = RestoreStats(
        input=input_path, output=output_path, store=store_path, store_missing=absent
    )
    data = jsonio.read_input(input_path)
    shape, items, original = parquet.open_records(input_path, data)
    results = _restored(items, input_path, store, stats)
    if output_path == "-" or shape != "jsonl":
        results = iter(list(results))  # check everything before the first byte goes out
    # The originals are back: no more readable than the file or the store they came from.
    with jsonio.AtomicWriter(output_path, like=(input_path, store_path)) as writer:
        newline, bom = jsonio.line_style(input_path, data)
        sink = parquet.sink(writer, shape, original, newline=newline, bom=bom)
        for out, changed in results:
            if not stats.missing:  # after the first, only name the rest
                sink.write(out, changed=changed)
        if stats.missing:
            shown = ", ".join(stats.missing[:10])
            more = f" and {len(stats.missing) - 10} more" if len(stats.missing) > 10 else ""
            raise StoreError(
                f"{input_path}: {len(stats.missing)} placeholder(s) cannot be restored from "
                f"{store_path}{' (no such file)' if absent else ''}: {shown}{more}; --store "
                "names the store of the run that wrote them (a run to stdout keeps it beside "
                "its input)"
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
        new, restored, problems = restore_record(record, store, stats.earlier)
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
