"""``process_map``: forked workers, input order, bounded read-ahead, errors, news."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxcli import memo
from ctxcli.errors import WorkerError
from ctxcli.parallel import TASKS_IN_HAND, RemoteTraceback, process_map

_KNOWN: set[int] = set()


def _square(item: int) -> int:
    return item * item


def _fail_at_five(item: int) -> int:
    if item == 5:
        raise KeyError(item)
    return item


def _die_at_three(item: int) -> int:
    if item == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return item


def _unpicklable(item: int) -> Any:
    return lambda: item


class _UnpicklesBadly:
    """Pickles in a worker, fails to unpickle in the parent."""

    def __reduce__(self) -> tuple[Any, ...]:
        return int, ("not a number",)


def _unreadable(item: int) -> Any:
    return _UnpicklesBadly() if item == 1 else item


def _breaks_its_sender(item: int) -> int:
    if item == 1:
        from multiprocessing.connection import Connection

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("the sender broke")

        Connection.send_bytes = broken  # type: ignore[method-assign]  # in this worker only
    return item


def _remember(item: int) -> tuple[int, int, list[int]]:
    """(item, pid, items this worker knew of before) and it now knows ``item``."""
    before = sorted(_KNOWN)
    _KNOWN.add(item)
    return item, os.getpid(), before


def _learn(found: int) -> None:
    _KNOWN.add(found)


def test_results_come_in_input_order_from_several_processes() -> None:
    results = list(process_map(_square, range(50), workers=2))
    assert results == [i * i for i in range(50)]
    assert list(process_map(_square, [], workers=2)) == []


def test_items_are_read_only_a_bounded_window_ahead() -> None:
    taken: list[int] = []

    def items() -> Iterator[int]:
        for i in range(40):
            taken.append(i)
            yield i

    for i, value in enumerate(process_map(_square, items(), workers=2, window=4)):
        assert value == i * i
        assert len(taken) <= i + 1 + 4


def test_an_error_is_raised_at_its_items_position() -> None:
    seen = []
    with pytest.raises(KeyError):
        for value in process_map(_fail_at_five, range(20), workers=2):
            seen.append(value)
    assert seen == [0, 1, 2, 3, 4]


_PARENT = os.getpid()


class _OnlyHere:
    """An item that cannot be rebuilt in a worker process."""

    def __reduce__(self) -> Any:
        return (_rebuild, ())


def _rebuild() -> _OnlyHere:
    if os.getpid() != _PARENT:
        raise ValueError("cannot rebuild here")
    return _OnlyHere()


def _worker_error(func: Any, items: list[Any], seconds: float = 30) -> str:
    """What :class:`WorkerError` ``process_map(func, items)`` raises on two workers
    within ``seconds`` (``""``: none, or it hung), run on a thread a hang cannot hold."""
    import threading

    outcome: list[WorkerError] = []

    def run() -> None:
        try:
            list(process_map(func, items, workers=2))
        except WorkerError as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(seconds)
    return str(outcome[0]) if outcome else ""


def test_a_task_a_worker_cannot_read_is_an_error_not_a_hang() -> None:
    assert "cannot read its task" in _worker_error(_square_or_same, [1, 2, _OnlyHere(), 4])


def _square_or_same(item: Any) -> Any:
    return item * item if isinstance(item, int) else item


def _inner(item: int) -> int:
    return {}[item]  # type: ignore[no-any-return]


def _buggy(item: int) -> int:
    return _inner(item)


def test_a_bug_in_a_worker_comes_with_the_workers_traceback() -> None:
    with pytest.raises(KeyError) as caught:
        list(process_map(_buggy, range(3), workers=2))
    cause = caught.value.__cause__
    assert isinstance(cause, RemoteTraceback) and "in _inner" in str(cause)


def test_a_killed_worker_is_named_not_waited_for() -> None:
    with pytest.raises(WorkerError, match="killed by SIGKILL"):
        list(process_map(_die_at_three, range(20), workers=2))


def test_a_result_that_cannot_be_sent_back_is_an_error() -> None:
    with pytest.raises(WorkerError, match="cannot be sent back"):
        list(process_map(_unpicklable, range(3), workers=2))


def test_a_result_that_cannot_be_read_back_is_an_error() -> None:
    with pytest.raises(WorkerError, match="cannot be read back"):
        list(process_map(_unreadable, range(3), workers=2))


def test_a_worker_whose_answers_cannot_be_written_ends_and_is_named() -> None:
    """Not a hang: the worker ends, and the parent says so."""
    assert "ended unexpectedly" in _worker_error(_breaks_its_sender, list(range(6)))


def test_news_of_one_worker_reaches_the_others_before_their_next_item() -> None:
    results = list(
        process_map(_remember, range(30), workers=2, news=lambda result: result[0], learn=_learn)
    )
    assert len({pid for _, pid, _ in results}) == 2
    done_by = {item: pid for item, pid, _ in results}
    for item, _, before in results:
        # Unknown can be only what the other worker held when this item was started,
        # or had just finished.
        assert len(set(range(item)) - set(before)) <= 2 * TASKS_IN_HAND, (item, before)
    item, pid, before = results[-1]
    assert any(done_by[i] != pid for i in before)


def _big(item: int) -> tuple[int, bytes, bytes]:
    return item, bytes(1 << 20), bytes(1 << 20)


def test_large_results_and_large_news_do_not_block_each_other() -> None:
    """Pipes hold far less than a megabyte: a parent that waited to send news to a
    worker that waits to send its result would hang."""
    import threading

    got: list[int] = []

    def run() -> None:
        for item, _, _ in process_map(
            _big, range(24), workers=3, news=lambda result: result[2], learn=len
        ):
            got.append(item)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(60)
    assert got == list(range(24))


def _big_or_mark(item: tuple[str, str]) -> bytes:
    kind, path = item
    if kind == "big":
        return bytes(8 << 20)
    Path(path).write_text("started")
    return b""


def test_a_worker_goes_on_while_its_last_answer_waits_to_be_read(tmp_path: Path) -> None:
    """A worker whose large answer the parent has not read yet (busy with another
    worker's) still starts its next item."""
    from ctxcli import parallel

    marker = tmp_path / "second item started"
    context = multiprocessing.get_context("fork")
    mine, theirs = context.Pipe()
    worker = context.Process(
        target=parallel._serve, args=(theirs, [mine], _big_or_mark, None, (), None), daemon=True
    )
    worker.start()
    theirs.close()
    try:
        mine.send((parallel._ITEM, ("big", "")))
        mine.send((parallel._ITEM, ("mark", str(marker))))
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists()  # the first answer, 8 MB, is not read yet
        assert mine.recv() == (True, bytes(8 << 20))
        assert mine.recv() == (True, b"")
    finally:
        mine.send(None)
        mine.close()
        worker.join(10)
    assert worker.exitcode == 0


def _slow_after_first(item: int) -> int:
    if item:
        time.sleep(30)
    return item


def test_stopping_early_stops_the_workers_at_once() -> None:
    results = process_map(_slow_after_first, range(100), workers=2)
    assert next(results) == 0
    started = time.monotonic()
    results.close()
    assert time.monotonic() - started < 5
    assert multiprocessing.active_children() == []


def test_workers_must_be_one_or_more() -> None:
    with pytest.raises(ValueError):
        list(process_map(_square, range(3), workers=0))


# --- memos shared between workers -----------------------------------------------------


def test_a_memo_shares_only_what_it_computed_since_the_last_news() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text.split())

    long_text = "word " * memo.SHARED_MIN_CHARS
    mine = memo.TextMemo(count, share_as="test words")
    try:
        memo.track()
        mine("short text")  # computing it again costs what passing it on would
        assert mine(long_text) == memo.SHARED_MIN_CHARS
        news = memo.fresh()
        assert list(news) == ["test words"] and len(news["test words"]) == 1
        assert memo.fresh() == {}  # each result is news once
        # Another process takes it in and does not compute the text again.
        theirs = memo.TextMemo(count, share_as="test words")
        memo.learn(news)
        memo.learn({"a memo this process does not have": {(1, 2): 3}})
        assert theirs(long_text) == memo.SHARED_MIN_CHARS
        assert calls == ["short text", long_text]
        # The later memo of the name took it; share() gives it back to the first.
        assert memo._SHARED["test words"] is theirs
        memo.share(mine)
        assert memo._SHARED["test words"] is mine
    finally:
        memo._SHARED.pop("test words", None)
        for shared in memo._SHARED.values():
            shared._fresh = None


