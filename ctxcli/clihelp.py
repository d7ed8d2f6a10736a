"""What every ctxcli command shares: options whose help teaches (each shows the
default a run falls back to), and the one place a :class:`ctxcli.errors.CtxcliError`
becomes a message and an exit status."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxcli.errors import CtxcliError, InputError, UsageError

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


class Whole(click.IntRange):
    """A whole number within bounds, as :class:`click.IntRange`, but named so in its
    error: Click's says ``'abc' is not a valid integer range.``, as if a range were
    asked for."""

    name = "whole number"

    def _describe_range(self) -> str:
        if self.max is not None and self.max >= 2**32:  # a bound no one types
            return f"x>={self.min or 0} (at most 2^{int(self.max).bit_length() - 1})"
        return super()._describe_range()


class Named(click.types.StringParamType):
    """A name that is not empty (``--messages-key ''`` had been taken as no key at
    all, silently: the records were read from their format's own key)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = super().convert(value, param, ctx)
        if not text.strip():
            self.fail("is empty", param, ctx)
        return text


def option(*names: str, shown: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """``click.option`` with :class:`Option`: ``shown`` is the default its help shows."""
    return click.option(*names, cls=Option, shown=shown, **kwargs)


#: The exit status of a run interrupted by Ctrl-C (SIGINT): 128 + the signal's
#: number, as a shell reports a process a signal ended, so that a script tells it from
#: an error (1); Click's own is 1.
INTERRUPTED = 130


class Group(click.Group):
    """A group of commands whose library errors end the run the same way: a
    :class:`CtxcliError` raised by any of its commands is printed as ``Error:
    <message>`` on stderr with exit status 1 (see :func:`failure`), a
    :class:`UsageError` as Click's usage error (exit 2), and Ctrl-C as
    ``Aborted: interrupted`` with :data:`INTERRUPTED`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            raise click.UsageError(str(exc)) from None
        except CtxcliError as exc:
            raise failure(exc) from None
        except KeyboardInterrupt:
            # Every file is written to a temporary one and renamed once whole, so the
            # one being written is left as it was and its temporary file is removed.
            click.echo("Aborted: interrupted; no file was left half-written", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None


def failure(exc: CtxcliError) -> click.ClickException:
    """The exception a command ends with for ``exc`` (exit 1); in GitHub Actions
    (``GITHUB_ACTIONS=true``, read here at the edge) a bad input line is also printed
    as an ``::error`` annotation on it."""
    from ctxcli import github

    if isinstance(exc, InputError) and github.enabled(os.environ):
        click.echo(github.command("error", exc.reason, file=exc.path, line=exc.line), err=True)
    return click.ClickException(str(exc))
