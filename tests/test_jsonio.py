"""``ctxcli.jsonio``: pieces of a file, line styles, atomic writes that fail."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxcli import jsonio
from ctxcli.cli import cli
from ctxcli.errors import InputError, OutputError


def test_pieces_end_at_line_ends_and_name_their_first_line(tmp_path: Path) -> None:
    lines = [b'{"n": %d, "pad": "%s"}' % (i, b"x" * (i * 7 % 50)) for i in range(200)]
    lines.insert(50, b"")
    source = tmp_path / "a.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    with jsonio.open_input(str(source)) as stream:
        pieces = list(jsonio.chunks(stream, 300))
        records = [
            r
            for start, end, line in pieces
            for r in jsonio.read_chunk(stream.fileno(), start, end, line)
        ]
    assert len(pieces) > 10
    assert [r.raw for r in records] == [line for line in lines if line]
    assert [r.line for r in records] == [n + 1 for n, line in enumerate(lines) if line]


def test_first_pieces_are_small_and_grow_to_the_size(tmp_path: Path) -> None:
    lines = [b'{"n": %d, "pad": "%s"}' % (i, b"x" * 80) for i in range(2000)]
    source = tmp_path / "a.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    with jsonio.open_input(str(source)) as stream:
        pieces = list(jsonio.chunks(stream, 20_000, first=1000))
        records = [r for p in pieces for r in jsonio.read_chunk(stream.fileno(), *p)]
    sizes = [end - start for start, end, _ in pieces]
    assert [r.raw for r in records] == lines
    assert sizes[0] < 1200 and sizes[4] < 1200  # a quarter of what came before, or first
    # Growing (to within a line, as pieces end at line ends), but for the last.
    assert all(later > earlier - 110 for earlier, later in zip(sizes, sizes[1:-1]))
    assert 20_000 <= max(sizes) < 20_200  # up to the size (and the rest of a line)
    assert pieces[0][0] == 0 and all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))


@pytest.mark.parametrize(("size", "first"), [(0, None), (100, 0), (100, -5)])
def test_pieces_of_no_bytes_are_refused(tmp_path: Path, size: int, first: int | None) -> None:
    source = tmp_path / "a.jsonl"
    source.write_bytes(b"{}\n" * 10)
    with jsonio.open_input(str(source)) as stream, pytest.raises(ValueError):
        list(jsonio.chunks(stream, size, first))


def test_a_piece_is_read_from_the_file_that_was_cut_not_its_path_later(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_bytes(b'{"old": 1}\n{"old": 2}\n')
    with jsonio.open_input(str(source)) as stream:
        pieces = list(jsonio.chunks(stream, 4))
        replacement = tmp_path / "b.jsonl"
        replacement.write_bytes(b'{"new": 1}\n{"new": 2}\n')
        os.replace(replacement, source)
        raws = [r.raw for p in pieces for r in jsonio.read_chunk(stream.fileno(), *p)]
    assert raws == [b'{"old": 1}', b'{"old": 2}']


def test_an_unreadable_input_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(jsonio.InputError, match="cannot read"):
        jsonio.open_input(str(tmp_path / "missing.jsonl"))


@pytest.mark.parametrize("first_line_bytes", [10, 3 << 20])
def test_line_style_reads_past_a_long_first_line(tmp_path: Path, first_line_bytes: int) -> None:
    """The first line end decides, however long the line before it."""
    source = tmp_path / "a.jsonl"
    line = b'{"pad": "' + b"x" * first_line_bytes + b'"}'
    source.write_bytes(jsonio.BOM + line + b"\r\n" + b"{}\r\n")
    assert jsonio.line_style(str(source)) == (b"\r\n", True)
    source.write_bytes(line + b"\n")
    assert jsonio.line_style(str(source)) == (b"\n", False)
    source.write_bytes(line)  # one line, no end: the default
    assert jsonio.line_style(str(source)) == (b"\n", False)


def test_aborting_on_a_full_disk_still_removes_the_temporary_file(tmp_path: Path) -> None:
    class Full:
        def close(self) -> None:  # a flush of buffered bytes onto a full disk
            raise OSError(errno.ENOSPC, "No space left on device")

    writer = jsonio.AtomicWriter(str(tmp_path / "out.jsonl"))
    writer.write(b"{}\n")
    real = writer.stream
    writer.stream = Full()  # type: ignore[assignment]
    writer.abort()
    real.close()
    assert list(tmp_path.iterdir()) == []


def test_json_lines_with_a_broken_first_line_are_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "a.jsonl"
    source.write_bytes(b'{"messages": [\n{"messages": []}\n{"messages": []}\n')

    parse = jsonio.loads

    def no_whole_file(raw: bytes, path: str, line: int | None) -> Any:
        assert line is not None, "the file was parsed whole"
        return parse(raw, path, line)

    monkeypatch.setattr(jsonio, "loads", no_whole_file)
    shape, records, original = jsonio.read_records(str(source))
    assert shape == "jsonl" and original is None
    assert [r.line for r in records] == [1, 2, 3]


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        (b'[\n{"messages": []},\n{"messages": []}\n]\n', "array"),
        (b'[{"messages": []},\n {"messages": []}]\n', "array"),
        (b'{\n  "trajectory": [],\n  "history": []\n}\n', "object"),
        (b'{"id": "a", "messages": [\n{"role": "user", "content": "hi"}\n]}\n', "object"),
        (b'{"id": "a", "messages": [\n{"role": "user"},\n{"role": "user"}\n]}\n', "object"),
        (b'{"messages": []}\n', "jsonl"),
    ],
)
def test_arrays_and_spread_objects_are_still_read_whole(
    tmp_path: Path, text: bytes, shape: str
) -> None:
    source = tmp_path / "a.json"
    source.write_bytes(text)
    assert jsonio.read_records(str(source))[0] == shape


def test_a_deeper_recursion_limit_holds_until_the_last_thread_leaves() -> None:
    import sys
    import threading

    base = sys.getrecursionlimit()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def a() -> None:
        with jsonio.deeper_recursion(5000):
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with jsonio.deeper_recursion(4000):
            b_in.set()
            a_out.wait(5)
            seen["inside b after a left"] = sys.getrecursionlimit()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"inside b after a left": 4000}
    assert sys.getrecursionlimit() == base


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(b'{"a": NaN}', "NaN is not a JSON number (column 7)", id="nan"),
        pytest.param(
            b'{"a": [1, Infinity]}', "Infinity is not a JSON number (column 11)", id="inf"
        ),
        pytest.param(b'{"a": -Infinity}', "-Infinity is not a JSON number (column 8)", id="-inf"),
        pytest.param(
            b'{"a": 1e999}', "number 1e999 is too large for a double (column 7)", id="1e999"
        ),
        pytest.param(
            b'{"a": -' + b"9" * 400 + b"}",
            f"number -{'9' * 39}... (400 digits) is too large for a double (column 7)",
            id="big-int",
        ),
    ],
)
def test_numbers_json_does_not_allow_are_errors_naming_the_line(text: bytes, reason: str) -> None:
    with pytest.raises(jsonio.NumberError) as caught:
        jsonio.loads(text, "a.jsonl", 4)
    assert str(caught.value) == f"a.jsonl:4: {reason}"


def test_numbers_a_double_holds_are_read() -> None:
    big = b"1" + b"0" * 300  # within a double, beyond 64 bits: kept exact
    assert jsonio.loads(b'{"a": 1e308, "b": -1.5e-300, "c": ' + big + b"}", "a", 1) == {
        "a": 1e308,
        "b": -1.5e-300,
        "c": int(big),
    }
    assert jsonio.loads(b'{"s": "\\ud83d", "c": ' + big + b"}", "a", 1) == {
        "s": "\ud83d",  # what orjson refuses, read by the standard library
        "c": int(big),
    }


@pytest.mark.parametrize(
    "number", [12345678901234567890123, 18446744073709551616, -9999999999999999999, 2**64 - 1]
)
def test_integers_past_64_bits_are_kept_exact(tmp_path: Path, number: int) -> None:
    # orjson read them as floats: a system message's 12345678901234567890123 was
    # written back as 1.2345678901234568e+22, --in-place into the input too.
    assert jsonio.loads(f'{{"n": {number}, "s": "x"}}'.encode(), "a", 1) == {"n": number, "s": "x"}
    assert jsonio.loads(f'{{"n": {number}}}', "a", 1) == {"n": number}  # text too
    long = "word " * 3000
    record = {
        "messages": [
            {"role": "system", "content": "s", "cache_id": number},
            {"role": "user", "content": long},
            {"role": "assistant", "content": long},
            {"role": "user", "content": "q", "ts": number},
        ]
    }
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps(record) + "\n")
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "300", "-o", "-"])
    assert result.exit_code == 0, result.output
    [system, *_, last] = json.loads(result.stdout)["messages"]
    assert system["cache_id"] == number and last["ts"] == number
    assert type(system["cache_id"]) is int
    # written by the standard library then, non-ASCII still as UTF-8, as orjson writes it
    assert jsonio.dumps({"city": "München", "n": number}) == (
        f'{{"city":"München","n":{number}}}'.encode()
    )


def test_a_number_json_does_not_allow_in_an_array_file_names_its_line(tmp_path: Path) -> None:
    source = tmp_path / "a.json"
    source.write_bytes(b'[\n  {"messages": []},\n  {"x": NaN}\n]\n')
    with pytest.raises(jsonio.NumberError) as caught:
        jsonio.read_records(str(source))
    assert str(caught.value) == f"{source}:3: NaN is not a JSON number (column 9)"


@pytest.mark.parametrize("bad", [b"NaN", b"1e999"])
def test_a_bad_number_on_the_first_line_is_a_bad_line_like_any_other(
    tmp_path: Path, bad: bytes
) -> None:
    """A NaN on line 1 ended the run ('NaN is not a JSON number'), even with
    ``--on-error keep``, while the same line second was copied: the first line decides
    the file's shape, and it was read as a whole JSON text of a bad number."""
    good = b'{"messages": [{"role": "user", "content": "b"}]}\n'
    source = tmp_path / "runs.jsonl"
    source.write_bytes(
        b'{"messages": [{"role": "user", "content": "a"}], "x": ' + bad + b"}\n" + good
    )
    shape, _, _ = jsonio.read_records(str(source))
    assert shape == "jsonl"
    result = CliRunner().invoke(cli, ["compress", str(source), "--on-error", "keep", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert result.stdout.encode() == source.read_bytes()
    assert f"{source}:1: " in result.stderr and "(copied unchanged)" in result.stderr
    strict = CliRunner().invoke(cli, ["compress", str(source), "-o", "-"])
    assert strict.exit_code == 1 and f"Error: {source}:1: " in strict.stderr


def test_stdout_gets_all_of_the_output_or_none_of_it(capfdbinary: Any) -> None:
    with pytest.raises(RuntimeError), jsonio.AtomicWriter("-") as writer:
        writer.write(b"half\n")
        raise RuntimeError("a bad line later in the input")
    assert capfdbinary.readouterr().out == b""
    writer = jsonio.AtomicWriter("-")
    writer.write(b"x" * (jsonio.SPOOL_BYTES + 10))  # past memory, into a temporary file
    assert capfdbinary.readouterr().out == b""
    writer.commit()
    assert capfdbinary.readouterr().out == b"x" * (jsonio.SPOOL_BYTES + 10)


def test_temporary_files_of_a_killed_run_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = tmp_path / f".out.jsonl.ctxcli-{dead}-abc.tmp"
    live = tmp_path / f".out.jsonl.ctxcli-{os.getpid()}-abc.tmp"
    other = tmp_path / f".other.jsonl.ctxcli-{dead}-abc.tmp"
    for path in (stale, live, other):
        path.write_bytes(b"partial")
    with jsonio.AtomicWriter(str(tmp_path / "out.jsonl")) as writer:
        writer.write(b"{}\n")
        writer.commit()
    assert not stale.exists()
    assert live.exists() and other.exists()  # a running process's; another output's
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other.name, "out.jsonl"]
    )


