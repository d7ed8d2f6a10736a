"""``compress --in-place`` and ``--dry-run``: what CI jobs and pre-commit hooks use."""

from __future__ import annotations

import json
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import read_jsonl

from ctxcli import github
from ctxcli import store as store_module
from ctxcli.cli import cli
from ctxcli.placeholders import content_id

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
#: Over budget whatever is dropped: a system prompt of about 1,200 tokens.
TOO_BIG = {
    "messages": [{"role": "system", "content": "rule " * 1200}, {"role": "user", "content": "hi"}]
}


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env={"GITHUB_ACTIONS": None, **(env or {})})


def fixtures(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with a fixture compressing shrinks (agent_run) and one it leaves alone."""
    folder = tmp_path / "fixtures"
    folder.mkdir()
    big = folder / "agent_run.jsonl"
    big.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    small = folder / "chat.jsonl"
    small.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    return big, small


def test_dry_run_writes_nothing_names_the_file_and_exits_1(tmp_path: Path) -> None:
    big, small = fixtures(tmp_path)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (big, small)}
    result = invoke("compress", str(big.parent), "--in-place", "--dry-run")
    assert result.exit_code == 1, result.output
    assert (
        f"would rewrite {big}: 1 of 1 conversation changed, 8,396→7,843 tokens (-7%)\n"
        in result.stderr
    )
    assert str(small) + ":" not in result.stderr
    assert result.stderr.endswith("1 of 2 files would change; --in-place writes them\n")
    assert sorted(big.parent.iterdir()) == sorted(before)
    # Without --in-place the run writes new files: it had said "--in-place writes them".
    result = invoke("compress", str(big), "--dry-run")
    assert result.exit_code == 1, result.output
    assert result.stderr.endswith("would change; the run without --dry-run writes them\n")
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (big, small)} == before


def test_what_is_made_of_a_private_log_is_no_more_readable_than_it(tmp_path: Path) -> None:
    """A new user's 0600 log came out with a 0644 store: the tool results the log kept
    to its owner, readable by everyone. Output, store and stats take no more than the
    input's permission bits (as gzip's output does); a file replaced keeps its own."""
    big, _ = fixtures(tmp_path)
    big.chmod(0o600)
    assert invoke("compress", str(big), "--max-tokens", "3000", "-q").exit_code == 0
    made = sorted(p.name for p in big.parent.iterdir() if p.name.startswith("agent_run."))
    assert made == [
        "agent_run.compressed.jsonl", "agent_run.compressed.stats.json",
        "agent_run.compressed.store.jsonl", "agent_run.jsonl",
    ]  # fmt: skip
    assert {stat.S_IMODE((big.parent / name).stat().st_mode) for name in made} == {0o600}
    back = big.with_name("back.jsonl")  # every original again: no wider either
    restored = invoke("restore", str(big.with_name("agent_run.compressed.jsonl")), "-o", str(back))
    assert restored.exit_code == 0, restored.output
    assert stat.S_IMODE(back.stat().st_mode) == 0o600
    assert invoke("compress", str(big), "--in-place", "--max-tokens", "3000").exit_code == 0
    store = big.with_name("agent_run.store.jsonl")
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    big.chmod(0o644)
    output = big.with_name("agent_run.compressed.jsonl")
    output.chmod(0o640)  # the user's own choice for an output a run replaces
    assert invoke("compress", str(big), "--max-tokens", "3000", "-q").exit_code == 0
    assert stat.S_IMODE(output.stat().st_mode) == 0o640


def test_a_dry_run_with_a_bad_file_says_not_checked(tmp_path: Path) -> None:
    """A dry run writes nothing whatever happens: 'not written, for a bad line' said
    neither what failed (a file that cannot be read is no bad line) nor the truth."""
    big, small = fixtures(tmp_path)
    small.write_text("{bad\n")
    result = invoke("compress", str(big.parent), "--in-place", "--dry-run")
    assert result.exit_code == 1, result.output
    assert "error: 1 of 2 files not checked:\n" in result.stderr
    assert f"Error: {small}:1: invalid JSON" in result.stderr


def test_in_place_through_a_symlink_keeps_the_store_beside_the_file_it_rewrote(
    tmp_path: Path,
) -> None:
    """A new user's --in-place run of link.jsonl (a link to real/run.jsonl) rewrote the
    file and put its store beside the link: restore of real/run.jsonl then said 'no
    such file'. The store goes beside the file rewritten, and restore finds it from
    either path."""
    real = tmp_path / "real" / "run.jsonl"
    real.parent.mkdir()
    real.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    result = invoke("compress", str(link), "--in-place", "--max-tokens", "3000")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and (tmp_path / "real" / "run.store.jsonl").is_file()
    assert not (tmp_path / "link.store.jsonl").exists()
    back = [tmp_path / "from-real.jsonl", tmp_path / "from-link.jsonl"]
    for path, out in zip((real, link), back):
        assert invoke("restore", str(path), "-o", str(out)).exit_code == 0
    originals = read_jsonl(SAMPLES / "agent_run.jsonl")
    assert read_jsonl(back[0]) == read_jsonl(back[1]) == originals


def test_what_is_made_of_a_read_only_log_is_writable(tmp_path: Path) -> None:
    """Only the read bits follow the input: a copy of a read-only log (0444, as the
    shared data are) gave read-only outputs, which the user could not then edit."""
    big, _ = fixtures(tmp_path)
    big.chmod(0o444)
    assert invoke("compress", str(big), "--max-tokens", "3000", "-q").exit_code == 0
    umask = os.umask(0)
    os.umask(umask)
    output = big.with_name("agent_run.compressed.jsonl")
    assert stat.S_IMODE(output.stat().st_mode) == 0o666 & ~umask


def test_dry_run_from_stdin_says_stdin_to_stdout_not_a_rewrite_of_dash() -> None:
    text = (SAMPLES / "agent_run.jsonl").read_text(encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["compress", "-", "--dry-run", "-q"], input=text, env={"GITHUB_ACTIONS": None}
    )
    assert result.exit_code == 1, result.output
    assert "would compress stdin: 1 of 1 conversation changed, " in result.stderr
    assert result.stderr.rstrip().splitlines()[0].endswith(", into stdout")
    assert "would rewrite" not in result.stderr and result.stdout == ""


def test_in_place_rewrites_what_changes_keeps_its_mode_and_then_passes(tmp_path: Path) -> None:
    big, small = fixtures(tmp_path)
    big.chmod(0o640)
    small_stamp = small.stat().st_mtime_ns
    inode = small.stat().st_ino
    result = invoke("compress", str(big.parent), "--in-place")
    assert result.exit_code == 0, result.output
    assert f"rewrote {big}: 1 of 1 conversation changed" in result.stderr
    assert "left 1 file as found: nothing to change" in result.stderr
    assert stat.S_IMODE(big.stat().st_mode) == 0o640
    assert (small.stat().st_mtime_ns, small.stat().st_ino) == (small_stamp, inode)
    store = big.with_name("agent_run.store.jsonl")
    assert sorted(p.name for p in big.parent.iterdir()) == sorted(
        [big.name, small.name, store.name]
    )  # no stats, no temporary file left behind
    assert len(store.read_text().splitlines()) == 1  # one placeholder brings it within 8000
    again = invoke("compress", str(big.parent), "--in-place", "--dry-run")
    assert again.exit_code == 0, again.output
    assert again.stderr.endswith("0 of 2 files would change\n")
    restored = tmp_path / "restored.jsonl"
    assert invoke("restore", str(big), "-o", str(restored)).exit_code == 0
    assert read_jsonl(restored) == read_jsonl(SAMPLES / "agent_run.jsonl")


def test_in_place_adds_to_the_store_beside_it_never_replacing_it(tmp_path: Path) -> None:
    big, _ = fixtures(tmp_path)
    assert invoke("compress", str(big), "--in-place").exit_code == 0
    store = big.with_name("agent_run.store.jsonl")
    first = store.read_bytes()
    # Another run appended to the fixture; compressing it again keeps the first originals.
    big.write_bytes(big.read_bytes() + (SAMPLES / "agent_run.jsonl").read_bytes())
    assert invoke("compress", str(big), "--in-place").exit_code == 0
    assert store.read_bytes().startswith(first)
    restored = tmp_path / "restored.jsonl"
    assert invoke("restore", str(big), "-o", str(restored)).exit_code == 0
    assert read_jsonl(restored) == read_jsonl(SAMPLES / "agent_run.jsonl") * 2


@pytest.mark.parametrize("damage", ["cut", "edited"])
def test_a_damaged_store_entry_is_replaced_by_the_original(tmp_path: Path, damage: str) -> None:
    # An entry cut short or edited counted as held by its id: the good original was
    # never added, --in-place rewrote the input, and restore refused the store.
    source = tmp_path / "a.jsonl"
    original = (SAMPLES / "agent_run.jsonl").read_bytes()
    source.write_bytes(original)
    args = ["compress", str(source), "--in-place", "--stages", "placeholder", "-q"]
    assert invoke(*args).exit_code == 0
    store = tmp_path / "a.store.jsonl"
    lines = store.read_bytes().splitlines(keepends=True)
    if damage == "cut":
        lines[-1] = lines[-1][:-200]
    else:
        lines[-1] = lines[-1].replace(b"caller", b"callee", 1)
    store.write_bytes(b"".join(lines))
    source.write_bytes(original)  # start again from the original
    assert invoke(*args).exit_code == 0
    restored = tmp_path / "r.jsonl"
    result = invoke("restore", str(source), "-o", str(restored))
    assert result.exit_code == 0, result.output
    assert read_jsonl(restored) == [json.loads(original)]
    assert len(store.read_bytes().splitlines()) == len(lines)  # replaced, not added beside


def test_in_place_never_adds_to_a_file_that_is_no_store(tmp_path: Path) -> None:
    """A file that happened to have the store's name (a copy of a transcript named
    agent_run.store.jsonl, or any text) was appended to, and restore then failed; a
    --store naming a transcript replaced it."""
    big, small = fixtures(tmp_path)
    before = big.read_bytes()
    store = big.with_name("agent_run.store.jsonl")
    store.write_bytes(small.read_bytes())
    result = invoke("compress", str(big), "--in-place")
    assert result.exit_code == 1 and f"{store}: exists and is no ctxcli store" in result.output
    assert big.read_bytes() == before and store.read_bytes() == small.read_bytes()
    named = invoke("compress", str(big), "-o", str(tmp_path / "o.jsonl"), "--store", str(small))
    assert named.exit_code == 1 and small.read_bytes() == store.read_bytes()


def test_in_place_removes_what_a_killed_in_place_run_left(tmp_path: Path) -> None:
    """A run killed while rewriting in place (SIGKILL) left its temporary file and the
    writer's beside it, and no later run removed them, as the README says runs do."""
    big, _ = fixtures(tmp_path)
    dead = 4_194_305  # above Linux's largest process id: no such process
    left = [f".agent_run.jsonl.ctxcli-{dead}-x1.tmp", f"..agent_run.jsonl.ctxcli-{dead}-x1.tmp"]
    left[1] += f".ctxcli-{dead}-y2.tmp"
    for name in left:
        (big.parent / name).write_text("half a file")
    assert invoke("compress", str(big), "--in-place").exit_code == 0
    names = sorted(p.name for p in big.parent.iterdir())
    assert names == ["agent_run.jsonl", "agent_run.store.jsonl", "chat.jsonl"]


