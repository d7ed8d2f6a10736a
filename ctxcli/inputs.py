"""Which files a run reads, and where each one's results go.

An input is a file, ``-`` (stdin), or a folder, searched recursively for transcripts
(:data:`DEFAULT_GLOBS`, or the patterns given) without ctxcli's own outputs
(:func:`is_own_output`) or anything hidden. :func:`plan` then names every file a
``compress`` run writes, beside each input, under ``out_dir`` at the input's path
relative to its folder, or over the input itself (``in_place``), and refuses a plan
in which one file would replace another.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from ctxcli import jsonio
from ctxcli.errors import ConfigError, UsageError

#: What a folder input finds when no ``--glob`` is given: JSON lines, JSON (an array
#: of conversations or one), SWE-agent trajectories.
DEFAULT_GLOBS = ("*.jsonl", "*.json", "*.traj", "*.parquet")
#: Parts of a file name that mark what ctxcli writes: ``x.compressed.jsonl``, its
#: ``x.compressed.stats.json``, a store ``x.store.jsonl`` (in place: beside ``x.jsonl``).
OWN_MARKERS = (".compressed.",)
OWN_SUFFIXES = (".store.jsonl", ".stats.json")


def is_own_output(name: str) -> bool:
    """True for a file name ctxcli writes (an output, a store, a stats file), which a
    folder input never includes."""
    return any(m in name for m in OWN_MARKERS) or name.endswith(OWN_SUFFIXES)


@dataclass(frozen=True)
class Found:
    """One input file: ``path`` as it is read, and ``relative``, its path under the
    folder it was found in (``None`` for a file named on its own, or ``-``)."""

    path: str
    relative: str | None = None


def find_inputs(
    inputs: Iterable[str],
    globs: Sequence[str] | None = None,
    *,
    outputs: bool = False,
    warn: Callable[[str], None] | None = None,
) -> list[Found]:
    """The files to read: files as given (a named pipe too), ``-`` for stdin, and each
    folder's files matching ``globs`` (default :data:`DEFAULT_GLOBS`; matched against
    the path under the folder, from the right, as :meth:`pathlib.PurePath.match`
    does: ``*.json`` is any ``.json`` file, ``runs/*.json`` one in a folder ``runs``),
    at any depth, sorted by that path, regular files only (a symlink to one too),
    leaving out hidden files and folders and ctxcli's own outputs (but with
    ``outputs``, the compressed transcripts: what ``validate`` checks; never a store or
    stats file). A broken symlink in a folder is left out and told to ``warn`` (its
    file gone, a rotated log: not read, and not silently).

    Raises :class:`ConfigError` for a missing path or a folder where nothing matches
    (saying how many of ctxcli's outputs it left out), and :class:`UsageError` for
    stdin named twice (read once, it gave the second nothing: an empty row of counts).
    """
    patterns = tuple(globs or DEFAULT_GLOBS)
    found: list[Found] = []
    inputs = list(inputs)
    refuse_stdin_twice(inputs)
    for item in inputs:
        path = Path(item)
        if item == "-" or path.is_file() or jsonio.is_stream(item):
            found.append(Found(item))  # a pipe named on its own too: `<(zcat runs.gz)`
        elif path.is_dir():
            inside, skipped = _search(path, patterns, outputs, warn)
            if not inside:
                why = f" ({skipped} of ctxcli's outputs left out; name them)" if skipped else ""
                raise ConfigError(f"{item}: no {', '.join(patterns)} files in this folder{why}")
            found += inside
        else:
            raise ConfigError(f"{item}: no such file or directory")
    return found


def _search(
    folder: Path, patterns: Sequence[str], outputs: bool, warn: Callable[[str], None] | None
) -> tuple[list[Found], int]:
    """The files under ``folder`` :func:`find_inputs` takes, and how many of ctxcli's
    outputs matching ``patterns`` it left out; each broken symlink told to ``warn``."""
    found = []
    skipped = 0
    for parent, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            relative = PurePath(parent, name).relative_to(folder)
            if not _matches(relative, patterns):
                continue
            if is_own_output(name) and not (outputs and not name.endswith(OWN_SUFFIXES)):
                skipped += 1
                continue
            path = Path(parent, name)
            if not path.is_file():  # a named pipe (read, it waits forever), a broken symlink
                if warn and path.is_symlink() and not path.exists():
                    warn(f"{path}: skipped, a broken symlink (to {os.readlink(path)})")
                continue
            found.append((relative.as_posix(), str(Path(parent, name))))
    return [Found(path, relative) for relative, path in sorted(found)], skipped


_TWICE = "stdin (-) is named more than once; it can be read only once"
#: The names of stdin: ``-``, and the paths a shell or a user gives it.
_STDIN_NAMES = frozenset(
    {"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/proc/thread-self/fd/0"}
)


def refuse_stdin_twice(inputs: Sequence[str], message: str = _TWICE) -> None:
    """Raise :class:`UsageError` (``message``) when ``inputs`` name stdin
    (:data:`_STDIN_NAMES`, however spelt: ``/dev//stdin``, as
    :func:`ctxcli.jsonio.is_stream` reads such names) more than once: read once, it
    gives the second nothing, or, led to a file, the same records again."""
    if sum(os.path.normpath(item) in _STDIN_NAMES for item in inputs) > 1:
        raise UsageError(message)


def _matches(relative: PurePath, patterns: Sequence[str]) -> bool:
    """Whether ``relative`` matches one of ``patterns``; one of :data:`DEFAULT_GLOBS`
    whatever the case of its suffix (``RUN.JSONL`` was left out of a folder), a
    pattern given as the user wrote it."""
    lowered = PurePath(relative.as_posix().lower())
    return any(relative.match(p) or (p in DEFAULT_GLOBS and lowered.match(p)) for p in patterns)


def expand_inputs(
    inputs: Iterable[str],
    globs: Sequence[str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """The paths :func:`find_inputs` finds."""
    return [item.path for item in find_inputs(inputs, globs, warn=warn)]


def default_output(input_path: str, out_dir: str | None = None, relative: str | None = None) -> str:
    """``<stem>.compressed<suffix>`` beside the input, or in ``out_dir`` (in the folders
    of ``relative``, the input's path under the folder it was found in): the input's
    suffix is kept (the output has its shape), ``.jsonl`` when it has none; stdin's
    (``-``) is ``stdin.compressed.jsonl``, not a name a shell takes for an option."""
    path = Path("stdin" if input_path == "-" else input_path)
    suffix = path.suffix or ".jsonl"
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    folder = Path(out_dir) / PurePath(relative).parent if out_dir and relative else None
    return str((folder or Path(out_dir or path.parent)) / f"{stem}.compressed{suffix}")


def default_stats(output_path: str) -> str:
    """The stats file beside the output: ``<stem>.stats.json`` for a ``.jsonl`` one,
    ``<name>.stats.json`` for any other (:func:`beside`)."""
    return beside(output_path, "stats.json")


def default_store(output_path: str, input_path: str = "-") -> str | None:
    """The store beside the output (``<stem>.store.jsonl`` for a ``.jsonl`` one,
    ``<name>.store.jsonl`` for any other: :func:`beside`); with output to stdout,
    beside the input by the same rule; ``None`` for stdin to stdout."""
    base = output_path if output_path != "-" else input_path
    return None if base == "-" else beside(base, "store.jsonl")


def beside(path: str, kind: str) -> str:
    """The file of ``kind`` (``stats.json``) that goes with ``path`` (a local path or
    a URL such as ``s3://…``): named after its stem for a ``.jsonl`` file
    (``run.compressed.stats.json``, ``RUN.compressed.stats.json`` of ``RUN.JSONL``),
    after its whole name for any other
    (``run.compressed.parquet.stats.json``), so that two outputs of one stem never
    share one (run.jsonl and run.parquet compressed in turn: the second replaced the
    first's store, whose placeholders then restored from nothing)."""
    folder, slash, name = path.rpartition("/")
    base = name[: -len(".jsonl")] if name.lower().endswith(".jsonl") else name
    return f"{folder}{slash}{base}.{kind}"


def store_of(compressed: str) -> str | None:
    """The store of ``compressed`` when none is given, for ``restore`` and for
    ``--in-place`` (which adds to it): the one beside it (:func:`default_store`), or,
    when only that exists, the one an earlier version named after its stem whatever
    its suffix (``run.compressed.store.jsonl`` of ``run.compressed.json``); for a
    symlink, when neither is beside the link, the one beside the file it leads to,
    where a new store goes too (an in-place run rewrites that file: its store beside
    the link was not found by ``restore`` of the file); ``None`` for stdin."""
    found = _store_beside(compressed)
    if found is None or Path(found).exists() or not os.path.islink(compressed):
        return found
    return _store_beside(os.path.realpath(compressed))


def _store_beside(compressed: str) -> str | None:
    """:func:`store_of` for a path that is no symlink."""
    store = default_store(compressed)
    if store is None or Path(store).exists():
        return store
    folder, slash, name = compressed.rpartition("/")
    earlier = f"{folder}{slash}{name.rpartition('.')[0] or name}.store.jsonl"
    return earlier if Path(earlier).exists() else store


@dataclass(frozen=True)
class Plan:
    """Where one input's results go: ``output`` (``-``: stdout; the input itself when
    ``in_place``), ``stats`` and ``store`` paths (``None``: not written); the store is
    added to, never replaced, when ``in_place`` or ``adds_to_store``: when it is named
    (``--store``, which other outputs may share: a second run replaced the first's
    originals, and its output could no longer be restored), or the one beside the
    input for an output to stdout (which may hold the originals of the input's own
    placeholders)."""

    input: str
    output: str
    stats: str | None
    store: str | None
    in_place: bool = False
    adds_to_store: bool = False


def plan(
    inputs: Iterable[str],
    *,
    output: str | None = None,
    out_dir: str | None = None,
    stats: str | None = None,
    store: str | None = None,
    restorable: bool = False,
    globs: Sequence[str] | None = None,
    in_place: bool = False,
    warn: Callable[[str], None] | None = None,
) -> list[Plan]:
    """Decide every file a run writes, and refuse what would lose data.

    Defaults: ``<stem>.compressed<ext>`` beside each input (or under ``out_dir``, see
    :func:`default_output`), stats beside the output (none when the output is stdout
    or a device), the store beside the output (``/dev/null`` when the output is; for
    stdout, beside the input and only when ``restorable``: placeholders are written).
    A store is written only when it gets entries: originals a placeholder replaced,
    or the placeholder-like texts an input held (see :func:`ctxcli.pipeline.run`).
    ``in_place``: the output is the input, the store
    ``<stem>.store.jsonl`` beside it, and no stats unless ``stats`` is given.

    Raises :class:`ConfigError` when ``output``, ``stats`` or ``store`` is given with
    several inputs, when ``stats`` or ``store`` is ``-``, when ``output`` meets
    ``out_dir``, when an output is a folder,
    when ``in_place`` meets ``output``, ``out_dir`` or stdin, when two files the run
    writes, or one and an input (other than its own, in place), are the same file.
    """
    found = find_inputs(inputs, globs, warn=warn)
    _refuse_options(found, output=output, out_dir=out_dir, stats=stats, store=store)
    if in_place:
        _refuse_in_place(found, output=output, out_dir=out_dir)
        found = _inside_folders(found, warn)
        plans = [Plan(f.path, f.path, stats, store or store_of(f.path)) for f in found]
        plans = [dataclasses.replace(p, in_place=True) for p in plans]
    else:
        plans = [_plan_one(f, output, out_dir, stats, store, restorable) for f in found]
    _refuse_clashes(plans)
    return plans


def _refuse_options(
    found: Sequence[Found],
    *,
    output: str | None,
    out_dir: str | None,
    stats: str | None,
    store: str | None,
) -> None:
    """Raise :class:`UsageError` for one file's options given with several inputs,
    for stats or a store on stdout, or for both ``-o`` and ``--out-dir`` (``-o`` won,
    and the folder was never made)."""
    if len(found) > 1 and (output or stats or store):
        raise UsageError("-o, --stats and --store take one input; use --out-dir for several")
    if output and out_dir:
        raise UsageError("-o names the output, --out-dir the folder of outputs: give one")
    for name, value in (("--stats", stats), ("--store", store)):
        if value == "-":
            raise UsageError(f"{name} cannot be -: stdout carries the compressed records")


def _inside_folders(found: Sequence[Found], warn: Callable[[str], None] | None) -> list[Found]:
    """``found`` but the files found in a folder through a symlink that leads out of
    it, each told to ``warn``: ``--in-place`` on a folder rewrote the file such a link
    led to, elsewhere (a fixture linked to a shared data set), which the user never
    named. A file named on its own is rewritten through its link, as asked. Raises
    :class:`ConfigError` when that leaves no file."""
    kept = []
    for item in found:
        if item.relative is not None and os.path.islink(item.path):
            folder = item.path[: -len(item.relative)] or "."
            target = os.path.realpath(item.path)
            if os.path.commonpath([os.path.realpath(folder), target]) != os.path.realpath(folder):
                if warn:
                    warn(
                        f"{item.path}: skipped, a symlink out of the folder (to {target}); "
                        "name it to rewrite what it leads to"
                    )
                continue
        kept.append(item)
    if found and not kept:  # as a folder with no transcripts is
        raise ConfigError(
            "nothing to rewrite in place: every file found is a symlink out of its folder"
        )
    return kept


def _refuse_in_place(found: Sequence[Found], *, output: str | None, out_dir: str | None) -> None:
    """Raise :class:`UsageError` for what ``--in-place`` cannot take."""
    if output or out_dir:
        raise UsageError("--in-place writes over each input: it takes neither -o nor --out-dir")
    if any(item.path == "-" for item in found):
        raise UsageError("--in-place needs files: stdin (-) has no place to write back to")
    streams = [item.path for item in found if jsonio.is_stream(item.path)]
    if streams:  # /dev/fd/3 of '3< a.jsonl' rewrote a.jsonl behind the name
        raise UsageError(f"--in-place needs files: {streams[0]} is a pipe or stream")


def _plan_one(
    found: Found,
    output: str | None,
    out_dir: str | None,
    stats: str | None,
    store: str | None,
    restorable: bool,
) -> Plan:
    path = found.path
    target = _target(found, output, out_dir)
    streamed = jsonio.is_stream(target)
    kept = store or _default_store(path, target, restorable=restorable)
    return Plan(
        input=path,
        output=target,
        stats=stats or (None if streamed else default_stats(target)),
        store=kept,
        adds_to_store=bool(kept and (store or streamed) and not jsonio.is_stream(kept)),
    )


def _target(found: Found, output: str | None, out_dir: str | None) -> str:
    """Where the compressed ``found`` goes: ``output``, else stdout for stdin, else
    :func:`default_output`. Raises :class:`UsageError` for a pipe with neither
    ``output`` nor ``out_dir`` (no folder to write beside) and :class:`ConfigError`
    for an output that is a folder."""
    path = found.path
    if path != "-" and not (output or out_dir) and jsonio.is_stream(path):
        raise UsageError(
            f"{path} is a pipe or stream, with no folder to write beside: give -o (-: stdout)"
        )
    target = output or (
        "-" if path == "-" and not out_dir else default_output(path, out_dir, found.relative)
    )
    if target != "-" and Path(target).is_dir():
        raise ConfigError(f"{target}: is a folder; -o names the output file")
    return target


def _default_store(path: str, target: str, *, restorable: bool) -> str | None:
    """The store of ``path`` written to ``target`` when none is given: beside the
    output; ``/dev/null`` with the output; for stdout beside the input, and only when
    ``restorable`` (added to when it exists: :attr:`Plan.adds_to_store`); from stdin
    to stdout ``/dev/null``: there is no file to put one beside, and a pipe of an
    agent's log failed on its first placeholder ("need a store"); so too from a pipe
    (``<(zcat runs.jsonl.gz)``: "/proc/…/fd: cannot write"), and from a file
    in a folder that takes no new file (a read-only mount of logs: ``-o -`` wrote
    nothing, "cannot write", even where no placeholder was made). The summary line
    says how many originals were thrown away, and how to keep them."""
    streamed = jsonio.is_stream(target)
    if not (restorable or not streamed):  # a file's store costs nothing unless written
        return None
    kept = default_store("-" if streamed else target, path)
    if kept is None or streamed and jsonio.is_stream(path):  # stdin or a pipe to stdout:
        return os.devnull  # nowhere to put one (/dev/fd takes no new file, even for root)
    if streamed and not os.access(os.path.dirname(kept) or ".", os.W_OK | os.X_OK):
        return os.devnull
    if target == os.devnull:
        return os.devnull  # the output is thrown away: so are the originals
    return kept


def _refuse_clashes(plans: Sequence[Plan]) -> None:
    """Raise :class:`ConfigError` when two files of the plans are one, or one would
    replace an input (an in-place output replaces its own input only)."""
    written: dict[str, str] = {}
    inputs_seen = [p.input for p in plans if p.input != "-"]
    for item in plans:
        targets = (("output", item.output), ("stats", item.stats), ("store", item.store))
        for role, written_to in targets:
            if written_to is None or jsonio.is_stream(written_to):
                continue
            key = os.path.realpath(written_to)  # a symlink loop is told by the writer
            if key in written:
                raise ConfigError(
                    f"{written_to}: the {role} of {item.input} would overwrite the {written[key]}"
                )
            written[key] = f"{role} of {item.input}"
            own = item.in_place and role == "output"
            clash = (
                None
                if own
                else next((i for i in inputs_seen if jsonio.same_file(i, written_to)), None)
            )
            if clash is not None:
                raise ConfigError(
                    f"{written_to}: the {role} of {item.input} would overwrite the input {clash}"
                )
