"""Glue for one run: a source, the bus with its endpoints, progress, signals, summary."""

from __future__ import annotations

import logging
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from .bus import Bus, BusError, make_route
from .config import EndpointSpec
from .endpoints import EndpointError, create_endpoint
from .endpoints.base import Endpoint
from .runtime import install_signal_handlers
from .sources.base import Source, SourceError
from .urls import mask

log = logging.getLogger("streamer")


@dataclass
class RunResult:
    exit_code: int
    events: int
    seconds: float
    delivered: list[tuple[str, int, BaseException | None]] = field(default_factory=list)
    interrupted: int | None = None


class Progress:
    """A one-line progress report on a terminal (`events  events/s  percent`)."""

    def __init__(self, stream: TextIO, enabled: bool, interval: float = 0.5) -> None:
        self.stream = stream
        self.enabled = enabled
        self.interval = interval
        self.started = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, events: int, done: int = 0, total: int | None = None, label: str = "events") -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < self.interval:
            return
        self._last = now
        rate = events / max(now - self.started, 1e-9)
        share = f"  {100 * done / total:5.1f}%" if total else ""
        self.stream.write(f"\r{events:,} {label}  {rate:,.0f} events/s{share}   ")
        self.stream.flush()
        self._shown = True

    def finish(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


def build_endpoints(specs: list[EndpointSpec], defaults: dict[str, Any] | None = None) -> list[tuple[Endpoint, EndpointSpec]]:
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
                       signals: bool = True, live: bool | None = None) -> RunResult:
    """Run `source` into the endpoints of `specs` until it ends or a signal stops it.

    `live`: the source runs until stopped (a tail), so a signal ending it is a normal end (exit 0);
    by default the source's own `follow`.

    `extra`: endpoints built by the caller (with their specs) added to those of
    `specs`; `signals=False`: the caller handles SIGINT/SIGTERM itself.
    """
    err = stderr or sys.stderr
    routes = []
    built = [(e, EndpointSpec(url=e.url.raw)) for e in endpoints] if endpoints else build_endpoints(specs, defaults)
    built += extra or []
    for endpoint, spec in built:
        routes.append(make_route(endpoint, spec.events, buffer=spec.buffer, batch=spec.batch))
    saved = source.endpoint_marks()
    for route in routes:  # exactly-once endpoints undo what they wrote after the checkpoint resumed from
        key = route.endpoint.state_key
        if key is not None and key in saved:
            route.endpoint.resume(saved[key])
    bus = Bus(routes, on_error=on_error, commit=source.commit)
    show = err.isatty() if progress is None else progress
    meter = Progress(err, show)
    stopped: list[int] = []

    def on_stop(signum: int) -> None:
        stopped.append(signum)
        err.write(f"\nstreamer: {signal.Signals(signum).name}: flushing buffered events, then exiting\n")
        source.stop()

    if signals:
        install_signal_handlers(on_stop)
    started = time.monotonic()
    exit_code = 0
    try:
        await bus.start()
        await source.commit_start(bus.marks())
        async for batch in source.batches():
            await bus.publish(batch)
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
    if bus.error is not None:
        exit_code = 1
    if live is None:
        live = source.follow
    if stopped and exit_code == 0 and not live:
        exit_code = 128 + stopped[0]
    return RunResult(exit_code, bus.published_events, time.monotonic() - started, bus.summary(),
                     stopped[0] if stopped else None)


def print_summary(result: RunResult, stream: TextIO, *, bad_lines: int = 0) -> None:
    rate = result.events / result.seconds if result.seconds > 0 else 0.0
    stream.write(f"streamer: {result.events:,} events read in {result.seconds:.2f} s ({rate:,.0f} events/s)\n")
    for name, delivered, failed in result.delivered:
        state = f"FAILED: {failed}" if failed else "ok"
        stream.write(f"  {delivered:>10,} -> {name}  {state}\n")
    if bad_lines:
        stream.write(f"streamer: {bad_lines:,} malformed line(s) skipped (see messages above; --strict stops at the first)\n")
