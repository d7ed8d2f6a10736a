"""Benchmark: `skills list` reads front matter only, against reading every file whole.

Generates COUNT skills (a quarter in the NAME/SKILL.md layout) whose bodies are BODY_KB
kilobytes, then times, with a warm page cache, the median of REPEAT runs of:

- ``list_skills`` (what ``ctxcli skills list`` calls), counting the bytes it read;
- ``ctxcli skills list --format json`` in process, through click's CliRunner;
- a plain read of every file (``Path.read_bytes``), the floor for any eager loader;
- ``list_skills`` plus ``load_detail`` of every skill (an eager loader that parses too).

Prints a Markdown table; exits 1 if the listing read 2% or more of the bytes on disk.

    python benchmarks/bench_skills.py [--count 1000] [--body-kb 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from ctxcli import skills as lib
from ctxcli.skills_cli import skills as skills_group

WORDS = [
    "read",
    "write",
    "file",
    "path",
    "line",
    "token",
    "skill",
    "agent",
    "call",
    "return",
    "value",
    "error",
    "retry",
    "parse",
    "schema",
    "table",
    "output",
    "input",
    "command",
    "search",
    "query",
    "result",
    "context",
    "budget",
    "stream",
]


def generate(root: Path, count: int, body_kb: int, seed: int = 5) -> int:
    """Write ``count`` skills under ``root``; return the bytes on disk."""
    rng = random.Random(seed)
    total = 0
    for i in range(count):
        name = f"skill_{i:04d}"
        description = " ".join(rng.choices(WORDS, k=30)).capitalize() + "."
        front = (
            f"---\nname: {name}\ndescription: {description}\nlicense: MIT\nparameters:\n"
            "  path:\n    type: string\n    description: File to act on.\n    required: true\n"
            "  limit:\n    type: integer\n    description: Most lines.\n    default: 100\n"
            "  mode:\n    type: string\n    enum: [fast, full]\n---\n"
        )
        lines: list[str] = []
        size = 0
        while size < body_kb * 1024:
            line = " ".join(rng.choices(WORDS, k=12)) + "\n"
            lines.append(line)
            size += len(line)
        path = root / f"{name}.md" if i % 4 else root / name / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = (front + "# Usage\n\n" + "".join(lines)).encode()
        path.write_bytes(data)
        total += len(data)
    return total


def evict(files: list[Path]) -> None:
    """Drop these files' pages from the page cache (only ours: posix_fadvise per file)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def median_seconds(
    fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--body-kb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "skills"
        root.mkdir()
        on_disk = generate(root, args.count, args.body_kb)
        files = sorted(p for p in root.rglob("*.md"))

        found = lib.list_skills([root])
        assert len(found) == args.count
        listed_bytes = sum(s.bytes_read for s in found)
        front_bytes = sum(s.body_offset for s in found)

        def cli_list() -> None:
            result = CliRunner().invoke(
                skills_group, ["list", "--format", "json", "--dir", str(root)]
            )
            assert result.exit_code == 0, result.output

        def read_all() -> None:
            for path in files:
                path.read_bytes()

        def eager() -> None:
            for skill in lib.list_skills([root]):
                lib.load_detail(skill)

        variants: list[tuple[str, int, Callable[[], object]]] = [
            ("`list_skills` (front matter only)", listed_bytes, lambda: lib.list_skills([root])),
            ("`ctxcli skills list --format json` (CliRunner)", listed_bytes, cli_list),
            ("read every file whole (`read_bytes`)", on_disk, read_all),
            # list, then load_detail: the first chunk again, then the body from its offset.
            (
                "list + `load_detail` of every skill",
                2 * listed_bytes + on_disk - front_bytes,
                eager,
            ),
        ]
        rows = []
        for label, read_bytes, fn in variants:
            cold = median_seconds(fn, args.repeat, before=lambda: evict(files))
            read_all()  # warm the page cache for every variant alike
            warm = median_seconds(fn, args.repeat)
            rows.append((label, read_bytes, warm, cold))

    share = 100 * listed_bytes / on_disk
    mib = 1024 * 1024
    print(f"{args.count} skills, {args.body_kb} KB bodies, {on_disk / mib:.1f} MiB on disk;"
          f" median of {args.repeat} runs; cold: files evicted by fadvise first\n")  # fmt: skip
    print("| what | bytes read | share of disk | warm cache | cold cache |")
    print("|---|---:|---:|---:|---:|")
    for label, read_bytes, warm, cold in rows:
        print(f"| {label} | {read_bytes:,} | {100 * read_bytes / on_disk:.2f}% |"
              f" {warm * 1000:.0f} ms | {cold * 1000:.0f} ms |")  # fmt: skip
    print(f"\nfront matter itself: {front_bytes:,} bytes ({100 * front_bytes / on_disk:.2f}%);"
          " the rest of the listing's reads is the tail of each 512-byte first chunk")  # fmt: skip
    if share >= 2:
        print(f"FAIL: listing read {share:.2f}% of the bytes on disk (limit 2%)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
