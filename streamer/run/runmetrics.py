"""The metrics of one run: its bus counted by an exporter of its own (`--metrics HOST:PORT`) or by the caller's
(`streamer serve`'s, the bus attached while the run lasts)."""

from __future__ import annotations

from streamer.core.bus import Bus
from streamer.run.metrics import Metrics, source_label, start_exporter
from streamer.sources.base import Source


class RunMetrics:
    """What counts one run's bus; `close()` once the bus closed."""

    def __init__(self, bus: Bus, own: Metrics | None, shared: Metrics | None) -> None:
        self.bus = bus
        self.own = own
        self.shared = shared

    @classmethod
    async def start(cls, bus: Bus, source: Source, *, address: str | None, shared: Metrics | None) -> RunMetrics:
        """Attach `bus` to `shared` and, with an `address`, to an exporter of its own serving it (its
        `streamer_workflows_active` is the source's `workflows`)."""
        health = source.health if source.reachable else None
        if shared is not None:
            shared.attach(bus, source=source_label(source), health=health, node=source)
        own = None
        if address:
            own = await start_exporter(address, workflows=lambda: source.workflows)
            own.attach(bus, source=source_label(source), health=health, node=source)
        return cls(bus, own, shared)

    async def close(self) -> None:
        if self.own is not None:
            await self.own.stop()
        if self.shared is not None:
            self.shared.detach(self.bus)
