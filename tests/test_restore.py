"""``ctxcli restore``, and the store ``compress`` writes beside its output."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import read_jsonl

from ctxcli.cli import cli
from ctxcli.inputs import default_stats
from ctxcli.stages.placeholder import content_id

BIG = "a long line of tool output\n" * 60


def record(record_id: str, result: str) -> dict[str, Any]:
    return {
        "id": record_id,
        "messages": [
            {"role": "user", "content": "Go."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "a", "name": "cat", "content": result},
            {"role": "assistant", "content": "Done."},
        ],
    }


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    lines = [
        json.dumps(record("big", BIG)),
        json.dumps(record("small", "ok"), indent=None, separators=(", ", ": ")),
        json.dumps(record("same", BIG)),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def compress(path: Path, *args: str) -> Any:
    result = CliRunner().invoke(
        cli,
        ["compress", str(path), "--stages", "placeholder", "--placeholder-keep-recent", "0", *args],
    )
    assert result.exit_code == 0, result.output
    return result


def test_compress_writes_a_deduplicated_store_and_restore_gives_back_the_input(
    source: Path, tmp_path: Path
) -> None:
    result = compress(source, "--placeholder-threshold", "100")
    out = tmp_path / "in.compressed.jsonl"
    store = tmp_path / "in.compressed.store.jsonl"
    assert f"wrote {store} (1 original," in result.output
    assert read_jsonl(store) == [{"id": content_id(BIG), "content": BIG}]
    stats = json.loads((tmp_path / "in.compressed.stats.json").read_text())
    assert stats["stage_events"]["placeholder"]["placeholders_written"] == 2
    assert stats["store"] == {"path": str(store), "entries": 1, "bytes": store.stat().st_size}
    back = tmp_path / "back.jsonl"
    result = CliRunner().invoke(cli, ["restore", str(out), "--store", str(store), "-o", str(back)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"restored 2 placeholders ({2 * len(BIG):,} characters) in 2 of 3 records from {store}\n"
    )
    assert read_jsonl(back) == read_jsonl(source)
    # The untouched line comes back as the very bytes read.
    assert back.read_bytes().splitlines()[1] == source.read_bytes().splitlines()[1]


def test_restore_finds_the_store_compress_wrote_beside_its_output(
    source: Path, tmp_path: Path
) -> None:
    compress(source, "--placeholder-threshold", "100")
    back = tmp_path / "back.jsonl"
    result = CliRunner().invoke(
        cli, ["restore", str(tmp_path / "in.compressed.jsonl"), "-o", str(back)]
    )
    assert result.exit_code == 0, result.output
    assert f"from {tmp_path / 'in.compressed.store.jsonl'}" in result.output
    assert read_jsonl(back) == read_jsonl(source)
    stdin = CliRunner().invoke(cli, ["restore", "-"], input="{}\n")
    assert stdin.exit_code == 2 and "give --store" in stdin.output


def test_restore_writes_to_stdout_by_default(source: Path, tmp_path: Path) -> None:
    compress(source, "--placeholder-threshold", "100", "--store", str(tmp_path / "s.jsonl"))
    result = CliRunner().invoke(
        cli,
        ["restore", str(tmp_path / "in.compressed.jsonl"), "--store", str(tmp_path / "s.jsonl")],
    )
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == read_jsonl(source)


def test_an_unresolvable_placeholder_is_an_error_naming_it(source: Path, tmp_path: Path) -> None:
    compress(source, "--placeholder-threshold", "100")
    empty = tmp_path / "empty.store.jsonl"
    empty.write_text("")
    back = tmp_path / "back.jsonl"
    result = CliRunner().invoke(
        cli,
        ["restore", str(tmp_path / "in.compressed.jsonl"), "--store", str(empty), "-o", str(back)],
    )
    assert result.exit_code == 1
    key = content_id(BIG)
    assert result.output == (
        f"Error: {tmp_path / 'in.compressed.jsonl'}: 2 placeholder(s) cannot be restored from "
        f"{empty}: {key} (line 1), {key} (line 3); --store names the store of the run that "
        "wrote them (a run to stdout keeps it beside its input)\n"
    )
    assert not back.exists()
    assert list(tmp_path.glob(".back.jsonl.*")) == []


def test_a_store_whose_content_does_not_match_its_id_is_refused(
    source: Path, tmp_path: Path
) -> None:
    compress(source, "--placeholder-threshold", "100")
    store = tmp_path / "in.compressed.store.jsonl"
    store.write_text(json.dumps({"id": content_id(BIG), "content": "edited"}) + "\n")
    result = CliRunner().invoke(
        cli, ["restore", str(tmp_path / "in.compressed.jsonl"), "--store", str(store)]
    )
    assert result.exit_code == 1
    assert f"{store}:1: content does not match its id {content_id(BIG)}" in result.output
    # a transcript given as the store has ids, not contents: it is named as no store
    # (it was "content does not match its id", as if a store had been edited)
    result = CliRunner().invoke(
        cli, ["restore", str(tmp_path / "in.compressed.jsonl"), "--store", str(source)]
    )
    assert result.exit_code == 1
    assert f'{source}:1: expected {{"id": ..., "content": ...}}: no ctxcli store' in result.output


def test_stdin_to_stdout_throws_the_originals_away_and_says_so(source: Path) -> None:
    """A pipe of an agent's log (``cat run.jsonl | ctxcli compress -``) failed on its
    first placeholder with default settings: "the tool results placeholders replaced
    need a store". There is no file to keep one beside: the originals go, and the
    summary line says how to keep them."""
    args = ["-", "-o", "-", "--stages", "placeholder", "--placeholder-threshold", "100"]
    args += ["--placeholder-keep-recent", "0"]
    result = CliRunner().invoke(cli, ["compress", *args], input=source.read_text())
    assert result.exit_code == 0, result.output
    assert "ctxcli placeholder" in result.stdout
    said = (
        "threw away 1 original (the store is /dev/null): from stdin to stdout there is no "
        "file to keep them beside; --store PATH keeps them for `ctxcli restore`"
    )
    assert said in result.stderr
    quiet = CliRunner().invoke(cli, ["compress", "-q", *args], input=source.read_text())
    assert quiet.exit_code == 0 and quiet.stderr == f"warning: {said}\n"  # -q hid it
    chosen = ["compress", "-q", "--store", os.devnull, *args]
    assert CliRunner().invoke(cli, chosen, input=source.read_text()).stderr == ""
    # Asked for, /dev/null needs no reason: the table says what went, not why.
    loud = [arg for arg in chosen if arg != "-q"]
    told = CliRunner().invoke(cli, loud, input=source.read_text()).stderr
    assert "threw away 1 original (the store is /dev/null)\n" in told


def test_stdout_from_a_folder_that_takes_no_file_throws_the_originals_away(
    source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-o -`` from a read-only mount of logs wrote nothing ("cannot write"), even where
    no placeholder was made: the store beside the input was set up first."""
    folder = str(source.parent)
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: path != folder and real(path, mode))
    args = [str(source), "-o", "-", "--stages", "placeholder", "--placeholder-threshold", "100"]
    result = CliRunner().invoke(cli, ["compress", *args, "--placeholder-keep-recent", "0"])
    assert result.exit_code == 0, result.output
    assert "ctxcli placeholder" in result.stdout
    assert (
        f"threw away 1 original (the store is /dev/null): {folder} takes no new file to keep "
        "them beside; --store PATH keeps them for `ctxcli restore`"
    ) in result.stderr
    assert sorted(p.name for p in source.parent.iterdir()) == [source.name]


