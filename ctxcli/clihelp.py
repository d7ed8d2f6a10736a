"""Click options whose help teaches: each shows the default a run falls back to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class Option(click.Option):
    """An option whose help shows ``shown``, the default a run falls back to, also
    when its value stays ``None`` (so that a config file may set it), and no range
    when ``hide_range`` (the bound of a budget is no news to anyone)."""

    def __init__(
        self, *args: Any, shown: str | None = None, hide_range: bool = False, **kwargs: Any
    ) -> None:
        self.shown = shown
        self.hide_range = hide_range
        super().__init__(*args, **kwargs)

    def get_help_extra(self, ctx: click.Context) -> Any:
        extra = super().get_help_extra(ctx)
        if self.shown is not None:
            extra["default"] = self.shown
        if self.hide_range:
            extra.pop("range", None)
        return extra


def option(*names: str, shown: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """``click.option`` with :class:`Option`: ``shown`` is the default its help shows."""
    return click.option(*names, cls=Option, shown=shown, **kwargs)
