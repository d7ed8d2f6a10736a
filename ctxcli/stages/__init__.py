"""Pipeline stages, one module each, and :data:`STAGES`, the one place a stage is
registered; the protocol they follow and their shared :class:`Context` are in
:mod:`ctxcli.stages.base`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ctxcli.errors import ConfigError
from ctxcli.stages.base import Context, Stage
from ctxcli.stages.placeholder import Placeholder
from ctxcli.stages.priority import Priority
from ctxcli.stages.summary import Summary
from ctxcli.stages.window import Window

__all__ = ["DEFAULT_STAGES", "STAGES", "Context", "Stage", "build_stage"]

#: Stage name -> options dataclass. The single place a stage is registered.
STAGES: dict[str, type[Any]] = {cls.name: cls for cls in (Window, Placeholder, Summary, Priority)}

DEFAULT_STAGES = ("placeholder", "summary", "priority")


def build_stage(name: str, options: Mapping[str, Any] | None = None) -> Stage:
    """Make stage ``name`` with ``options`` (its dataclass fields).

    Raises :class:`ConfigError` naming the known stages or the stage's known options.
    """
    try:
        cls = STAGES[name]
    except KeyError:
        known = ", ".join(sorted(STAGES))
        raise ConfigError(f"unknown stage {name!r}; known stages: {known}") from None
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options or {}) - fields)
    if unknown:
        raise ConfigError(
            f"stage {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options: {', '.join(sorted(fields))}"
        )
    try:
        stage: Stage = cls(**(options or {}))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"stage {name!r}: {exc}") from None
    return stage