def test_stdout_from_a_shell_pipe_throws_the_originals_away(source: Path) -> None:
    """``ctxcli compress <(cat run.jsonl) -o -``, as the README shows it, failed with
    "/proc/…/fd: cannot write" and wrote nothing: the store was put beside the pipe's
    ``/dev/fd/N``, where not even root can make a file. A pipe is read as stdin is."""
    read, write = os.pipe()
    writer = threading.Thread(target=_write_all, args=(write, source.read_bytes()), daemon=True)
    writer.start()
    try:
        args = [f"/dev/fd/{read}", "-o", "-", "--stages", "placeholder"]
        args += ["--placeholder-threshold", "100", "--placeholder-keep-recent", "0", "-q"]
        result = CliRunner().invoke(cli, ["compress", *args])
    finally:
        writer.join()
        os.close(read)
    assert result.exit_code == 0, result.output
    assert "ctxcli placeholder" in result.stdout
    assert result.stderr == (
        "warning: threw away 1 original (the store is /dev/null): from a pipe to stdout there"
        " is no file to keep them beside; --store PATH keeps them for `ctxcli restore`\n"
    )


def _write_all(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(data)


def test_stdout_output_puts_the_store_beside_the_input(source: Path, tmp_path: Path) -> None:
    result = compress(source, "--placeholder-threshold", "100", "-o", "-", "-q")
    assert len(result.stdout.splitlines()) == 3
    assert read_jsonl(tmp_path / "in.store.jsonl")[0]["id"] == content_id(BIG)


def test_a_failed_run_leaves_neither_output_nor_store(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(record("big", BIG)) + "\nnot json\n")
    result = CliRunner().invoke(
        cli,
        ["compress", str(path), "--stages", "placeholder", "--placeholder-threshold", "100"]
        + ["--placeholder-keep-recent", "0"],
    )
    assert result.exit_code == 1
    assert "in.jsonl:2: invalid JSON" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_store_takes_one_input(source: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["compress", str(source), str(source), "--store", str(tmp_path / "s.jsonl")]
    )
    assert result.exit_code == 2  # options that cannot go together: a usage error
    assert "Error: -o, --stats and --store take one input" in result.output
    result = CliRunner().invoke(cli, ["compress", str(source), "--in-place", "-o", "x.jsonl"])
    assert result.exit_code == 2
    assert "Error: --in-place writes over each input: it takes neither" in result.output
    assert not Path("x.jsonl").exists()


def test_restore_has_help() -> None:
    result = CliRunner().invoke(cli, ["restore", "-h"])
    assert result.exit_code == 0
    assert "Put the originals back" in result.output and "Examples:" in result.output


@pytest.mark.parametrize(
    ("name", "args"),
    [
        pytest.param("tau-bench/gpt-4o-airline.json", ["--messages-key", "traj"], id="json-array"),
        pytest.param(
            "swe-agent/marshmallow-code__marshmallow-1867.traj",
            ["--messages-key", "history"],
            id="one-record",
        ),
        pytest.param(
            "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", [], id="claude-code"
        ),
    ],
)
def test_restore_works_in_every_shape_and_format(
    data: Path, tmp_path: Path, name: str, args: list[str]
) -> None:
    source = data / name
    out = tmp_path / f"out{source.suffix}"
    store = tmp_path / "store.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "compress",
            str(source),
            "-o",
            str(out),
            "--store",
            str(store),
            "--stages",
            "placeholder",
            "--placeholder-threshold",
            "100",
            "--placeholder-keep-recent",
            "0",
            "-q",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    assert b"[ctxcli placeholder " in out.read_bytes()
    back = tmp_path / f"back{source.suffix}"
    result = CliRunner().invoke(cli, ["restore", str(out), "--store", str(store), "-o", str(back)])
    assert result.exit_code == 0, result.output
    assert "restored 0" not in result.output
    if source.suffix == ".jsonl":
        assert [json.loads(x) for x in back.read_text().splitlines()] == [
            json.loads(x) for x in source.read_text().splitlines()
        ]
    else:
        assert json.loads(back.read_text()) == json.loads(source.read_text())


def test_a_mangled_placeholder_is_an_error(tmp_path: Path) -> None:
    text = '[ctxcli placeholder id=NOT-HEX tool="x" tokens=1 chars=1 head=0 tail=0]'
    record = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "tool", "tool_call_id": "a", "content": text},
        ]
    }
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(record) + "\n")
    store = tmp_path / "store.jsonl"
    store.write_text("")
    result = CliRunner().invoke(
        cli, ["restore", str(src), "--store", str(store), "-o", str(tmp_path / "o.jsonl")]
    )
    assert result.exit_code == 1
    assert "unreadable placeholder" in result.output
    assert not (tmp_path / "o.jsonl").exists()


