"""Throughput of ``ctxcli compress`` beside the tiktoken floor, on repeated real data.

Builds large JSONL inputs by repeating tau-bench's 200 airline runs (from
``../shared/data``, or ``--source``) to ``--size-mb`` (and, with ``--large-mb``, a
second, larger one for the memory check), byte-compiles the ``ctxcli`` package the
runs import (as ``pip install .`` leaves it), then runs each variant ``--repeat``
times, round by round (so that a slow spell of the machine falls on every variant
alike), each time in a fresh process, so its peak RSS is its own:

- ``tiktoken floor``: encoding every message's text once with ``encode_ordinary``, the
  work no exact counter can avoid;
- ``ctxcli --jobs N``: ``ctxcli compress --stages summary,priority`` (``--stages``)
  in-process, for each N in ``--jobs``;
- ``ctxcli count``: ``ctxcli count`` of the same input (``--encoding``), in-process:
  the same reading and counting as compress's "tokens before", and nothing else;
- ``ctxcli --stages window --jobs 1``: the like-for-like operation to
  ``trim_messages``: keep the last messages that fit the budget (``--keep-last`` set
  out of reach, so only the budget limits);
- ``trim_messages (ChatOpenAI counter)``: LangChain's ``trim_messages`` (if
  ``langchain-core`` and ``langchain-openai`` are installed) on the same conversations
  and budget, with the exact counter LangChain documents for it,
  ``token_counter=ChatOpenAI(model="gpt-4o")`` (``gpt-4`` for ``cl100k_base``), whose
  ``get_num_tokens_from_messages`` follows the OpenAI cookbook rule and counts tool
  calls; it counts locally and never sends a request (its ``base_url`` is a closed
  loopback port); ``strategy="last"``, ``include_system=True``, ``start_on="human"``;
  each record's messages go through ``convert_to_messages``, as a user's must;
- ``trim_messages (hand-written counter)``: the same with a plain tiktoken function
  by the same cookbook rule (if ``langchain-core`` is installed);
- with ``--distinct``, the floor, ``ctxcli --jobs N`` and ``ctxcli count`` again on a
  second input of the same size whose copies differ (every string ``content`` of a
  user, assistant or tool message ends in `` [copy K]``, a JSON tool result in its
  last string value, so it stays JSON as in the source), so a per-process memo has
  little to reuse; only system prompts and tool call arguments repeat;
- with ``--large-mb``, ``ctxcli --jobs 1`` on the larger input;
- with ``--ray``, ``ctxcli --engine ray`` beside ``--jobs N`` (on each input): a local
  Ray started by the run with every core, its start-up included, as a user pays it.

It prints one table (median seconds, MB/s, conversations/s, the largest peak RSS in
MiB of the process and its workers, time per MB over the floor's on the same kind of
input) and the ratios the goals of issue 7 are stated in; ``--markdown`` prints the
table as Markdown for ``benchmarks/RESULTS.md``. Usage::

    TIKTOKEN_CACHE_DIR=../shared/tiktoken-cache python benchmarks/bench_compress.py \\
        --size-mb 100 --large-mb 1000 --jobs 1,2 --repeat 3
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[1] / "shared/data/tau-bench/gpt-4o-airline.json"
# A model tiktoken maps to each encoding, so ChatOpenAI counts with the same one.
CHAT_MODELS = {"o200k_base": "gpt-4o", "cl100k_base": "gpt-4"}
FLOOR = "tiktoken floor"
WINDOW = "ctxcli --stages window --jobs 1"
COUNT = "ctxcli count"
TRIM_CHAT = "trim_messages (ChatOpenAI counter)"
TRIM_HAND = "trim_messages (hand-written counter)"
DISTINCT = " (distinct copies)"
LARGE = "ctxcli --jobs 1 (large input)"
RAY = "ctxcli --engine ray"


def _marked(content: str, mark: str) -> str:
    """``content`` made distinct by ``mark``: after its text, or, when it is JSON (a
    tool result, as real logs have them), after its last string value, so that it
    stays valid JSON and is read as records, as the original is."""
    try:
        value = json.loads(content)
    except ValueError:
        return content + mark
    leaves = [value]
    while leaves:
        node = leaves.pop()
        items = node if isinstance(node, list) else node if isinstance(node, dict) else None
        if items is None:
            continue
        keys = list(range(len(items))) if isinstance(items, list) else list(items)
        strings = [k for k in keys if isinstance(items[k], str)]
        if strings:
            items[strings[-1]] += mark
            return json.dumps(value)
        leaves += [items[k] for k in keys]
    return content + mark


def build_input(
    source: Path, size_mb: float, target: Path, *, distinct: bool = False
) -> tuple[int, int]:
    """Write ``target`` by repeating the runs in ``source`` until ``size_mb`` MB;
    return (conversations, bytes). With ``distinct``, copy K of a run has `` [copy K]``
    after every string content of its user, assistant and tool messages, inside the
    last string value of one that is JSON (:func:`_marked`), and ``-cK`` after its id.
    Reuses a file of the right size."""
    want = int(size_mb * 1_000_000)
    if target.is_file() and abs(target.stat().st_size - want) < 2_000_000:
        with target.open("rb") as f:
            return sum(1 for _ in f), target.stat().st_size

    def encode(run: dict[str, Any], copy: int | None) -> bytes:
        name, messages = f"{run['task_id']}-{run['trial']}", run["traj"]
        if copy is not None:
            name += f"-c{copy}"
            messages = [
                {**m, "content": _marked(m["content"], f" [copy {copy}]")}
                if m["role"] in ("user", "assistant", "tool") and isinstance(m.get("content"), str)
                else m
                for m in messages
            ]
        return (json.dumps({"id": name, "messages": messages}) + "\n").encode()

    runs = json.loads(source.read_text())
    lines = [encode(run, None) for run in runs]
    count = written = copy = 0
    with target.open("wb") as out:
        while written < want:
            if distinct:
                lines = [encode(run, copy) for run in runs]
            for line in lines:
                out.write(line)
                written += len(line)
                count += 1
                if written >= want:
                    break
            copy += 1
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


def count(path: str, args: list[str]) -> None:
    from click.testing import CliRunner

    from ctxcli.cli import cli

    result = CliRunner().invoke(cli, ["count", path, "--format", "json", *args])
    if result.exit_code != 0:
        raise SystemExit(result.output)


def hand_counter(encoding: str) -> Callable[[list[BaseMessage]], int]:
    """A plain tiktoken counter by the OpenAI cookbook rule: 3 tokens a message, its
    type and text, 3 a tool call with its name and JSON arguments, 3 for the reply."""
    import tiktoken

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

    return count


def chat_counter(encoding: str) -> Any:
    """The counter LangChain documents for trim_messages: a ChatOpenAI model, whose
    get_num_tokens_from_messages counts locally (no request is made)."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(
        model=CHAT_MODELS[encoding], api_key=SecretStr("unused"), base_url="http://127.0.0.1:9"
    )


