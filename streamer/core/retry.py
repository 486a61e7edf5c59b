"""The one retry loop: run an attempt, and while it fails for a reason a retry can cure, wait and run it again.

An attempt signals a retriable fault by raising `TransientError(kind, detail)`;
anything else is permanent and goes straight through. Between attempts the
loop waits with exponential back-off and full jitter (writers that collided do
not collide again in step), reports a fault once it has lasted `quiet_for`
seconds, and gives up once it has lasted `retry_for` seconds by raising the
`exhausted` exception the caller names (`Exhausted` by default; the endpoints
raise their `Unavailable`, which a spooling layer catches). What the fault is
and how to classify a driver's exceptions is the caller's business
(`streamer/endpoints/layers/resilience.py`); this module knows neither endpoints nor
events.

A loop that retries until it is stopped rather than for `retry_for` (a collector reconnecting to its broker,
serve resuming a failed workflow, held rows written again) waits through `Backoff(...).waits(stop=...)`:
the same doubling delays, each said in the caller's log line, a stop event ending the wait at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator

log = logging.getLogger("streamer.retry")


class TransientError(Exception):
    """An attempt failed for a reason a retry can cure (`kind` says which)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class Exhausted(Exception):
    """A retriable fault outlasted `retry_for` (`kind` is the fault's)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class RetryStats:
    """Retries per kind of fault (printed in summaries, asserted by tests)."""

    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


@dataclass
class RetryPolicy:
    retry_for: float = 300.0
    """Seconds a fault may persist before the loop gives up."""
    setting: str = "retry_for"
    """The option that set `retry_for`, named when the loop gives up (`connect_for` for a first connection)."""
    first_delay: float = 0.02
    max_delay: float = 5.0
    quiet_for: float = 5.0
    """Seconds a fault may persist before it is reported (a deadlock cured by one retry is not news)."""

    def delay(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, first * 2**attempt)]."""
        return random.uniform(0, min(self.max_delay, self.first_delay * (2 ** min(attempt, 20))))


@dataclass
class Reporting:
    """How a loop speaks: the exception it gives up with, how it redacts a fault's text, where it logs."""

    exhausted: Callable[[str, str], Exception] = Exhausted
    redact: Callable[[str], str] = str
    logger: logging.Logger = log


PLAIN = Reporting()


class Attempts:
    """The bookkeeping of one retry loop: failures counted, reported once lasting, given up past `retry_for`.

    The loop itself is `retrying` (async) or `retrying_sync` (a worker thread);
    both only run an attempt and sleep what `failed` returns."""

    def __init__(self, name: str, what: str, policy: RetryPolicy, stats: RetryStats | None,
                 reporting: Reporting = PLAIN) -> None:
        self.name, self.what, self.policy, self.stats, self.reporting = name, what, policy, stats, reporting
        self.started = time.monotonic()
        self.tries = 0
        self.reported = False

    def failed(self, exc: TransientError) -> float:
        """Count and report one failed attempt; give up past `retry_for`; the delay before the next."""
        self.tries += 1
        if self.stats is not None:
            self.stats.add(exc.kind)
        elapsed = time.monotonic() - self.started
        policy, out = self.policy, self.reporting
        detail = out.redact(exc.detail)
        if elapsed >= policy.retry_for:
            raise out.exhausted(
                exc.kind, f"{self.name}: {self.what} failed: {exc.kind} persisted for {elapsed:.0f} s over "
                f"{self.tries} attempts ({policy.setting}={policy.retry_for:g}): {detail}") from None
        if elapsed >= policy.quiet_for and not self.reported:
            out.logger.warning("%s: %s still failing after %.0f s (%s: %s); retrying for up to %.0f s more",
                               self.name, self.what, elapsed, exc.kind, detail, policy.retry_for - elapsed)
            self.reported = True
        else:
            out.logger.debug("%s: %s: %s (%s), retry %d", self.name, self.what, exc.kind, detail, self.tries)
        return policy.delay(self.tries)


def raise_if_cancelled(exc: BaseException) -> None:
    """CancelledError (from `exc`) when the running task is being cancelled. Python 3.11's `asyncio.wait_for`
    hands back the awaited operation's own failure instead of the cancellation when both come in one turn of
    the loop (a broker resetting a reconnect as SIGTERM stops the run); a retry loop that took that failure for
    "not now" lost the cancellation and went on retrying (`load --follow` did not end after SIGTERM). Every retry
    loop calls this before it retries."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from exc


async def retrying(name: str, what: str, attempt: Callable[[], Awaitable[Any]], policy: RetryPolicy,
                   stats: RetryStats | None = None,
                   between: Callable[[str], Awaitable[None]] | None = None,
                   reporting: Reporting = PLAIN) -> Any:
    """Run `attempt()` until it succeeds, retrying `TransientError` for `policy.retry_for` seconds.

    `between(kind)` runs before each new attempt (e.g. reconnect after a lost
    connection); a `TransientError` it raises counts like the attempt's.
    """
    attempts = Attempts(name, what, policy, stats, reporting)
    kind: str | None = None
    while True:
        try:
            if kind is not None and between is not None:
                await between(kind)
            return await attempt()
        except TransientError as exc:
            raise_if_cancelled(exc)
            kind = exc.kind
            await asyncio.sleep(attempts.failed(exc))


def retrying_sync(name: str, what: str, attempt: Callable[[], Any], policy: RetryPolicy,
                  stats: RetryStats | None = None, reporting: Reporting = PLAIN) -> Any:
    """`retrying` for code running in a worker thread (SQLite)."""
    attempts = Attempts(name, what, policy, stats, reporting)
    while True:
        try:
            return attempt()
        except TransientError as exc:
            time.sleep(attempts.failed(exc))


@dataclass(frozen=True)
class Backoff:
    """The delays of a loop that retries until it succeeds or is stopped: `first`, then each the one before
    times `factor`, at most `cap`; with `jitter` each after the first is then multiplied by a uniform draw in
    [1 - jitter, 1] (collectors that lost the same broker do not come back in step)."""

    first: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0

    def delays(self) -> Iterator[float]:
        delay = self.first
        while True:
            yield delay
            delay = min(self.cap, delay * self.factor)
            if self.jitter:
                delay *= random.uniform(1.0 - self.jitter, 1.0)

    def waits(self, stop: asyncio.Event | None = None) -> "Waits":
        return Waits(self, stop)


class Waits:
    """The waits of one retry loop (`Backoff.waits`): `await waits.wait(log.warning, "...; retrying in %.1f s",
    ...)` between two attempts."""

    def __init__(self, backoff: Backoff, stop: asyncio.Event | None = None) -> None:
        self.backoff = backoff
        self.stop = stop
        self._delays = backoff.delays()
        self.count = 0
        """Waits so far (failed attempts)."""

    async def wait(self, say: Callable[..., Any] | None = None, message: str = "", *args: Any,
                   at_most: float | None = None) -> bool:
        """Log the caller's line (`say(message, *args, delay)`: the delay is its last argument) and sleep the
        next delay, at most `at_most` seconds; False (at once) when the stop event is or becomes set: the loop
        ends rather than trying again."""
        delay = next(self._delays)
        self.count += 1
        if say is not None:
            say(message, *args, delay)
        if self.stop is not None and self.stop.is_set():
            return False
        seconds = delay if at_most is None else min(delay, at_most)
        if self.stop is None:
            await asyncio.sleep(seconds)
            return True
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except asyncio.TimeoutError:
            return True
        return False
