"""Glue for one run: a source, the bus with its endpoints, progress, signals, summary."""

from __future__ import annotations

import logging
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TextIO

from streamer.core.bus import Bus, BusError, make_route
from streamer.console.rate import RateWindow
from streamer.config.settings import EndpointSpec
from streamer.endpoints import EndpointError, create_endpoint
from streamer.endpoints.base import Endpoint
from streamer.endpoints.layers.waiting import left_behind, stop_waiting, waiting_for
from streamer.events.codec import JSON_LINES
from streamer.util.runtime import install_signal_handlers
from streamer.sources.base import Batch, Source, SourceError
from streamer.util.urls import mask
from streamer.util.exitcodes import signalled

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

log = logging.getLogger("streamer")


@dataclass
class RunResult:
    exit_code: int
    events: int
    seconds: float
    delivered: list[tuple[str, int, BaseException | None]] = field(default_factory=list)
    interrupted: int | None = None
    stats: list[tuple[str, Any]] = field(default_factory=list)
    """(endpoint name, `core.bus.RouteStats`) per endpoint."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Inputs left out (each named in a warning), by reason."""
    undelivered: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    """Per endpoint name: events it took that did not arrive (`Endpoint.undelivered`: unroutable, dead-lettered)."""


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


def build_endpoints(specs: list[EndpointSpec],
                    defaults: dict[str, Any] | None = None) -> list[tuple[Endpoint, EndpointSpec]]:
    endpoints = []
    for spec in specs:
        options = {**(defaults or {}), **spec.options}
        endpoints.append((create_endpoint(spec.url, options), spec))
    return endpoints


async def run_pipeline(source: Source, specs: list[EndpointSpec], *, on_error: str = "stop",
                       defaults: dict[str, Any] | None = None, progress: bool | None = None,
                       stderr: TextIO | None = None, label: str = "events",
                       endpoints: list[Endpoint] | None = None,
                       extra: list[tuple[Endpoint, EndpointSpec]] | None = None,
                       signals: bool = True, metrics: str | None = None, meter: Any = None,
                       watch: Callable[[Batch], None] | None = None, live: bool | None = None,
                       exporter: Any = None) -> RunResult:
    """Run `source` into the endpoints of `specs` until it ends or a signal stops it.

    `live`: the source runs until stopped (a tail), so a signal ending it is a normal end (exit 0);
    by default the source's own `follow`.

    `extra`: endpoints built by the caller (with their specs) added to those of
    `specs`; `signals=False`: the caller handles SIGINT/SIGTERM itself;
    `metrics`: HOST:PORT to serve Prometheus metrics and /healthz on while it runs (or `exporter`: a
    running `metrics.Metrics` of the caller's, e.g. `streamer serve`'s, the bus attached to it meanwhile); `meter`:
    the progress display (default: `Progress`); `watch`: called with every batch.
    """
    err = stderr or sys.stderr
    built = [(e, EndpointSpec(url=e.url.raw)) for e in endpoints] if endpoints else build_endpoints(specs, defaults)
    built += extra or []
    # the bus parks events in overflow files with the Stampede codec: it knows records, not events
    routes = [make_route(endpoint, spec.events, codec=JSON_LINES, buffer=spec.buffer, batch=spec.batch)
              for endpoint, spec in built]
    sinks = [endpoint for endpoint, _ in built]
    saved = source.endpoint_marks()
    for endpoint in sinks:  # exactly-once endpoints undo what they wrote after the checkpoint resumed from
        key = endpoint.state_key
        if key is not None and key in saved:
            endpoint.resume(saved[key])
    bus = Bus(routes, on_error=on_error, commit=source.commit)
    source.held_downstream = bus.holding  # type: ignore[method-assign]
    shared_exporter = exporter
    if shared_exporter is not None:
        from streamer.run.metrics import source_label

        shared_exporter.attach(bus, source=source_label(source), health=getattr(source, "health", None),
                               node=source)
    exporter = await start_metrics(metrics, bus, source)
    show = err.isatty() if progress is None else progress
    meter = meter if meter is not None else Progress(err, show)
    stopped: list[int] = []

    def on_stop(signum: int) -> None:
        stopped.append(signum)
        err.write(f"\nstreamer: {signal.Signals(signum).name}: flushing buffered events, then exiting\n")
        for endpoint in sinks:  # say what the flush waits for, and for how long
            note = waiting_for(endpoint)
            if note:
                err.write(f"streamer: {mask(note)}\n")
            stop_waiting(endpoint)
        err.flush()
        source.stop()

    def left() -> list[str]:
        return [mask(note) for endpoint in sinks if (note := left_behind(endpoint))]

    if signals:
        install_signal_handlers(on_stop, left)
    started = time.monotonic()
    exit_code = 0
    try:
        await bus.start()
        await source.commit_start(bus.marks())
        async for batch in source.batches():
            await bus.publish(batch)
            if watch is not None:
                watch(batch)
            meter.update(bus.published_events, batch.done, batch.total, label)
            if stopped:
                break
    except BusError:  # the bus has reported the failing endpoint already
        exit_code = 1
    except EndpointError as exc:
        log.error("%s", exc)
        exit_code = 1
    except SourceError as exc:
        err.write(f"streamer: error: {mask(str(exc))}\n")
        exit_code = 1
    finally:
        meter.finish()
        source.stop()
        await bus.close()
        await source.close()
        if exporter is not None:
            await exporter.stop()
        if shared_exporter is not None:
            shared_exporter.detach(bus)
    if bus.error is not None or any(failed for _, _, failed in bus.summary()):
        exit_code = 1  # --on-error isolate too: the others completed, but cron and systemd must see it
    if live is None:
        live = source.follow
    if stopped and exit_code == 0 and not live:
        exit_code = signalled(stopped[0])
    return RunResult(exit_code, bus.published_events, time.monotonic() - started, bus.summary(),
                     stopped[0] if stopped else None, bus.route_stats(), dict(bus.dropped),
                     {endpoint.name: endpoint.undelivered() for endpoint in sinks})