def test_restore_never_writes_over_its_store(tmp_path: Path) -> None:
    store = tmp_path / "store.jsonl"
    store.write_text("")
    src = tmp_path / "in.jsonl"
    src.write_text('{"messages": []}\n')
    result = CliRunner().invoke(cli, ["restore", str(src), "--store", str(store), "-o", str(store)])
    assert result.exit_code == 1
    assert "would overwrite the store" in result.output


def test_anthropic_parallel_results_are_replaced_in_place(tmp_path: Path) -> None:
    big = "line of a large file\n" * 400
    record = {
        "system": "Use tools.",
        "messages": [
            {"role": "user", "content": "Read both files."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": big,
                        "cache_control": {"type": "ephemeral"},
                    },
                    {"type": "tool_result", "tool_use_id": "t2", "content": "short"},
                ],
            },
            {"role": "assistant", "content": "Both read."},
            {"role": "user", "content": "Thanks."},
        ],
    }
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps(record) + "\n")
    result = CliRunner().invoke(
        cli, ["compress", str(src), "--stages", "placeholder", "--placeholder-keep-recent", "0"]
    )
    assert result.exit_code == 0, result.output
    out = read_jsonl(tmp_path / "a.compressed.jsonl")[0]
    results = out["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == ["t1", "t2"]  # one user message, in order
    assert results[0]["content"].startswith("[ctxcli placeholder ")
    assert results[0]["cache_control"] == {"type": "ephemeral"}
    assert results[1] == record["messages"][2]["content"][1]
    assert (
        CliRunner().invoke(cli, ["validate", str(tmp_path / "a.compressed.jsonl")]).exit_code == 0
    )
    back = tmp_path / "back.jsonl"
    store = tmp_path / "a.compressed.store.jsonl"
    assert (
        CliRunner()
        .invoke(
            cli,
            [
                "restore",
                str(tmp_path / "a.compressed.jsonl"),
                "--store",
                str(store),
                "-o",
                str(back),
            ],
        )
        .exit_code
        == 0
    )
    assert read_jsonl(back)[0] == record


def test_a_message_quoting_a_placeholder_comes_back_as_it_was(tmp_path: Path) -> None:
    quoted = '[ctxcli placeholder id=0123456789abcdef tool="x" tokens=1 chars=1 head=0 tail=0]\nx'
    source = record("q", BIG)
    source["messages"][3]["content"] = f"see {quoted}"
    source["messages"].append({"role": "user", "content": quoted})
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(source) + "\n")
    compress(src, "--placeholder-threshold", "100")
    back = tmp_path / "back.jsonl"
    out, store = tmp_path / "in.compressed.jsonl", tmp_path / "in.compressed.store.jsonl"
    result = CliRunner().invoke(cli, ["restore", str(out), "--store", str(store), "-o", str(back)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("restored 1 placeholder (")
    assert read_jsonl(back) == [source]


def test_an_output_compressed_again_restores_with_each_store(tmp_path: Path) -> None:
    first_in = tmp_path / "a.jsonl"
    first_in.write_text(json.dumps(record("r", BIG)) + "\n")
    compress(first_in, "--placeholder-threshold", "100")
    first_out = read_jsonl(tmp_path / "a.compressed.jsonl")[0]
    later = record("r", "another long result line\n" * 60)["messages"]
    for message in later[1:3]:  # the same call id would be used twice
        message.get("tool_calls", [{}])[0]["id"] = "b"
    later[2]["tool_call_id"] = "b"
    second = {"id": "r", "messages": first_out["messages"] + later[1:]}
    second_in = tmp_path / "b.jsonl"
    second_in.write_text(json.dumps(second) + "\n")
    compress(second_in, "--placeholder-threshold", "100")
    store_b = read_jsonl(tmp_path / "b.compressed.store.jsonl")
    kept = first_out["messages"][2]["content"]
    assert {"id": content_id(kept), "content": kept} in store_b  # kept as it was
    steps = [
        ("b.compressed.jsonl", "b.compressed.store.jsonl", "b.back.jsonl"),
        ("b.back.jsonl", "a.compressed.store.jsonl", "a.back.jsonl"),
    ]
    notes = []
    for source, store, back in steps:
        result = CliRunner().invoke(
            cli,
            ["restore", str(tmp_path / source), "--store", str(tmp_path / store)]
            + ["-o", str(tmp_path / back)],
        )
        assert result.exit_code == 0, result.output
        notes.append([line for line in result.stderr.splitlines() if line.startswith("note:")])
    # The first step says that a placeholder of the earlier run stays; the last, none.
    assert len(notes[0]) == 1 and "1 placeholder of an earlier run stays as" in notes[0][0]
    assert notes[1] == []
    assert read_jsonl(tmp_path / "b.back.jsonl") == [second]
    expected = {**second, "messages": record("r", BIG)["messages"] + later[1:]}
    assert read_jsonl(tmp_path / "a.back.jsonl") == [expected]


def test_compressing_an_output_again_needs_no_store_when_it_adds_no_placeholder(
    source: Path, tmp_path: Path
) -> None:
    compress(source, "--placeholder-threshold", "100")
    out = tmp_path / "in.compressed.jsonl"
    result = CliRunner().invoke(
        cli,
        ["compress", "-", "-o", "-", "-q", "--stages", "placeholder"]
        + ["--placeholder-threshold", "100", "--placeholder-keep-recent", "0"],
        input=out.read_text(),
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == out.read_text()


def test_a_run_that_only_keeps_placeholders_writes_a_store_restore_reads(
    source: Path, tmp_path: Path
) -> None:
    """Compressing an output again replaces nothing new: its store holds the texts it
    kept as they were, so that restore leaves them (they restore from the first run's
    store); with no store at all restore could not tell them from lost placeholders."""
    compress(source, "--placeholder-threshold", "100")
    out = tmp_path / "in.compressed.jsonl"
    again = tmp_path / "again.jsonl"
    result = compress(out, "--placeholder-threshold", "100", "-o", str(again))
    assert f"wrote {tmp_path / 'again.store.jsonl'} (1 original," in result.output
    back = CliRunner().invoke(cli, ["restore", str(again), "-o", "-"])
    assert back.exit_code == 0, back.output
    assert back.stdout == again.read_text()
    assert "2 placeholders of an earlier run stay as" in back.stderr
    both = tmp_path / "both.store.jsonl"
    stores = ("in.compressed.store.jsonl", "again.store.jsonl")
    both.write_text("".join((tmp_path / name).read_text() for name in stores))
    back = CliRunner().invoke(cli, ["restore", str(again), "--store", str(both), "-o", "-"])
    assert back.exit_code == 0, back.output
    assert [json.loads(line) for line in back.stdout.splitlines()] == read_jsonl(source)


def test_a_missing_store_is_empty_and_named_when_placeholders_need_it(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ctxcli.cli import cli

    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    missing = str(tmp_path / "none.store.jsonl")
    result = CliRunner().invoke(cli, ["restore", str(plain), "--store", missing, "-o", "-"])
    assert result.exit_code == 0, result.output
    assert result.stdout == plain.read_text()
    # Not "restored 0 placeholders … from X", then "note: X does not exist": one line.
    assert result.stderr == (
        f"restored nothing: {plain} has no placeholders (1 record written back unchanged;"
        f" {missing} does not exist, and was not needed)\n"
    )
    placeholder = tmp_path / "ph.jsonl"
    calls = [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    messages = [{"role": "user", "content": "ls"}, {"role": "assistant", "tool_calls": calls}]
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "x\n" * 2000})
    placeholder.write_text(json.dumps({"messages": messages}) + "\n")
    store = tmp_path / "ph.store.jsonl"
    args = [
        "compress",
        str(placeholder),
        "--stages",
        "placeholder",
        "--placeholder-keep-recent",
        "0",
    ]
    out = tmp_path / "ph.out.jsonl"
    assert (
        CliRunner().invoke(cli, [*args, "--store", str(store), "-o", str(out), "-q"]).exit_code == 0
    )
    store.unlink()
    result = CliRunner().invoke(cli, ["restore", str(out), "--store", str(store), "-o", "-"])
    assert result.exit_code != 0 and f"{store} (no such file)" in result.output


def test_a_result_that_looks_like_a_placeholder_restores_as_it_was(tmp_path: Path) -> None:
    """The input holds a tool result that reads like a placeholder and the run replaces
    nothing: restore gives back the input (it failed: 'cannot be restored ... (no such
    file)', as the run wrote no store)."""
    look_alike = (
        '[ctxcli placeholder id=0123456789abcdef tool="cat" tokens=900 chars=3000 head=2 tail=0]'
        "\nab\n[... 2998 characters omitted ...]"
    )
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record("r", look_alike)) + "\n")
    done = CliRunner().invoke(cli, ["compress", str(source), "-q"])
    assert done.exit_code == 0, done.output
    out = tmp_path / "in.compressed.jsonl"
    back = CliRunner().invoke(cli, ["restore", str(out), "-o", "-"])
    assert back.exit_code == 0, back.output
    assert back.stdout == source.read_text()


def test_a_run_without_the_placeholder_stage_restores_an_input_placeholder_look_alike(
    tmp_path: Path,
) -> None:
    look_alike = (
        '[ctxcli placeholder id=0123456789abcdef tool="cat" tokens=9 chars=9 head=1 tail=0]\n'
        "x\n[... 8 characters omitted ...]"
    )
    messages: list[dict[str, Any]] = []
    for i in range(10):
        messages += [
            {"role": "user", "content": f"q{i} " + "w " * 100},
            {"role": "assistant", "content": "a " * 100},
        ]
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
    messages += [
        {"role": "user", "content": "cat it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": look_alike},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"messages": messages}) + "\n")
    ran = CliRunner().invoke(
        cli, ["compress", str(source), "--stages", "summary", "--max-tokens", "300"]
    )
    assert ran.exit_code == 0, ran.output
    restored = CliRunner().invoke(cli, ["restore", str(tmp_path / "in.compressed.jsonl")])
    assert restored.exit_code == 0, restored.output  # was: cannot be restored (no such file)
    assert json.loads(restored.stdout)["messages"][-1]["content"] == look_alike


