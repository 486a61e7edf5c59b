"""`core/retry.Backoff`: the waits of every loop that retries until it succeeds or is stopped (a collector
reconnecting, serve resuming a workflow, held rows written again)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import random

from streamer.core.retry import Backoff, RetryPolicy, TransientError, retrying


def test_delays_double_up_to_the_cap_without_jitter() -> None:
    assert list(itertools.islice(Backoff(first=1.0, cap=60.0).delays(), 9)) == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert list(itertools.islice(Backoff(first=0.05, cap=1.0).delays(), 7)) == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_jittered_delays_stay_within_their_bounds() -> None:
    """Each delay after the first is min(cap, 2 x the one before) times a draw in [0.8, 1]: never above the cap,
    never below 0.8 x the doubled previous one, and not all the same (the draw is used)."""
    random.seed(7)
    delays = list(itertools.islice(Backoff(first=0.2, cap=30.0, jitter=0.2).delays(), 200))
    assert delays[0] == 0.2
    for before, after in itertools.pairwise(delays):
        doubled = min(30.0, before * 2)
        assert 0.8 * doubled <= after <= doubled <= 30.0
    assert max(delays) > 20.0 and len(set(delays[20:])) > 100  # reaches the cap's neighbourhood, jittered there


def test_wait_logs_the_callers_line_with_the_delay_last() -> None:
    said: list[tuple[object, ...]] = []

    async def main() -> list[bool]:
        waits = Backoff(first=0.001, cap=0.004).waits()
        return [await waits.wait(lambda *args: said.append(args), "%s; retrying in %.1f s", "lost") for _ in range(4)]

    assert asyncio.run(main()) == [True] * 4
    assert said == [("%s; retrying in %.1f s", "lost", d) for d in (0.001, 0.002, 0.004, 0.004)]


def test_a_stop_event_ends_a_wait_at_once() -> None:
    """Set while waiting an hour, the wait returns False at once; set before, the next wait returns False
    without sleeping (the line is still logged, as the loops did)."""
    log = logging.getLogger("test.backoff")

    async def main() -> tuple[bool, bool, int]:
        stop = asyncio.Event()
        waits = Backoff(first=3600.0, cap=3600.0).waits(stop=stop)
        asyncio.get_running_loop().call_later(0.01, stop.set)
        during = await asyncio.wait_for(waits.wait(log.info, "waiting %.0f s"), 30)
        after = await asyncio.wait_for(waits.wait(), 30)
        return during, after, waits.count

    assert asyncio.run(main()) == (False, False, 2)


def test_at_most_shortens_one_wait_but_not_the_sequence() -> None:
    """`at_most` (a deadline nearer than the delay) cuts that sleep; the next delay still doubles."""

    async def main() -> tuple[bool, float]:
        waits = Backoff(first=3600.0, cap=7200.0).waits()
        ok = await asyncio.wait_for(waits.wait(at_most=0.001), 30)
        return ok, next(waits._delays)

    assert asyncio.run(main()) == (True, 7200.0)


async def test_retrying_ends_cancelled_when_the_cancel_came_with_the_attempt_s_failure() -> None:
    """A cancellation that Python 3.11's wait_for turned into the attempt's own failure is not retried away."""
    attempts: list[float] = []
    task: list[asyncio.Task[object]] = []

    async def attempt() -> None:
        attempts.append(asyncio.get_running_loop().time())
        async def fails() -> None:
            task[0].cancel()  # the caller is cancelled in the same turn as ...
            raise TransientError("connection", "reset by peer")  # ... the attempt fails
        await asyncio.wait_for(fails(), 5)

    policy = RetryPolicy(retry_for=60, first_delay=0.01, max_delay=0.01, quiet_for=60)
    task.append(asyncio.create_task(retrying("x", "a write", attempt, policy)))
    try:
        await asyncio.wait_for(asyncio.shield(task[0]), 5)
    except asyncio.CancelledError:
        pass
    assert task[0].cancelled()
    assert len(attempts) == 1, "retried after the cancellation"
