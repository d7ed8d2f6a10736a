"""Throughput of ``ctxcli compress`` beside the tiktoken floor, on repeated real data.

Builds large JSONL inputs by repeating tau-bench's 200 airline runs (from
``../shared/data``, or ``--source``) to ``--size-mb`` (and, with ``--large-mb``, a
second, larger one for the memory check), then measures each variant in a fresh
process, so its peak RSS is its own:

- ``tiktoken floor``: encoding every message's text once with ``encode_ordinary``, the
  work no exact counter can avoid;
- ``ctxcli --jobs N``: ``ctxcli compress`` in-process, for each N in ``--jobs``;
- ``trim_messages``: LangChain's ``trim_messages`` (if ``langchain-core`` is installed)
  on the same conversations and budget, with an exact tiktoken counter by the same
  cookbook rule (``strategy="last"``, ``include_system=True``, ``start_on="human"``),
  converting each record's messages with ``convert_to_messages`` as a user must.

It prints one table (seconds, MB/s, conversations/s, peak RSS in MiB, time over the
floor) and the ratios the throughput goals are stated in; ``--markdown`` prints the
table as Markdown for ``benchmarks/RESULTS.md``. Usage::

    TIKTOKEN_CACHE_DIR=../shared/tiktoken-cache python benchmarks/bench_compress.py \\
        --size-mb 100 --large-mb 1000 --jobs 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[1] / "shared/data/tau-bench/gpt-4o-airline.json"


def build_input(source: Path, size_mb: float, target: Path) -> tuple[int, int]:
    """Write ``target`` by repeating the runs in ``source`` until ``size_mb`` MB;
    return (conversations, bytes). Reuses a file of the right size."""
    want = int(size_mb * 1_000_000)
    if target.is_file() and abs(target.stat().st_size - want) < 2_000_000:
        with target.open("rb") as f:
            return sum(1 for _ in f), target.stat().st_size
    runs = json.loads(source.read_text())
    lines = [
        (json.dumps({"id": f"{r['task_id']}-{r['trial']}", "messages": r["traj"]}) + "\n").encode()
        for r in runs
    ]
    count = written = 0
    with target.open("wb") as out:
        while written < want:
            for line in lines:
                out.write(line)
                written += len(line)
                count += 1
                if written >= want:
                    break
    return count, written


def floor(path: str, encoding: str) -> None:
    """Encode every message's text once, as an exact counter must at least do."""
    import orjson
    import tiktoken

    encode = tiktoken.get_encoding(encoding).encode_ordinary
    with open(path, "rb") as f:
        for line in f:
            for message in orjson.loads(line)["messages"]:
                for key in ("role", "content", "name"):
                    value = message.get(key)
                    if isinstance(value, str):
                        encode(value)
                for call in message.get("tool_calls") or []:
                    encode(call["function"]["name"])
                    encode(call["function"]["arguments"])


def compress(path: str, args: list[str]) -> None:
    from click.testing import CliRunner

    from ctxcli.cli import cli

    result = CliRunner().invoke(cli, ["compress", path, "-o", os.devnull, "-q", *args])
    if result.exit_code not in (0, 3):
        raise SystemExit(result.output)


def langchain(path: str, encoding: str, max_tokens: int) -> None:
    """LangChain's trim_messages with an exact tiktoken counter (cookbook rule)."""
    import orjson
    import tiktoken
    from langchain_core.messages import BaseMessage, convert_to_messages, trim_messages

    encode = tiktoken.get_encoding(encoding).encode_ordinary

    def count(messages: list[BaseMessage]) -> int:
        total = 3
        for m in messages:
            total += (
                3
                + len(encode(m.type))
                + len(encode(m.content if isinstance(m.content, str) else json.dumps(m.content)))
            )
            for call in getattr(m, "tool_calls", None) or []:
                total += 3 + len(encode(call["name"])) + len(encode(json.dumps(call["args"])))
        return total

    with open(path, "rb") as f:
        for line in f:
            messages = convert_to_messages(orjson.loads(line)["messages"])
            trim_messages(
                messages,
                max_tokens=max_tokens,
                token_counter=count,
                strategy="last",
                include_system=True,
                start_on="human",
            )