def langchain(path: str, counter: Any, max_tokens: int) -> None:
    """LangChain's trim_messages on every record, keeping the last messages."""
    import orjson
    from langchain_core.messages import convert_to_messages, trim_messages

    with open(path, "rb") as f:
        for line in f:
            messages = convert_to_messages(orjson.loads(line)["messages"])
            trim_messages(
                messages,
                max_tokens=max_tokens,
                token_counter=counter,
                strategy="last",
                include_system=True,
                start_on="human",
            )


def child(kind: str, path: str, rest: list[str]) -> None:
    started = time.perf_counter()
    if kind == "tiktoken":
        floor(path, rest[0])
    elif kind == "trim-chat":
        langchain(path, chat_counter(rest[0]), int(rest[1]))
    elif kind == "trim-hand":
        langchain(path, hand_counter(rest[0]), int(rest[1]))
    elif kind == "count":
        count(path, rest)
    else:
        compress(path, rest)
    seconds = time.perf_counter() - started
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"seconds": seconds, "rss_mib": max(own, workers) / 1024}))


def run_once(
    name: str, kind: str, path: Path, rest: list[str], show_stderr: bool
) -> dict[str, float]:
    """Run one variant once, in a fresh process: its seconds and peak RSS (MiB)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path), *rest],
        check=True,
        capture_output=True,
        text=True,
    )
    if show_stderr and out.stderr.strip():
        print(f"{name}, stderr:\n{out.stderr.rstrip()}", file=sys.stderr)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(
    variants: list[tuple[str, str, Path, list[str]]], repeat: int
) -> dict[str, dict[str, float]]:
    """Run each variant ``repeat`` times, round by round (every variant once, then
    again), so that a slow spell of the machine falls on all of them alike and the
    ratios between them hold; give each its median seconds and largest peak RSS (MiB).
    A child's stderr is shown once."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in variants}
    for i in range(repeat):
        for name, kind, path, rest in variants:
            runs[name].append(run_once(name, kind, path, rest, show_stderr=i == 0))
    results = {}
    for name, done in runs.items():
        seconds = [r["seconds"] for r in done]
        print(f"{name}: {' '.join(f'{s:.2f}' for s in seconds)} s", file=sys.stderr)
        results[name] = {
            "seconds": statistics.median(seconds),
            "rss_mib": max(r["rss_mib"] for r in done),
        }
    return results


