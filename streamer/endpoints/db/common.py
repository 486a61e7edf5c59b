"""What the SQLite and PostgreSQL endpoints share besides the loader.

Both keep a bounded list of rejected events (for the CLI's summary and for
tests), count what they wrote, and log rejections once each with the event
named, so a malformed event never hides among thousands of good ones.

Events that arrive before their parent (`?wait_parents=30s`, the default of a
collector): collectors sharing one queue each get part of a workflow's events,
and a broker redelivers a killed collector's messages after later ones, so a
job's events can reach one collector before the `job.info` or `wf.plan` they
hang on is committed (by the other collector, or by this one from a later
batch). Such an event (its workflow, job, task or job instance not in the
database yet) is held instead of refused and written again — after re-reading
what other writers committed — after each later batch and, at a checkpoint,
with backoff, until it fits or it has waited `wait_parents` seconds (then it is
refused as usual, and dead-lettered when so set up). While an endpoint holds
events (or writes them again), the bus acknowledges nothing from their batch on
(`Endpoint.holding`), so a crash loses none of them. A checkpoint that waits
for them (`settle`) takes the endpoint's write lock for each attempt only: the
endpoint's next writes, which may bring the parents, go on meanwhile.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import Any, Awaitable, Callable

from streamer.core.retry import Backoff
from streamer.events import Event
from streamer.endpoints.db.loader import Loader
from streamer.endpoints.db.plan import Plan

log = logging.getLogger("streamer.endpoints.db")


class WriteStats:
    """Counters of one database endpoint (read by `bench/bench_db.py`)."""

    def __init__(self) -> None:
        self.events = 0
        self.rows = 0
        self.batches = 0
        self.retries = 0
        self.rejected: deque[str] = deque(maxlen=1000)
        self.refused: list[Any] | None = None
        """Set to a list to collect (event, reason) of each rejected event (the dead-letter layer does)."""
        self.holding: list[tuple[Event, str, str, float]] | None = None
        """Set to a list (`?wait_parents`): events whose parent is not loaded yet wait there, not refused."""
        self._retrying = 0
        """Held events being written again (out of `holding` meanwhile): they count as held (`waiting`)."""

    def record(self, plan: Plan, endpoint_name: str) -> None:
        self.rows += plan.row_count
        self.batches += 1
        held = 0
        for message, (event, reason) in zip(plan.rejected, plan.refused):
            if self.holding is not None and reason.startswith(ORPHAN):
                self.holding.append((event, reason, message, time.monotonic()))
                held += 1
            else:
                self._refuse(event, reason, message, endpoint_name)
        self.events += plan.events - held

    def _refuse(self, event: Event, reason: str, message: str, endpoint_name: str) -> None:
        self.rejected.append(message)
        if self.refused is not None:  # the dead-letter layer reports it, once, with where it went
            self.refused.append((event, reason))
            return
        log.warning("%s: %s", endpoint_name, message)

    def waiting(self) -> bool:
        """Events are held, or being written again (`Endpoint.holding`: nothing from their batch is
        acknowledged until they are in)."""
        return bool(self.holding) or self._retrying > 0

    def hold_since(self) -> float:
        return min(since for *_, since in self.holding) if self.holding else 0.0

    async def retry_held(self, endpoint_name: str, loader: Loader, wait: float,
                         write_again: Callable[[list[Event]], Awaitable[None]]) -> None:
        """Write the held events once more; those held `wait` seconds are refused."""
        if not self.holding:
            return
        now = time.monotonic()
        held, self.holding = self.holding, []
        expired = [h for h in held if now - h[3] >= wait]
        for event, reason, message, _ in expired:
            self._refuse(event, reason, message + f" (waited {wait:g} s for it)", endpoint_name)
        again = [h for h in held if now - h[3] < wait]
        if again:
            since = {id(event): t for event, _, _, t in again}
            events = [event for event, *_ in again]
            loader.forget(Loader.mentioned_uuids(events))  # re-read what the other writers committed
            self._retrying += 1
            try:
                await write_again(events)
            finally:
                self._retrying -= 1
            self.holding = [(e, r, m, since.get(id(e), now)) for e, r, m, _ in self.holding]

    async def settle(self, retry: Callable[[], Awaitable[None]], wait: float) -> None:
        """Retry the held events with backoff until none is left (each is refused after `wait` seconds).

        `retry` takes the endpoint's write lock for one attempt only: between attempts the endpoint's
        writes go on, and they may bring the parents themselves (a killed collector's redelivered
        messages reach the survivor after the later events that hang on them). A checkpoint that kept
        the lock while it waited kept those parents out until the wait ran out: the events were refused."""
        waits = Backoff(first=0.05, cap=1.0).waits()
        while self.waiting():
            left = self.hold_since() + wait - time.monotonic() if self.holding else math.inf
            if left > 0:
                await waits.wait(at_most=left)
            await retry()

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "rows": self.rows, "batches": self.batches,
                "retries": self.retries, "rejected": len(self.rejected)}


ORPHAN = ("unknown workflow ", "unknown job ", "unknown task ")
"""Refusal reasons of an event whose parent row is not loaded (yet): `Loader._wf`, `_job_id`, `_inst_id`, `_task_id`."""


def hold_orphans(stats: WriteStats, wait: float) -> None:
    """Turn on holding (`wait` > 0) for an endpoint's statistics."""
    stats.holding = [] if wait > 0 else None