def child(kind: str, path: str, rest: list[str]) -> None:
    started = time.perf_counter()
    if kind == "tiktoken":
        floor(path, rest[0])
    elif kind == "langchain":
        langchain(path, rest[0], int(rest[1]))
    else:
        compress(path, rest)
    seconds = time.perf_counter() - started
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"seconds": seconds, "rss_mib": own / 1024, "worker_rss_mib": workers / 1024}))


def measure(kind: str, path: Path, rest: list[str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path), *rest],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--large-mb", type=float, default=0, help="also run --jobs 1 here")
    parser.add_argument("--jobs", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--workdir", type=Path, default=HERE / "data")
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--stages", default="summary,priority")
    parser.add_argument("--encoding", default="o200k_base")
    parser.add_argument("--no-langchain", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    options.workdir.mkdir(parents=True, exist_ok=True)

    def make(size: float) -> tuple[Path, int, int]:
        path = options.workdir / f"airline-{size:g}mb.jsonl"
        return (path, *build_input(options.source, size, path))

    path, conversations, size = make(options.size_mb)
    base = ["--stages", options.stages, "--max-tokens", str(options.max_tokens)]
    base += ["--encoding", options.encoding]
    rows: list[tuple[str, Path, int, int, dict[str, float]]] = []
    rows.append(
        ("tiktoken floor", path, conversations, size, measure("tiktoken", path, [options.encoding]))
    )
    for jobs in options.jobs.split(","):
        args = [*base, "--jobs", jobs]
        rows.append(
            (f"ctxcli --jobs {jobs}", path, conversations, size, measure("compress", path, args))
        )
    if not options.no_langchain:
        try:
            import langchain_core  # noqa: F401

            result = measure("langchain", path, [options.encoding, str(options.max_tokens)])
            rows.append(("trim_messages (exact counter)", path, conversations, size, result))
        except ImportError:
            print("langchain-core is not installed: trim_messages skipped", file=sys.stderr)
    if options.large_mb:
        large, large_n, large_size = make(options.large_mb)
        result = measure("compress", large, [*base, "--jobs", "1"])
        rows.append(("ctxcli --jobs 1 (large input)", large, large_n, large_size, result))
    report(rows, options, base)


def report(
    rows: list[tuple[str, Path, int, int, dict[str, float]]], options: Any, args: list[str]
) -> None:
    floor_s = rows[0][4]["seconds"]
    head = ("what", "input", "s", "MB/s", "conv/s", "peak RSS MiB", "x floor")
    table = []
    for name, _, n, size, r in rows:
        s = r["seconds"]
        rss = max(r["rss_mib"], r.get("worker_rss_mib", 0))
        table.append(
            (
                name,
                f"{size / 1e6:.0f} MB",
                f"{s:.2f}",
                f"{size / 1e6 / s:.1f}",
                f"{n / s:.0f}",
                f"{rss:.0f}",
                f"{s / floor_s:.2f}",
            )
        )
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"compress {' '.join(args)}; {time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    if options.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(x[i])) for x in [head, *table]) for i in range(len(head))]
        for row in [head, *table]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    by = {name: r for name, _, _, _, r in rows}
    one, two = by.get("ctxcli --jobs 1"), by.get("ctxcli --jobs 2")
    if one:
        print(f"jobs 1 / floor: {one['seconds'] / floor_s:.2f} (goal <= 1.5)")
    if one and two:
        print(f"jobs 1 / jobs 2: {one['seconds'] / two['seconds']:.2f} (goal >= 1.7)")
    lc = by.get("trim_messages (exact counter)")
    if one and lc:
        print(f"trim_messages / jobs 1: {lc['seconds'] / one['seconds']:.2f} (goal >= 5)")
    large = by.get("ctxcli --jobs 1 (large input)")
    if one and large:
        print(f"peak RSS large / small: {large['rss_mib'] / one['rss_mib']:.2f} (goal <= 1.2)")


if __name__ == "__main__":
    main()
