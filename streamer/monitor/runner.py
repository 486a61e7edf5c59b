"""Where the monitor's parsing runs: a worker thread, or a child process on a second core.

The `Tracker` (dagman.out lines, .sub/.out/.err files, the engine) is
synchronous CPU work. In a thread it shares the GIL with the event loop, so a
replay does parsing and encoding/publishing on one core, one after the other.
In a child process the two overlap: the child parses step k+1 while the
parent types, encodes and delivers step k. Events cross as raw
`(name, fields, dagman_out, line)` tuples, typed in the parent (which has
cycles to spare), the checkpoint position as the tracker's JSON state.

`MonitorCore` is the same in both: it owns the tracker and takes a
checkpoint snapshot after every step (or at most once per `snapshot_interval`
seconds when one is given, and always at the end of its input), static.bp
events included, so a crash repeats at most the step in flight. A snapshot
holds only the jobs changed since the previous one (`snapshot.SnapshotDiff`);
`step()` joins them back into the full state at once (`snapshot.SnapshotJoin`),
the child's `step_raw()` leaves that to the `ProcessRunner` in the parent: the
source always sees (and saves) whole states.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from streamer.monitor.snapshot import SnapshotDiff, SnapshotJoin
from streamer.monitor.tracker import Tracker
from streamer.monitor.engine.events import type_raw
from streamer.monitor.engineopts import DEFAULT, EngineOptions

if TYPE_CHECKING:
    from concurrent.futures import Future

log = logging.getLogger("streamer.monitor")

SNAPSHOT_BUDGET = 4.0
"""A snapshot is taken once the time since the last is this many times what that one cost."""
SNAPSHOT_INTERVAL = 0.0
"""Seconds between checkpoint snapshots while the monitor is busy (0: after every step, so a crash
repeats at most one step's events; a snapshot of a step costs far less than the step)."""


@dataclass
class Step:
    """What one tracker step produced."""

    events: list[Any]
    position: dict[str, Any] | None
    done: int = 0
    total: int = 0
    warnings: list[str] = field(default_factory=list)
    at_eof: bool = False
    finished: bool = False
    dropped: dict[str, int] = field(default_factory=dict)
    """Inputs left out in this step, by reason (`Tracker.dropped`)."""


class MonitorCore:
    """The tracker plus the checkpoint-snapshot policy (runs in the thread or the child)."""

    def __init__(self, dagman_out: str, *, recursive: bool, tz: str | None, write_jobstate: bool,
                 state: dict[str, Any] | None, read_size: int, snapshot_interval: float = SNAPSHOT_INTERVAL,
                 engine: EngineOptions = DEFAULT) -> None:
        self.tracker = Tracker(dagman_out, recursive=recursive, tz=tz, write_jobstate=write_jobstate, state=state,
                               engine=engine)
        self.read_size = read_size
        self.snapshot_interval = snapshot_interval
        self.last_snapshot = float("-inf")  # the first step after a (re)start is checkpointed at once
        self.snapshot_cost = 0.0
        self.diff = SnapshotDiff()
        self.join = SnapshotJoin()
        """`step`/`finish` (in this process) join the diffs at once; `step_raw`/`finish_raw` (the child's)
        leave them to the receiving runner's own join."""

    def step(self, final: bool) -> Step:
        """One step, its events typed, its snapshot (if any) the full state."""
        step = typed(self.step_raw(final))
        step.position = self.join.apply(step.position)
        return step

    def finish(self) -> Step:
        step = typed(self.finish_raw())
        step.position = self.join.apply(step.position)
        return step

    def step_raw(self, final: bool) -> Step:
        """One step, its events as the engine's raw records (typed by whoever receives them)."""
        tracker = self.tracker
        events = tracker.step(final=final, max_bytes=self.read_size)
        at_eof, finished = tracker.all_at_eof(), tracker.dagman_finished()
        # After every step, unless snapshots grow costly (many live jobs): then at most ~20% of the time
        # goes to them, and a crash repeats the few steps since the last one.
        wait = max(self.snapshot_interval, SNAPSHOT_BUDGET * self.snapshot_cost)
        due = at_eof or finished or time.monotonic() - self.last_snapshot >= wait
        return self._result(events, self._snapshot() if due else None, at_eof=at_eof, finished=finished)

    def finish_raw(self) -> Step:
        events = self.tracker.finish(0)
        return self._result(events, self._snapshot(complete=True), at_eof=True, finished=True)

    def close(self) -> None:
        self.tracker.close()

    def _snapshot(self, complete: bool = False) -> dict[str, Any]:
        started = time.monotonic()
        state = self.tracker.to_state()
        state["complete"] = complete
        copy = self.diff.make(state, full=complete)  # a copy: the engine keeps changing
        self.last_snapshot = time.monotonic()
        self.snapshot_cost = self.last_snapshot - started
        return copy

    def _result(self, events: list[Any], position: dict[str, Any] | None, *, at_eof: bool,
                finished: bool) -> Step:
        done, total = self.tracker.progress()
        warnings, self.tracker.warnings = self.tracker.warnings, []
        dropped, self.tracker.dropped = self.tracker.dropped, {}
        return Step(events, position, done, total, warnings, at_eof, finished, dropped)


def typed(step: Step) -> Step:
    """The step with its raw records typed (`engine.events.type_raw`); what cannot be typed is a warning."""
    step.events = type_raw(step.events, step.warnings)
    return step


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


async def _to_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
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
        self.core = await _to_thread(MonitorCore, **self.options)

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
            await _to_thread(self.core.close)


class MonitorWorkerError(RuntimeError):
    """The child process that parses the workflow's logs died or could not start."""


class ProcessRunner:
    """The core in a child process (running `serve()`): parsing overlaps delivery.

    A plain subprocess with a pickle protocol over its stdin/stdout rather than
    multiprocessing: nothing of the caller's `__main__` is re-imported, and the
    child exits on its own when the parent dies (its stdin closes).
    """

    kind = "process"

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.process: subprocess.Popen[bytes] | None = None
        self.join = SnapshotJoin()
        self._lock = threading.Lock()  # one request at a time, even if an awaiting task was cancelled

    async def open(self) -> None:
        # its own process group: a terminal's Ctrl-C (sent to the foreground group) reaches the parent alone,
        # which stops the worker in order, even while the worker is still starting (before `serve` ignores it)
        self.process = await _to_thread(
            subprocess.Popen, [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, _PARENT_ENV: str(os.getpid())}, process_group=0)
        await self._call("open", self.options, logging.getLogger().level)

    async def _call(self, op: str, *args: Any) -> Any:
        # a thread blocks on the pipe: replies are read as soon as they come, whatever the loop is doing
        status, value = await _to_thread(self._roundtrip, op, args)
        if status == "error":
            raise value
        return value

    def _roundtrip(self, op: str, args: tuple[Any, ...]) -> tuple[str, Any]:
        with self._lock:
            process = self.process
            if process is None or process.stdin is None or process.stdout is None:
                raise MonitorWorkerError("the monitor worker process is not running")
            try:
                process.stdin.write(_frame((op, args)))
                process.stdin.flush()
                header = process.stdout.read(8)
                size = int.from_bytes(header, "little") if len(header) == 8 else -1
                data = process.stdout.read(size) if size >= 0 else b""
                if len(data) != size:
                    raise EOFError
            except (EOFError, OSError) as exc:
                code = process.wait()
                raise MonitorWorkerError(f"the monitor worker process exited (code {code}) during {op!r}") from exc
            status, value = pickle.loads(data)
        if status == "ok" and isinstance(value, Step):
            typed(value)  # typed here, in this thread: the loop stays free
            value.position = self.join.apply(value.position)
        return status, value

    async def step(self, final: bool) -> Step:
        return await self._call("step", final)

    async def finish(self) -> Step:
        return await self._call("finish")

    async def close(self) -> None:
        if self.process is None:
            return
        try:
            if self.process.poll() is None:  # a dead worker has nothing to close (its death was reported)
                await self._call("close")
        except MonitorWorkerError as exc:
            log.warning("%s", exc)
        finally:
            await _to_thread(self._stop_process)

    def _stop_process(self) -> None:
        with self._lock:
            process, self.process = self.process, None
            if process is None:
                return
            if process.stdin is not None:
                try:
                    process.stdin.close()
                except OSError:  # it died with bytes of ours unread
                    pass
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(8, "little") + data


def make_runner(kind: str, **options: Any) -> ThreadRunner | ProcessRunner:
    """`thread`, `process`, or `auto` (a process for a large dagman.out on a machine with 2+ cores)."""
    if kind == "auto":
        kind = "process" if _worth_a_process(options["dagman_out"]) else "thread"
    if kind == "process":
        return ProcessRunner(**options)
    if kind == "thread":
        return ThreadRunner(**options)
    raise ValueError(f"unknown parser mode {kind!r} (thread, process or auto)")


PROCESS_THRESHOLD = 4 << 20
"""dagman.out bytes from which `auto` parses in a child process (~3,000 jobs; below, start-up costs more)."""


def _worth_a_process(dagman_out: str) -> bool:
    """A large log, and a core to spare: measured (docs/benchmarks.md, 2026-11-27), the child overlaps parsing
    with delivery only on an idle second core; on a busy machine (load 15-30 on 2 cores) it cost 1-3% more
    CPU, 21-43% more wall and 9-20% more memory than the thread at 1,000 and 5,000 jobs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        size = os.path.getsize(dagman_out)
    except OSError:
        size = 0
    if cores < 2 or size < PROCESS_THRESHOLD:
        return False
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average here: as before
        return True
    return load <= cores - 1


# ---------------------------------------------------------------- in the child process

_CHILD = "import sys; from streamer.monitor.runner import serve; sys.exit(serve())"
_PARENT_ENV = "STREAMER_MONITOR_PARENT"


def _exit_with_parent(parent: int, interval: float = 0.2) -> None:
    """End this child within `interval` of its parent's death, even in the middle of a step.

    Closing stdin tells a waiting child to stop; a child busy reading ahead
    would otherwise go on writing jobstate.log after a SIGKILLed parent, and
    race the restarted one.
    """
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, name="streamer-parent-watch", daemon=True).start()


def _silence_stdout() -> None:
    """The pipe to a parent that is gone: point it at /dev/null, so the interpreter's final flush of what
    was buffered cannot print `Exception ignored ... BrokenPipeError` over the user's terminal."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def serve() -> int:
    """Serve `open`/`step`/`finish`/`close` requests until the parent closes our stdin."""
    # the parent handles SIGINT/SIGTERM (flushing its endpoints) and then closes us
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = os.environ.get(_PARENT_ENV)
    if parent and parent.isdigit():
        _exit_with_parent(int(parent))
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    core: MonitorCore | None = None
    ahead: Step | Exception | None = None  # replay: the next step, computed while the parent delivers
    while True:
        header = requests.read(8)
        if len(header) < 8:
            return 0
        op, args = pickle.loads(requests.read(int.from_bytes(header, "little")))
        speculate = False
        try:
            if op == "open":
                options, level = args
                from streamer.util.runtime import log_to_stderr, tune_gc

                log_to_stderr(level)
                tune_gc()  # as the parent: the engine's state lives for the whole run (~4% of a replay's parsing)
                core = MonitorCore(**options)
                result: Any = None
            elif core is None:
                raise MonitorWorkerError(f"{op!r} before 'open'")
            elif op == "step":
                (final,) = args
                result, ahead = (ahead if ahead is not None else core.step_raw(final)), None
                if isinstance(result, Exception):
                    raise result
                # only a replay reads ahead: a live follower would serve a stale poll
                speculate = final and (bool(result.events) or not result.at_eof)
            elif op == "finish":
                earlier, ahead = ahead, None
                if isinstance(earlier, Exception):
                    raise earlier
                result = core.finish_raw()
                if earlier is not None:  # read ahead but never asked for: it goes out first
                    result.events = earlier.events + result.events
                    result.warnings = earlier.warnings + result.warnings
                    for reason, count in earlier.dropped.items():
                        result.dropped[reason] = result.dropped.get(reason, 0) + count
            elif op == "close":
                ahead = None
                core.close()
                result = None
            else:
                raise MonitorWorkerError(f"unknown request {op!r}")
            reply = _frame(("ok", result))
        except Exception as exc:  # the parent re-raises it
            try:
                reply = _frame(("error", exc))
            except Exception:  # an exception that does not pickle
                reply = _frame(("error", MonitorWorkerError(f"{type(exc).__name__}: {exc}")))
        try:
            replies.write(reply)
            replies.flush()
        except OSError:  # BrokenPipeError: the parent is gone (or closed us): nothing left to serve
            _silence_stdout()
            return 0
        if speculate and core is not None:
            try:
                ahead = core.step_raw(True)
            except Exception as exc:  # reported when that step is asked for
                ahead = exc