def _file_text(lines: int) -> str:
    """A file an agent writes: ``lines`` distinct lines of code (about 17 tokens each)."""
    return "".join(
        f"def f_{k}(x):\n    return x * {k}  # id-{k * 7919 % 10000}\n" for k in range(lines)
    )


def _compressed(path: Path, value: dict[str, Any], budget: int) -> Path:
    """``value`` written to ``path`` as one record and compressed at ``budget`` tokens
    beside it; the output's path."""
    path.write_text(json.dumps(value) + "\n")
    out = path.with_suffix(".out.jsonl")
    result = CliRunner().invoke(
        cli, ["compress", str(path), "--max-tokens", str(budget), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def _ask(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def test_gemini_call_arguments_the_summary_stage_cleared_restore(tmp_path: Path) -> None:
    """A functionCall's large ``args`` in the kept tail becomes a placeholder object,
    and restore puts the original back (it used to stay a placeholder, exit 0)."""
    big = {"path": "big.py", "content": _file_text(160)}
    contents = [_ask("Write big.py.")]
    contents += [
        {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": big}}]}
    ]
    contents += [
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "write_file", "response": {"ok": True}}}],
        }
    ]
    # a later call, the latest, which stays as it was
    run = {"name": "run", "args": {"cmd": "pytest"}}
    contents += [{"role": "model", "parts": [{"functionCall": run}]}]
    contents += [{"role": "user", "parts": [{"functionResponse": {"name": "run", "response": {}}}]}]
    for k in range(4):
        contents += [
            _ask(f"Now step {k}: {_file_text(6)}"),
            {"role": "model", "parts": [{"text": f"Done {k}."}]},
        ]
    out = _compressed(tmp_path / "g.jsonl", {"contents": contents}, 2500)
    assert '"ctxcli_placeholder"' in out.read_text()  # the args were cleared, not folded
    back = tmp_path / "g.back.jsonl"
    result = CliRunner().invoke(cli, ["restore", str(out), "-o", str(back)])
    assert result.exit_code == 0, result.output
    restored = read_jsonl(back)[0]["contents"]
    calls = [p["functionCall"] for c in restored for p in c["parts"] if "functionCall" in p]
    assert calls[0] == {"name": "write_file", "args": big}


