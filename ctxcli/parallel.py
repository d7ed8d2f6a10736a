"""Run a function over a stream, in order and with bounded memory: on a pool of threads
(:func:`ordered_map`) or of forked worker processes (:func:`process_map`)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any, TypeVar

from ctxcli import jsonio
from ctxcli.errors import CtxcliError, WorkerError

T = TypeVar("T")
R = TypeVar("R")

#: Tasks each worker process holds at once: one at work, one waiting, so that a
#: worker never waits for the parent between tasks.
TASKS_IN_HAND = 2


def ordered_map(
    func: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int,
    window: int | None = None,
) -> Iterator[R]:
    """Yield ``func(item)`` for each item, in the order of ``items``.

    At most ``workers`` calls run at once, on threads, and at most ``window`` items
    (default ``2 * workers``) are taken from ``items`` ahead of the result last yielded,
    so memory stays bounded however long the stream is. ``items`` is read on the
    calling thread only. With ``workers`` 1 no thread is started.

    An exception raised by ``func`` is raised here, at its item's position; items
    not yet started are then cancelled. Raises ``ValueError`` for ``workers`` or
    ``window`` below 1.
    """
    if workers < 1 or (window is not None and window < 1):
        raise ValueError("workers and window must be 1 or more")
    if workers == 1:
        yield from map(func, items)
        return
    window = max(window or 2 * workers, workers)
    pending: deque[Future[R]] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ctxcli") as pool:
        try:
            for item in items:
                pending.append(pool.submit(func, item))
                if len(pending) >= window:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            # Reached on an error or when the consumer stops early: started calls
            # finish, the rest are dropped.
            for future in pending:
                future.cancel()


def process_map(
    func: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    news: Callable[[R], Any] | None = None,
    learn: Callable[[Any], object] | None = None,
    window: int | None = None,
) -> Iterator[R]:
    """Yield ``func(item)`` for each item, in the order of ``items``, computed by
    ``workers`` forked worker processes.

    Forking shares what this process already loaded (a tokenizer) at no cost; each
    worker first runs ``initializer(*initargs)``. ``func`` must be a module-level
    function, and items and results picklable. Each worker holds
    :data:`TASKS_IN_HAND` items at a time and gets the next one as soon as it returns
    a result; at most ``window`` items (default ``4 * workers``, and never fewer than
    the workers hold) are taken from ``items`` ahead of the result last yielded, so
    memory stays bounded.

    Workers may share what they learn: ``news(result)`` (here) takes it out of a
    result (``None`` for nothing), it is sent at once to every other worker, and each
    runs ``learn(news)`` with all the news it has received before it starts an item.

    An exception raised by ``func`` is raised here at its item's position; the workers
    are then stopped, as they are when the consumer stops early. Raises
    :class:`WorkerError` when a worker process cannot start (too many open files or
    processes) or dies (killed, out of memory), or a result cannot be passed back, and
    ``ValueError`` for ``workers`` below 1. An exception other than a
    :class:`ctxcli.errors.CtxcliError` comes with the worker's traceback as its cause
    (:class:`RemoteTraceback`). A worker ends by itself once this process is gone.

    No send here waits on a worker at work: each worker reads its pipe on a thread of
    its own, so a large result and a large piece of news cannot block each other. A
    worker writes its results from another thread, so it starts its next item without
    waiting for this process to read the last.
    """
    if workers < 1:
        raise ValueError("workers must be 1 or more")
    window = max(window or 4 * workers, workers * TASKS_IN_HAND)
    ends, processes = _start(workers, (func, initializer, initargs, learn))
    pool = _Pool(ends, processes, iter(items), window, news)
    try:
        yield from pool.results()
    finally:
        pool.stop()


def _start(
    workers: int, work: tuple[Callable[[Any], Any], Any, tuple[Any, ...], Any]
) -> tuple[list[Connection], list[Any]]:
    """Fork ``workers`` worker processes serving ``work`` (``func``, ``initializer``,
    ``initargs``, ``learn``: see :func:`_serve`); their pipes' ends here and the
    processes. Raises :class:`WorkerError` when one cannot start, once the started
    ones are stopped."""
    context = multiprocessing.get_context("fork")
    ends: list[Connection] = []
    processes: list[Any] = []
    for started in range(workers):
        try:
            mine, theirs = context.Pipe()
            process = context.Process(
                target=_serve, args=(theirs, [*ends, mine], *work), daemon=True
            )
            with _signals_held():
                process.start()
        except OSError as exc:  # too many open files or processes
            for end in ends:
                end.close()  # a started worker sees its pipe close and ends
            for process in processes:
                process.join()
            raise WorkerError(
                f"cannot start worker process {started + 1} of {workers}: "
                f"{exc.strerror or exc} (fewer workers may start)"
            ) from None
        theirs.close()
        ends.append(mine)
        processes.append(process)
    return ends, processes


class _Pool:
    """One :func:`process_map` run over started workers: what each holds (``in_hand``,
    item indexes), the results come back early (``done``), and how far ``source`` has
    been taken (``taken``) and yielded (``yielded``)."""

    def __init__(
        self,
        ends: list[Connection],
        processes: list[Any],
        source: Iterator[Any],
        window: int,
        news: Callable[[Any], Any] | None,
    ) -> None:
        self.ends, self.processes, self.source = ends, processes, source
        self.window, self.news = window, news
        self.taken = self.yielded = 0
        self.exhausted = False
        self.in_hand: list[deque[int]] = [deque() for _ in ends]
        self.done: dict[int, tuple[bool, Any]] = {}

    def results(self) -> Iterator[Any]:
        """The results in item order; raises an item's error at its position."""
        while True:
            for depth in range(TASKS_IN_HAND):  # round by round: pieces end near in order
                for w in range(len(self.ends)):
                    if len(self.in_hand[w]) <= depth:
                        self._give(w)
            busy = [self.ends[w] for w in range(len(self.ends)) if self.in_hand[w]]
            if not busy:
                return
            for ready in wait(busy):
                self._receive(self.ends.index(ready))  # type: ignore[arg-type]
            while self.yielded in self.done:
                ok, value = self.done.pop(self.yielded)
                self.yielded += 1
                if not ok:
                    error, where = value
                    if where:  # not one of ctxcli's own errors: show where it arose
                        raise error from RemoteTraceback(where)
                    raise error
                yield value

    def _give(self, w: int) -> None:
        """Send worker ``w`` the next item, unless none is left or the window is full."""
        if self.exhausted or self.taken - self.yielded >= self.window:
            return
        try:
            item = next(self.source)
        except StopIteration:
            self.exhausted = True
            return
        self._tell(w, ForkingPickler.dumps((_ITEM, item)))
        self.in_hand[w].append(self.taken)
        self.taken += 1

    def _receive(self, w: int) -> None:
        """Take worker ``w``'s next result, and pass on its news to the others."""
        try:
            ok, value = self.ends[w].recv()
        except (EOFError, OSError):
            raise self._lost(w) from None
        except Exception as exc:  # it pickled there but does not unpickle here
            raise WorkerError(f"a worker's result cannot be read back: {exc!r}") from None
        self.done[self.in_hand[w].popleft()] = (ok, value)
        found = self.news(value) if ok and self.news is not None else None
        if found is not None and len(self.ends) > 1:
            message = ForkingPickler.dumps((_NEWS, found))  # once for all
            for other in range(len(self.ends)):
                if other != w:
                    self._tell(other, message)

    def _tell(self, w: int, message: bytes | memoryview) -> None:
        try:
            self.ends[w].send_bytes(message)
        except OSError:
            raise self._lost(w) from None

    def _lost(self, w: int) -> WorkerError:
        self.processes[w].join(1)
        return WorkerError(_death(self.processes[w].exitcode))

    def stop(self) -> None:
        """Stop the workers: reached at the end, on an error, or when the consumer
        stops early (a worker with items in hand is terminated: its work is not
        wanted)."""
        for w, end in enumerate(self.ends):
            if self.in_hand[w]:
                self.processes[w].terminate()
            else:
                with contextlib.suppress(OSError):
                    end.send(None)
            end.close()
        for process in self.processes:
            process.join()


