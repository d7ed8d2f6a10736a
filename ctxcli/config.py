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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ctxcli.errors import ConfigError
from ctxcli.pipeline import DEFAULT_STAGES, STAGES, Stage, build_stage
from ctxcli.tokens import MAX_BUDGET

DEFAULT_MAX_TOKENS = 8000
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
    """Read a YAML config file. Raises :class:`ConfigError` naming the file."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    unknown = set(data) - _TOP_LEVEL - set(STAGES)
    if unknown:
        known = ", ".join(sorted(_TOP_LEVEL | set(STAGES)))
        raise ConfigError(f"{path}: unknown setting {sorted(unknown)[0]!r}; known: {known}")
    return data


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

    Raises :class:`ConfigError` for an unknown stage or option, or a bad value.
    """
    file = dict(file or {})
    listed = _stage_list(stages if stages is not None else file.get("stages", list(DEFAULT_STAGES)))
    built: list[Stage] = []
    listed_names = [name for name, _ in listed]
    twice = next((n for n in listed_names if listed_names.count(n) > 1), None)
    if twice:
        raise ConfigError(f"stage {twice!r} is listed twice")
    for name, options in listed:
        merged = dict(file.get(name) or {})
        merged.update(options)
        merged.update((stage_options or {}).get(name, {}))
        built.append(build_stage(name, merged))
    names = ("max_tokens", "model", "encoding", "on_error", "format", "messages_key")
    values: dict[str, Any] = {k: file[k] for k in names if k in file}
    values.update({k: v for k, v in overrides.items() if v is not None})
    max_tokens = values.get("max_tokens", DEFAULT_MAX_TOKENS)
    if max_tokens is not None and (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 0 <= max_tokens <= MAX_BUDGET
    ):
        raise ConfigError(
            f"max_tokens must be a whole number of tokens up to {MAX_BUDGET}, not {max_tokens!r}"
        )
    if values.get("on_error", "fail") not in ("fail", "keep"):
        raise ConfigError(f"on_error must be 'fail' or 'keep', not {values['on_error']!r}")
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


def _summarizer(file: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    if file is not None and not isinstance(file, Mapping):
        raise ConfigError("summarizer must be a mapping of options, e.g. {name: llm}")
    merged = dict(file or {})
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return merged
