"""`--db-stats`: every endpoint's statistics logged at the end of a run.

monitord's `--db-stats` makes its loaders time their work and log the figures when they close, raising the
log level to INFO for that if it was set higher. streamer's equivalent comes from the bus: for each endpoint,
the events delivered, the batches written, the seconds spent writing them and the resulting rate.
"""

from __future__ import annotations

import logging

from streamer.run.pipeline import RunResult
from streamer.util.urls import mask

log = logging.getLogger("streamer.monitord")


def stat_lines(result: RunResult) -> list[str]:
    """One line per endpoint: `db-stats: NAME: N events in B batches, S s writing (R events/s)`."""
    lines = []
    for name, stats in result.stats:
        rate = stats.delivered / stats.busy_seconds if stats.busy_seconds > 0 else 0.0
        lines.append(f"db-stats: {mask(name)}: {stats.delivered} events in {stats.batches} batches, "
                     f"{stats.busy_seconds:.3f} s writing ({rate:,.0f} events/s)")
    return lines


def log_db_stats(result: RunResult) -> None:
    """Log the statistics at INFO, raising the root level to INFO first if it is higher (as monitord)."""
    root = logging.getLogger()
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)
    for line in stat_lines(result):
        log.info("%s", line)
