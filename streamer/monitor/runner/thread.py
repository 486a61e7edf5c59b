"""The core in a worker thread of this process (small workflows, one core): the parse pool every workflow of
the process shares, and `ThreadRunner`."""

from __future__ import annotations

import itertools
import os
import queue
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from streamer.monitor.runner.core import MonitorCore, Step

if TYPE_CHECKING:
    from concurrent.futures import Future

PARSE_THREADS = max(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
"""Threads that run `ThreadRunner` steps, shared by every workflow of the process (serve follows
hundreds): more would only queue for the GIL, and the event loop thread with them (a few, not one per
core: a step may wait on the disk, appending to jobstate.log while others fsync). First come,
first served, live workflows first: a workflow with a big piece to parse delays the others by one
step, not more, and a step of a workflow that had caught up with its logs (a piece just appended)
goes ahead of the steps of workflows still reading a backlog (serve restarted beside live ones)."""
LIVE, BACKLOG = 0, 1
"""Priorities of a step in the parse pool."""


class _ParsePool:
    """`PARSE_THREADS` threads taking steps by priority, then in the order asked (started on the first step;
    `concurrent.futures` is imported then too: the parsing child, which never takes one, does without it)."""

    def __init__(self, threads: int) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, Future[Any], Any, tuple[Any, ...]]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = threads
        self._started = False
        self._lock = threading.Lock()

    def submit(self, priority: int, fn: Any, *args: Any) -> Future[Any]:
        from concurrent.futures import Future

        with self._lock:
            if not self._started:  # all at once: later steps never wait for a thread to start
                for i in range(self._threads):
                    threading.Thread(target=self._work, name=f"streamer-parse_{i}", daemon=True).start()
                self._started = True
        future: Future[Any] = Future()
        self._queue.put((priority, next(self._order), future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            _, _, future, fn, args = self._queue.get()
            if not future.set_running_or_notify_cancel():  # its awaiting task was cancelled
                continue
            try:
                result = fn(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


_parse_pool = _ParsePool(PARSE_THREADS)


def _in_parse_thread(priority: int, fn: Any, *args: Any) -> Awaitable[Any]:
    """`fn(*args)` in the shared parse pool (threads are not tied to a loop)."""
    import asyncio

    return asyncio.wrap_future(_parse_pool.submit(priority, fn, *args))


async def to_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`asyncio.to_thread`. The parent side alone imports asyncio: the parsing child never needs it
    (like `concurrent.futures`, ~40 ms of its start-up)."""
    import asyncio

    return await asyncio.to_thread(fn, *args, **kwargs)


class ThreadRunner:
    """The core in a worker thread of this process (small workflows, one core)."""

    kind = "thread"

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.core: MonitorCore | None = None
        self.live = False
        """The last step reached the end of every log: the next one parses what was just appended."""

    async def open(self) -> None:
        self.core = await to_thread(MonitorCore, **self.options)

    async def step(self, final: bool) -> Step:
        assert self.core is not None
        step: Step = await _in_parse_thread(LIVE if self.live else BACKLOG, self.core.step, final)
        self.live = step.at_eof
        return step

    async def finish(self) -> Step:
        assert self.core is not None
        return await _in_parse_thread(LIVE, self.core.finish)

    async def close(self) -> None:
        if self.core is not None:
            await to_thread(self.core.close)