def test_a_local_shell_call_keeps_its_action_and_the_stats_count_what_is_written(
    tmp_path: Path,
) -> None:
    """A Responses ``local_shell_call`` has no place for a placeholder: its ``action``
    stays whole, and the stats' tokens are those of the written output (they counted
    a placeholder the writer never wrote, so an output over budget passed as within)."""
    command = ["bash", "-lc", "cat > big.py <<'EOF'\n" + _file_text(160) + "EOF"]
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "Write big.py."}]
    items += [
        {
            "type": "local_shell_call",
            "call_id": "ls1",
            "status": "completed",
            "action": {"type": "exec", "command": command},
        },
        {"type": "local_shell_call_output", "call_id": "ls1", "output": "done"},
    ]
    for k in range(4):
        items += [
            {"type": "message", "role": "user", "content": f"Step {k}: {_file_text(6)}"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"Done {k}."}],
            },
        ]
    out = _compressed(tmp_path / "r.jsonl", {"input": items}, 2000)
    stats = json.loads((tmp_path / "r.out.stats.json").read_text())
    counted = CliRunner().invoke(cli, ["count", str(out)])
    assert f"{stats['tokens']['after']:,}" in counted.output.splitlines()[-1]
    assert "ctxcli_placeholder" not in out.read_text()


