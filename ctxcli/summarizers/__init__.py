"""Summarizers turn folded messages into the text of one summary message.

A summarizer (:class:`Summarizer`) has one method::

    summarize(messages, *, previous, max_tokens, counter) -> str

``messages`` are the folded OpenAI-style message dicts (oldest first, without the
earlier summary), ``previous`` the body of an earlier ctxcli summary to merge (or
``None``), ``max_tokens`` the bound on the returned text in tokens of ``counter``.
It returns the summary body (the stage adds the ``[ctxcli summary]`` header) and
raises :class:`ctxcli.errors.SummaryError` when it cannot produce a usable one.
A summarizer may be called from several threads at once. Besides, it says what the
compressor may ask of it: ``concurrency`` (how many conversations to summarize at
once, on threads), ``offline`` (it calls no model, so worker processes may fork it)
and ``stats`` (its model-use counters, :class:`Stats`, or ``None``).

:func:`build` makes one from the ``summarizer:`` settings: ``extractive`` (offline,
the default, :mod:`ctxcli.summarizers.extractive`) or ``llm``
(:mod:`ctxcli.summarizers.llm`, any OpenAI-compatible endpoint). The modules:
:mod:`~ctxcli.summarizers.text` (a message's text, sentences, shortening, language),
:mod:`~ctxcli.summarizers.facts` (fact extraction), ``extractive``, ``llm`` and
``endpoint`` (the HTTP client under ``llm``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ctxcli.tokens import MAX_BUDGET, TokenCounter


class Stats(Protocol):
    """Model-use counters (:class:`ctxcli.summarizers.llm.LLMStats`): ``snapshot()``
    gives every counter now; the names in ``GAUGES`` are levels, the rest count up."""

    GAUGES: tuple[str, ...]

    def snapshot(self) -> dict[str, float]: ...


class Summarizer(Protocol):
    """See the module docstring."""

    @property
    def concurrency(self) -> int: ...

    @property
    def offline(self) -> bool: ...

    @property
    def stats(self) -> Stats | None: ...

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str: ...


#: Keys of the ``summarizer:`` mapping (YAML config, or the CLI options that fill it).
OPTIONS = (
    "name",
    "model",
    "base_url",
    "api_key_env",
    "timeout",
    "retries",
    "concurrency",
    "input_max_tokens",
    "template",
    "cache",
)
NAMES = ("extractive", "llm")
#: The longest wait for a model's answer the ``timeout`` option may ask (seconds):
#: past it, ``inf`` or ``1e10`` overflowed the HTTP client's clock and every summary
#: failed.
MAX_TIMEOUT = 86400
#: The most retries of a failed model request the ``retries`` option may ask: past a
#: few, a dead endpoint is retried for hours (1e22 retried without end).
MAX_RETRIES = 100
#: The most model requests in flight the ``concurrency`` option may ask: a number past
#: 64 bits ended the run writing its stats (orjson holds no larger integer).
MAX_CONCURRENCY = 1024


#: The whole-number options of the llm summarizer and their bounds, inclusive (the
#: config file's check reads them from here, :mod:`ctxcli.config`): a number past 64
#: bits ended a run in a traceback writing its stats.
WHOLE_BOUNDS = {
    "retries": (0, MAX_RETRIES),
    "concurrency": (1, MAX_CONCURRENCY),
    "input_max_tokens": (1, MAX_BUDGET),
}


def is_timeout(value: Any) -> bool:
    """Whether ``value`` is a summarizer timeout: a number of seconds over 0 and at
    most :data:`MAX_TIMEOUT` (not NaN, not ``True``). The config file's check and
    :func:`build` both ask this."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and 0 < value <= MAX_TIMEOUT  # NaN fails it too


def _llm_settings(options: Mapping[str, Any]) -> dict[str, Any]:
    """The llm summarizer's settings of ``options``, checked: ``model`` and
    ``base_url`` strings, ``timeout`` a number of seconds over 0 and at most
    :data:`MAX_TIMEOUT` (not NaN), the others whole numbers within
    :data:`WHOLE_BOUNDS` (not ``True``, not 2.9). Raises
    :class:`ctxcli.errors.ConfigError` naming the option."""
    from ctxcli.errors import ConfigError

    settings: dict[str, Any] = {}
    for option in ("model", "base_url"):
        if options.get(option) is not None:
            settings[option] = str(options[option])
    timeout = options.get("timeout")
    if timeout is not None:
        if not is_timeout(timeout):
            raise ConfigError(
                f"summarizer option timeout must be a number of seconds over 0 and at most "
                f"{MAX_TIMEOUT}, not {timeout!r}"
            )
        settings["timeout"] = float(timeout)
    for option, (least, most) in WHOLE_BOUNDS.items():
        value = options.get(option)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise ConfigError(
                f"summarizer option {option} must be a whole number from {least} to {most},"
                f" not {value!r}"
            )
        settings[option] = value
    return settings


def build(options: Mapping[str, Any], *, api_key: str | None = None) -> Summarizer:
    """The summarizer ``options`` ask for (the extractive one by default:
    :data:`ctxcli.summarizers.extractive.EXTRACTIVE`).

    ``options`` are the ``summarizer:`` settings (:data:`OPTIONS`): ``name``
    (``extractive`` or ``llm``); for ``llm``: ``model``, ``base_url``, ``timeout``
    (seconds), ``retries``, ``concurrency``, ``input_max_tokens`` (tokens),
    ``template`` (a prompt file path) and ``cache`` (a SQLite path, or ``false`` /
    ``None`` for none). ``api_key`` comes from the caller, who reads the environment
    variable ``api_key_env`` names. Raises :class:`ctxcli.errors.ConfigError` for an
    unknown name or option, or a bad value (a ``timeout``, ``retries`` or
    ``concurrency`` over :data:`MAX_TIMEOUT`, :data:`MAX_RETRIES`,
    :data:`MAX_CONCURRENCY`).
    """
    from ctxcli.errors import ConfigError

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(
            f"summarizer has no option {unknown[0]!r}; its options: {', '.join(OPTIONS)}"
        )
    name = options.get("name") or "extractive"
    if name not in NAMES:
        raise ConfigError(f"unknown summarizer {name!r}; known summarizers: {', '.join(NAMES)}")
    if name == "extractive":
        from ctxcli.summarizers.extractive import EXTRACTIVE

        return EXTRACTIVE
    from ctxcli.cache import SummaryCache
    from ctxcli.summarizers import llm

    settings = _llm_settings(options)
    cache = options.get("cache")
    return llm.LLMSummarizer(
        **settings,
        api_key=api_key,
        template=llm.load_template(options["template"]) if options.get("template") else None,
        cache=SummaryCache(cache) if cache else None,
    )
