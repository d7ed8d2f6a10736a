"""Compress whole files: read, run the pipeline, write, count.

Conversations are read, compressed and written one at a time, so memory does not
grow with the file. A record no stage changed is written back as the very bytes
that were read. With a summarizer that calls a model, several conversations are
compressed at once on threads (:func:`ctxcli.parallel.ordered_map`), still written
in input order.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli import jsonio
from ctxcli.config import Settings
from ctxcli.errors import ConfigError, InputError
from ctxcli.formats import openai as openai_format
from ctxcli.model import Conversation
from ctxcli.parallel import ordered_map
from ctxcli.pipeline import Context, Result, run
from ctxcli.summarizers import Summarizer, build
from ctxcli.tokens import TokenCounter, encoding_name_for

#: Files a directory input never includes: what ctxcli itself wrote there.
OWN_SUFFIXES = (".compressed.jsonl", ".store.jsonl")

Warn = Callable[[str], None]
#: One input line after the pipeline: line number, raw bytes, parsed record, and the
#: result or the error that line gave.
_Outcome = tuple[int, bytes, Any, "Result | InputError"]


@dataclass
class FileStats:
    """What one input file went through. Token figures are tokens of the run's
    encoding by the cookbook rule (messages, reply priming and ``tools``)."""

    input: str
    output: str
    encoding: str
    max_tokens: int | None
    stages: list[str]
    conversations: int = 0
    changed: int = 0
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    by_role: dict[str, Counter[str]] = field(default_factory=dict)
    stage_events: dict[str, Counter[str]] = field(default_factory=dict)
    over_budget: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    warnings: int = 0
    elapsed_seconds: float = 0.0
    llm: dict[str, float] = field(default_factory=dict)

    def add(self, result: Result) -> None:
        """Count one compressed conversation."""
        before, after = result.before, result.after
        self.conversations += 1
        self.changed += result.changed
        self.messages_before += len(before.messages)
        self.messages_after += len(after.messages)
        self.tokens_before += before.tokens
        self.tokens_after += after.tokens
        for side, conversation in (("before", before), ("after", after)):
            for message in conversation.messages:
                role = "summary" if message.is_summary and message.index is None else message.role
                counts = self.by_role.setdefault(role, Counter())
                counts[f"messages_{side}"] += 1
                counts[f"tokens_{side}"] += message.tokens
        for stage, events in result.events.items():
            self.stage_events.setdefault(stage, Counter()).update(events)
        if result.over_budget:
            self.over_budget.append({"id": after.id, "line": after.line, "tokens": after.tokens})

    @property
    def ratio(self) -> float:
        """Tokens after / tokens before (1.0 for an empty file)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0

    def to_json(self) -> dict[str, Any]:
        """The stats file's content."""
        return {
            "input": self.input,
            "output": self.output,
            "encoding": self.encoding,
            "max_tokens": self.max_tokens,
            "stages": self.stages,
            "conversations": self.conversations,
            "conversations_changed": self.changed,
            "messages": {"before": self.messages_before, "after": self.messages_after},
            "tokens": {"before": self.tokens_before, "after": self.tokens_after},
            "ratio": round(self.ratio, 4),
            "by_role": {role: dict(c) for role, c in sorted(self.by_role.items())},
            "stage_events": {s: dict(c) for s, c in self.stage_events.items()},
            "over_budget": self.over_budget,
            "errors": self.errors,
            "warnings": self.warnings,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            **({"llm": self.llm} if self.llm else {}),
        }


def expand_inputs(inputs: Iterable[str]) -> list[str]:
    """Paths to read: files as given, a directory's ``*.jsonl`` (sorted, without the
    files ctxcli writes), ``-`` for stdin. Raises :class:`ConfigError` for a missing
    path or an empty directory."""
    paths: list[str] = []
    for item in inputs:
        path = Path(item)
        if item == "-" or path.is_file():
            paths.append(item)
        elif path.is_dir():
            found = sorted(
                str(p) for p in path.glob("*.jsonl") if not p.name.endswith(OWN_SUFFIXES)
            )
            if not found:
                raise ConfigError(f"{item}: no *.jsonl files in this directory")
            paths += found
        else:
            raise ConfigError(f"{item}: no such file or directory")
    return paths


def default_output(input_path: str, out_dir: str | None = None) -> str:
    """``<stem>.compressed.jsonl`` beside the input, or in ``out_dir``."""
    path = Path(input_path)
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
    return str(Path(out_dir or path.parent) / f"{stem}.compressed.jsonl")


def default_stats(output_path: str) -> str:
    """``<output stem>.stats.json`` beside the output."""
    path = Path(output_path)
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
    return str(path.with_name(f"{stem}.stats.json"))


