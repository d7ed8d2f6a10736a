"""Run a function over a stream on a pool of threads, in order, with bounded memory."""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(
    func: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int,
    window: int | None = None,
    processes: bool = False,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[R]:
    """Yield ``func(item)`` for each item, in the order of ``items``.

    At most ``workers`` calls run at once, and at most ``window`` items (default
    ``2 * workers``) are taken from ``items`` ahead of the result last yielded, so
    memory stays bounded however long the stream is. ``items`` is read on the calling
    thread only. With ``workers`` 1 no thread is started.

    With ``processes`` the calls run in forked worker processes (``func`` must be a
    module-level function; items and results are pickled), each first running
    ``initializer(*initargs)``; forking shares what this process already loaded, such
    as a tokenizer, at no cost.

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
    pool: Executor
    if processes:
        context = multiprocessing.get_context("fork")
        pool = ProcessPoolExecutor(workers, context, initializer, initargs)
    else:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ctxcli")
    with pool:
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
