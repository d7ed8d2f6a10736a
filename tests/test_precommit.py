"""The pre-commit hooks of .pre-commit-hooks.yaml, run by the real pre-commit.

``pre-commit try-repo`` clones this checkout (with its uncommitted changes to tracked
files), builds the hooks' virtualenv and ``pip install``s ctxcli into it, then runs
the hooks in a temporary git repository. pip works offline here: ``PIP_NO_INDEX`` and
a wheelhouse made from the installed environment (see ``wheelhouse.py``). It takes
about half a minute: the hooks' environment is built twice, once per run, since
try-repo keeps it in a temporary store.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None
    or not (REPO / ".git").exists()
    or importlib.util.find_spec("pre_commit") is None
    or importlib.util.find_spec("virtualenv") is None
    or sys.version_info < (3, 11),  # tomllib, to read this checkout's dependencies
    reason="needs git, a git checkout, pre-commit (the test extra) and Python 3.11+",
)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment pre-commit runs in: pip offline, caches in the test's folder,
    and no PYTHONPATH, so that the hook runs the ctxcli pip installed for it."""
    import tomllib
    import wheelhouse

    root = tmp_path_factory.mktemp("pre-commit")
    requirements = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    wheels = wheelhouse.build(root / "wheels", requirements)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,  # no index or links from the user's pip.conf
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        VIRTUALENV_NO_PERIODIC_UPDATE="1",
        PRE_COMMIT_HOME=str(root / "home"),
        GIT_AUTHOR_NAME="test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
    )
    return env


def git(repo: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def try_repo(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pre_commit",
            "try-repo",
            str(REPO),
            "--all-files",
            "--color",
            "never",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_hook_shrinks_a_fixture_then_passes(tmp_path: Path, env: dict[str, str]) -> None:
    repo = tmp_path / "project"
    (repo / "fixtures").mkdir(parents=True)
    fixture = repo / "fixtures" / "agent_run.jsonl"
    shutil.copy(SAMPLES / "agent_run.jsonl", fixture)
    shutil.copy(SAMPLES / "customer_service_zh.jsonl", repo / "fixtures" / "chat.jsonl")
    git(repo, env, "init", "-q")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "fixtures")
    size = fixture.stat().st_size

    first = try_repo(repo, env)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "ctxcli compress --in-place" in out and "Failed" in out
    assert "files were modified by this hook" in out
    assert "rewrote fixtures/agent_run.jsonl: 1 of 1 conversation changed" in out
    # Only what must go: one placeholder brings its 8,396 tokens within the 8,000 budget,
    # the tokens it frees past the budget widening its preview (7,843 tokens).
    assert size * 0.8 < fixture.stat().st_size < size * 0.95
    assert (repo / "fixtures" / "agent_run.store.jsonl").is_file()
    assert (repo / "fixtures" / "chat.jsonl").read_bytes() == (
        SAMPLES / "customer_service_zh.jsonl"
    ).read_bytes()

    git(repo, env, "add", "-A")
    second = try_repo(repo, env)
    out = second.stdout + second.stderr
    assert second.returncode == 0, out
    passed = [line for line in out.splitlines() if line.endswith("Passed")]
    assert [line.split(".")[0] for line in passed] == [
        "ctxcli compress --in-place",
        "ctxcli validate",
    ]
