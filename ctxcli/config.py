"""Settings for ``compress``: defaults, then a YAML file, then command-line options.

A config file maps one-to-one onto the command-line options::

    model: gpt-4o            # or encoding: cl100k_base
    max_tokens: 2000         # tokens per conversation; null for no budget
    on_error: fail           # or keep
    format: anthropic        # force a format (default: detected per record)
    messages_key: traj       # where the messages are (default: the format's own key)
    stages:                  # in order; a name, or a name with its options
      - summary: {keep_last: 4, role: user, max_tokens: 300}
      - priority
    window: {keep_last: 6}   # options may also stand at the top level, by stage name
    summarizer:              # extractive (default) or llm; see ctxcli.summarizers.build
      name: llm
      model: gpt-4o-mini
      base_url: http://127.0.0.1:8080/v1

The file is read within the bounds of :mod:`ctxcli.yamlio` (64 KiB, no aliases) and every
value's type is checked (:func:`check`) before any is used: a wrong one is a one-line
:class:`ConfigError` naming the file, line and key, such as ``ctxcli.yaml:2: model:
expected a string or null, got a list``.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ctxcli.errors import ConfigError, YamlError
from ctxcli.pipeline import DEFAULT_STAGES, STAGES, Stage, build_stage
from ctxcli.summarizers import NAMES as SUMMARIZER_NAMES
from ctxcli.summarizers import WHOLE_BOUNDS, is_timeout
from ctxcli.tokens import MAX_BUDGET, unknown_encoding

DEFAULT_MAX_TOKENS = 8000
#: Options the default pipeline (:data:`DEFAULT_STAGES`) sets beneath the user's: it
#: leaves a conversation within the budget as it is, placeholders included, and its
#: placeholders name the facts they omit (see :class:`ctxcli.stages.placeholder.Placeholder`).
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"placeholder": {"until_fit": True, "facts": True}}
_TOP_LEVEL = {
    "model",
    "encoding",
    "max_tokens",
    "on_error",
    "stages",
    "summarizer",
    "format",
    "messages_key",
}


@dataclass
class Settings:
    """Everything ``compress`` needs besides paths.

    ``max_tokens`` is the budget in tokens per conversation (``None``: no budget);
    ``model`` picks the tiktoken encoding unless ``encoding`` names one. ``format``
    forces a transcript format (:data:`ctxcli.formats.FORMATS`; ``None``: detect per
    record); ``messages_key`` is the record key holding the messages (``None``: the
    format's own, ``messages`` or ``conversations``).
    """

    stages: list[Stage]
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    model: str | None = None
    encoding: str | None = None
    on_error: Literal["fail", "keep"] = "fail"
    summarizer: Mapping[str, Any] = field(default_factory=dict)
    format: str | None = None
    messages_key: str | None = None

    @property
    def stage_names(self) -> list[str]:
        return [stage.name for stage in self.stages]


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file: at most :data:`ctxcli.yamlio.MAX_BYTES` bytes of UTF-8,
    parsed by :func:`ctxcli.yamlio.parse` (no aliases), every value type-checked by
    :func:`check` before it is used.

    Raises :class:`ConfigError` naming the file and, where known, the line: also for
    what :func:`resolve` of the file alone refuses (``ctxcli.yaml:2: max_tokens must
    be a whole number …``, ``ctxcli.yaml: unknown stage 'bogus' …``).
    """
    from ctxcli import yamlio  # PyYAML only for a run with a config file

    try:
        with open(path, "rb") as f:
            raw = f.read(yamlio.MAX_BYTES + 1)  # a bound, not the whole of /dev/zero
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > yamlio.MAX_BYTES:
        raise ConfigError(f"{path}: longer than {yamlio.MAX_BYTES} bytes; not a config file")
    try:
        document = yamlio.parse(raw.decode("utf-8"), path=str(path))
    except UnicodeDecodeError as exc:
        line = 1 + raw.count(b"\n", 0, exc.start)
        raise ConfigError(f"{path}:{line}: not valid UTF-8") from None
    except YamlError as exc:
        raise ConfigError(str(exc)) from None
    data = document.data
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {_kind_of(data)}")
    unknown = set(data) - _TOP_LEVEL - set(STAGES)

    def where(keys: tuple[str | int, ...]) -> str:
        line = document.line(keys)
        return f"{path}:{line}" if line is not None else str(path)

    if unknown:
        first = sorted(unknown, key=str)[0]  # keys of any type: ``1: 2`` beside ``foo: 1``
        known = ", ".join(sorted(_TOP_LEVEL | set(STAGES)))
        raise ConfigError(f"{where((first,))}: unknown setting {first!r}; known: {known}")
    check(data, where=where)
    _check_names(data, where)
    try:  # what only :func:`resolve` finds (an unknown stage or option, a bad budget)
        resolve(data)
    except ConfigError as exc:
        raise ConfigError(f"{where(_keys_of(str(exc), data))}: {exc}") from None
    return data


def _check_names(data: Mapping[str, Any], where: Where) -> None:
    """Raise :class:`ConfigError` at its line for an ``encoding`` tiktoken does not know
    or a ``format`` ctxcli does not (:class:`ctxcli.tokens.TokenCounter` and
    :func:`ctxcli.formats.get` refuse them later, naming no file)."""
    from ctxcli import formats

    encoding, format = data.get("encoding"), data.get("format")
    unknown = unknown_encoding(encoding) if isinstance(encoding, str) else None
    if unknown:
        raise ConfigError(f"{where(('encoding',))}: {unknown}")
    if isinstance(format, str):
        try:
            formats.get(format)
        except ConfigError as exc:
            raise ConfigError(f"{where(('format',))}: {exc}") from None


def _keys_of(message: str, data: Mapping[str, Any]) -> tuple[str | int, ...]:
    """The key path in ``data`` a :func:`resolve` error ``message`` is about: the
    setting it opens with (``max_tokens must be …``); the stage it names (``stage
    'placeholder' has no option 'thresold'``), under its own key when the file has one,
    else its item in the ``stages`` list, and the option it names in it; else
    ``stages``."""
    named = re.match(r"(?:unknown )?stage '([^']+)'(?: has no option '([^']+)')?", message)
    if named:
        name, option = named.groups()
        listed = data.get("stages")
        if name in data:
            return (name, option) if option else (name,)
        for i, item in enumerate(listed if isinstance(listed, list) else ()):
            if item == name:
                return ("stages", i)
            if isinstance(item, Mapping) and name in item:
                return ("stages", i, name, option) if option else ("stages", i)
    opening = next((key for key in data if message.startswith(f"{key} ")), None)
    return (opening or "stages",)


def _stage_list(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """Stage names with their options from ``"a,b"``, ``["a", {"b": {...}}]``."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, Sequence) or not value:
        raise ConfigError("stages must name at least one stage")
    out: list[tuple[str, dict[str, Any]]] = []
    for item in value:
        if isinstance(item, str):
            out.append((item, {}))
        elif isinstance(item, Mapping) and len(item) == 1:
            ((name, options),) = item.items()
            if options is not None and not isinstance(options, Mapping):
                raise ConfigError(f"options of stage {name!r} must be a mapping")
            out.append((str(name), dict(options or {})))
        else:
            raise ConfigError(f"a stage is a name or {{name: options}}, not {item!r}")
    return out


def resolve(
    file: Mapping[str, Any] | None = None,
    *,
    stages: str | None = None,
    stage_options: Mapping[str, Mapping[str, Any]] | None = None,
    summarizer: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> Settings:
    """Merge a config file's settings with command-line values into :class:`Settings`.

    ``stages`` (``"summary,priority"``) replaces the file's list; ``stage_options``
    (``{"summary": {"role": "user"}}``) override option by option; ``overrides``
    (``max_tokens``, ``model``, ``encoding``, ``on_error``, ``format``,
    ``messages_key``) whose value is not ``None`` replace the file's; ``summarizer``
    values that are not ``None`` replace the file's ``summarizer:`` options one by one.
    Options for a stage that is not in the pipeline are ignored, so ``--keep-last`` can
    serve window and summary alike.

    Raises :class:`ConfigError` for an unknown setting, stage or option, or a bad value
    (the file's values checked by :func:`check` first).
    """
    names = ("max_tokens", "model", "encoding", "on_error", "format", "messages_key")
    _refuse_unknown(overrides, names)
    file = dict(file or {})
    check(file)
    built = _stages(file, stages, stage_options or {})
    values: dict[str, Any] = {k: file[k] for k in names if k in file}
    values.update({k: v for k, v in overrides.items() if v is not None})
    max_tokens = _budget(values.get("max_tokens", DEFAULT_MAX_TOKENS))
    if values.get("on_error", "fail") not in ("fail", "keep"):
        raise ConfigError(f"on_error must be 'fail' or 'keep', not {values['on_error']!r}")
    if not _NAME.or_null().test(values.get("messages_key")):
        raise ConfigError(f"messages_key must be {_NAME.expects}, not {values['messages_key']!r}")
    return Settings(
        stages=built,
        max_tokens=max_tokens or None,
        model=values.get("model"),
        encoding=values.get("encoding"),
        on_error=values.get("on_error", "fail"),
        summarizer=_summarizer(file.get("summarizer"), summarizer or {}),
        format=values.get("format"),
        messages_key=values.get("messages_key"),
    )


def _refuse_unknown(overrides: Mapping[str, Any], names: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for a setting :func:`resolve` does not know (the API's
    ``compress_file(path, maxtokens=2000)`` had run at the default budget, the typo
    dropped), naming the nearest known one."""
    known = [*names, "stages", "stage_options", "summarizer"]
    for name in overrides:
        if name not in names:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"unknown setting {name!r}{hint}; known: {', '.join(known)}")


def _stages(
    file: Mapping[str, Any], stages: str | None, stage_options: Mapping[str, Mapping[str, Any]]
) -> list[Stage]:
    """The stages of :func:`resolve`: the list given, else the file's, else the
    default one; the default list, however given, gets :data:`DEFAULT_OPTIONS`
    beneath the user's options. A stage of the list given keeps the options the
    file's list gives it (``--stages placeholder,priority`` and a file's ``-
    placeholder: {exclude_tools: [read_file]}``: the option had been dropped)."""
    in_file = dict(_stage_list(file["stages"])) if "stages" in file else {}
    listed = _stage_list(stages if stages is not None else file.get("stages", list(DEFAULT_STAGES)))
    listed_names = [name for name, _ in listed]
    default = listed_names == list(DEFAULT_STAGES)
    twice = next((n for n in listed_names if listed_names.count(n) > 1), None)
    if twice:
        raise ConfigError(f"stage {twice!r} is listed twice")
    built: list[Stage] = []
    for name, options in listed:
        merged = dict(DEFAULT_OPTIONS.get(name, {})) if default else {}
        merged.update(file.get(name) or {})
        merged.update(in_file.get(name) or {})
        merged.update(options)
        merged.update(stage_options.get(name, {}))
        built.append(build_stage(name, merged))
    return built


def _budget(max_tokens: Any) -> int | None:
    """``max_tokens`` checked: ``None`` or a whole number up to :data:`MAX_BUDGET`."""
    if max_tokens is not None and (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 0 <= max_tokens <= MAX_BUDGET
    ):
        raise ConfigError(
            f"max_tokens must be a whole number of tokens up to {MAX_BUDGET}, not {max_tokens!r}"
        )
    return max_tokens


def _summarizer(file: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    if file is not None and not isinstance(file, Mapping):
        raise ConfigError("summarizer must be a mapping of options, e.g. {name: llm}")
    merged = dict(file or {})
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return merged


# --------------------------------------------------------------------------- value types


@dataclass(frozen=True)
class _Kind:
    """What a setting accepts: ``expects`` says it in a message, ``test`` checks the
    value itself and ``items`` (if any) each item of a list or value of a mapping;
    ``choices`` are the strings a closed choice allows."""

    expects: str
    test: Callable[[Any], bool]
    items: _Kind | None = None
    choices: tuple[str, ...] = ()

    def or_null(self) -> _Kind:
        test = self.test
        return replace(self, expects=f"{self.expects} or null", test=lambda v: v is None or test(v))


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _one_of(*values: str) -> _Kind:
    expects = "one of " + ", ".join(map(repr, values))
    return _Kind(expects, lambda v: isinstance(v, str) and v in values, choices=values)


_STRING = _Kind("a string", lambda v: isinstance(v, str))
#: A key or name: a string with more than spaces in it (``messages_key: ""`` had been
#: taken as no key at all, silently).
_NAME = _Kind("a string that is not empty", lambda v: isinstance(v, str) and bool(v.strip()))
_WHOLE = _Kind("a whole number", _whole)


def _between(low: int, high: int) -> _Kind:
    """A whole number from ``low`` to ``high`` (:data:`MAX_BUDGET` said as 2^53)."""
    said = "2^53" if high == MAX_BUDGET else str(high)
    return _Kind(f"a whole number from {low} to {said}", lambda v: _whole(v) and low <= v <= high)


_NUMBER = _Kind("a number", lambda v: _whole(v) or isinstance(v, float))
_BOOL = _Kind("true or false", lambda v: isinstance(v, bool))
_STRINGS = _Kind("a list of strings", lambda v: isinstance(v, (str, list)), items=_STRING)
_COUNTS = _Kind("a mapping of names to whole numbers", lambda v: isinstance(v, dict), items=_WHOLE)
_OPTIONS = _Kind("a mapping of options", lambda v: isinstance(v, dict)).or_null()
_ANY = _Kind("anything", lambda v: True)

#: The top-level settings; the sections of stage options are checked by their fields' types.
_SETTING_KINDS: dict[str, _Kind] = {
    "model": _STRING.or_null(),
    "encoding": _STRING.or_null(),
    "max_tokens": _WHOLE.or_null(),  # its range: resolve()
    "on_error": _one_of("fail", "keep"),
    "format": _STRING.or_null(),
    "messages_key": _NAME.or_null(),
    "stages": _Kind(
        "a list of stages or a comma-separated string", lambda v: isinstance(v, (str, list))
    ),
    "summarizer": _OPTIONS,
}
#: The ``summarizer:`` options (:data:`ctxcli.summarizers.OPTIONS`); null leaves one unset.
_SUMMARIZER_KINDS: dict[str, _Kind] = {
    "name": _one_of(*SUMMARIZER_NAMES).or_null(),
    "model": _STRING.or_null(),
    "base_url": _STRING.or_null(),
    "api_key_env": _STRING.or_null(),
    "timeout": _Kind(
        "a number of seconds over 0, at most a day, or null",
        lambda v: v is None or is_timeout(v),
    ),
    # retries, concurrency, input_max_tokens: the ranges the llm summarizer holds them
    # to, checked here whatever the name (a bad value is bad before a model is asked)
    **{name: _between(*bounds).or_null() for name, bounds in WHOLE_BOUNDS.items()},
    "template": _STRING.or_null(),
    "cache": _Kind(
        "a file path, true, false or null", lambda v: v is None or isinstance(v, (str, bool))
    ),
}


def _option_kind(hint: Any) -> _Kind:
    """The kind of a stage option from its dataclass field's type."""
    simple = {bool: _BOOL, int: _WHOLE, str: _STRING, float: _NUMBER}
    if hint in simple:
        return simple[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return _option_kind(next(a for a in args if a is not type(None))).or_null()
    if origin is Literal:
        return _one_of(*args)
    if origin is tuple and args[:1] == (str,):
        return _STRINGS
    if origin in (Mapping, dict) and args == (str, int):
        return _COUNTS
    return _ANY


def stage_option_kinds(name: str) -> dict[str, _Kind]:
    """Option name -> kind for stage ``name``, read from its dataclass's field types."""
    hints = typing.get_type_hints(STAGES[name])
    return {f.name: _option_kind(hints[f.name]) for f in dataclasses.fields(STAGES[name])}


_KIND_NAMES = (
    (bool, "true/false"),
    (int, "a whole number"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a mapping"),
    (datetime.date, "a date"),
    (bytes, "binary data"),
)


def _kind_of(value: Any) -> str:
    """How a message names the type of a YAML value: ``a list``, ``null``, ..."""
    if value is None:
        return "null"
    return next((name for cls, name in _KIND_NAMES if isinstance(value, cls)), type(value).__name__)


Where = Callable[[tuple[str | int, ...]], str]


def check(data: Mapping[str, Any], *, where: Where = lambda keys: "config") -> None:
    """Check the type of every setting in a config mapping, nested options included,
    before any is used: the top-level settings, ``stages`` (names, or ``{name:
    options}``), each stage's options (the types of its dataclass fields) and the
    ``summarizer:`` options. Unknown names are left to :func:`resolve`.

    ``where(keys)`` names the place of a key path (``("stages", 0, "summary")``) in
    messages, e.g. ``ctxcli.yaml:3``. Raises :class:`ConfigError` for the first wrong
    value: ``ctxcli.yaml:3: model: expected a string or null, got a list``.
    """
    for key, kind in _SETTING_KINDS.items():
        if key in data:
            _expect(data[key], kind, (key,), where)
    stages = data.get("stages")
    for i, item in enumerate(stages if isinstance(stages, list) else []):
        _check_stage_item(item, (("stages", i)), where)
    _check_options(data.get("summarizer"), _SUMMARIZER_KINDS, ("summarizer",), where, closed=True)
    for name in STAGES:
        if name in data:
            _expect(data[name], _OPTIONS, (name,), where)
            _check_options(data[name], stage_option_kinds(name), (name,), where)


def _check_stage_item(item: Any, keys: tuple[str | int, ...], where: Where) -> None:
    if isinstance(item, str):
        return
    if not (isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item)), str)):
        raise ConfigError(
            f"{where(keys)}: {_dotted(keys)}: expected a stage name or {{name: options}},"
            f" got {_kind_of(item)}"
        )
    ((name, options),) = item.items()
    _expect(options, _OPTIONS, (*keys, name), where)
    if name in STAGES:
        _check_options(options, stage_option_kinds(name), (*keys, name), where)


def _check_options(
    options: Any,
    kinds: Mapping[str, _Kind],
    keys: tuple[str | int, ...],
    where: Where,
    *,
    closed: bool = False,
) -> None:
    """Check each option of ``options`` that ``kinds`` knows; with ``closed``, any other
    is an error here (the summarizer's, which :func:`resolve` does not build)."""
    if not isinstance(options, dict):
        return
    for option, value in options.items():
        if option in kinds:
            _expect(value, kinds[option], (*keys, option), where)
        elif closed:
            raise ConfigError(
                f"{where((*keys, option))}: {_dotted(keys)} has no option {option!r}; "
                f"its options: {', '.join(kinds)}"
            )


def _expect(value: Any, kind: _Kind, keys: tuple[str | int, ...], where: Where) -> None:
    if not kind.test(value):
        # A number where a number is asked for is out of range: say which one it is.
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        said = (kind.choices and isinstance(value, str)) or (number and "number" in kind.expects)
        said = said or value == ""  # "got ''", not "got a string"
        got = repr(value) if said else _kind_of(value)
        raise ConfigError(f"{where(keys)}: {_dotted(keys)}: expected {kind.expects}, got {got}")
    if kind.items is None:
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _expect(item, kind.items, (*keys, i), where)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(
                    f"{where(keys)}: {_dotted(keys)}: expected {kind.expects}, got the key {key!r}"
                )
            _expect(item, kind.items, (*keys, key), where)


def _dotted(keys: tuple[str | int, ...]) -> str:
    """``("stages", 0, "summary")`` as ``stages[0].summary``."""
    out = ""
    for key in keys:
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else str(key)
    return out
