"""Bounded YAML: the one loader for config files and skill front matter.

:func:`parse` is ``yaml.safe_load`` with bounds checked before any value is built:

- at most :data:`MAX_BYTES` bytes of text (UTF-8);
- no aliases (``*name``, so no merge keys ``<<: *name`` either): an alias is how a
  few hundred bytes expand into gigabytes (a "billion laughs" YAML bomb), and ctxcli's
  settings and front matter never need one. An anchor alone (``&name``) is harmless;
- collections nested at most :data:`MAX_DEPTH` deep: libyaml's composer recurses in C
  and crashes the process on a deep enough nesting, PyYAML's raises RecursionError;
- every value has a JSON form: no ``.inf`` or ``.nan``, no integer of more than
  :data:`MAX_INT_DIGITS` digits (Python cannot even print one); and a value Python
  refuses (a date that does not exist, ``2024-13-45``) is an error at its line, not a
  traceback.

Aliases and depth are checked on the parser's events, before any node is built, so a
refused document costs one linear pass and never a node of its expansion (a text with
no ``*`` and too few collections to nest that deep skips the pass); values are checked
as each is built. libyaml is used when present (the pure-Python parser is most of the
cost of a skills listing); an error is reported in PyYAML's own words, parsed again
without libyaml, so messages do not depend on whether it is installed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from ctxcli.errors import YamlError

MAX_BYTES = 64 * 1024  # bytes of YAML text, UTF-8
MAX_DEPTH = 100  # nested mappings and sequences
MAX_INT_DIGITS = 4300  # CPython's default int_max_str_digits
_MAX_INT = 10**MAX_INT_DIGITS
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_INT_DIGITS", "Document", "parse"]


@dataclass(frozen=True)
class Document:
    """One parsed YAML document: ``data`` as ``yaml.safe_load`` builds it (``None`` for
    an empty one), and its root ``node`` (with marks, 0-based) for finding lines."""

    data: Any
    node: yaml.Node | None
    first_line: int

    def line(self, keys: tuple[str | int, ...]) -> int | None:
        """The 1-based line of the key path ``keys`` (mapping keys as written, or as
        read when not text, ``1`` of ``1: 2``; list indexes as ints): of the last key
        for a mapping, of the item for a list. ``None`` when the path is not in the
        document."""
        node, line = self.node, None
        for key in keys:
            found = _child(node, key)
            if found is None:
                return None
            mark, node = found
            line = self.first_line + mark.line
        return line


def _child(node: yaml.Node | None, key: str | int) -> tuple[Any, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == str(key):  # ``1:`` too
                return k.start_mark, v
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        item = node.value[key]
        return item.start_mark, item
    return None


#: A number YAML 1.1 reads in another base than people write it (PyYAML: ``010`` is
#: 8, ``1:30`` is 90, ``1:30.5`` is 90.5), where YAML 1.2 reads ``10``-ish text or a
#: string.
_BASE_1_1 = re.compile(r"[-+]?(?:0[0-7_]+|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)")


def _refuse_base_1_1(node: yaml.ScalarNode) -> None:
    """Raise a YAML error at ``node`` when it is a number of :data:`_BASE_1_1`."""
    if _BASE_1_1.fullmatch(node.value):
        raise ConstructorError(
            None,
            None,
            f"{node.value} reads as a number in base 8 or 60 here; "
            "write it without a leading zero or colon, or quote it",
            node.start_mark,
        )


def _checked_int(loader: Any, node: yaml.ScalarNode) -> int:
    # Digits first: Python refuses to read so many, in words that suggest a sys call.
    too_long = sum(c.isdigit() for c in node.value) > MAX_INT_DIGITS
    if not too_long:
        _refuse_base_1_1(node)
    value = 0 if too_long else _constructed(SafeConstructor.construct_yaml_int, loader, node)
    if too_long or abs(value) >= _MAX_INT:
        raise ConstructorError(
            None, None, f"an integer of more than {MAX_INT_DIGITS} digits", node.start_mark
        )
    return int(value)


def _checked_float(loader: Any, node: yaml.ScalarNode) -> float:
    _refuse_base_1_1(node)
    value = _constructed(SafeConstructor.construct_yaml_float, loader, node)
    if not math.isfinite(value):
        raise ConstructorError(
            None, None, f"{node.value!r} is not a finite number (JSON has none)", node.start_mark
        )
    return float(value)


def _checked_timestamp(loader: Any, node: yaml.ScalarNode) -> Any:
    return _constructed(SafeConstructor.construct_yaml_timestamp, loader, node)


def _constructed(construct: Any, loader: Any, node: yaml.ScalarNode) -> Any:
    """``construct(loader, node)``, a ValueError (too many digits, no such date) turned
    into a YAML error at the node: it would carry no line, and is no YAMLError."""
    try:
        return construct(loader, node)
    except (ValueError, OverflowError) as e:
        raise ConstructorError(None, None, str(e), node.start_mark) from None


class _UniqueKeys:
    """A loader's mappings refuse a key given twice (PyYAML keeps the last, silently:
    ``max_tokens: 300`` then ``max_tokens: 5`` ran at 5; YAML 1.2 wants keys unique)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    problem = f"{key.value!r} is given twice; give it once"
                    raise ConstructorError(None, None, problem, key.start_mark)
                seen.add(key.value)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _FastLoader(_UniqueKeys, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


class _PureLoader(_UniqueKeys, yaml.SafeLoader):
    pass


for _loader in (_FastLoader, _PureLoader):
    _loader.add_constructor("tag:yaml.org,2002:int", _checked_int)
    _loader.add_constructor("tag:yaml.org,2002:float", _checked_float)
    _loader.add_constructor("tag:yaml.org,2002:timestamp", _checked_timestamp)


def parse(text: str, *, path: str, first_line: int = 1, max_bytes: int = MAX_BYTES) -> Document:
    """Parse one YAML document within the bounds of the module docstring.

    ``path`` names the source in errors; ``first_line`` is the file line of the text's
    first line (2 for front matter after its ``---``). Raises :class:`YamlError` with
    the file line where one is known.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise YamlError(path, None, f"{size} bytes, over the bound of {max_bytes}")
    try:
        try:
            return _load(_FastLoader, text, path, first_line)
        except yaml.YAMLError:
            return _load(_PureLoader, text, path, first_line)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = first_line + mark.line if mark is not None else None
        what = ", ".join(str(part) for part in (e.context, e.problem) if part)
        raise YamlError(path, line, what) from None
    except yaml.YAMLError as e:
        raise YamlError(path, None, str(e)) from None


def _load(loader_class: Any, text: str, path: str, first_line: int) -> Document:
    if "*" in text or _most_collections(text) > MAX_DEPTH:
        _check_events(loader_class, text, path, first_line)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return Document(data, node, first_line)


def _most_collections(text: str) -> int:
    """An upper bound on the collections in ``text``, so on their depth: each starts
    with a character of its own (``[`` or ``{``; the ``-`` of a block sequence's first
    item; the ``:`` or ``?`` of a mapping's first key). Most front matter has under 100
    of them, and skips :func:`_check_events` (a third of the cost of a parse)."""
    return sum(text.count(c) for c in "[{-:?")


def _check_events(loader_class: Any, text: str, path: str, first_line: int) -> None:
    """Refuse aliases and deep nesting from the event stream, before any node exists."""
    loader = loader_class(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                raise YamlError(
                    path,
                    _line(event, first_line),
                    f"aliases are not allowed (found *{event.anchor}); write the value out",
                )
            if isinstance(event, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    line = _line(event, first_line)
                    raise YamlError(path, line, f"nested more than {MAX_DEPTH} levels deep")
            elif isinstance(event, _CLOSE):
                depth -= 1
    finally:
        loader.dispose()


def _line(event: yaml.Event, first_line: int) -> int | None:
    mark = event.start_mark
    return first_line + mark.line if mark is not None else None
