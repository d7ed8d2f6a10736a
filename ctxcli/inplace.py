"""Compress planned files: to their outputs, in place, or in a dry run that only finds
which inputs compressing would change.

What CI jobs and pre-commit hooks want from a formatter (``ruff format``, ``black``):
rewrite each input with its compressed form, or check it and say which would change.

- In place: the compressed form is written to a hidden temporary file beside the
  input, and renamed over the input (through any symlink, onto the file it names)
  with the input's permission bits, so a reader sees the old file or the new one,
  never half of either. A file no stage changes is not rewritten at all (its time
  stamp stays). The originals that placeholders replaced are added to the store
  beside it (``<stem>.store.jsonl``, see :func:`ctxcli.inputs.store_of`): an
  existing store keeps its entries, since the input's earlier placeholders restore
  from them. The store is moved into place before the input.
- A dry run compresses to ``/dev/null`` and writes nothing anywhere.

Either way a file would change when any of its conversations does
(:attr:`ctxcli.compress.FileStats.changed`), which is exactly when its compressed
form differs from it: unchanged records are written back as the bytes read.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctxcli import jsonio
from ctxcli.compress import Compressor, FileStats, planned
from ctxcli.errors import OutputError
from ctxcli.inputs import Plan
from ctxcli.store import add_to_store, refuse_foreign


@dataclass(frozen=True)
class Outcome:
    """What :func:`run` did to one input: its ``stats``, whether compressing
    ``changes`` it, and whether the input was ``rewritten`` (never in a dry run)."""

    stats: FileStats
    changes: bool
    rewritten: bool


def run(
    compressor: Compressor, item: Plan, *, dry_run: bool = False, progress: bool = False
) -> Outcome:
    """Compress ``item`` as planned (:func:`ctxcli.inputs.plan`): into its output, or
    over its input when ``item.in_place``; with ``dry_run`` only find whether that
    would change the input, writing nothing. Raises what :meth:`Compressor.file`
    raises; an input compressed in place is then left as it was."""
    if dry_run:
        stats = compressor.file(
            item.input,
            os.devnull,
            store_path=os.devnull if item.store else None,
            progress=progress,
        )
        stats.output, stats.store = item.output, None
        return Outcome(stats, stats.changed > 0, False)
    if item.in_place:
        return _in_place(compressor, item, progress=progress)
    stats = planned(compressor, item, progress=progress)
    return Outcome(stats, stats.changed > 0, False)


def _write_stats(stats: FileStats, path: str | None) -> None:
    """Write ``stats`` to ``path`` (if given), atomically, once its store is in place,
    no more readable than the input."""
    if path:
        with jsonio.AtomicWriter(path, like=stats.input) as writer:
            writer.write(jsonio.dumps_indented(stats.to_json()))
            writer.commit()


def _in_place(compressor: Compressor, item: Plan, *, progress: bool) -> Outcome:
    target = os.path.realpath(item.input)
    if item.store:
        refuse_foreign(item.store)  # it is added to: never to another file
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(_temporary(target))
        store = stack.enter_context(_temporary(target)) if item.store else None
        stats = compressor.file(item.input, output, store_path=store, progress=progress)
        stats.output = item.input
        if not stats.changed:
            stats.store = None
            return Outcome(stats, False, False)
        if stats.store and store is not None and item.store is not None:
            stats.store_entries, stats.store_bytes = add_to_store(
                store, item.store, like=item.input
            )
            stats.store = item.store
        _write_stats(stats, item.stats)
        os.chmod(output, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(output, target)
    return Outcome(stats, True, True)


def describe(outcome: Outcome, *, dry_run: bool) -> str:
    """One line for people on an input that changed or would: ``rewrote PATH: 1 of 1
    conversation changed, 8,396→1,073 tokens (-87%)`` (``would rewrite`` in a dry run
    in place, ``would compress ... into OUTPUT`` otherwise; ``-`` is named ``stdin`` and
    ``stdout``: stdin to stdout is no rewrite)."""
    s = outcome.stats
    in_place = s.output == s.input != "-"
    verb = "rewrote" if not dry_run else "would rewrite" if in_place else "would compress"
    convs = f"{s.conversations:,} conversation{'' if s.conversations == 1 else 's'}"
    line = (
        f"{verb} {_named(s.input, 'stdin')}: {s.changed:,} of {convs} changed, "
        f"{s.tokens_before:,}→{s.tokens_after:,} tokens (-{1 - s.ratio:.0%})"
    )
    return line if in_place else f"{line}, into {_named(s.output, 'stdout')}"


def _named(path: str | None, stream: str) -> str:
    """``path`` as a line names it: ``stream`` (``stdin``, ``stdout``) for ``-``."""
    return stream if path == "-" else str(path)


@contextlib.contextmanager
def _temporary(beside: str) -> Iterator[str]:
    """A hidden temporary file's path in ``beside``'s folder (so that renaming it over
    ``beside`` is atomic), removed at the end unless renamed; named with this
    process's id as :class:`ctxcli.jsonio.AtomicWriter` names its own, so the ones a
    killed run left (theirs, and the writer's beside them) are removed here first.
    Raises :class:`OutputError` when the folder takes no new file."""
    folder = os.path.dirname(beside)
    prefix = jsonio.temporary_prefix(beside)
    for stale in (prefix, f".{prefix}"):
        jsonio.remove_stale(Path(folder), stale)
    try:
        fd, path = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"{folder or '.'}: cannot write: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
