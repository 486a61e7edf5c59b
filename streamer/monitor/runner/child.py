"""In the child process: serve the parent's `open`/`step`/`finish`/`close` requests (`process.ProcessRunner`),
reading the next step ahead of a replay while the parent delivers this one."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
from typing import Any

from streamer.monitor.runner.core import MonitorCore, Step
from streamer.monitor.errors import MonitorWorkerError
from streamer.monitor.runner.process import PARENT_ENV, frame




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
    parent = os.environ.get(PARENT_ENV)
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
                from streamer.util.runtime import limit_malloc_arenas, log_to_stderr, tune_gc

                log_to_stderr(level)
                tune_gc()  # as the parent: the engine's state lives for the whole run (~4% of a replay's parsing)
                limit_malloc_arenas()
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
            reply = frame(("ok", result))
        except Exception as exc:  # the parent re-raises it
            try:
                reply = frame(("error", exc))
            except Exception:  # an exception that does not pickle
                reply = frame(("error", MonitorWorkerError(f"{type(exc).__name__}: {exc}")))
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