class Compressor:
    """Runs one :class:`Settings` over files; holds the token counter for the run.

    ``warn`` receives each warning as one line of text (the CLI prints it to stderr).
    ``summarizer`` replaces the one ``settings.summarizer`` names (the CLI builds it,
    API key included). Raises :class:`ConfigError` for a bad encoding or summarizer.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        warn: Warn | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.settings = settings
        self.encoding = encoding_name_for(settings.model, settings.encoding)
        try:
            self.counter = TokenCounter(self.encoding)
        except ValueError as exc:
            raise ConfigError(f"unknown encoding {self.encoding!r}: {exc}") from None
        self.summarizer = summarizer or build(settings.summarizer)
        self.context = Context(settings.max_tokens, self.counter, self.summarizer)
        # Threads only pay off while waiting on a model; the extractive path stays serial.
        self.workers = getattr(self.summarizer, "concurrency", 1)
        self._warn = warn or (lambda _: None)
        self.warned = 0

    def warn(self, text: str) -> None:
        """Pass one warning on, and count it."""
        self.warned += 1
        self._warn(text)

    def conversation(self, record: Any, *, path: str = "<input>", line: int = 0) -> Result:
        """Compress one parsed record. Raises :class:`InputError` for a bad record."""
        conversation = openai_format.read(record, self.counter, path=path, line=line)
        return self._run(conversation)

    def _run(self, conversation: Conversation) -> Result:
        result = run(conversation, self.settings.stages, self.context)
        for text in result.warnings:
            self.warn(text)
        return result

    def _attempt(self, item: tuple[int, bytes], path: str) -> _Outcome:
        """Parse and compress one input line, on any thread (warnings wait in the result)."""
        line, raw = item
        try:
            record = jsonio.loads(raw, path, line)
            conversation = openai_format.read(record, self.counter, path=path, line=line)
            return line, raw, record, run(conversation, self.settings.stages, self.context)
        except InputError as exc:
            return line, raw, None, exc

    def records(
        self, lines: Iterable[tuple[int, bytes]], path: str, stats: FileStats
    ) -> Iterator[bytes]:
        """Output lines (without line ends) for ``(line_number, raw)`` input lines, in
        input order; up to ``workers`` conversations are compressed at once, and at
        most ``2 * workers`` lines are held in memory."""
        outcomes = ordered_map(lambda item: self._attempt(item, path), lines, workers=self.workers)
        for line, raw, record, result in outcomes:
            if isinstance(result, InputError):
                if self.settings.on_error != "keep":
                    raise result
                stats.errors.append({"line": line, "reason": result.reason})
                self.warn(f"{result} (copied unchanged)")
                yield raw
                continue
            for text in result.warnings:
                self.warn(text)
            stats.add(result)
            if result.over_budget:
                self.warn(
                    f"{path}:{line}: conversation {result.after.label} is over budget: "
                    f"{result.after.tokens} tokens > {self.settings.max_tokens} with only "
                    "what must be kept"
                )
            if result.changed:
                yield jsonio.dumps(openai_format.write(record, result.after))
            else:
                yield raw

    def file(
        self,
        input_path: str,
        output_path: str,
        *,
        stats_path: str | None = None,
        progress: bool = False,
    ) -> FileStats:
        """Compress ``input_path`` into ``output_path`` (``-``: stdout) atomically and
        write the stats JSON to ``stats_path`` (if given).

        Raises :class:`InputError` for a bad line (no output is left behind) and
        :class:`ConfigError` when the output would overwrite the input.
        """
        if input_path != "-" and output_path != "-" and _same_file(input_path, output_path):
            raise ConfigError(f"{output_path}: the output would overwrite the input")
        started = time.perf_counter()
        stats = FileStats(
            input=input_path,
            output=output_path,
            encoding=self.encoding,
            max_tokens=self.settings.max_tokens,
            stages=self.settings.stage_names,
        )
        warned = self.warned
        model_use = self._model_use()
        lines = jsonio.iter_lines(input_path)
        bar = _progress(input_path) if progress else None
        with jsonio.AtomicWriter(output_path) as writer:
            for out in self.records(_tracked(lines, bar), input_path, stats):
                writer.write(out + b"\n")
            writer.commit()
        if bar is not None:
            bar.close()
        stats.warnings = self.warned - warned
        if model_use is not None:
            now = self._model_use() or {}
            stats.llm = {k: v - model_use.get(k, 0) for k, v in now.items()}
            stats.llm["wait_seconds"] = round(stats.llm["wait_seconds"], 3)
            stats.llm["fallbacks"] = stats.stage_events.get("summary", Counter())["fallbacks"]
        stats.elapsed_seconds = time.perf_counter() - started
        if stats_path:
            jsonio.write_json(stats_path, stats.to_json())
        return stats

    def _model_use(self) -> dict[str, float] | None:
        """The summarizer's model-use counters so far, if it counts any."""
        model_stats = getattr(self.summarizer, "stats", None)
        return None if model_stats is None else dict(model_stats.snapshot())


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _progress(path: str) -> Any:
    from tqdm import tqdm

    total = os.path.getsize(path) if path != "-" else None
    return tqdm(total=total, unit="B", unit_scale=True, desc=Path(path).name, leave=False)


def _tracked(lines: Iterator[tuple[int, bytes]], bar: Any) -> Iterator[tuple[int, bytes]]:
    for item in lines:
        if bar is not None:
            bar.update(len(item[1]) + 1)
        yield item
