"""Compress whole files: read, run the pipeline, write, count.

An input is JSON lines, one JSON array of records, or one record (see
:func:`ctxcli.jsonio.read_records`); the output has the input's shape, and each
record the format it was read in (:mod:`ctxcli.formats`). A Claude Code session log
is one conversation for the whole file. JSON lines are read, compressed and written
one record at a time, so memory does not grow with the file (stdin is read whole). A record no stage
changed is written back as the very bytes that were read; a changed one is checked
against its format's rules before it is written.
With ``jobs`` above 1, worker processes compress pieces of a JSON lines file
(:func:`ctxcli.parallel.process_map`); with a summarizer that calls a model, threads
wait on it (:func:`ctxcli.parallel.ordered_map`); either way the output is written in
input order and memory stays bounded.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ctxcli import drivers, formats, jsonio, parquet, pool, record
from ctxcli.config import Settings
from ctxcli.drivers import WARNINGS_SHOWN as WARNINGS_SHOWN
from ctxcli.drivers import FileRun, Warn
from ctxcli.errors import ConfigError
from ctxcli.formats.base import WholeFile

# Re-exported where they were before ctxcli.inputs and ctxcli.formats held them.
from ctxcli.inputs import Plan as Plan
from ctxcli.inputs import default_output as default_output
from ctxcli.inputs import default_stats as default_stats
from ctxcli.inputs import default_store as default_store
from ctxcli.inputs import expand_inputs as expand_inputs
from ctxcli.inputs import plan as plan
from ctxcli.model import Conversation
from ctxcli.pipeline import Context, Result, run
from ctxcli.pool import POOL_MIN_BYTES as POOL_MIN_BYTES
from ctxcli.pool import Piece as Piece
from ctxcli.pool import usable_cpus as usable_cpus
from ctxcli.record import Note, Outcome, Recipe
from ctxcli.record import contain as contain
from ctxcli.stages.placeholder import settle_store
from ctxcli.stats import LISTED_MAX as LISTED_MAX
from ctxcli.stats import Fallback as Fallback
from ctxcli.stats import FileStats as FileStats
from ctxcli.stats import Tally as Tally
from ctxcli.store import StoreWriter, refuse_foreign
from ctxcli.summarizers import Summarizer, build
from ctxcli.tokens import TokenCounter, encoding_name_for, knows_model


def open_writers(
    stack: contextlib.ExitStack[Any],
    input_path: str,
    paths: tuple[str, str | None, str | None],
    *,
    adding: bool = False,
) -> tuple[jsonio.AtomicWriter, StoreWriter | None, jsonio.AtomicWriter | None]:
    """The writers of the output, the store (added to, with ``adding``: see
    :class:`ctxcli.store.StoreWriter`) and the stats of ``paths`` (the last two when
    named), entered on ``stack``: what is made of ``input_path`` is no more readable
    than it, when it is a local file (see :class:`ctxcli.jsonio.AtomicWriter`). Raises
    :class:`ctxcli.errors.OutputError` for a file that cannot be written."""
    output_path, store_path, stats_path = paths
    writer = stack.enter_context(jsonio.AtomicWriter(output_path, like=input_path))
    store = (
        stack.enter_context(StoreWriter(store_path, like=input_path, adding=adding))
        if store_path
        else None
    )
    stats = (
        stack.enter_context(jsonio.AtomicWriter(stats_path, like=input_path))
        if stats_path
        else None
    )
    return writer, store, stats


class Compressor:
    """Runs one :class:`Settings` over files; holds the token counter for the run.

    ``warn`` receives each warning as one line of text (the CLI prints it to stderr).
    ``summarizer`` replaces the one ``settings.summarizer`` names (the CLI builds it,
    API key included). ``jobs`` is the number of worker processes for a JSON lines file
    (``None``: one per usable core, :func:`ctxcli.pool.usable_cpus`, for files of
    :data:`ctxcli.pool.POOL_MIN_BYTES` or more, else 1).
    ``cache_dir`` is where the parsed tokenizer may be kept between runs (see
    :func:`ctxcli.tokens.load_encoding`; ``None``: nowhere). With ``score``, each
    file's stats also measure fact retention (:mod:`ctxcli.score`).
    Raises :class:`ConfigError` for a bad summarizer and
    :class:`ctxcli.errors.TokenizerError` for an encoding that cannot be loaded.

    What one file's run needs lives in its :class:`ctxcli.drivers.FileRun`; what
    compressing one record needs, in :attr:`recipe` (:mod:`ctxcli.record`).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        warn: Warn | None = None,
        summarizer: Summarizer | None = None,
        jobs: int | None = 1,
        cache_dir: str | Path | None = None,
        score: bool = False,
    ) -> None:
        self.settings = settings
        self.score = score
        self.requested_jobs = jobs
        self.encoding = encoding_name_for(settings.model, settings.encoding)
        self._warn = warn or (lambda _: None)
        if settings.model and not settings.encoding and not knows_model(settings.model):
            self._warn(
                f"tiktoken does not know the model {settings.model!r}: counting tokens "
                f"with {self.encoding} (--encoding chooses another)"
            )
        self.counter = TokenCounter(self.encoding, cache_dir=cache_dir)
        self.format = formats.get(settings.format) if settings.format else None
        self.summarizer = summarizer if summarizer is not None else build(settings.summarizer)
        whole = frozenset().union(*(getattr(s, "exclude_tools", ()) for s in settings.stages))
        self.context = Context(settings.max_tokens, self.counter, self.summarizer, whole)
        self.recipe = Recipe(settings, self.counter, self.context, self.format, score)
        #: Warnings so far, over all files.
        self.warned = 0
        #: Where the current file's warnings start, for :meth:`warn` (ctxcli.ray_engine
        #: sets it per file; :meth:`file` counts its own in its run).
        self._file_start = 0

    def warn(self, text: str) -> None:
        """Count one warning and pass it on; past :data:`WARNINGS_SHOWN` since
        ``_file_start`` only the count goes on (the stats file lists them all)."""
        self.warned += 1
        if self.warned - self._file_start <= WARNINGS_SHOWN:
            self._warn(text)

    def read(
        self, record: Any, *, path: str = "<input>", line: int = 0
    ) -> tuple[formats.Found, Conversation]:
        """Read one parsed record (see :func:`ctxcli.record.read`).

        Raises :class:`ctxcli.errors.InputError` for a bad record or one no format fits.
        """
        return _read(self.recipe, record, path=path, line=line)

    def conversation(self, record: Any, *, path: str = "<input>", line: int = 0) -> Result:
        """Compress one parsed record. Raises :class:`ctxcli.errors.InputError` for a
        bad record."""
        conversation = self.read(record, path=path, line=line)[1]
        result = settle_store(run(conversation, self.settings.stages, self.context))
        for text in result.warnings:
            self.warn(text)
        return result

    def file(
        self,
        input_path: str,
        output_path: str,
        *,
        stats_path: str | None = None,
        store_path: str | None = None,
        add_to_store: bool = False,
        progress: bool = False,
    ) -> FileStats:
        """Compress ``input_path`` into ``output_path`` (``-``: stdout) and the originals
        of placeholders into ``store_path`` (see :mod:`ctxcli.store`; added to, not
        replaced, with ``add_to_store``), both atomically: the two are moved into place
        only when the whole run succeeded (the store first). Writes the stats JSON to
        ``stats_path`` (if given).

        Raises :class:`ctxcli.errors.InputError` for a bad line (no output is left
        behind), :class:`ConfigError` when the output or store would overwrite the
        input or is of another shape, or a placeholder is written with no ``store_path``, and
        :class:`ctxcli.errors.WorkerError` when a worker process cannot start or dies.
        """
        _refuse_overwrites(input_path, output_path, store_path)
        started = time.perf_counter()
        stats = self._stats_for(input_path, output_path, store_path)
        model_use = self._model_use()
        data = jsonio.read_input(input_path)
        shape, items, original = parquet.open_records(input_path, data, self.settings.messages_key)
        bar = drivers.progress(input_path) if progress and shape == "jsonl" else None
        newline, bom = jsonio.line_style(input_path, data)
        shown = drivers.Shown(self._warn, bar)
        file_run = self._file_run(stats, shown, shape, original, newline, bar)
        whole, items = formats.whole_file_of(self.format, shape, items, input_path)
        items = drivers.tracked(items, bar)  # counted as a driver reads them, not when peeked at
        lines = (
            drivers.records(file_run, items)
            if whole is None
            else drivers.session(file_run, items, whole)
        )
        with contextlib.ExitStack() as stack:
            if bar is not None:
                stack.callback(bar.close)
            writer, store, stats_file = open_writers(
                stack, input_path, (output_path, store_path, stats_path), adding=add_to_store
            )
            file_run.store = store
            sink = parquet.sink(writer, shape, original, newline=newline, bom=bom)
            for out, changed in lines:
                sink.write(out, changed=changed)
            sink.close()
            if bar is not None and bar.total:
                bar.update(bar.total - bar.n)  # line ends and blank lines it missed
            self.warned += shown.count
            self._close(stats, input_path, shown.count, model_use, started)
            commit_outputs(stats, stats_file, store, writer)
        return stats

    def _stats_for(self, input_path: str, output_path: str, store_path: str | None) -> FileStats:
        """Empty stats for one file of this run."""
        stats = FileStats(
            input=input_path,
            output=output_path,
            encoding=self.encoding,
            max_tokens=self.settings.max_tokens,
            stages=self.settings.stage_names,
            store=store_path,
        )
        if self.score:
            from ctxcli.score import FileScore  # only for a run that scores

            stats.score = FileScore(input_path, output_path, self.settings.max_tokens)
        return stats

    def _file_run(
        self,
        stats: FileStats,
        shown: drivers.Shown,
        shape: str,
        original: Any,
        newline: bytes,
        bar: Any,
    ) -> FileRun:
        """The run of the file ``stats`` are for, of ``shape`` (its Parquet source
        ``original`` encodes its records), warning through ``shown``."""
        return FileRun(
            self.recipe,
            stats.input,
            stats,
            warn=shown,
            shape=shape,
            encode=original.encode if shape == "parquet" else jsonio.dumps,
            newline=newline,
            bar=bar,
            jobs=pool.jobs_for(self.requested_jobs, stats.input),
            threads=self.summarizer.concurrency,
            # Threads only pay off while waiting on a model; no client, no cache to fork.
            offline=self.summarizer.offline,
        )

    def _close(
        self,
        stats: FileStats,
        input_path: str,
        warnings: int,
        model_use: dict[str, float] | None,
        started: float,
    ) -> None:
        """Fill in the stats known only at the end of a file: its ``warnings``, the
        store's size, model use and time."""
        stats.warnings = warnings
        if stats.warnings > WARNINGS_SHOWN:
            hidden = stats.warnings - WARNINGS_SHOWN
            self._warn(f"{input_path}: {hidden} more warnings not shown; the stats list them")
        if model_use is not None:
            now = self._model_use() or {}
            # Gauges (the concurrency used) are levels, not counts: taken as they are.
            model_stats = self.summarizer.stats
            gauges = model_stats.GAUGES if model_stats is not None else ()
            stats.llm = {k: v if k in gauges else v - model_use.get(k, 0) for k, v in now.items()}
            stats.llm["wait_seconds"] = round(stats.llm["wait_seconds"], 3)
            stats.llm["fallbacks"] = stats.stage_events.get("summary", Counter())["fallbacks"]
        stats.elapsed_seconds = time.perf_counter() - started

    def _model_use(self) -> dict[str, float] | None:
        """The summarizer's model-use counters so far, if it counts any."""
        model_stats = self.summarizer.stats
        return None if model_stats is None else dict(model_stats.snapshot())

    # What ctxcli.ray_engine calls, each a thin call into the modules that hold it.

    def _finish(
        self,
        stats: FileStats,
        input_path: str,
        warned: int,
        model_use: dict[str, float] | None,
        started: float,
    ) -> None:
        """:meth:`_close` for a file whose warnings went through :meth:`warn` since
        ``warned`` of them had been."""
        self._close(stats, input_path, self.warned - warned, model_use, started)

    def _book(
        self,
        item: jsonio.Record,
        outcome: Outcome,
        path: str,
        stats: FileStats,
        note: Callable[[Note], None],
    ) -> tuple[bytes, bool]:
        """:func:`ctxcli.record.book` with this compressor's settings."""
        return record.book(self.settings, item, outcome, path, stats, note)

    def _apply(self, note: Note, store: StoreWriter | None) -> None:
        """Act on one note of :meth:`_book`: warn, or store originals."""
        if isinstance(note, str):
            self.warn(note)
        else:
            drivers.stash(note[0], store, note[1])

    def piece(self, items: Iterable[jsonio.Record], path: str) -> Piece:
        """:func:`ctxcli.pool.piece`: ``items`` compressed into one :class:`Piece`."""
        return pool.piece(pool.Worker(self.recipe), items, path)

    def session(
        self,
        items: Iterable[jsonio.Record],
        path: str,
        stats: FileStats,
        store: StoreWriter | None = None,
        *,
        module: WholeFile,
    ) -> Iterator[tuple[bytes, bool]]:
        """:func:`ctxcli.drivers.session`, warning through :meth:`warn`."""
        file_run = FileRun(self.recipe, path, stats, store, warn=self.warn)
        return drivers.session(file_run, items, module)


