"""What SIGINT/SIGTERM do to a run: say what the flush waits for, stop the source after the batch under way (a
second signal exits at once, naming what it leaves behind: `util.runtime.install_signal_handlers`)."""

from __future__ import annotations

import signal
from typing import TextIO

from streamer.endpoints.base import Endpoint
from streamer.endpoints.layers.waiting import left_behind, stop_waiting, waiting_for
from streamer.sources.base import Source
from streamer.util.runtime import install_signal_handlers
from streamer.util.urls import mask


class Stopping:
    """The signals a run received (`signals`: the first ends it after the batch under way)."""

    def __init__(self, source: Source, endpoints: list[Endpoint], err: TextIO) -> None:
        self.source = source
        self.endpoints = endpoints
        self.err = err
        self.signals: list[int] = []

    def install(self) -> None:
        install_signal_handlers(self.stop, self.left)

    def stop(self, signum: int) -> None:
        self.signals.append(signum)
        self.err.write(f"\nstreamer: {signal.Signals(signum).name}: flushing buffered events, then exiting\n")
        for endpoint in self.endpoints:  # say what the flush waits for, and for how long
            note = waiting_for(endpoint)
            if note:
                self.err.write(f"streamer: {mask(note)}\n")
            stop_waiting(endpoint)
        self.err.flush()
        self.source.stop()

    def left(self) -> list[str]:
        return [mask(note) for endpoint in self.endpoints if (note := left_behind(endpoint))]

    @property
    def first(self) -> int | None:
        return self.signals[0] if self.signals else None