#: Signals held while a worker is forked, until it has set its own handlers: a forked
#: process first runs the parent's, and one that raises (Ctrl-C's KeyboardInterrupt,
#: the CLI's SystemExit on SIGTERM) would unwind the parent's code in the worker, as
#: if it were the parent.
_HELD = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Block :data:`_HELD` in this thread (and so in a process forked here) for the
    block's duration; signals that come meanwhile wait, none is lost."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


#: Kinds of message to a worker of :func:`process_map` (``None``: stop); ``_BROKEN``
#: is the worker's own note that a message could not be read.
_ITEM, _NEWS, _BROKEN = 0, 1, 2


def _serve(
    end: Connection,
    others: list[Connection],
    func: Callable[[Any], Any],
    initializer: Callable[..., object] | None,
    initargs: tuple[Any, ...],
    learn: Callable[[Any], object] | None,
) -> None:
    """A worker process of :func:`process_map`: run items from ``end`` until told to
    stop (``None``) or the parent is gone (its end of the pipe closes). A thread reads
    the pipe into ``inbox`` as messages come, so the parent's sends never wait; another
    writes the answers from ``outbox``, so the worker starts its next item without
    waiting for the parent to read the last one."""
    for other in others:
        other.close()  # the parent's ends: only the parent may hold them, or no worker
        # would see its pipe close when the parent is gone
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent stops a worker with it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)  # held since the fork (see below)
    if initializer is not None:
        initializer(*initargs)
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_read_into, args=(end, inbox), name="ctxcli-inbox", daemon=True).start()
    outbox: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
    sender = threading.Thread(
        target=_write_from, args=(end, outbox), name="ctxcli-outbox", daemon=True
    )
    sender.start()
    try:
        _work(inbox, outbox, func, learn)
    finally:
        outbox.put(None)
        sender.join()  # all answers written


