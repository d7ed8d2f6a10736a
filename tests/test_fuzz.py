"""A fuzz test: generated conversations (``fuzz_corpus``) through random settings, by
the file-level path the CLI takes, every output checked by an oracle written apart
from ctxcli (``fuzz_oracle``).

A case is one input file (one to four records, formats mixed) with one setting. The run
counts aborted files (each conversation that broke one is found by compressing it
alone), invalid outputs, lost system or latest user messages, conversations over
budget that the stats do not list, counts that do not describe what was written,
crashes, hangs, failed restores and per-conversation fallbacks (the stats' ``fallbacks``
list, when there is one). All must be 0.

``pytest tests/test_fuzz.py --fuzz-n 10000`` runs 10,000 conversations (the default
run: 300); ``--fuzz-seed S`` another corpus. A failure names its case ``S:K``, which
``fuzz_corpus.case(S, K)`` gives again (records and settings) for a reproducer.
"""

from __future__ import annotations

import json
import signal
import time
import traceback
from collections import Counter as Tally
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fuzz_corpus import Case, case
from fuzz_oracle import Bad, Counter, Store, check_record

from ctxcli.compress import Compressor
from ctxcli.config import resolve
from ctxcli.errors import CtxcliError, InvariantError
from ctxcli.store import restore_file

#: Seconds one file may take before it counts as a hang.
HANG_SECONDS = 60
COUNTER = Counter("o200k_base")
KINDS = (
    "aborted files",
    "invalid",
    "lost",
    "unlisted over budget",
    "wrong counts",
    "crashes",
    "hangs",
    "restore failures",
    "fallbacks",
)


@dataclass
class Report:
    """Counts per kind of failure, and a reproducer for the first few of each."""

    conversations: int = 0
    files: int = 0
    counts: Tally[str] = field(default_factory=Tally)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, where: str, detail: str) -> None:
        self.counts[kind] += 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < 5:
            shown.append(f"case {where}: {detail[:600]}")

    def text(self) -> str:
        lines = [f"{self.conversations} conversations in {self.files} files"]
        lines += [f"  {kind}: {self.counts[kind]}" for kind in KINDS]
        for kind, shown in self.examples.items():
            lines += [f"{kind}:", *(f"  {s}" for s in shown)]
        return "\n".join(lines)


class Hang(Exception):
    pass


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def expire(*_: object) -> None:
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Run:
    """What one compress run left: the error it ended with, or its files."""

    error: BaseException | None
    outputs: list[dict[str, Any]]
    stats: dict[str, Any]
    store: Store
    store_path: Path
    output: Path


