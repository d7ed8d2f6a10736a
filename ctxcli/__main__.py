"""``python -m ctxcli``."""

from ctxcli.cli import cli

cli()
