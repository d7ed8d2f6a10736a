"""The real data in ../shared/data: the 200 tau-bench airline runs compressed three
ways, and the SWE-agent and Claude Code single-task runs summarized."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl

from ctxcli.cli import cli
from ctxcli.inputs import default_stats, default_store
from ctxcli.model import SUMMARY_MARKER
from ctxcli.tokens import TokenCounter
from ctxcli.validate import validate_file


@pytest.mark.parametrize(
    "args",
    [
        pytest.param("--max-tokens 2000", id="default"),
        pytest.param("--max-tokens 2000 --stages window --keep-last 6", id="window"),
        pytest.param(
            "--max-tokens 2000 --stages summary,priority --summary-role user", id="summary-user"
        ),
    ],
)
def test_airline_runs_fit_2000_tokens_with_every_invariant(
    airline: Path, tmp_path: Path, args: str
) -> None:
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        cli, ["compress", str(airline), "-o", str(out), "-q", *shlex.split(args)]
    )
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "out.stats.json").read_text())
    before, after = read_jsonl(airline), read_jsonl(out)
    assert len(after) == stats["conversations"] == 200
    counter = TokenCounter("o200k_base")
    over = {item["id"] for item in stats["over_budget"]}
    tokens_after = 0
    for b, a in zip(before, after):
        assert a["id"] == b["id"]
        assert_valid(b, a, counter, max_tokens=2000, over_budget_ok=a["id"] in over)
        size = counter.messages(a["messages"])
        assert (size <= 2000) != (a["id"] in over)
        tokens_after += size
    assert stats["tokens"]["after"] == tokens_after
    assert stats["tokens"]["before"] == sum(counter.messages(r["messages"]) for r in before)
    assert stats["messages"]["after"] == sum(len(r["messages"]) for r in after)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        pytest.param(
            "swe-agent/marshmallow-code__marshmallow-1867.traj",
            "--messages-key history",
            id="swe-agent",
        ),
        pytest.param(
            "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", "", id="claude-code"
        ),
    ],
)
def test_single_task_agent_runs_fold_their_steps_into_a_summary(
    data: Path, tmp_path: Path, name: str, args: str
) -> None:
    out = tmp_path / f"out{Path(name).suffix}"
    result = CliRunner().invoke(
        cli,
        [
            "compress",
            str(data / name),
            "-o",
            str(out),
            "-q",
            "--stages",
            "summary,priority",
            "--max-tokens",
            "2000",
            *shlex.split(args),
        ],
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(Path(default_stats(str(out))).read_text())
    summary = stats["stage_events"]["summary"]
    assert summary["summaries_written"] == 1 and summary["steps_summarized"] >= 18
    assert stats["stage_events"]["priority"] == {}  # nothing dropped without a trace
    assert stats["tokens"]["after"] <= 2000 and not stats["over_budget"]
    assert list(validate_file(str(out), messages_key=args.split()[-1] if args else None)) == []
    text = out.read_text(encoding="utf-8")
    assert text.count(SUMMARY_MARKER) == 1 and "Actions: " in text  # each call, its outcome


def _real_files() -> list[Path]:
    root = Path(__file__).resolve().parents[2] / "shared/data"
    found = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl", ".traj"))
    return found or [root / "absent.jsonl"]


def _placeholders_no_smaller(out: Path, store: Path) -> list[tuple[int, int]]:
    """``(placeholder tokens, original tokens)`` of each placeholder in the output
    ``out`` that costs as much as what it stands for or more (the Codex session at a
    quarter had six: a preview widened to all but a few characters)."""
    if not store.is_file():
        return []
    counter = TokenCounter("o200k_base")
    originals = {}
    for line in store.read_text().splitlines():
        entry = json.loads(line)
        content = entry.get("content")
        originals[entry["id"]] = content if isinstance(content, str) else json.dumps(content)
    text = out.read_text()
    records = (
        [json.loads(line) for line in text.splitlines()]
        if out.suffix == ".jsonl"
        else [json.loads(text)]
    )
    found: list[tuple[int, int]] = []

    def walk(value: object) -> None:
        if isinstance(value, str) and value.startswith("[ctxcli placeholder id="):
            original = originals.get(value[len("[ctxcli placeholder id=") :].split(" ", 1)[0])
            if original is not None and counter.text(value) >= counter.text(original):
                found.append((counter.text(value), counter.text(original)))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(records)
    return found


@pytest.mark.parametrize("source", _real_files(), ids=lambda p: p.name[:40])
def test_every_real_file_compresses_with_no_flag_but_the_budget(
    source: Path, tmp_path: Path
) -> None:
    """At 2000 tokens and at a quarter of its tokens every file in ../shared/data (each
    format: Claude Code, Codex, Gemini CLI, Responses, ShareGPT, tau-bench, SWE-agent)
    compresses with no other flag, its output has no problem its input did not have,
    the stats' tokens after are what ``count`` reads in the written file, and with no stage changing anything the output is the input, byte for byte."""
    if not source.is_file():
        pytest.skip("../shared/data is not here")
    counted = CliRunner().invoke(cli, ["count", str(source), "--format", "json"])
    assert counted.exit_code == 0, counted.output
    tokens = json.loads(counted.stdout)["total"]["tokens"]
    problems_before = sorted(p.reason for p in validate_file(str(source)))
    out = tmp_path / f"out{source.suffix}"
    for budget in (2000, max(1, tokens // 4)):
        args = ["compress", str(source), "-o", str(out), "-q", "--max-tokens", str(budget)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert sorted(p.reason for p in validate_file(str(out))) == problems_before
        stats = json.loads(Path(default_stats(str(out))).read_text())
        assert stats["fallbacks"] == [] and stats["tokens"]["before"] == tokens
        recount = CliRunner().invoke(cli, ["count", str(out), "--format", "json"])
        assert json.loads(recount.stdout)["total"]["tokens"] == stats["tokens"]["after"]
        assert not _placeholders_no_smaller(out, Path(str(default_store(str(out)))))
    same = CliRunner().invoke(
        cli,
        [
            "compress",
            str(source),
            "-o",
            str(out),
            "-q",
            "--max-tokens",
            "0",
            "--stages",
            "priority",
        ],
    )
    assert same.exit_code == 0, same.output
    assert out.read_bytes() == source.read_bytes()
