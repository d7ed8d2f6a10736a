"""Where the ``ctxcli skills`` group was: it is :mod:`ctxcli.skills.cli` now."""

from ctxcli.skills.cli import skills as skills

__all__ = ["skills"]
