"""The core in a child process (`child.serve`): parsing overlaps delivery. The parent's side of it:
`ProcessRunner` starts the child and speaks the protocol to it, one pickled request and reply at a time."""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
from typing import Any

from streamer.monitor.runner.core import Step, typed
from streamer.monitor.runner.thread import to_thread
from streamer.monitor.errors import MonitorWorkerError
from streamer.monitor.snapshot import SnapshotJoin
from streamer.util import compiled

log = logging.getLogger("streamer.monitor")

CHILD = "import sys; from streamer.monitor.runner.child import serve; sys.exit(serve())"
PARENT_ENV = "STREAMER_MONITOR_PARENT"


def child_code() -> str:
    """The child runs the same code as its parent: the mypyc-compiled modules when they are in use here."""
    return f"from streamer.util import compiled; compiled.activate(); {CHILD}" if compiled.active() else CHILD
"""The child's environment names its parent: it exits when that process is gone (`child.serve`)."""


class ProcessRunner:
    """The core in a child process (running `child.serve()`): parsing overlaps delivery.

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
        self.process = await to_thread(
            subprocess.Popen, [sys.executable, "-c", child_code()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, PARENT_ENV: str(os.getpid())}, process_group=0)
        await self._call("open", self.options, logging.getLogger().level)

    async def _call(self, op: str, *args: Any) -> Any:
        # a thread blocks on the pipe: replies are read as soon as they come, whatever the loop is doing
        status, value = await to_thread(self._roundtrip, op, args)
        if status == "error":
            raise value
        return value

    def _roundtrip(self, op: str, args: tuple[Any, ...]) -> tuple[str, Any]:
        with self._lock:
            process = self.process
            if process is None or process.stdin is None or process.stdout is None:
                raise MonitorWorkerError("the monitor worker process is not running")
            try:
                process.stdin.write(frame((op, args)))
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
            await to_thread(self._stop_process)

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


def frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(8, "little") + data
