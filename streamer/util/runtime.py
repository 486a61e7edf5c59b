"""Event loop (uvloop where available), signals and the stderr reporter.

asyncio is imported by the functions that need a loop: the monitor's parsing child process uses this
module (`log_to_stderr`, `tune_gc`, `limit_malloc_arenas`) and runs no loop.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
from typing import Any, Callable, Coroutine

from streamer.util.urls import mask

log = logging.getLogger("streamer")


def run(main: Coroutine[Any, Any, int]) -> int:
    """Run `main` on uvloop (Linux/macOS), falling back to asyncio's loop."""
    import asyncio

    tune_gc()
    limit_malloc_arenas()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(_quietly(main))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_quietly(main))


async def _quietly(main: Coroutine[Any, Any, int]) -> int:
    import asyncio

    asyncio.get_running_loop().set_exception_handler(RecoveredFaults())
    return await main


class RecoveredFaults:
    """The loop's exception handler: what a lost database connection leaves behind is one WARNING line.

    When PostgreSQL restarts under a run, asyncpg hands the loop what it could not give anyone: the
    connection it resets with a transaction still open (the server rolled it back when the connection
    went), and futures of a connection attempt or query whose exception no one awaited. asyncio's default
    handler prints both as ERROR with a traceback, while the endpoint's retry has already written the
    batch again. Each kind is said once, at WARNING, in words; anything else goes to the default handler.
    """

    def __init__(self) -> None:
        self.said: set[str] = set()

    def __call__(self, loop: Any, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        exc = context.get("exception")
        if message.startswith("Resetting connection with an active transaction"):
            self._say("reset", "a database connection was reset with its transaction open (the server lost "
                      "it and rolled it back); the endpoint writes that batch again")
        elif message == "Future exception was never retrieved" and _connection_fault(exc):
            self._say("future", f"a connection was lost with an operation in flight ({type(exc).__name__}: "
                      f"{mask(str(exc))[:200]}); the endpoint reconnects and retries")
        else:
            loop.default_exception_handler(context)

    def _say(self, kind: str, text: str) -> None:
        if kind in self.said:
            log.debug("%s", text)
        else:
            self.said.add(kind)
            log.warning("%s", text)


def _connection_fault(exc: Any) -> bool:
    """A lost or refused connection: asyncpg's errors, or the OS's for a closed socket."""
    if not isinstance(exc, Exception):
        return False
    return isinstance(exc, (ConnectionError, TimeoutError)) or type(exc).__module__.startswith("asyncpg")


def tune_gc() -> None:
    """Fewer cyclic-GC passes over objects that live for the whole run.

    A pipeline holds tens of thousands of events in its buffers; with the
    default thresholds the collector walks them all again and again (3% of a
    load). Objects made at start-up (modules, schema tables) are frozen out of
    its sight, and a young generation of 10,000 objects keeps passes rare;
    reference cycles are still collected.
    """
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)


M_ARENA_MAX = -8
"""glibc's `mallopt` parameter for the most malloc arenas (malloc.h)."""
MALLOC_ARENAS = 2
"""Arenas a run's threads share (the loop's, the monitor's engine, the writers')."""


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """At most `arenas` glibc malloc arenas from now on; whether it was set.

    glibc gives each thread that allocates its own arena (up to 8 per core), and memory freed in one stays
    mapped there: a 20,000-job replay peaked at 132 MiB with the default and 108–110 MiB with two arenas, for
    the same CPU (interleaved runs, docs/benchmarks.md). Called before the run starts its threads. Left alone
    where the user set `MALLOC_ARENA_MAX` (glibc read it at start) and where there is no glibc `mallopt`
    (musl, macOS)."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


class MaskingFormatter(logging.Formatter):
    """Never lets a password in a URL reach the log."""

    def format(self, record: logging.LogRecord) -> str:
        return mask(super().format(record))


def setup_logging(verbosity: int) -> None:
    """The commands' logging: warnings by default, -v for INFO, -vv for DEBUG, on stderr."""
    log_to(sys.stderr, logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG)


def log_to_stderr(level: int) -> None:
    """streamer's log lines (passwords masked) on stderr at `level`; also used by worker processes."""
    log_to(sys.stderr, level)


def log_to(stream: Any, level: int, fmt: str = "streamer: %(levelname)s: %(message)s") -> None:
    """The one logging set-up: every log line through `fmt` with passwords masked, to `stream` at `level`;
    the AMQP drivers' own chatter only from WARNING (aio-pika) and ERROR (aiormq) unless debugging asks more."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(MaskingFormatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aio_pika").setLevel(max(level, logging.WARNING))
    logging.getLogger("aiormq").setLevel(max(level, logging.ERROR))
    # aiormq logs every failed connection attempt as an ERROR: streamer reports an outage once, itself
    quiet = logging.getLogger("aiormq.connection")
    quiet.filters[:] = [f for f in quiet.filters if not isinstance(f, _DropPrefix)]
    quiet.addFilter(_DropPrefix("error when creating transport"))
    # a quorum queue's refusal of a channel-wide prefetch closes the connection: the collector says so and
    # consumes again with a per-consumer one (`sources/amqp/queue.per_consumer_only`)
    quiet.addFilter(_DropPrefix("Unexpected connection close from remote", containing="global qos"))
    # asyncmy logs every server note as a warning; the notes a load gets are DECIMAL roundings of values with
    # more digits than the column keeps (as PostgreSQL rounds them, silently): not worth a line each
    logging.getLogger("asyncmy").setLevel(max(level, logging.ERROR))


class _DropPrefix(logging.Filter):
    """Drops the records whose message starts with `prefix`."""

    def __init__(self, prefix: str, *, containing: str | None = None) -> None:
        super().__init__()
        self.prefix = prefix
        self.containing = containing
        """Drop only the records whose message also holds this text."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.prefix):
            return True
        return self.containing is not None and self.containing not in record.getMessage()


def install_signal_handlers(on_stop: Callable[[int], None],
                            left: Callable[[], list[str]] | None = None) -> None:
    """SIGINT/SIGTERM call `on_stop(signum)`; a second signal exits at once (128 + N), saying
    what it leaves behind (`left()`: one message per endpoint)."""
    import asyncio

    loop = asyncio.get_running_loop()
    seen: list[int] = []

    def handler(signum: int) -> None:
        if seen:
            try:
                notes = left() if left is not None else []
            except Exception:  # noqa: BLE001 - exiting now whatever happens
                notes = []
            sys.stderr.write("streamer: second signal: exiting without flushing\n"
                             + "".join(f"streamer: {note}\n" for note in notes))
            sys.stderr.flush()
            os._exit(128 + signum)
        seen.append(signum)
        on_stop(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, handler, signum)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
