"""Print a digest of what ctxcli writes for every file under a folder of transcripts.

    python scripts/outputs-digest.py ../shared/data > before.txt
    ... change the code ...
    python scripts/outputs-digest.py ../shared/data > after.txt
    diff before.txt after.txt   # empty: the outputs are byte-identical

Each file is compressed with several settings (the default pipeline at 2000 tokens
and at a quarter of the file's mean tokens per conversation, the summary and window
stages alone, a no-op run) by the ``ctxcli`` of the current ``PYTHONPATH``. One line
per output and setting gives the exit status and the SHA-256 of the output, of its
stats (without timings and paths) and of its placeholder store.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ctxcli.inputs import default_stats, default_store

SETTINGS = {
    "default-2000": ["--max-tokens", "2000"],
    "summary-1000": ["--max-tokens", "1000", "--stages", "summary,priority"],
    "window-1500": ["--max-tokens", "1500", "--stages", "window", "--keep-last", "6"],
    "no-op": ["--max-tokens", "10000000"],
}
#: Stats keys that differ between two runs of the same code: timings, and the paths of
#: the input, output and store (each run writes into a temporary folder of its own).
UNSTABLE_KEYS = {"elapsed_seconds", "input", "output", "path"}


def _ctxcli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxcli", *args], capture_output=True, text=True, check=False
    )


def _tokens(path: Path) -> int:
    done = _ctxcli("count", str(path), "--format", "json")
    try:
        total = json.loads(done.stdout)["total"]
        return int(total["tokens"]) // max(1, int(total["conversations"]))
    except (ValueError, KeyError, TypeError):
        return 8000


def _untimed(value: object) -> object:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in UNSTABLE_KEYS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _digest(path: Path) -> str:
    if not path.exists():
        return "-"
    data = path.read_bytes()
    if path.name.endswith(".stats.json"):
        data = json.dumps(_untimed(json.loads(data)), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def main(root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md")
    with tempfile.TemporaryDirectory() as work:
        for path in files:
            settings = dict(SETTINGS)
            settings["quarter"] = ["--max-tokens", str(max(200, _tokens(path) // 4))]
            for name, args in settings.items():
                out = Path(work) / f"{name}-{path.name}"
                done = _ctxcli("compress", str(path), "-o", str(out), "-q", *args)
                stats, store = Path(default_stats(str(out))), Path(str(default_store(str(out))))
                line = [path.relative_to(root).as_posix(), name, f"exit={done.returncode}"]
                line += [_digest(out), _digest(stats), _digest(store)]
                print(" ".join(line), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"))