def compress(folder: Path, config: dict[str, Any], records: list[dict[str, Any]]) -> Run:
    """``ctxcli compress`` of ``records`` with ``config``, as the CLI runs it: the
    store beside the output (written when it gets entries, see ctxcli.inputs.plan)."""
    folder.mkdir(parents=True, exist_ok=True)
    source, output = folder / "in.jsonl", folder / "out.jsonl"
    stats_path, store_path = folder / "out.stats.json", folder / "out.store.jsonl"
    lines = [json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(records)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = resolve(config)
    error: BaseException | None = None
    try:
        with deadline(HANG_SECONDS):
            Compressor(settings).file(
                str(source),
                str(output),
                stats_path=str(stats_path),
                store_path=str(store_path),
            )
    except (CtxcliError, Hang, Exception) as exc:  # each is counted by its kind
        error = exc
    if error is not None:
        return Run(error, [], {}, Store(), store_path, output)
    outputs = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    store = Store()
    if store_path.exists():
        for line in store_path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            store.originals[entry["id"]] = entry["content"]
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    return Run(None, outputs, stats, store, store_path, output)


def failure(error: BaseException) -> tuple[str, str]:
    """The report's kind of an error a run ended with, and its text."""
    if isinstance(error, InvariantError):
        return "aborted files", str(error)
    if isinstance(error, Hang):
        return "hangs", str(error)
    if isinstance(error, CtxcliError):
        return "crashes", f"{type(error).__name__}: {error}"
    return "crashes", "".join(traceback.format_exception(error))[-1500:]


def run_case(item: Case, folder: Path, report: Report) -> None:
    report.files += 1
    report.conversations += len(item.records)
    run = compress(folder, item.config, item.records)
    if run.error is not None:
        kind, text = failure(run.error)
        report.add(kind, item.key, f"{text} (settings {json.dumps(item.config)})")
        if kind == "aborted files" and len(item.records) > 1:
            alone(item, folder, report)
        return
    for entry in run.stats.get("fallbacks", []):
        report.add("fallbacks", item.key, f"{entry} (settings {json.dumps(item.config)})")
    check_outputs(item, run, report)
    check_restore(item, run, folder, report)


def alone(item: Case, folder: Path, report: Report) -> None:
    """Compress each record of an aborted file alone: every one that aborts is named
    (beyond the first, which the file's error named)."""
    broken = []
    for n, record in enumerate(item.records):
        run = compress(folder / f"alone{n}", item.config, [record])
        if isinstance(run.error, InvariantError):
            broken.append(f"record {n}: {run.error}")
    if len(broken) > 1:
        report.add("aborted files", item.key, "; ".join(broken[1:]) + " (each alone)")


def check_outputs(item: Case, run: Run, report: Report) -> None:
    budget = item.config["max_tokens"]
    listed = {e["line"]: e["tokens"] for e in run.stats["over_budget"]}
    if len(run.outputs) != len(item.records):
        report.add("invalid", item.key, f"{len(run.outputs)} records for {len(item.records)}")
        return
    before = after = 0
    for line, (record, out) in enumerate(zip(item.records, run.outputs), start=1):
        try:
            check_record(record, out, run.store)
        except Bad as bad:
            report.add(
                bad.kind,
                item.key,
                f"record {line - 1} ({record['id']}): {bad.detail} (settings {json.dumps(item.config)})",
            )
        tokens = COUNTER.record(out)
        before += COUNTER.record(record)
        after += tokens
        if tokens > budget and line not in listed:
            report.add("unlisted over budget", item.key, f"record {line - 1}: {tokens} > {budget}")
        if line in listed and listed[line] != tokens:
            report.add(
                "wrong counts",
                item.key,
                f"record {line - 1}: listed with {listed[line]} tokens, wrote {tokens}",
            )
    counted = (run.stats["tokens"]["before"], run.stats["tokens"]["after"])
    if counted != (before, after):
        report.add(
            "wrong counts", item.key, f"stats say {counted} tokens, the oracle {(before, after)}"
        )


def check_restore(item: Case, run: Run, folder: Path, report: Report) -> None:
    """``restore`` of the output with its store (or none) gives back input messages."""
    back = folder / "back.jsonl"
    try:
        restore_file(str(run.output), str(back), str(run.store_path))
    except CtxcliError as exc:
        report.add("restore failures", item.key, str(exc))
        return
    restored = [json.loads(line) for line in back.read_text(encoding="utf-8").splitlines()]
    for n, (record, out) in enumerate(zip(item.records, restored)):
        try:
            check_record(record, out, Store(restored=True))
        except Bad as bad:
            report.add("restore failures", item.key, f"record {n}: {bad.detail}")


def fuzz(seed: int, n: int, tmp_path: Path) -> Report:
    report = Report()
    k = 0
    while report.conversations < n:
        run_case(case(seed, k), tmp_path / f"c{k % 50}", report)
        k += 1
    return report


def test_fuzz(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Every output of the generated corpus passes the oracle; nothing aborts, crashes
    or hangs, and no conversation falls back."""
    n: int = request.config.getoption("--fuzz-n")
    seed: int = request.config.getoption("--fuzz-seed")
    started = time.perf_counter()
    report = fuzz(seed, n, tmp_path)
    elapsed = time.perf_counter() - started
    print(f"\nfuzz seed {seed}: {report.text()}\n  took {elapsed:.1f} s")
    assert not any(report.counts[kind] for kind in KINDS), report.text()


def _broken(record: dict[str, Any], how: str) -> dict[str, Any]:
    """``record`` (a valid output of itself) broken one way."""
    out = json.loads(json.dumps(record))
    key = "conversations" if "conversations" in out else "messages"
    items = out[key]
    if how == "drop first":
        del items[0]
    elif how == "drop a result":
        del items[next(i for i, m in enumerate(items) if m.get("role") == "tool")]
    elif how == "swap":
        items[1], items[2] = items[2], items[1]
    elif how == "edit last user":
        users = [m for m in items if m.get("role") == "user" or m.get("from") == "human"]
        users[-1]["content" if "content" in users[-1] else "value"] += "!"
    elif how == "new message":
        items.insert(1, {"role": "assistant", "content": "made up"})
    elif how == "system kept":
        out["system"] = "other"
    return out


OPENAI = {
    "id": "o",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "ls"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "user", "content": "and?"},
    ],
}
ANTHROPIC = {
    "id": "a",
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "ls"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a b"},
                {"type": "text", "text": "and?"},
            ],
        },
    ],
}


@pytest.mark.parametrize(
    ("record", "how", "kind"),
    [
        (OPENAI, "drop first", "lost"),
        (OPENAI, "drop a result", "invalid"),
        (OPENAI, "swap", "invalid"),
        (OPENAI, "edit last user", "lost"),
        (OPENAI, "new message", "invalid"),
        (ANTHROPIC, "drop first", "invalid"),
        (ANTHROPIC, "swap", "invalid"),
        (ANTHROPIC, "system kept", "lost"),
    ],
)
def test_the_oracle_sees_a_broken_output(record: dict[str, Any], how: str, kind: str) -> None:
    assert check_record(record, record, Store()) in ("openai", "anthropic")
    with pytest.raises(Bad) as raised:
        check_record(record, _broken(record, how), Store())
    assert raised.value.kind == kind


def test_the_oracle_counts_by_the_cookbook_rule() -> None:
    """3 per message + role + content, 3 per call + name + arguments, 3 priming."""
    text = COUNTER.text
    calls = 3 + text("ls") + text("{}")
    messages = OPENAI["messages"]
    expected = sum(3 + text(m["role"]) + text(m["content"] or "") for m in messages) + calls + 3
    assert COUNTER.record(OPENAI) == expected