def compile_ctxcli() -> None:
    """Byte-compile the ctxcli package the children import, as an install leaves it,
    so no run spends its start compiling sources (PYTHONDONTWRITEBYTECODE may be set)."""
    spec = importlib.util.find_spec("ctxcli")
    if spec is None or spec.origin is None:
        raise SystemExit("ctxcli is not importable: install it (pip install -e .)")
    if not compileall.compile_dir(Path(spec.origin).parent, quiet=1):
        raise SystemExit(f"ctxcli at {Path(spec.origin).parent} does not compile")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--large-mb", type=float, default=0, help="also run --jobs 1 here")
    parser.add_argument("--jobs", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant (median)")
    parser.add_argument(
        "--distinct", action="store_true", help="also run on copies that differ in text"
    )
    parser.add_argument("--workdir", type=Path, default=HERE / "data")
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--stages", default="summary,priority")
    parser.add_argument("--encoding", default="o200k_base")
    parser.add_argument("--no-langchain", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--ray", action="store_true", help="also run --engine ray")
    options = parser.parse_args()
    if options.repeat < 1:
        parser.error("--repeat must be 1 or more")
    options.workdir.mkdir(parents=True, exist_ok=True)
    compile_ctxcli()

    def make(size: float, kind: str = "") -> tuple[Path, int, int]:
        path = options.workdir / f"airline{kind}-{size:g}mb.jsonl"
        return (path, *build_input(options.source, size, path, distinct=bool(kind)))

    variants: list[tuple[str, str, Path, list[str]]] = []
    sizes: dict[str, tuple[int, int]] = {}

    def add(name: str, kind: str, made: tuple[Path, int, int], rest: list[str]) -> None:
        path, conversations, size = made
        variants.append((name, kind, path, rest))
        sizes[name] = (conversations, size)

    small = make(options.size_mb)
    budget = ["--max-tokens", str(options.max_tokens), "--encoding", options.encoding]
    base = ["--stages", options.stages, *budget]
    add(FLOOR, "tiktoken", small, [options.encoding])
    for jobs in options.jobs.split(","):
        add(f"ctxcli --jobs {jobs}", "compress", small, [*base, "--jobs", jobs])
    add(COUNT, "count", small, ["--encoding", options.encoding])
    if options.ray:
        add(RAY, "compress", small, [*base, "--engine", "ray"])
    window = ["--stages", "window", "--keep-last", "1000000", *budget, "--jobs", "1"]
    add(WINDOW, "compress", small, window)
    if not options.no_langchain:
        trim = [options.encoding, str(options.max_tokens)]
        missing = [
            p for p in ("langchain_core", "langchain_openai") if not importlib.util.find_spec(p)
        ]
        if missing:
            names = " and ".join(p.replace("_", "-") for p in missing)
            print(f"{names} not installed: {TRIM_CHAT} skipped", file=sys.stderr)
        elif options.encoding not in CHAT_MODELS:
            print(
                f"no ChatOpenAI model for {options.encoding}: {TRIM_CHAT} skipped", file=sys.stderr
            )
        else:
            add(TRIM_CHAT, "trim-chat", small, trim)
        if "langchain_core" in missing:
            print(f"langchain-core not installed: {TRIM_HAND} skipped", file=sys.stderr)
        else:
            add(TRIM_HAND, "trim-hand", small, trim)
    if options.distinct:
        other = make(options.size_mb, "-unique")
        add(FLOOR + DISTINCT, "tiktoken", other, [options.encoding])
        for jobs in options.jobs.split(","):
            add(f"ctxcli --jobs {jobs}{DISTINCT}", "compress", other, [*base, "--jobs", jobs])
        add(COUNT + DISTINCT, "count", other, ["--encoding", options.encoding])
        if options.ray:
            add(RAY + DISTINCT, "compress", other, [*base, "--engine", "ray"])
    if options.large_mb:
        add(LARGE, "compress", make(options.large_mb), [*base, "--jobs", "1"])
    results = measure(variants, options.repeat)
    rows = [(name, *sizes[name], results[name]) for name, *_ in variants]
    report(rows, options, base)


def report(
    rows: list[tuple[str, int, int, dict[str, float]]], options: Any, args: list[str]
) -> None:
    by = {name: (size, r) for name, _, size, r in rows}

    def per_mb(name: str) -> float:
        size, r = by[name]
        return r["seconds"] / size

    median = f"s (median of {options.repeat})"
    head = ("what", "input", median, "MB/s", "conv/s", "peak RSS MiB", "x floor")
    table: list[tuple[str, ...]] = []
    for name, n, size, r in rows:
        s = r["seconds"]
        base_floor = FLOOR + DISTINCT if name.endswith(DISTINCT) else FLOOR
        table.append(
            (
                name,
                f"{size / 1e6:.0f} MB",
                f"{s:.2f}",
                f"{size / 1e6 / s:.1f}",
                f"{n / s:.0f}",
                f"{r['rss_mib']:.0f}",
                f"{per_mb(name) / per_mb(base_floor):.2f}",
            )
        )
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"compress {' '.join(args)}; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
        f"seconds are medians of {options.repeat} runs, each in a fresh process, "
        "variants taking turns"
    )
    if options.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(x[i])) for x in [head, *table]) for i in range(len(head))]
        for row in [head, *table]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())

    def ratio(label: str, top: str, bottom: str, goal: str = "", key: str = "seconds") -> None:
        if top not in by or bottom not in by:
            return
        value = by[top][1][key] / by[bottom][1][key]
        if goal:
            sign, bound = goal.split()
            held = value <= float(bound) if sign == "<=" else value >= float(bound)
            goal = f" (goal {goal}: {'met' if held else 'missed'})"
        print(f"{label}: {value:.2f}{goal}")

    one, two = "ctxcli --jobs 1", "ctxcli --jobs 2"
    ratio("jobs 1 / floor", one, FLOOR, "<= 1.5")
    ratio("count / floor", COUNT, FLOOR, "<= 1.2")
    ratio("count / floor (distinct copies)", COUNT + DISTINCT, FLOOR + DISTINCT, "<= 1.2")
    ratio("jobs 1 / jobs 2", one, two, ">= 1.7")
    ratio("jobs 1 / floor (distinct copies)", one + DISTINCT, FLOOR + DISTINCT, "<= 1.5")
    ratio("jobs 1 / jobs 2 (distinct copies)", one + DISTINCT, two + DISTINCT, ">= 1.7")
    ratio("engine ray / jobs 2 (Ray's overhead)", RAY, two)
    ratio("engine ray / jobs 2 (distinct copies)", RAY + DISTINCT, two + DISTINCT)
    for trim in (TRIM_CHAT, TRIM_HAND):
        ratio(f"{trim} / jobs 1", trim, one, ">= 5")
        ratio(f"{trim} / jobs 2", trim, two, ">= 5")
    ratio(f"{TRIM_CHAT} / window (like for like)", TRIM_CHAT, WINDOW)
    ratio("peak RSS large / small", LARGE, one, "<= 1.2", key="rss_mib")


if __name__ == "__main__":
    main()
