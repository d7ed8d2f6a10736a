"""The skills that ship with ctxcli: package data, used when no folder is given."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxcli import skills as lib
from ctxcli.cli import cli

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(s.name for s in lib.list_skills([lib.shipped_dir()]))


def skills(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(
        cli, ["skills", *args], env={"CTXCLI_SKILLS_DIR": None, **(env or {})}
    )


def write_skill(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: The {name} tool.\n---\nUse {name} well.\n"
    )
    return folder


def test_the_repository_keeps_one_copy_linked_from_skills() -> None:
    assert lib.shipped_dir() == REPO / "ctxcli" / "shipped_skills"
    assert (REPO / "skills").is_symlink()
    assert (REPO / "skills").resolve() == lib.shipped_dir()
    assert "read_file" in SHIPPED and len(SHIPPED) >= 5


@pytest.mark.parametrize("command", [["list"], ["show", "read_file"], ["validate"]])
def test_with_no_folder_anywhere_the_shipped_skills_are_used_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    result = skills(*command)
    assert result.exit_code == 0, result.output
    note = (
        "note: no ./skills folder here: using the skills shipped with ctxcli "
        f"({lib.shipped_dir()}); --dir or CTXCLI_SKILLS_DIR names others\n"
    )
    assert result.stderr.startswith(note)
    if command == ["list"]:
        listed = [line.split()[0] for line in result.stdout.splitlines()[1:]]
        assert listed == SHIPPED
    if command[0] == "show":
        assert result.stdout.startswith("name: read_file\n")


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("cwd", id="./skills"),
        pytest.param("dir", id="--dir"),
        pytest.param("env", id="CTXCLI_SKILLS_DIR"),
    ],
)
def test_a_folder_given_replaces_the_shipped_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = write_skill(tmp_path / ("skills" if how == "cwd" else "mine"), "alpha")
    args = ["--dir", str(folder)] if how == "dir" else []
    env = {"CTXCLI_SKILLS_DIR": str(folder)} if how == "env" else None
    result = skills("list", *args, env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == ["alpha"]
    shown = skills("show", "read_file", *args, env=env)
    assert shown.exit_code == 1
    assert "unknown skill 'read_file'; available: alpha" in shown.output