def test_a_memo_made_to_share_from_zero_shares_short_texts() -> None:
    costly = memo.TextMemo(str.upper, share_as="test upper", share_from=0)
    try:
        memo.track()
        costly("hi")
        assert memo.fresh() == {"test upper": {(hash("hi"), 2): "HI"}}
    finally:
        memo._SHARED.pop("test upper", None)
        for shared in memo._SHARED.values():
            shared._fresh = None


# --- how many workers by default --------------------------------------------------------


def test_default_workers_follow_affinity_and_a_cgroup_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxcli import pool

    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(pool, "CGROUP_CPU_MAX", tmp_path / "cpu.max")
    assert pool.usable_cpus() == 4  # no cgroup file
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert pool.usable_cpus() == 4
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # docker --cpus 1.5
    assert pool.usable_cpus() == 2
    (tmp_path / "cpu.max").write_text("20000 100000\n")
    assert pool.usable_cpus() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {3}, raising=False)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert pool.usable_cpus() == 1


def test_default_workers_follow_a_cgroup_v1_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxcli import pool

    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(pool, "CGROUP_CPU_MAX", tmp_path / "no cgroup v2" / "cpu.max")
    monkeypatch.setattr(pool, "CGROUP_V1_CPU", tmp_path)
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")  # no quota
    assert pool.usable_cpus() == 4
    (tmp_path / "cpu.cfs_quota_us").write_text("250000\n")  # docker --cpus 2.5
    assert pool.usable_cpus() == 3
    (tmp_path / "cpu.cfs_period_us").write_text("0\n")  # nonsense: no quota
    assert pool.usable_cpus() == 4