def _parts(text: str, kind: str = "text") -> list[dict[str, Any]]:
    return [{"type": kind, "value": text}]


def _part_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A LLaMA-Factory assistant message whose call is a ``tool_call`` part."""
    value = json.dumps({"name": name, "arguments": arguments})
    return {"role": "assistant", "content": [{"type": "tool_call", "value": value}]}


def _counted_as_written(out: Path) -> None:
    """The stats' tokens after are what ``count`` reads in the written file."""
    stats = json.loads(Path(default_stats(str(out))).read_text())
    counted = CliRunner().invoke(cli, ["count", str(out)])
    assert f"{stats['tokens']['after']:,}" in counted.output.splitlines()[-1], counted.output


def _restored(out: Path) -> list[dict[str, Any]]:
    done = CliRunner().invoke(cli, ["restore", str(out)])
    assert done.exit_code == 0, done.output
    return [json.loads(line) for line in done.stdout.splitlines()]


def _read_big(calling: str) -> dict[str, Any]:
    """The assistant message that reads big.py: with ``tool_calls``, or its call as a
    ``tool_call`` part (LLaMA-Factory's own shape: the reader pairs its result by
    adjacency)."""
    if calling == "part":
        return _part_call("read", {"path": "big.py"})
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "read", "arguments": '{"path": "big.py"}'}
    return {"role": "assistant", "content": _parts("Reading."), "tool_calls": [call]}


@pytest.mark.parametrize("calling", ["tool_calls", "part"])
def test_a_llama_factory_tool_result_placeholder_is_one_part_and_restores(
    tmp_path: Path, calling: str
) -> None:
    """In a record of LLaMA-Factory parts (``[{"type": "text", "value": …}]``) a tool
    result's placeholder was a plain string, which a loader that reads only parts
    (LLaMA-Factory v1's messages format) cannot take, nor a Parquet column of parts
    hold. It is one part like the first of those it replaced, whichever way the call
    is written, the stats count it as written, and restore gives the parts back."""
    result = {"role": "tool", "content": _parts(_file_text(200), "observation")}
    messages = [
        {"role": "system", "content": _parts("You read files.")},
        {"role": "user", "content": _parts("Read big.py.")},
        _read_big(calling),
        {**result, "tool_call_id": "c1"} if calling == "tool_calls" else result,
        {"role": "assistant", "content": _parts("It defines 200 functions.")},
        {"role": "user", "content": _parts("Which is the last?")},
        {"role": "assistant", "content": _parts("f_199.")},
        {"role": "user", "content": _parts("Thanks.")},
    ]
    out = _compressed(tmp_path / "lf.jsonl", {"messages": messages}, 1500)
    written = read_jsonl(out)[0]["messages"][3]["content"]
    assert len(written) == 1 and written[0]["type"] == "observation", written
    assert written[0]["value"].startswith("[ctxcli placeholder id="), written
    _counted_as_written(out)
    assert _restored(out) == [{"messages": messages}]