def compress_record(
    compressor: Compressor,
    item: jsonio.Record,
    path: str,
    encode: Callable[[Any], bytes] = jsonio.dumps,
) -> Outcome:
    """:func:`ctxcli.record.compress_record` with ``compressor``'s recipe: what one
    input record becomes, with no side effect."""
    return record.compress_record(compressor.recipe, item, path, encode)


def _read(
    recipe: Recipe, value: Any, *, path: str, line: int
) -> tuple[formats.Found, Conversation]:
    return record.read(recipe, value, path=path, line=line)


def _refuse_overwrites(input_path: str, output_path: str, store_path: str | None) -> None:
    """Raise :class:`ConfigError` when the output or the store is the input, or the
    store is the output, or the output is named in another shape than the input's
    (:func:`_refuse_other_shape`); :class:`ctxcli.errors.StoreError` when the store
    would replace a file that is no store (:func:`ctxcli.store.refuse_foreign`)."""
    _refuse_other_shape(input_path, output_path)
    if store_path and store_path != "-":
        refuse_foreign(store_path)
    for target in (output_path, store_path):
        if target and target != "-" and input_path != "-" and jsonio.same_file(input_path, target):
            raise ConfigError(f"{target}: the output would overwrite the input")
    if (
        store_path
        and output_path != "-"
        and not jsonio.is_stream(store_path)
        and jsonio.same_file(output_path, store_path)
    ):
        raise ConfigError(f"{store_path}: the store would overwrite the output")