@pytest.mark.parametrize("lines", [1, 400, 2_300, 12_000])
def test_no_more_workers_start_than_the_file_has_pieces(tmp_path: Path, lines: int) -> None:
    from ctxcli import jsonio, pool

    source = tmp_path / "a.jsonl"
    source.write_bytes(b'{"pad": "%s"}\n' % (b"x" * 1000) * lines)
    with jsonio.open_input(str(source)) as stream:
        expected = pool._pieces_in(stream)
        assert expected == len(list(jsonio.chunks(stream, *pool._piece_sizes())))


def test_a_signal_at_a_workers_birth_does_not_run_the_parents_handler_there() -> None:
    """A worker stopped (SIGTERM) the moment it is forked dies of the signal; it does
    not run the parent's handler, whose SystemExit would unwind the parent's code in
    the worker. Run apart, so that a failure cannot unwind this test session."""
    import subprocess
    import sys

    script = (
        "import os, signal\n"
        "from ctxcli.errors import WorkerError\n"
        "from ctxcli.parallel import process_map\n"
        "def stop(signum, frame):\n"
        "    raise SystemExit(128 + signum)\n"
        "signal.signal(signal.SIGTERM, stop)  # as ctxcli's CLI does\n"
        "os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
        "try:\n"
        "    list(process_map(abs, range(3), workers=1))\n"
        "except WorkerError as exc:\n"
        "    print(os.getpid(), exc)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    printed = run.stdout.split("\n", 1)[0].split(" ", 1)
    assert run.stdout.count("\n") == 1, run.stdout + run.stderr  # from the parent alone
    assert printed[1] == "a worker process was killed by SIGTERM", run.stdout + run.stderr


def test_workers_that_cannot_start_are_a_clear_error_and_leave_none_running() -> None:
    import subprocess
    import sys

    script = (
        "import multiprocessing, resource\n"
        "from ctxcli.parallel import process_map\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))\n"
        "try:\n"
        "    list(process_map(abs, range(10), workers=30))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "print(len(multiprocessing.active_children()))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.stderr == ""
    error, alive = run.stdout.splitlines()
    assert error.startswith("WorkerError cannot start worker process ")
    assert "Too many open files" in error and alive == "0"


def test_merged_stats_keep_a_pieces_out_of_context_count() -> None:
    # --engine ray wrote a Claude Code session's stats without "out_of_context": 143,
    # which the local run writes: merge() left the count behind.
    from ctxcli.stats import FileStats

    def stats() -> FileStats:
        return FileStats(
            input="s.jsonl", output="o.jsonl", encoding="o200k_base", max_tokens=9, stages=[]
        )

    whole, piece = stats(), stats()
    piece.out_of_context = 143
    whole.merge(piece)
    assert whole.to_json()["out_of_context"] == 143