def test_in_place_follows_a_symlink_to_the_file(tmp_path: Path) -> None:
    big, _ = fixtures(tmp_path)
    link = tmp_path / "link.jsonl"
    link.symlink_to(big)
    assert invoke("compress", str(link), "--in-place", "--stages", "window").exit_code == 0
    assert link.is_symlink()
    assert len(read_jsonl(big)[0]["messages"]) < 15


def test_a_failed_in_place_run_leaves_the_input_as_it_was(tmp_path: Path) -> None:
    big, _ = fixtures(tmp_path)
    big.write_bytes(big.read_bytes() + b"{broken\n")
    before = big.read_bytes()
    result = invoke("compress", str(big), "--in-place")
    assert result.exit_code == 1
    assert f"{big}:2: invalid JSON" in result.output
    assert big.read_bytes() == before
    assert sorted(p.name for p in big.parent.iterdir()) == ["agent_run.jsonl", "chat.jsonl"]


def test_ctrl_c_exits_130_and_leaves_the_input_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Click ends an interrupted run with "Aborted!" and exit 1, an error's status.
    big, _ = fixtures(tmp_path)
    before = big.read_bytes()

    def interrupt(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("ctxcli.drivers.compress_record", interrupt)
    result = invoke("compress", str(big), "--in-place")
    assert result.exit_code == 130
    assert "Aborted: interrupted; no file was left half-written" in result.output
    assert big.read_bytes() == before
    assert sorted(p.name for p in big.parent.iterdir()) == ["agent_run.jsonl", "chat.jsonl"]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(["--dry-run"], 1, id="dry-run"),
        pytest.param(["--dry-run", "--check"], 3, id="check-wins"),
        pytest.param(["--in-place", "--check"], 3, id="in-place-check"),
        pytest.param(["--in-place"], 0, id="in-place"),
    ],
)
def test_exit_status_of_the_gates(tmp_path: Path, args: list[str], code: int) -> None:
    big, _ = fixtures(tmp_path)
    (big.parent / "huge.jsonl").write_text(json.dumps(TOO_BIG) + "\n")
    result = invoke("compress", str(big.parent), "--max-tokens", "1000", *args)
    assert result.exit_code == code, result.output