def _dead_pid() -> int:
    """The id of a process that has ended."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_line_style_of_stdin_is_read_from_its_bytes() -> None:
    assert jsonio.line_style("-", jsonio.BOM + b'{"a": 1}\r\n{"b": 2}\r\n') == (b"\r\n", True)
    assert jsonio.line_style("-", b'{"a": 1}\n') == (b"\n", False)
    assert jsonio.line_style("-", b"") == (b"\n", False)


def test_a_broken_line_is_named_by_its_line_and_column_only(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text('{"messages": []}\n{"messages": [{"role": "user" "content": "hi"}]}\n')
    _, records, _ = jsonio.read_records(str(source))
    with pytest.raises(InputError) as caught:
        [record.parse(str(source)) for record in records]
    assert str(caught.value) == (
        f"{source}:2: invalid JSON: unexpected character, expected ',' or '}}': column 31"
    )


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    """``-o link.jsonl`` replaced the link with a plain file (``--in-place`` writes
    through links), and its temporary file, beside the link's target, was renamed
    over a link in another folder."""
    (tmp_path / "data").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "data" / "out.jsonl"
    target.write_text("old\n")
    link = tmp_path / "links" / "out.jsonl"
    link.symlink_to(target)
    with jsonio.AtomicWriter(str(link)) as writer:
        writer.write(b"new\n")
        writer.commit()
    assert link.is_symlink() and target.read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["out.jsonl"]


def test_a_symlink_loop_as_the_output_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "l2.jsonl").symlink_to("l1.jsonl")
    (tmp_path / "l1.jsonl").symlink_to("l2.jsonl")
    with pytest.raises(OutputError, match="l1.jsonl: cannot write: Too many levels of symbolic"):
        jsonio.AtomicWriter(str(tmp_path / "l1.jsonl"))
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    result = CliRunner().invoke(cli, ["compress", str(source), "-o", str(tmp_path / "l1.jsonl")])
    assert result.exit_code == 1 and result.exception is not None
    assert "Too many levels of symbolic links" in result.output
    assert isinstance(result.exception, SystemExit)


def test_a_broken_object_spread_over_lines_is_named_where_it_breaks(tmp_path: Path) -> None:
    # Read as JSON lines after all, it was "line 1: unexpected end of data", and
    # validate listed every line of the file (3,316 for a SWE-agent .traj).
    source = tmp_path / "run.traj"
    source.write_text('{\n  "history": [\n    {"role": "user", content": "hi"}\n  ]\n}\n')
    with pytest.raises(InputError) as caught:
        jsonio.read_records(str(source))
    assert str(caught.value).startswith(f"{source}:3: invalid JSON: ")
    assert str(caught.value).endswith("column 22")  # where content" starts
    result = CliRunner().invoke(cli, ["validate", str(source)])
    assert result.exit_code == 1 and result.output.count(str(source)) == 1
    # JSON lines whose first line is broken stay JSON lines, named line by line
    lines = tmp_path / "a.jsonl"
    lines.write_text('{"messages": [\n{"messages": []}\n')
    assert jsonio.read_records(str(lines))[0] == "jsonl"
    result = CliRunner().invoke(cli, ["validate", str(lines)])
    assert result.exit_code == 1 and f"{lines}:1: invalid JSON" in result.output


def test_a_summary_folds_call_arguments_with_integers_past_64_bits(tmp_path: Path) -> None:
    # Read exact, they reached orjson.dumps in the summary ("Integer exceeds 64-bit
    # range"): the summary stage fell back, a "ctxcli bug", and wrote no summary.
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for n in range(6):
        call = {"id": f"c{n}", "type": "function"}
        call["function"] = {"name": "f", "arguments": {"n": 12345678901234567890123}}
        messages += [
            {"role": "user", "content": f"task {n} " + "word " * 150},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "res " * 150},
        ]
    messages.append({"role": "user", "content": "final"})
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps({"messages": messages}) + "\n")
    result = CliRunner().invoke(cli, ["compress", str(source), "--max-tokens", "800", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert "broke a rule" not in result.stderr
    assert "[ctxcli summary]" in result.stdout and "12345678901234567890123" in result.stdout


@pytest.mark.parametrize(
    "head",
    [
        '{"messages": [{"role": "user", "content": "hello\nworld"}]}\n',
        '{"messages": [{"role": "user", "content": "a\nb\nc"}]}\n',  # pasted lines
        '{"messages": [{"role": "user", "content": "a\nb"}]}\n{"messages": "c\nd"}\n',
    ],
)
def test_json_lines_whose_first_record_a_line_end_split_stay_json_lines(
    tmp_path: Path, head: str
) -> None:
    # 0e960fd took them for one object spread over lines: the whole file failed,
    # --on-error keep too, where each bad line had been named and the rest written.
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    source = tmp_path / "a.jsonl"
    source.write_text(head + f"{good}\n" * 5)
    result = CliRunner().invoke(cli, ["compress", str(source), "--on-error", "keep", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert result.stdout.count(good) == 5
    assert f"{source}:1: " in result.stderr and f"{source}:2: " in result.stderr


def test_bad_utf8_in_an_object_spread_over_lines_is_named_at_its_line(tmp_path: Path) -> None:
    source = tmp_path / "run.traj"
    source.write_bytes(b'{\n  "history": [\n    {"role": "user", "content": "h\xffi"}\n  ]\n}\n')
    with pytest.raises(InputError) as caught:
        jsonio.read_records(str(source))
    assert str(caught.value) == f"{source}:3: not valid UTF-8 (at byte 35 of the line)"
