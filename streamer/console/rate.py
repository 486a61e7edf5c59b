"""The events/s a person is shown: a count over the last few seconds, not the run's average."""

from __future__ import annotations

from collections import deque

WINDOW = 5.0
"""Seconds of history a rate is measured over."""


class RateWindow:
    """Samples of (time, running count); `rate` is the count's growth per second over the last `window` s."""

    def __init__(self, window: float = WINDOW, start: tuple[float, int] | None = None) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque([start] if start else [])

    def add(self, now: float, count: int) -> None:
        self._samples.append((now, count))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rate(self, now: float, *, idle_after: float | None = None, min_span: float = 0.0) -> float:
        """Growth per second from the oldest sample kept to `now`; 0 with no samples, when the newest is older
        than `idle_after` s, or over a span of `min_span` s or less (when one is given)."""
        if not self._samples:
            return 0.0
        last_t, last_n = self._samples[-1]
        if idle_after is not None and now - last_t > idle_after:
            return 0.0
        first_t, first_n = self._samples[0]
        span = now - first_t
        if min_span and span <= min_span:
            return 0.0
        return (last_n - first_n) / max(span, 1e-9)