def _read_into(end: Connection, inbox: queue.SimpleQueue[Any]) -> None:
    """A worker's reading thread: each message from the parent into ``inbox``."""
    try:
        while True:
            message = end.recv()
            inbox.put(message)
            if message is None:
                return
    except (EOFError, OSError):
        # The parent is gone (killed, say): nobody wants the work in hand.
        os._exit(1)
    except BaseException as exc:  # a message that cannot be read: say so, and stop
        inbox.put((_BROKEN, exc))


def _write_from(end: Connection, outbox: queue.SimpleQueue[memoryview | None]) -> None:
    """A worker's writing thread: the answers of ``outbox`` to the parent, so that the
    worker goes on with its next item while the parent, busy with another worker's
    answer, has yet to read this one."""
    while (answer := outbox.get()) is not None:
        try:
            end.send_bytes(answer)
        except BaseException:
            # The parent is gone (OSError), or this answer cannot be written: end the
            # worker, which the parent reports, rather than leave it waiting.
            os._exit(1)


def _work(
    inbox: queue.SimpleQueue[Any],
    outbox: queue.SimpleQueue[memoryview | None],
    func: Callable[[Any], Any],
    learn: Callable[[Any], object] | None,
) -> None:
    """A worker's loop: run the items of ``inbox`` (learning its news first) until
    told to stop, each answer into ``outbox``."""
    items: deque[Any] = deque()
    while True:
        # Take in all that has come; wait only while there is no item to work on.
        while True:
            try:
                message = inbox.get(block=not items)
            except queue.Empty:
                break
            if message is None:
                return
            kind, body = message
            if kind == _ITEM:
                items.append(body)
            elif kind == _BROKEN:
                failed = WorkerError(f"a worker cannot read its task: {body!r}")
                outbox.put(_pickled(_failure(failed)))
                return
            elif learn is not None:
                learn(body)
        try:
            answer: tuple[bool, Any] = (True, func(items.popleft()))
        except Exception as exc:
            answer = _failure(exc)
        outbox.put(_pickled(answer))
        del answer  # the pickled copy is all that is needed now


def _failure(exc: BaseException) -> tuple[bool, Any]:
    """A failed item's answer: the exception, and where it arose unless it is one of
    ctxcli's own errors (those say what is wrong themselves)."""
    where = "" if isinstance(exc, CtxcliError) else "".join(traceback.format_exception(exc))
    return False, (exc, where)


def _pickled(answer: tuple[bool, Any]) -> memoryview:
    """``answer`` pickled for the parent, as deep as one process reads and writes; an
    answer that does not pickle gives a failure that says so instead."""
    try:
        with jsonio.deeper_recursion(jsonio.DEEP_RECURSION_LIMIT):
            return ForkingPickler.dumps(answer)
    except Exception as exc:  # an exception or result that does not pickle
        failed = WorkerError(f"a worker's result cannot be sent back: {exc!r}")
        return ForkingPickler.dumps(_failure(failed))


class RemoteTraceback(Exception):
    """Where an exception arose in a worker process: the cause of the same exception
    raised again in the parent, so that a bug's traceback shows both."""

    def __init__(self, text: str) -> None:
        super().__init__(text)

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


def _death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"a worker process was killed by {name}{hint}"
    return f"a worker process ended unexpectedly (exit code {code})"
