"""Throughput of ``ctxcli compress`` beside the tiktoken floor, on repeated real data.

Builds a large JSONL input by repeating tau-bench's 200 airline runs (from
``../shared/data``, or ``--source``) up to ``--size-mb``, then measures, each in a
fresh process so peak memory is its own:

- ``tiktoken``: encoding every message's text once with ``encode_ordinary``, the work
  no exact counter can avoid (the floor);
- ``compress``: ``ctxcli compress`` in-process with the given stages and budget.

It prints one table: seconds, MB/s, conversations/s, peak RSS (MiB) and the ratio to
the floor. Usage::

    TIKTOKEN_CACHE_DIR=../shared/tiktoken-cache python benchmarks/bench_compress.py --size-mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[1] / "shared/data/tau-bench/gpt-4o-airline.json"


def build_input(source: Path, size_mb: float, target: Path) -> tuple[int, int]:
    """Write ``target`` by repeating the runs in ``source`` until ``size_mb`` MB;
    return (conversations, bytes). Reuses a file of the right size."""
    runs = json.loads(source.read_text())
    lines = [
        json.dumps({"id": f"{r['task_id']}-{r['trial']}", "messages": r["traj"]}) + "\n"
        for r in runs
    ]
    want = int(size_mb * 1_000_000)
    if target.is_file() and abs(target.stat().st_size - want) < 2_000_000:
        with target.open("rb") as f:
            return sum(1 for _ in f), target.stat().st_size
    count = written = 0
    with target.open("w") as out:
        while written < want:
            for line in lines:
                out.write(line)
                written += len(line.encode())
                count += 1
                if written >= want:
                    break
    return count, written


def floor(path: str, encoding: str) -> None:
    """Encode every message's text once, as a counter must at least do."""
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


def child(kind: str, path: str, rest: list[str]) -> None:
    started = time.perf_counter()
    if kind == "tiktoken":
        floor(path, rest[0])
    else:
        compress(path, rest)
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rss_mib": rss}))


def measure(kind: str, path: Path, rest: list[str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path), *rest],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--workdir", type=Path, default=HERE / "data")
    parser.add_argument("--max-tokens", default="2000")
    parser.add_argument("--stages", default="summary,priority")
    parser.add_argument("--encoding", default="o200k_base")
    options = parser.parse_args()
    options.workdir.mkdir(parents=True, exist_ok=True)
    path = options.workdir / f"airline-{options.size_mb:g}mb.jsonl"
    conversations, size = build_input(options.source, options.size_mb, path)
    args = ["--stages", options.stages, "--max-tokens", options.max_tokens]
    args += ["--encoding", options.encoding]
    rows = [
        ("tiktoken floor", measure("tiktoken", path, [options.encoding])),
        (f"compress {' '.join(args)}", measure("compress", path, args)),
    ]
    base = rows[0][1]["seconds"]
    print(f"input: {path.name}, {size / 1e6:.1f} MB, {conversations:,} conversations")
    print(f"{'what':<70} {'s':>7} {'MB/s':>7} {'conv/s':>8} {'RSS MiB':>8} {'x floor':>7}")
    for name, r in rows:
        s = r["seconds"]
        print(
            f"{name:<70} {s:7.2f} {size / 1e6 / s:7.1f} {conversations / s:8.0f} "
            f"{r['rss_mib']:8.0f} {s / base:7.2f}"
        )


if __name__ == "__main__":
    main()
