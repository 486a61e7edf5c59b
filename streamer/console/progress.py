"""The progress of a run on a terminal: `Meter` (what a run updates), `Progress` (the plain line of `load`)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Callable, Protocol, TextIO

from streamer.console.rate import RateWindow


class Meter(Protocol):
    """What a run reports its progress to after every batch, and finishes once it ended."""

    def update(self, events: int, done: int = 0, total: int | None = None, label: str = "events") -> None:
        """`events` published so far; `done` of `total` units of work (lines, jobs, ...) when known."""

    def finish(self) -> None:
        """Take the display off the screen (the run ended)."""


class _AboveTheLine:
    """Stands for the progress line's stream while it is drawn: whatever else is written there (a warning, a
    malformed line's report) first clears the line, so it starts on a line of its own; the next update draws
    the line again below it."""

    def __init__(self, progress: "Progress", stream: TextIO) -> None:
        self._progress = progress
        self._stream = stream

    def write(self, text: str) -> int:
        self._progress.clear()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Progress:
    """A one-line progress report on a terminal: events, the current events/s, percent.

    While it is enabled, messages written to its stream (sys.stderr and the log handlers writing there) go
    above the line, never onto its end."""

    def __init__(self, stream: TextIO, enabled: bool, interval: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.enabled = enabled
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._last = float("-inf")
        self._shown = False
        self._window = RateWindow(start=(self.started, 0))
        self._redirected: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._stderr: Any = None
        if enabled:
            above = _AboveTheLine(self, stream)
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is stream:
                    self._redirected.append((handler, handler.setStream(above)))
            if sys.stderr is stream:
                self._stderr, sys.stderr = sys.stderr, above

    def clear(self) -> None:
        """Take the line off the screen (it is drawn again at the next update)."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self._shown = False
            self._last = float("-inf")

    def rate(self, now: float, events: int) -> float:
        """Events per second over the last few seconds (`console.rate.WINDOW`), not the run's average."""
        self._window.add(now, events)
        return self._window.rate(now)

    def update(self, events: int, done: int = 0, total: int | None = None, label: str = "events") -> None:
        now = self.clock()
        rate = self.rate(now, events)
        if not self.enabled or now - self._last < self.interval:
            return
        self._last = now
        share = f"  {100 * done / total:5.1f}%" if total else ""
        self.stream.write(f"\r{events:,} {label}  {rate:,.0f} events/s now{share}   ")
        self.stream.flush()
        self._shown = True

    def finish(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()
            self._shown = False
        for handler, stream in self._redirected:
            handler.setStream(stream)
        self._redirected.clear()
        if self._stderr is not None:
            sys.stderr, self._stderr = self._stderr, None
