"""Checks the tests run on every output, independent of the pipeline's own check.

They work on the JSON written to disk: output messages are matched to the input's by
value, in order, so a message that was written back changed or out of order shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxcli.invariants import problems
from ctxcli.model import Conversation, Message
from ctxcli.stages.placeholder import content_id
from ctxcli.store import restore_record
from ctxcli.tokens import TokenCounter


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON lines file (a byte order mark, which ctxcli keeps from
    its input, is skipped)."""
    return [
        json.loads(line)
        for line in Path(path).read_text(encoding="utf-8-sig").splitlines()
        if line.strip()
    ]


def to_conversation(
    messages: list[dict[str, Any]],
    counter: TokenCounter,
    originals: list[dict[str, Any]] | None = None,
) -> Conversation:
    """Wrap dicts; with ``originals``, give each message its input position by value
    (a message whose placeholders restore to an original is that original, changed).

    Matching runs from the end, as compression keeps the end: of two equal messages
    the later one is taken as the one kept.
    """
    positions: list[tuple[int, bool] | None] = [None] * len(messages)
    if originals is not None:
        cursor = len(originals)
        for k in range(len(messages) - 1, -1, -1):
            for j in range(cursor - 1, -1, -1):
                if originals[j] == messages[k]:
                    positions[k], cursor = (j, False), j
                    break
                if _placeholder_of(originals[j], messages[k]):
                    positions[k], cursor = (j, True), j
                    break
    wrapped = []
    for data, found in zip(messages, positions):
        if found is None:
            wrapped.append(Message(data, counter.message(data), None, True))
            continue
        index, changed = found
        if not changed and originals is not None:
            data = originals[index]
        wrapped.append(Message(data, counter.message(data), index, changed))
    return Conversation(tuple(wrapped))


def _placeholder_of(original: dict[str, Any], data: dict[str, Any]) -> bool:
    """True when ``data`` is ``original`` with some parts replaced by placeholders."""
    parts = [original.get("content")]
    for call in original.get("tool_calls") or []:
        parts.append((call.get("function") or {}).get("arguments"))
    store = {content_id(p): p for p in parts if p is not None}
    restored, ids, _ = restore_record({"messages": [data]}, store)
    return bool(ids) and restored["messages"][0] == original


def assert_valid(
    before: dict[str, Any],
    after: dict[str, Any],
    counter: TokenCounter,
    *,
    max_tokens: int | None,
    over_budget_ok: bool = False,
) -> None:
    """Every invariant holds for one output record (see ctxcli.invariants)."""
    original = to_conversation(before["messages"], counter)
    originals = [m.data for m in original.messages]
    result = to_conversation(after["messages"], counter, originals)
    for message in result.messages:
        if message.index is None:
            assert message.is_summary, f"new message that is not a summary: {message.data}"
    found = problems(original, result, max_tokens=None if over_budget_ok else max_tokens)
    assert not found, found
    assert {k: v for k, v in before.items() if k != "messages"} == {
        k: v for k, v in after.items() if k != "messages"
    }


def yaml_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs" YAML mapping: ``width ** levels`` strings (9 ** 9 = 387
    million) from under 1 KB of text, each key ``l<i>`` a list of aliases of the one
    before; ``*l8`` is the whole bomb."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def run_cli_bounded(group: str, args: list[str], cwd: Path) -> dict[str, Any]:
    """Run a click command (``group`` as ``module:name``) in a fresh interpreter whose
    address space is capped at 1 GiB and time at 60 s, so that a command which would
    exhaust the machine fails fast instead. Returns ``seconds`` (the command alone,
    interpreter start-up excluded), ``exit_code``, ``output`` and ``peak_mb`` (the
    child's peak resident memory in MB: VmHWM, which unlike ``ru_maxrss`` does not
    carry over the parent's size across fork and exec)."""
    import os
    import subprocess
    import sys

    module, name = group.split(":")
    code = f"""
import json, resource, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from click.testing import CliRunner
from {module} import {name} as group
start = time.perf_counter()
result = CliRunner().invoke(group, {args!r})
seconds = time.perf_counter() - start
status = open("/proc/self/status").read()
peak_kb = int(status.split("VmHWM:")[1].split()[0])
print(json.dumps({{"seconds": seconds, "exit_code": result.exit_code,
    "output": result.output, "exception": repr(result.exception), "peak_mb": peak_kb / 1024}}))
"""
    repo = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": path},
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result
