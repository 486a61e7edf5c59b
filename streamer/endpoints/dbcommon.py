"""What the SQLite and PostgreSQL endpoints share besides the loader.

Both keep a bounded list of rejected events (for the CLI's summary and for
tests), count what they wrote, and log rejections once each with the event
named, so a malformed event never hides among thousands of good ones.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from .plan import Plan

log = logging.getLogger("streamer.endpoints.db")


class WriteStats:
    """Counters of one database endpoint (read by `bench/bench_db.py`)."""

    def __init__(self) -> None:
        self.events = 0
        self.rows = 0
        self.batches = 0
        self.retries = 0
        self.rejected: deque[str] = deque(maxlen=1000)

    def record(self, plan: Plan, endpoint_name: str) -> None:
        self.events += plan.events
        self.rows += plan.row_count
        self.batches += 1
        for message in plan.rejected:
            self.rejected.append(message)
            log.warning("%s: %s", endpoint_name, message)

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "rows": self.rows, "batches": self.batches,
                "retries": self.retries, "rejected": len(self.rejected)}