def test_the_arguments_a_stage_cleared_in_a_tool_call_part_are_written(tmp_path: Path) -> None:
    """A long argument of a ``tool_call`` part a stage turned into a placeholder is
    written into the part: the part read was written back whole, so the file held
    6,464 tokens where the stats said 1,104, over budget with none listed. Restore
    gives the same arguments back (the value's JSON, written anew)."""
    messages = [
        {"role": "user", "content": _parts("Write it, then check it")},
        _part_call("write", {"path": "a.txt", "text": _file_text(200)}),
        {"role": "tool", "content": _parts("ok")},
        _part_call("check", {"path": "a.txt"}),
        {"role": "tool", "content": _parts("fine")},
        {"role": "assistant", "content": _parts("done")},
        {"role": "user", "content": _parts("next?")},
    ]
    source = tmp_path / "args.jsonl"
    out = _compressed(source, {"messages": messages}, 2000)
    written = json.loads(read_jsonl(out)[0]["messages"][1]["content"][0]["value"])
    assert list(written["arguments"]) == ["ctxcli_placeholder"], written
    _counted_as_written(out)
    restored = _restored(out)[0]["messages"]
    assert restored[2:] == messages[2:]
    assert json.loads(restored[1]["content"][0]["value"]) == json.loads(
        messages[1]["content"][0]["value"]
    )


def test_a_placeholder_for_parts_that_open_with_an_image_is_a_text_part(tmp_path: Path) -> None:
    """The placeholder of a result whose first part is an image takes the type of its
    first text part (it took ``image``: a loader reads its text as an image's URL, and
    a counter as an image's 85 tokens)."""
    content = [{"type": "image", "value": "https://x/img.png"}, *_parts(_file_text(200))]
    messages = [
        {"role": "user", "content": _parts("Read big.py.")},
        _read_big("tool_calls"),
        {"role": "tool", "tool_call_id": "c1", "content": content},
        {"role": "assistant", "content": _parts("It defines 200 functions.")},
        {"role": "user", "content": _parts("Which is the last?")},
    ]
    out = _compressed(tmp_path / "img.jsonl", {"messages": messages}, 1500)
    written = read_jsonl(out)[0]["messages"][2]["content"]
    assert [p["type"] for p in written] == ["text"], written
    _counted_as_written(out)


def test_a_placeholder_part_of_an_earlier_run_is_read_as_a_placeholder(tmp_path: Path) -> None:
    """Compressed again, a placeholder an earlier run wrote as a part is that run's
    placeholder: never replaced again (nested), named in the new store as it was, so
    restore leaves it and exits 0 (it failed: 'cannot be restored')."""
    messages = [
        {"role": "user", "content": _parts("Read big.py.")},
        _read_big("tool_calls"),
        {"role": "tool", "tool_call_id": "c1", "content": _parts(_file_text(300))},
        {"role": "assistant", "content": _parts("It defines 300 functions.")},
        {"role": "user", "content": _parts("Which is the last?")},
    ]
    first = _compressed(tmp_path / "one.jsonl", {"messages": messages}, 2500)
    again = tmp_path / "again"
    again.mkdir()
    second = _compressed(again / "two.jsonl", read_jsonl(first)[0], 2400)
    [result] = [m for m in read_jsonl(second)[0]["messages"] if m["role"] == "tool"]
    value = result["content"][0]["value"]
    assert value.count("[ctxcli placeholder id=") == 1, value
    assert _restored(second) == read_jsonl(first)


def _parts_and_their_json(tmp_path: Path) -> tuple[Path, list[Any]]:
    """A file of two conversations: one whose tool result is a list of parts, one
    whose tool result is that list's canonical JSON as a string."""
    parts = [{"text": BIG * 5, "type": "text"}]
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    records = []
    for k, result in enumerate([parts, text]):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        records.append(
            {
                "messages": [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"c{k}", "content": result},
                    {"role": "assistant", "content": "done"},
                ]
            }
        )
    source = tmp_path / "a.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    return source, records


def test_a_string_that_is_a_lists_json_has_an_id_of_its_own(tmp_path: Path) -> None:
    # They shared an id: the store refused both, and the whole file was lost
    # ("names both a string and a list of parts") for one conversation's result.
    source, records = _parts_and_their_json(tmp_path)
    args = ["--stages", "placeholder", "--placeholder-keep-recent", "0", "-q"]
    result = CliRunner().invoke(cli, ["compress", str(source), *args])
    assert result.exit_code == 0, result.output
    out = tmp_path / "a.compressed.jsonl"
    assert [m["content"][:23] for r in read_jsonl(out) for m in r["messages"][2:3]] == [
        "[ctxcli placeholder id="
    ] * 2
    restored = tmp_path / "r.jsonl"
    assert CliRunner().invoke(cli, ["restore", str(out), "-o", str(restored)]).exit_code == 0
    assert read_jsonl(restored) == records


