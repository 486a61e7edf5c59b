"""One run: `Run(source, endpoints, RunOptions)` reads a source into its endpoints through the bus until the
source ends or a signal stops it, and says how it went (`RunResult`: exit code, counts).

Its jobs live beside it, one module each: `wiring.py` (endpoints, routes, the bus), `runmetrics.py` (the
metrics of the run), `signals.py` (SIGINT/SIGTERM), `summary.py` (the lines said at the end); the progress on
a terminal is the console's (`console/progress.py`)."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

from streamer.console.progress import Meter, Progress
from streamer.core.bus import Bus, BusError, RouteStats
from streamer.endpoints import EndpointError
from streamer.run.metrics import Metrics
from streamer.run.runmetrics import RunMetrics
from streamer.run.signals import Stopping
from streamer.run.wiring import Routed, connect
from streamer.sources.base import Batch, Source, SourceError
from streamer.util.exitcodes import signalled
from streamer.util.urls import mask

log = logging.getLogger("streamer")


@dataclass
class RunOptions:
    """How a run goes, besides its source and endpoints."""

    on_error: str = "stop"
    """A failing endpoint stops the run ("stop") or is isolated while the others go on ("isolate")."""
    progress: bool | None = None
    """Show the progress line (`console.progress.Progress`) on `stderr`; None: when it is a terminal."""
    meter: Meter | None = None
    """The progress display instead (`console.progressline.ProgressLine`)."""
    label: str = "events"
    """What the progress line counts."""
    stderr: TextIO | None = None
    """Where the progress line, signal notes and source errors go (default: sys.stderr)."""
    signals: bool = True
    """Handle SIGINT/SIGTERM (False: the caller does)."""
    metrics: str | None = None
    """HOST:PORT to serve Prometheus metrics and /healthz on while the run lasts."""
    exporter: Metrics | None = None
    """A running exporter of the caller's (`streamer serve`'s) to count the run's bus in meanwhile."""
    watch: Callable[[Batch], None] | None = None
    """Called with every batch once published."""
    live: bool | None = None
    """The source runs until stopped (a tail): a signal ending it is a normal end (exit 0); None: the source's
    `follow`."""


@dataclass
class RunResult:
    exit_code: int
    events: int
    seconds: float
    delivered: list[tuple[str, int, BaseException | None]] = field(default_factory=list)
    interrupted: int | None = None
    stats: list[tuple[str, RouteStats]] = field(default_factory=list)
    """(endpoint name, its route's counters) per endpoint."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Inputs left out (each named in a warning), by reason."""
    undelivered: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    """Per endpoint name: events it took that did not arrive (`Endpoint.undelivered`: unroutable, dead-lettered)."""


class Run:
    """`source` read into `endpoints` (built by `wiring.build_endpoints`, or by the caller) as `options` say."""

    def __init__(self, source: Source, endpoints: list[Routed], options: RunOptions | None = None) -> None:
        self.source = source
        self.endpoints = endpoints
        self.options = options or RunOptions()
        self.err = self.options.stderr or sys.stderr

    async def run(self) -> RunResult:
        """Until the source ends or a signal stops it; the endpoints and the source closed after."""
        options, source = self.options, self.source
        sinks = [endpoint for endpoint, _ in self.endpoints]
        bus = connect(source, self.endpoints, on_error=options.on_error)
        counted = await RunMetrics.start(bus, source, address=options.metrics, shared=options.exporter)
        meter = options.meter or Progress(self.err, self.err.isatty() if options.progress is None
                                          else options.progress)
        stopping = Stopping(source, sinks, self.err)
        if options.signals:
            stopping.install()
        started = time.monotonic()
        try:
            exit_code = await self._deliver(bus, meter, stopping)
        finally:
            meter.finish()
            source.stop()
            await bus.close()
            await source.close()
            await counted.close()
        if bus.error is not None or any(failed for _, _, failed in bus.summary()):
            exit_code = 1  # --on-error isolate too: the others completed, but cron and systemd must see it
        live = source.follow if options.live is None else options.live
        if stopping.first is not None and exit_code == 0 and not live:
            exit_code = signalled(stopping.first)
        return RunResult(exit_code, bus.published_events, time.monotonic() - started, bus.summary(),
                         stopping.first, bus.route_stats(), dict(bus.dropped),
                         {endpoint.name: endpoint.undelivered() for endpoint in sinks})

    async def _deliver(self, bus: Bus, meter: Meter, stopping: Stopping) -> int:
        """Every batch of the source published (0), or the exit code of what stopped it."""
        try:
            await bus.start()
            await self.source.commit_start(bus.marks())
            async for batch in self.source.batches():
                await bus.publish(batch)
                if self.options.watch is not None:
                    self.options.watch(batch)
                meter.update(bus.published_events, batch.done, batch.total, self.options.label)
                if stopping.signals:
                    break
        except BusError:  # the bus has reported the failing endpoint already
            return 1
        except EndpointError as exc:
            log.error("%s", exc)
            return 1
        except SourceError as exc:
            self.err.write(f"streamer: error: {mask(str(exc))}\n")
            return 1
        return 0