def test_github_actions_get_annotations(tmp_path: Path) -> None:
    big, _ = fixtures(tmp_path)
    huge = big.parent / "huge.jsonl"
    huge.write_text(json.dumps({"id": "h", **TOO_BIG}) + "\n")
    env = {"GITHUB_ACTIONS": "true"}
    result = invoke("compress", str(huge), "--max-tokens", "1000", "--dry-run", env=env)
    assert f"::warning file={huge},line=1::{huge}:1: conversation h is over budget" in result.stderr
    bad = big.parent / "bad.jsonl"
    bad.write_text("{}\n{broken\n")
    failed = invoke("compress", str(bad), env=env)
    assert f"::error file={bad},line=1::no format fits" in failed.stderr
    checked = invoke("validate", str(big), env=env)
    assert "::" not in checked.stderr  # no problems, no annotations
    assert "::" not in invoke("compress", str(huge), "--max-tokens", "1000").stderr


def test_workflow_commands_escape_what_github_reads_as_syntax() -> None:
    assert github.command("warning", "50% done\nnext", file="a,b:c.jsonl", line=3) == (
        "::warning file=a%2Cb%3Ac.jsonl,line=3::50%25 done%0Anext"
    )
    assert github.command("error", "x", file="-", line=2) == "::error::x"
    assert github.line_in("a.jsonl:12: over budget", "a.jsonl") == 12
    assert github.line_in("a.jsonl[record 2]: over budget", "a.jsonl") is None


