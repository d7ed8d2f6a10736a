"""The 200 tau-bench airline runs from ../shared/data, compressed three ways."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl

from ctxcli.cli import cli
from ctxcli.tokens import TokenCounter


@pytest.fixture(scope="module")
def airline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tau-bench's airline runs as JSONL, one conversation a line (its README's recipe)."""
    source = Path(__file__).resolve().parents[2] / "shared/data/tau-bench/gpt-4o-airline.json"
    if not source.is_file():
        pytest.skip("../shared/data is not here")
    path = tmp_path_factory.mktemp("airline") / "airline.jsonl"
    runs = json.loads(source.read_text())
    with path.open("w") as out:
        for run in runs:
            out.write(
                json.dumps({"id": f"{run['task_id']}-{run['trial']}", "messages": run["traj"]})
                + "\n"
            )
    return path


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