async def start_metrics(address: str | None, bus: Bus, source: Source) -> Any:
    """A `Metrics` exporter serving `address` with `bus` attached (None without an address)."""
    if not address:
        return None
    from streamer.run.metrics import source_label, start_exporter

    one = hasattr(source, "submit_dir")  # the workflow monitor follows one workflow (and its sub-workflows)
    exporter = await start_exporter(address, workflows=lambda: int(one and not getattr(source, "finished", False)))
    exporter.attach(bus, source=source_label(source), health=getattr(source, "health", None), node=source)
    return exporter


def print_summary(result: RunResult, stream: SupportsWrite[str], *, bad_lines: int = 0) -> None:
    rate = result.events / result.seconds if result.seconds > 0 else 0.0
    stream.write(f"streamer: {result.events:,} events read in {result.seconds:.2f} s ({rate:,.0f} events/s)\n")
    for name, delivered, failed in result.delivered:
        state = f"FAILED: {failed}" if failed else "ok"
        lost = result.undelivered.get(name, [])
        arrived = max(delivered - sum(count for count, _ in lost), 0)
        state += "".join(f" · {count:,} {what}" for count, what in lost)
        stream.write(f"  {arrived:>10,} -> {name}  {state}\n")
    if bad_lines:
        stream.write(f"streamer: {bad_lines:,} malformed line(s) skipped "
                     "(see messages above; --strict stops at the first)\n")
    dropped = {reason: count for reason, count in result.dropped.items() if not (bad_lines and reason == "bad_line")}
    if dropped:  # (malformed lines were said just above)
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(dropped.items()))
        stream.write(f"streamer: {sum(dropped.values()):,} input(s) left out or cut short ({reasons}): "
                     "see the warnings above\n")