def test_inputs_are_never_modified_without_in_place(tmp_path: Path) -> None:
    big, small = fixtures(tmp_path)
    before = {p: p.read_bytes() for p in (big, small)}
    assert invoke("compress", str(big.parent), "--max-tokens", "500").exit_code == 0
    assert {p: p.read_bytes() for p in (big, small)} == before
    assert os.path.exists(big.with_name("agent_run.compressed.jsonl"))


def test_a_folder_that_takes_no_new_file_is_a_clean_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only folder (root ignores modes, so the refusal is simulated)."""
    import tempfile

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    big, _ = fixtures(tmp_path)
    monkeypatch.setattr(tempfile, "mkstemp", refused)
    result = invoke("compress", str(big), "--in-place")
    assert result.exit_code == 1
    assert f"{big.parent}: cannot write: Permission denied" in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, OSError)


def test_runs_adding_to_one_store_at_once_each_add_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two runs that both read the store before either replaced it kept only the last
    # one's originals: the other's placeholders could never be restored.
    news = []
    for k in (1, 2):
        news.append(str(tmp_path / f"new{k}.jsonl"))
        with store_module.StoreWriter(news[-1]) as writer:
            writer.add({content_id(f"original {k}"): f"original {k}"})
            writer.commit()
    reading = store_module._kept_and_added

    def slowly(held: bytes, new: bytes) -> tuple[bytes, bytes]:
        time.sleep(0.3)  # the other run reads the store meanwhile, unless it waits
        return reading(held, new)

    monkeypatch.setattr(store_module, "_kept_and_added", slowly)
    store = str(tmp_path / "shared.store.jsonl")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda new: store_module.add_to_store(new, store), news))
    assert sorted(store_module.load_store(store).values()) == ["original 1", "original 2"]


def test_in_place_on_a_folder_leaves_what_a_symlink_out_of_it_leads_to(tmp_path: Path) -> None:
    # It rewrote the file the link led to, outside the folder (a fixture linked to a
    # shared data set), which the user never named.
    big, _ = fixtures(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    data = shared / "runs.jsonl"
    data.write_bytes(big.read_bytes())
    (big.parent / "linked.jsonl").symlink_to(data)
    result = invoke("compress", "--in-place", str(big.parent))
    assert result.exit_code == 0, result.output
    assert data.read_bytes() == (SAMPLES / "agent_run.jsonl").read_bytes()
    assert "linked.jsonl: skipped, a symlink out of the folder" in result.stderr
    assert big.read_bytes() != data.read_bytes()  # the folder's own file was rewritten
    named = invoke("compress", "--in-place", str(big.parent / "linked.jsonl"))
    assert named.exit_code == 0, named.output  # named on its own: rewritten, as asked
    assert data.read_bytes() != (SAMPLES / "agent_run.jsonl").read_bytes()


def test_a_store_in_a_folder_that_cannot_be_read_is_added_to_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Opening the folder for its lock raised PermissionError (mode 0300, not root):
    # the run wrote nothing, where it had written before the lock.
    opening = os.open

    def refused(path: str, flags: int, *args: Any) -> int:
        if os.path.isdir(path):
            raise PermissionError(13, "Permission denied", path)
        return opening(path, flags, *args)

    new = str(tmp_path / "new.jsonl")
    with store_module.StoreWriter(new) as writer:
        writer.add({content_id("original"): "original"})
        writer.commit()
    monkeypatch.setattr(os, "open", refused)
    store = str(tmp_path / "s.store.jsonl")
    assert store_module.add_to_store(new, store)[0] == 1
    monkeypatch.setattr(os, "open", opening)
    assert store_module.load_store(store) == {content_id("original"): "original"}


def test_in_place_on_a_folder_of_symlinks_out_of_it_is_an_error(tmp_path: Path) -> None:
    folder, shared = tmp_path / "fx", tmp_path / "shared.jsonl"
    folder.mkdir()
    shared.write_bytes((SAMPLES / "agent_run.jsonl").read_bytes())
    (folder / "a.jsonl").symlink_to(shared)
    result = invoke("compress", "--in-place", str(folder))
    assert result.exit_code == 1 and "nothing to rewrite in place" in result.output
