"""The progress line of `streamer replay` / `streamer follow`, drawn with rich on a terminal.

`wf-label: 120/213 jobs · 3 running · 1 held · 0 failed · 5:12 elapsed · ETA 2 min · 1,234 events/s`

Jobs are counted by `status.tracker.StatusTracker` from the events themselves
(sub-workflows included); the rate is the current one (the last few seconds),
not the run's average. While nothing happens the line says what it waits for
(`waiting for DAGMan to start`, `DAGMan exited; waiting for a restart
(--keep-alive)`). Log lines written while it is shown go above it (rich's
Live redirects stderr and stdout, and streamer's log handler follows), so
nothing ever prints over it. `endsummary.py` prints what is left at the end.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any, Iterable, TextIO

from streamer.console.rate import WINDOW, RateWindow
from streamer.sources.base import Batch
from streamer.events.tally.counts import RUNNING
from streamer.events.tally.tracker import DONE, FAILED, HELD, RUNNING_JOB, StatusTracker

if TYPE_CHECKING:  # rich is imported where a line is drawn: `-q` and a pipe never load it (~25 ms)
    from rich.live import Live
    from rich.text import Text


def clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def eta(seconds: float) -> str:
    if seconds < 60:
        return f"{max(int(seconds), 1)} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class RunView:
    """Follows a workflow run from its events: counts for the progress line and the end summary."""

    def __init__(self, *, follow: bool = False, keep_alive: bool = False) -> None:
        self.tracker = StatusTracker()
        self.follow = follow
        self.keep_alive = keep_alive
        self.started = time.monotonic()
        self.events = 0
        self._window = RateWindow()
        self._first_done: tuple[float, int] | None = None

    def watch(self, batch: Batch) -> None:
        self.tracker.feed(batch.events)

    def prime(self, history: Iterable[list[Any]]) -> None:
        """A resumed run: the workflow's events before its position first, so the line and the end summary
        describe the workflow (jobs, failures, label, state), not only what this process reads."""
        for events in history:
            self.tracker.feed(events)

    def count(self, events: int) -> None:
        now = time.monotonic()
        self.events = events
        self._window.add(now, events)

    def rate(self) -> float:
        """Events per second over the last few seconds (0 when idle that long)."""
        return self._window.rate(time.monotonic(), idle_after=WINDOW, min_span=0.2)

    def jobs(self) -> tuple[int, int, int, int, int]:
        """(done, total, running, held, failed) over every workflow of the run."""
        done = total = running = held = failed = 0
        for wf in self.tracker.workflows.values():
            for job in wf.jobs.values():
                total += 1
                phase = wf.node_state(job)
                done += phase == DONE
                failed += phase == FAILED
                running += phase == RUNNING_JOB
                held += phase == HELD
        return done, total, running, held, failed

    def line(self) -> str:
        roots = self.tracker.roots()
        root = roots[0] if roots else None
        elapsed = time.monotonic() - self.started
        if root is None or root.started is None:
            return f"waiting for DAGMan to start · {clock(elapsed)} elapsed"
        label = root.label or (root.dag or "").removesuffix(".dag") or root.xwf_id[:8]
        done, total, running, held, failed = self.jobs()
        parts = [f"{label}: {done}/{total} jobs", f"{running} running", f"{held} held", f"{failed} failed",
                 f"{clock(elapsed)} elapsed"]
        if not any(w.state == RUNNING for w in roots):
            if self.follow and self.keep_alive:
                parts.append("DAGMan exited; waiting for a restart (--keep-alive)")
            return " · ".join(parts)
        if self._first_done is None and done:
            self._first_done = (elapsed, done)
        if done and total > done and self._first_done is not None and elapsed > self._first_done[0]:
            speed = (done - self._first_done[1]) / (elapsed - self._first_done[0])
            if speed > 0:
                parts.append(f"ETA {eta((total - done) / speed)}")
        parts.append(f"{self.rate():,.0f} events/s")
        return " · ".join(parts)


class _Line:
    def __init__(self, view: RunView) -> None:
        self.view = view

    def __rich__(self) -> Text:
        from rich.text import Text

        return Text(self.view.line(), no_wrap=True, overflow="ellipsis")


class ProgressLine:
    """The pipeline's meter for a workflow run: `update` per batch, `finish` at the end."""

    def __init__(self, view: RunView, stream: TextIO, enabled: bool) -> None:
        self.view = view
        self.stream = stream
        self.live: Live | None = None
        self._handlers: list[tuple[logging.StreamHandler, Any]] = []
        if enabled:
            from rich.console import Console
            from rich.live import Live

            # soft_wrap: a long warning wraps as the terminal wraps it (tmux -J joins it back), never cut at a space
            console = Console(file=stream, highlight=False, soft_wrap=True)
            self.live = Live(_Line(view), console=console, refresh_per_second=4, transient=True,
                             redirect_stdout=True, redirect_stderr=True)
            self.live.start()
            for handler in logging.getLogger().handlers:  # log lines go above the line, not over it
                if isinstance(handler, logging.StreamHandler) and handler.stream is stream:
                    self._handlers.append((handler, handler.setStream(sys.stderr)))

    def update(self, events: int, done: int = 0, total: int | None = None, label: str = "events") -> None:
        self.view.count(events)

    def finish(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
            for handler, stream in self._handlers:
                handler.setStream(stream)
            self._handlers.clear()
