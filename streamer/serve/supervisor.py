"""The `serve` process: discovery in, one follower per root workflow, shared endpoints, restart and SIGHUP.

The workflows being followed are listed in `<state dir>/workflows.json`
(written atomically whenever one starts or ends), so after a restart or a
crash each is resumed from its own checkpoint (`streamer.state.json` in its
submit dir) even when no watched root holds it (the master DB found it).
SIGINT/SIGTERM detach every follower (no `MONITORD_FINISHED`, the state stays
resumable) and exit 0; SIGHUP re-reads the configuration: new roots and
master DB at once, and when the endpoints changed every follower is detached
and resumed from its checkpoint with the new ones (nothing lost, nothing
repeated: the same path as a restart).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable


from streamer.util import checkpoint
from streamer.config.settings import ConfigError
from streamer.serve.config import ServeConfig
from streamer.serve.discovery import MasterDBPoller, examine
from streamer.serve.follower import Followed, follow
from streamer.serve.shared import SharedEndpoint
from streamer.serve.state import ServeState
from streamer.serve.watch import TreeWatcher

log = logging.getLogger("streamer.serve")

REGISTRY = "workflows.json"
WORKER_THREADS = 64
PENDING_LOOK = 2.0
"""Seconds until the first look again at a candidate that is no workflow to follow yet (braindump half-written,
no dagman.out), doubling up to PENDING_LOOK_MAX: whatever order and timing its files come in (inotify or not,
found in the master DB before DAGMan started), it is followed once it is one."""
PENDING_LOOK_MAX = 60.0


class Supervisor:
    def __init__(self, config: ServeConfig, *, state: ServeState | None = None,
                 reload: Callable[[], ServeConfig] | None = None) -> None:
        self.config = config
        self.state = state or ServeState()
        self.reload_config = reload
        self.state_dir = config.default_state_dir()
        self.followed: dict[str, Followed] = {}
        self.shared: list[SharedEndpoint] = []
        self.exporter: Any = None
        """`--metrics`: the Prometheus exporter every followed workflow's bus is attached to."""
        self.watcher: TreeWatcher | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._lock_fd: int | None = None
        self._registry_dirty = asyncio.Event()
        self.pending: dict[str, tuple[float, float]] = {}
        """Candidate directories that may still become workflows to follow: (next look, interval)."""

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        # Checkpoint fsyncs, markers and endpoint set-up of every workflow share the default executor
        # (parsing has its own few threads, runner.PARSE_THREADS): sized for many workflows, so a slow
        # fsync of one never queues another's. Its threads are all started now, off the loop: a thread
        # start waits for the new thread to run, and must not stall the loop in the middle of a run.
        executor = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="streamer-serve")
        loop.set_default_executor(executor)
        await _start_threads(executor, WORKER_THREADS)
        seen: list[int] = []

        def on_signal(signum: int) -> None:
            if seen:
                os._exit(128 + signum)
            seen.append(signum)
            log.warning("%s: letting every workflow go at its checkpoint, then exiting", signal.Signals(signum).name)
            self._stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        loop.add_signal_handler(signal.SIGHUP, lambda: self._spawn(self.reload(), "reload"))
        self._lock()  # after the handlers: whoever sees the lock held may signal this process
        try:
            if self.config.metrics:  # one exporter for every workflow's bus (metrics.py)
                from streamer.run.metrics import start_exporter

                self.exporter = await start_exporter(self.config.metrics,
                                                     workflows=lambda: len(self.state.active_workflows()))
            await self._open_shared()
            self._start_discovery()
            for path in self._read_registry():
                self.candidate(path)
            self._registry_dirty.set()  # written once at start: the sign that serve is up (signals handled)
            self._spawn(self._registry_writer(), "registry")
            self._spawn(self._look_again(), "pending")
            await self._stop.wait()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(signum)
            await self._detach_all()
            self._stop_discovery()
            await self._close_shared()
            if self.exporter is not None:
                await self.exporter.stop()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._write_registry()
        return 0

    def stop(self) -> None:
        self._stop.set()

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.append(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serve: %s failed: %s", task.get_name(), task.exception())

    def _lock(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state_dir / "serve.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"{self.state_dir}: another streamer serve uses this state directory "
                              "(give each its own with --state-dir)") from None
        self._lock_fd = fd

    # ------------------------------------------------------------ discovery
    def _start_discovery(self) -> None:
        config = self.config
        if config.roots:
            self.watcher = TreeWatcher(config.roots, self.candidate, self.wrote)
            self.watcher.start()
            self._spawn(self.watcher.run(), "watch")
            log.info("watching %s (%s, %d directories)", ", ".join(map(str, config.roots)),
                     "inotify" if self.watcher.inotify else "polling", self.watcher.watched)
        if config.master_db:
            self._spawn(MasterDBPoller(config.master_db, self.candidate, config.master_poll).run(), "master DB")

    def _stop_discovery(self) -> None:
        for task in list(self._tasks):
            if task.get_name() in ("watch", "master DB"):
                task.cancel()
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def candidate(self, directory: str) -> None:
        """A directory that may hold a root workflow to follow (from inotify, the master DB, the registry)."""
        real = os.path.realpath(directory)
        if self._stop.is_set() or real in self.followed:
            return
        found, later = examine(directory)
        if found is None:
            if not later:
                self.pending.pop(real, None)
            elif real not in self.pending:
                log.debug("%s: not a workflow to follow yet; looking again", real)
                self.pending[real] = (time.monotonic() + PENDING_LOOK, PENDING_LOOK)
            return
        self.pending.pop(real, None)
        if found.submit_dir in self.followed:
            return
        watcher = self.watcher
        wakeable = bool(watcher is not None and watcher.inotify and any(
            found.submit_dir == str(root) or found.submit_dir.startswith(str(root).rstrip("/") + "/")
            for root in self.config.roots))
        wf = Followed(found, wakeable=wakeable)
        self.followed[found.submit_dir] = wf
        wf.task = self._spawn(self._follow(wf), f"follow {found.submit_dir}")
        self._registry_dirty.set()
        log.info("following %s (%s)", found.submit_dir, os.path.basename(found.dagman_out))

    async def _look_again(self) -> None:
        """Candidates that were not ready (see `discovery.examine`) are looked at again until they are."""
        while True:
            await asyncio.sleep(PENDING_LOOK / 4)
            now = time.monotonic()
            for directory, (due, interval) in sorted(self.pending.items()):
                if due > now:
                    continue
                self.pending[directory] = (now + interval * 2, min(interval * 2, PENDING_LOOK_MAX))
                self.candidate(directory)

    def wrote(self, path: str) -> None:
        """A dagman.out was written: wake the workflow it belongs to (its own or a sub-workflow's)."""
        directory = os.path.dirname(path)
        while True:
            wf = self.followed.get(directory)
            if wf is not None:
                if wf.source is not None:
                    wf.source.wake.set()
                return
            parent = os.path.dirname(directory)
            if parent == directory:
                return
            directory = parent

    async def _follow(self, wf: Followed) -> None:
        finished = await follow(wf, self.config, self.shared, self.state.started, self.state.ended,
                                exporter=self.exporter)
        if finished:
            self.followed.pop(wf.found.submit_dir, None)
            self._registry_dirty.set()
            if self.watcher is not None:
                self.watcher.forget(wf.found.submit_dir)

    async def _detach_all(self) -> None:
        followed = list(self.followed.values())
        for wf in followed:
            wf.detach()
        await asyncio.gather(*(wf.task for wf in followed if wf.task is not None), return_exceptions=True)

    # ------------------------------------------------------------ shared endpoints
    async def _open_shared(self) -> None:
        shared = [SharedEndpoint(spec) for spec in self.config.shared]
        results = await asyncio.gather(*(s.open() for s in shared), return_exceptions=True)
        for item, result in zip(shared, results):
            if isinstance(result, BaseException):
                await asyncio.gather(*(s.close() for s, r in zip(shared, results) if not isinstance(r, BaseException)),
                                     return_exceptions=True)
                raise ConfigError(f"shared endpoint {item.endpoint.name}: {result}")
        self.shared = shared

    async def _close_shared(self) -> None:
        for item in self.shared:
            try:
                await item.close()
            except Exception as exc:
                log.error("shared endpoint %s: %s", item.endpoint.name, exc)
        self.shared = []

    # ------------------------------------------------------------ SIGHUP
    async def reload(self) -> None:
        if self.reload_config is None:
            return
        try:
            config = self.reload_config()
        except (ConfigError, ValueError, OSError) as exc:
            log.error("SIGHUP: configuration not reloaded, the old one stays: %s", exc)
            return
        log.warning("SIGHUP: configuration re-read%s", f" from {config.source}" if config.source else "")
        restart = config.endpoints_key() != self.config.endpoints_key()
        self._stop_discovery()
        if restart:  # every follower lets go at its checkpoint and resumes with the new endpoints
            paths = list(self.followed)
            await self._detach_all()
            self.followed.clear()
            await self._close_shared()
            self.config = config
            await self._open_shared()
            for path in paths:
                self.candidate(path)
        self.config = config
        self._start_discovery()

    # ------------------------------------------------------------ registry of followed workflows
    def _read_registry(self) -> list[str]:
        data = checkpoint.read(self.state_dir / REGISTRY, what="registry of followed workflows (version 1)",
                               accept=lambda data: isinstance(data.get("followed", []), list), refuse=False,
                               clean="only the watched roots are searched")
        return [str(p) for p in data.get("followed", [])] if data is not None else []

    def _write_registry(self) -> None:
        checkpoint.write(self.state_dir / REGISTRY, {"version": 1, "followed": sorted(self.followed)}, indent=True)

    async def _registry_writer(self) -> None:
        while True:
            await self._registry_dirty.wait()
            self._registry_dirty.clear()
            await asyncio.to_thread(self._write_registry)


async def _start_threads(executor: ThreadPoolExecutor, count: int) -> None:
    """Start the pool's `count` threads from another thread: each takes a task that holds it until all
    have one (a pool starts a thread only when no idle one is there)."""
    started: Future[None] = Future()

    def start() -> None:
        gate = threading.Event()
        try:
            held = [executor.submit(gate.wait) for _ in range(count)]
        except BaseException as exc:  # no thread could be started (a limit): serve cannot run
            started.set_exception(exc)
            return
        finally:
            gate.set()
        for future in held:
            future.result()
        started.set_result(None)

    threading.Thread(target=start, name="pool-start", daemon=True).start()
    await asyncio.wrap_future(started)


async def run_serve(config: ServeConfig, reload: Callable[[], ServeConfig] | None = None,
                    state: ServeState | None = None) -> int:
    return await Supervisor(config, state=state, reload=reload).run()


def describe(config: ServeConfig) -> list[str]:

    lines = [f"watch: {root}" for root in config.roots]
    if config.master_db:
        lines.append(f"master DB: {config.master_db.masked}")
    lines += [f"shared endpoint: {s.url.masked}" for s in config.shared]
    lines += [f"per-workflow endpoint: {t}" for t in config.workflow_dest]
    return lines


__all__ = ["Supervisor", "run_serve", "describe"]
