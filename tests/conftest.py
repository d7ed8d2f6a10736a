"""Shared fixtures: where the shared data lives, and a runner for the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

# The property tests draw the same examples on every run, so the test command passes
# or fails the same way on every machine (a random draw once found, in CI only, what
# no run before had); HYPOTHESIS_PROFILE=explore draws new ones, to look for more.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", max_examples=400)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# ../shared beside the checkout; a git worktree one level deeper finds it one more up.
_UP = Path(__file__).resolve().parents
SHARED = next(
    (p / "shared" for p in (_UP[2], _UP[3]) if (p / "shared").is_dir()), _UP[2] / "shared"
)
CASES = SHARED / "cases"
DATA = SHARED / "data"

if "TIKTOKEN_CACHE_DIR" not in os.environ and (SHARED / "tiktoken-cache").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(SHARED / "tiktoken-cache")


@pytest.fixture(autouse=True, scope="session")
def _user_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The CLI keeps its caches under ``XDG_CACHE_HOME``: a folder of the test run's,
    never the user's own."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture
def cases() -> Path:
    """The shared cases folder; skips the test when ../shared is absent."""
    if not CASES.is_dir():
        pytest.skip("../shared/cases is not here")
    return CASES


@pytest.fixture
def data() -> Path:
    """The shared real-data folder; skips the test when ../shared is absent."""
    if not DATA.is_dir():
        pytest.skip("../shared/data is not here")
    return DATA


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzz", "tests/test_fuzz.py")
    group.addoption(
        "--fuzz-n", type=int, default=300, help="conversations the fuzz test generates (300)"
    )
    group.addoption("--fuzz-seed", type=int, default=13, help="the fuzz corpus's seed (13)")


@pytest.fixture(scope="session")
def airline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tau-bench's airline runs as JSONL, one conversation a line (the recipe of
    ../shared/data's README); skips the test when ../shared is absent."""
    source = DATA / "tau-bench/gpt-4o-airline.json"
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
