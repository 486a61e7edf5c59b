"""The notifications endpoint: scripts of the notify files, run as asyncio subprocesses.

It is an endpoint on the bus like any other (its own filter, buffer and task):
`write` only matches events and queues scripts, so a slow or hanging script
never holds back the databases or the broker. At most `max_parallel` scripts
run at once (monitord's `--notifications-max`, default 10); one running longer
than `timeout` seconds (0: no limit) gets SIGTERM, then SIGKILL 5 s later
(its whole process group: it runs in a session of its own). Each outcome goes
to `monitord-notifications.log` in monitord's format. `close` waits for every
queued script, as monitord does before it exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Sequence

from streamer.endpoints.base import Endpoint
from streamer.events import Event
from streamer.util.urls import EndpointURL
from streamer.monitord.files import isodate
from streamer.monitord.notify import WATCHED, Matcher, Notification

log = logging.getLogger("streamer.monitord")

LOG_NAME = "monitord-notifications.log"
GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL of a script past its timeout (monitord's WAIT_CHILD_FINISH)."""


def bin_dir(braindump_bindir: str | None = None) -> str | None:
    """PEGASUS_BIN_DIR for Pegasus's notification clients (they run `$PEGASUS_BIN_DIR/pegasus-status`)."""
    if os.environ.get("PEGASUS_BIN_DIR"):
        return os.environ["PEGASUS_BIN_DIR"]
    if os.environ.get("PEGASUS_HOME") and os.path.isdir(os.path.join(os.environ["PEGASUS_HOME"], "bin")):
        return os.path.join(os.environ["PEGASUS_HOME"], "bin")
    found = shutil.which("pegasus-status")
    if found:
        return os.path.dirname(found)
    return braindump_bindir


class NotificationEndpoint(Endpoint):
    default_events = WATCHED

    def __init__(self, matcher: Matcher, log_dir: str | Path, *, max_parallel: int = 10, timeout: float = 0,
                 extra_env: dict[str, str] | None = None) -> None:
        super().__init__(EndpointURL(raw=f"notifications://{matcher.root_dir}", scheme="notifications",
                                     base=f"notifications://{matcher.root_dir}"), {"overflow": "off"})
        self.matcher = matcher
        self.log_path = Path(log_dir) / LOG_NAME
        self.max_parallel = max(1, max_parallel)
        self.timeout = timeout
        self.extra_env = extra_env or {}
        self._slots = asyncio.Semaphore(self.max_parallel)
        self._tasks: set[asyncio.Task[None]] = set()
        self._log_lock = asyncio.Lock()
        self.started = 0
        self.finished = 0

    @property
    def name(self) -> str:
        return f"notifications ({self.log_path.parent})"

    async def open(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.touch()

    async def write(self, batch: Sequence[Event]) -> None:
        for event in batch:
            try:
                found = self.matcher.match(event)
            except Exception as exc:  # a notification problem must never stop the monitor
                log.warning("notifications: event %s not matched (%s)", event.name, exc)
                continue
            for notification in found:
                task = asyncio.create_task(self._run(notification))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._tasks:
            log.info("finishing %d notification(s)...", len(self._tasks))
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ------------------------------------------------------------ one script
    async def _run(self, notification: Notification) -> None:
        async with self._slots:
            self.started += 1
            try:
                await self._execute(notification)
            except Exception as exc:  # logged, never raised into the bus
                log.warning("notification %s - %s failed: %s", notification.label, notification.action, exc)
            finally:
                self.finished += 1

    async def _execute(self, notification: Notification) -> None:
        try:
            argv = shlex.split(notification.action)
        except ValueError as exc:
            await self._record(notification, f"not started: cannot split the action ({exc})", "", "")
            return
        env = {**os.environ, **self.extra_env, **notification.env}
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        try:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv, stdout=out, stderr=err, stdin=asyncio.subprocess.DEVNULL,
                    env=env, cwd=notification.cwd, start_new_session=True)
            except OSError as exc:
                log.warning("cannot start notification executable: %s (%s)", notification.label, exc.strerror or exc)
                await self._record(notification, f"not started: {exc.strerror or exc}", "", "")
                return
            log.info("started notification for: %s", notification.label)
            status: str
            try:
                if self.timeout > 0:
                    code = await asyncio.wait_for(process.wait(), self.timeout)
                else:
                    code = await process.wait()
                status = str(code)
            except asyncio.TimeoutError:
                status = await self._terminate(process, notification)
            out.seek(0)
            err.seek(0)
            await self._record(notification, status, out.read().decode(errors="replace"),
                               err.read().decode(errors="replace"))
        finally:
            out.close()
            err.close()

    async def _terminate(self, process: asyncio.subprocess.Process, notification: Notification) -> str:
        log.warning("notification expired after %g s, terminating it: %s - %s", self.timeout, notification.label,
                    notification.action)
        self._signal(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), GRACE)
            return f"terminated after the {self.timeout:g} s timeout (SIGTERM)"
        except asyncio.TimeoutError:
            log.warning("killing notification process: %s - %s", notification.label, notification.action)
            self._signal(process, signal.SIGKILL)
            await process.wait()
            return f"killed after the {self.timeout:g} s timeout (SIGTERM ignored for {GRACE:g} s, SIGKILL)"

    @staticmethod
    def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
        try:
            os.killpg(process.pid, signum)
        except OSError:
            try:
                process.send_signal(signum)
            except ProcessLookupError:
                pass

    async def _record(self, notification: Notification, status: str, stdout: str, stderr: str) -> None:
        lines = ["-" * 80,
                 f"Notification time  : {isodate(time.time())}",
                 f"Notification event : {notification.label}",
                 f"Notification action: {notification.action}",
                 f"Notification status: {status}",
                 "",
                 "Notification environment"]
        lines += [f"{key} : {value}" for key, value in notification.env.items()]
        lines += ["", "stdout:", stdout.rstrip("\n"), "", "stderr:", stderr.rstrip("\n"), "", ""]
        text = "\n".join(lines) + "\n"
        async with self._log_lock:
            await asyncio.to_thread(self._append, text)

    def _append(self, text: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(text)