def test_a_store_of_list_ids_as_written_before_still_restores(tmp_path: Path) -> None:
    # A list's id was the hash of its canonical JSON alone; stores written so restore.
    source, records = _parts_and_their_json(tmp_path)
    source.write_text(json.dumps(records[0]) + "\n")
    args = ["--stages", "placeholder", "--placeholder-keep-recent", "0", "-q"]
    assert CliRunner().invoke(cli, ["compress", str(source), *args]).exit_code == 0
    out, store = tmp_path / "a.compressed.jsonl", tmp_path / "a.compressed.store.jsonl"
    parts = records[0]["messages"][2]["content"]
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    old = content_id(text)  # the hash of the canonical JSON alone
    new = content_id(parts)
    assert old != new
    for path in (out, store):
        path.write_text(path.read_text().replace(new, old))
    restored = tmp_path / "r.jsonl"
    result = CliRunner().invoke(cli, ["restore", str(out), "-o", str(restored)])
    assert result.exit_code == 0, result.output
    assert read_jsonl(restored) == records[:1]


def _restores(output: Path, store: Path, original: Path) -> bool:
    restored = output.with_name("restored.jsonl")
    args = ["restore", str(output), "--store", str(store), "-o", str(restored)]
    result = CliRunner().invoke(cli, args)
    return result.exit_code == 0 and read_jsonl(restored) == read_jsonl(original)


def test_outputs_sharing_a_named_store_each_restore(tmp_path: Path) -> None:
    # The second run replaced the store the first had written: the first output's
    # placeholders could no longer be restored.
    store = tmp_path / "shared.jsonl"
    args = ["--stages", "placeholder", "--placeholder-keep-recent", "0", "--store", str(store)]
    pairs = []
    for name in "ab":
        source = tmp_path / f"{name}.jsonl"
        source.write_text(json.dumps(record(name, f"{name}: {BIG * 5}")) + "\n")
        output = tmp_path / f"{name}.out.jsonl"
        result = CliRunner().invoke(cli, ["compress", str(source), "-o", str(output), *args])
        assert result.exit_code == 0, result.output
        pairs.append((output, source))
    assert "wrote " + str(store) + " (2 originals" in result.output  # all it holds
    assert all(_restores(output, store, source) for output, source in pairs)
    # a name that is no store (another transcript) is refused, not added to
    other = ["--store", str(pairs[1][1])]
    output = str(tmp_path / "c.jsonl")
    result = CliRunner().invoke(cli, ["compress", str(pairs[0][1]), "-o", output, *other])
    assert result.exit_code == 1 and "is no ctxcli store" in result.output


def test_a_run_stopped_before_its_output_moved_leaves_the_old_output_restorable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store moved into place first, replacing the one the old output needed; a
    # Ctrl-C before the output moved left the old output with a store that lacks its
    # originals. A named store is now added to, so it serves both.
    store = tmp_path / "s.jsonl"
    source, output = tmp_path / "a.jsonl", tmp_path / "a.out.jsonl"
    args = ["compress", str(source), "-o", str(output), "--store", str(store)]
    args += ["--stages", "placeholder", "--placeholder-keep-recent", "0"]
    source.write_text(json.dumps(record("a", f"old {BIG * 5}")) + "\n")
    assert CliRunner().invoke(cli, args).exit_code == 0
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(source.read_bytes())
    source.write_text(json.dumps(record("a", f"new {BIG * 5}")) + "\n")
    moving = os.replace

    def stopped(src: str, dst: str) -> None:
        if os.path.basename(dst) == output.name:
            raise KeyboardInterrupt
        moving(src, dst)

    monkeypatch.setattr(os, "replace", stopped)
    assert CliRunner().invoke(cli, args).exit_code != 0
    monkeypatch.setattr(os, "replace", moving)
    assert _restores(output, store, kept)


@pytest.mark.parametrize(
    "style",
    [
        {"separators": (",", ":"), "ensure_ascii": False},  # as StoreWriter wrote it
        {"separators": (",", ":"), "sort_keys": True},  # as `jq -cS` rewrites it
        {},  # spaced
    ],
)
def test_a_string_whose_id_an_earlier_list_entry_holds_is_refused(
    tmp_path: Path, style: dict[str, Any]
) -> None:
    # A store written before PARTS_PREFIX holds a list under the id of the string that
    # is its JSON; adding that string kept the list, and restore gave back a list.
    source, records = _parts_and_their_json(tmp_path)
    parts = records[0]["messages"][2]["content"]
    text = records[1]["messages"][2]["content"]
    store = tmp_path / "old.store.jsonl"
    entry = {"id": content_id(text), "content": parts}
    store.write_text(json.dumps(entry, **style) + "\n")
    source.write_text(json.dumps(records[1]) + "\n")  # the string's conversation
    output = tmp_path / "out.jsonl"
    args = ["compress", str(source), "-o", str(output), "--store", str(store)]
    result = CliRunner().invoke(
        cli, [*args, "--stages", "placeholder", "--placeholder-keep-recent", "0"]
    )
    assert result.exit_code == 1
    assert f"{store}: id {content_id(text)} is held as a list of parts" in result.output
    assert not output.exists()