#: The names of outputs in the JSON shapes (JSON lines, a JSON array).
_JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _refuse_other_shape(input_path: str, output_path: str) -> None:
    """Raise :class:`ConfigError` when the output's name says another shape than its
    input's: the output is written in the input's shape, so JSON lines were written
    under a ``.parquet`` name (which no Parquet reader opens), or Parquet bytes under a
    ``.jsonl`` one. Standard input is JSON; an output of no such name (``-``, a device,
    ``--in-place``'s temporary file) is not checked."""
    if output_path == "-":
        return
    parquet_in = input_path != "-" and parquet.is_parquet(input_path)
    named = output_path.lower().endswith(_JSON_SUFFIXES) if parquet_in else None
    if named or (not parquet_in and parquet.is_parquet(output_path)):
        shape = "Parquet" if parquet_in else "JSON"
        raise ConfigError(
            f"{output_path}: the output is written as {shape}, as its input "
            f"{input_path} is; name it {'.parquet' if parquet_in else '.jsonl'}"
        )


def commit_outputs(
    stats: FileStats,
    stats_file: jsonio.AtomicWriter | None,
    store: StoreWriter | None,
    writer: jsonio.AtomicWriter,
) -> None:
    """Move the files into place, the output last: the store (which then holds every
    original of the output's placeholders, and, added to, of the outputs before), the
    stats (with the store's size), the output."""
    if store is not None:
        store.commit()
        stats.store_entries, stats.store_bytes = store.entries, store.bytes
        if not store.entries:
            stats.store = None
    if stats_file is not None:
        stats_file.write(jsonio.dumps_indented(stats.to_json()))
        stats_file.commit()
    writer.commit()


def planned(compressor: Compressor, item: Plan, *, progress: bool = False) -> FileStats:
    """``compressor``'s :meth:`Compressor.file` of the paths ``item`` plans
    (:func:`ctxcli.inputs.plan`), its store added to where the plan says so: one place
    that reads the plan, as two callers that read it by hand had each left
    ``adds_to_store`` out."""
    return compressor.file(
        item.input,
        item.output,
        stats_path=item.stats,
        store_path=item.store,
        add_to_store=item.adds_to_store,
        progress=progress,
    )
