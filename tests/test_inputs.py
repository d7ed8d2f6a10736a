"""Folder inputs: found at any depth, outputs under --out-dir at the same relative path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ctxcli.cli import cli
from ctxcli.errors import ConfigError
from ctxcli.inputs import find_inputs, plan
from ctxcli.validate import validate_file

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def agent_run() -> dict[str, Any]:
    record: dict[str, Any] = json.loads((SAMPLES / "agent_run.jsonl").read_text())
    return record


def mixed_folder(root: Path) -> Path:
    """JSON lines, a JSON array and a .traj, nested, with ctxcli's own files and a
    hidden folder that must not be read."""
    (root / "a/b").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a/b/run.jsonl").write_text(json.dumps(agent_run()) + "\n")
    (root / "a/runs.json").write_text(json.dumps([agent_run(), agent_run()]))
    (root / "top.traj").write_text(json.dumps(agent_run(), indent=2))
    (root / "notes.txt").write_text("not a transcript")
    (root / ".git/x.jsonl").write_text("{not json\n")
    for own in ("a/b/run.compressed.jsonl", "a/b/run.store.jsonl", "a/run.stats.json"):
        (root / own).write_text("{not json\n")
    return root


def test_a_folder_is_searched_at_any_depth_without_ctxcli_outputs(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "in")
    assert [(f.relative, f.path) for f in find_inputs([str(root)])] == [
        ("a/b/run.jsonl", str(root / "a/b/run.jsonl")),
        ("a/runs.json", str(root / "a/runs.json")),
        ("top.traj", str(root / "top.traj")),
    ]
    assert [f.relative for f in find_inputs([str(root)], ["*.json", "b/*"])] == [
        "a/b/run.jsonl",
        "a/runs.json",
    ]
    with pytest.raises(ConfigError, match=r"in: no \*.md files in this folder"):
        find_inputs([str(root)], ["*.md"])


def test_a_nested_mixed_folder_compresses_in_one_command_under_out_dir(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "in")
    out = tmp_path / "out"
    result = invoke("compress", str(root), "--out-dir", str(out), "--max-tokens", "3000")
    assert result.exit_code == 0, result.output
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == [
        "a/b/run.compressed.jsonl",
        "a/b/run.compressed.stats.json",
        "a/b/run.compressed.store.jsonl",
        "a/runs.compressed.json",
        "a/runs.compressed.json.stats.json",
        "a/runs.compressed.json.store.jsonl",
        "top.compressed.traj",
        "top.compressed.traj.stats.json",
        "top.compressed.traj.store.jsonl",
    ]
    for name in ("a/b/run.compressed.jsonl", "a/runs.compressed.json", "top.compressed.traj"):
        assert list(validate_file(str(out / name))) == []
    assert json.loads((out / "a/runs.compressed.json.stats.json").read_text())["conversations"] == 2
    table = result.stderr.splitlines()
    total = next(line for line in table if line.startswith("total (3 files)"))
    assert total.split()[3:5] == ["4", "60→60"]  # conversations; messages before→after


def test_an_output_and_a_folder_of_outputs_are_not_given_together(tmp_path: Path) -> None:
    """``-o y.jsonl --out-dir O`` wrote y.jsonl and never made O, with exit 0."""
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps(agent_run()) + "\n")
    with pytest.raises(ConfigError, match="-o names the output, --out-dir the folder"):
        plan([str(source)], output=str(tmp_path / "y.jsonl"), out_dir=str(tmp_path / "O"))


def test_in_place_takes_no_output_and_no_stdin(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps(agent_run()) + "\n")
    for kwargs in ({"output": "x.jsonl"}, {"out_dir": "out"}):
        with pytest.raises(ConfigError, match="--in-place writes over each input"):
            plan([str(source)], in_place=True, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="stdin"):
        plan(["-"], in_place=True)
    [item] = plan([str(source)], in_place=True, restorable=True)
    assert (item.output, item.stats, item.store) == (
        str(source),
        None,
        str(tmp_path / "a.store.jsonl"),
    )


def test_a_folder_takes_regular_files_only(tmp_path: Path) -> None:
    # A named pipe among the files made `compress folder` and `count folder` wait
    # forever; a broken symlink was "a bad line".
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (folder / "link.jsonl").symlink_to(folder / "a.jsonl")
    said: list[str] = []
    found = find_inputs([str(folder)], warn=said.append)
    assert [f.relative for f in found] == ["a.jsonl", "link.jsonl"]
    # The broken symlink (a rotated log) is told, the pipe is not: left out unread.
    assert said == [
        f"{folder / 'gone.jsonl'}: skipped, a broken symlink (to {tmp_path}/nowhere.jsonl)"
    ]
    for command in ("compress", "count", "validate"):
        result = invoke(command, str(folder))
        assert f"warning: {folder / 'gone.jsonl'}: skipped, a broken symlink" in result.stderr


def test_a_pipe_named_on_its_own_is_read_once(tmp_path: Path) -> None:
    # `ctxcli count <(zcat runs.jsonl.gz)` said "/dev/fd/63: no such file or directory";
    # read as a file, a pipe read twice (the look at its first lines, then the reading)
    # gave 0 conversations and an empty output with exit 0.
    import threading

    text = (SAMPLES / "agent_run.jsonl").read_bytes()
    fifo = tmp_path / "runs.jsonl"

    def run(*args: str) -> Result:
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_bytes, args=(text,), daemon=True)
        writer.start()
        try:
            return invoke(*args)
        finally:
            writer.join(timeout=5)
            fifo.unlink()

    counted = run("count", str(fifo), "--format", "json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["total"]["tokens"] == 8396
    out = tmp_path / "out.jsonl"
    result = run("compress", str(fifo), "-o", str(out), "--max-tokens", "2000", "-q")
    assert result.exit_code == 0, result.output
    assert "[ctxcli summary]" in out.read_text()
    os.mkfifo(fifo)  # no output named: nowhere beside a pipe to write
    result = invoke("compress", str(fifo))
    assert result.exit_code == 2
    assert "is a pipe or stream, with no folder to write beside: give -o" in result.output
