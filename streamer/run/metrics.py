"""Prometheus metrics and a health check for a running streamer (`--metrics HOST:PORT`).

`GET /metrics` serves Prometheus's text format (prometheus-client), `GET /healthz`
answers 200 `ok` while every endpoint is healthy and 503 with the reasons
otherwise (an endpoint failed, or its broker is unreachable and it is spooling).

Everything is read from the buses at scrape time (route counters, buffers,
overflow files, endpoint retry and connection counts), so delivery pays
nothing for metrics except the latency histogram, which the bus feeds through
its `on_delivered` hook (the bus knows nothing of Stampede or of Prometheus).

Every metric is declared once, in `METRICS` (what `collect` serves and `docs/reference/metrics.md` lists).

`streamer serve` uses the same object: `Metrics.attach(bus, source=...)` per
bus, `Metrics.workflows = callable` for the active workflows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterator

log = logging.getLogger("streamer.run.metrics")

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf"))


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its family name, Prometheus type, labels, HELP text and what it counts, in words."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str
    doc: str

    @property
    def exposed(self) -> str:
        """The name a scrape shows (`_total` after a counter's family name)."""
        return self.name + "_total" if self.kind == "counter" else self.name


METRICS: Final = (
    MetricSpec("streamer_events_in", "counter", ("source",), "Events the sources handed to the bus",
               "events the source handed to the bus (`source`: `file`, `workflow`, `jobstate`, `queue`, `amqp`)"),
    MetricSpec("streamer_input_dropped", "counter", ("reason",),
               "Inputs the sources left out or cut short, by reason (each named in a warning)",
               "inputs a source left out or cut short, each named on stderr (`reason`: `kickstart_record`, "
               "`kickstart_empty`, `kickstart_missing`, `special_file`, `unreadable_file`, `bad_line`, "
               "`line_too_long`, `repeated_line`)"),
    MetricSpec("streamer_events_out", "counter", ("endpoint",),
               "Events the endpoint's server acknowledged (spooled ones once delivered)",
               "events the endpoint's server acknowledged (`endpoint`: its masked URL); an event spooled while the "
               "server is away counts once the spool delivered it"),
    MetricSpec("streamer_endpoint_buffer_events", "gauge", ("endpoint",),
               "Events waiting for the endpoint (memory buffer and overflow file)",
               "events waiting for it (memory buffer and overflow file)"),
    MetricSpec("streamer_endpoint_overflow_bytes", "gauge", ("endpoint",),
               "Bytes parked in the endpoint's overflow file", "bytes parked in its overflow file"),
    MetricSpec("streamer_endpoint_errors", "counter", ("endpoint",),
               "Failed attempts, connections refused or lost, failed spool replays, events not encodable, "
               "events dead-lettered",
               "failed attempts (retried ones included), each outage of its server and each failed replay of its "
               "spool, events it could not encode, dead letters, 1 once it failed"),
    MetricSpec("streamer_endpoint_reconnects", "counter", ("endpoint",), "Connections opened again after a loss",
               "connections opened again after a loss"),
    MetricSpec("streamer_endpoint_lag_seconds", "gauge", ("endpoint",),
               "Age of the oldest event the endpoint has not acknowledged (spooled events included)",
               "age of the oldest event it has not acknowledged, spooled events included (0 when caught up)"),
    MetricSpec("streamer_endpoint_spooled_events", "gauge", ("endpoint",),
               "Events waiting in the endpoint's spool for its server",
               "events waiting in its spool while its broker or database is away (0 when it is back and drained)"),
    MetricSpec("streamer_endpoint_held_events", "gauge", ("endpoint",),
               "Events a database endpoint holds for another writer's rows",
               "events a database holds for another writer's workflow or job rows (`wait_parents`)"),
    MetricSpec("streamer_endpoint_up", "gauge", ("endpoint",),
               "1 while the endpoint's broker or database takes events, 0 while it is unreachable or failed",
               "1 while its broker or database takes events, 0 while it is unreachable (as /healthz's 503) or failed"),
    MetricSpec("streamer_source_up", "gauge", ("source",),
               "1 while the source's broker is reachable, 0 while not",
               "a collector: 1 while its queue's broker is reachable, 0 while not (only sources with a broker)"),
    MetricSpec("streamer_amqp_node", "gauge", ("client", "node"), "The RabbitMQ node an AMQP client is connected "
               "to (or last was)", "1 per AMQP endpoint and collector, labelled with the broker node (`host:port`) it "
               "uses now: with several brokers in the URL, where it failed over to"),
    MetricSpec("streamer_workflows_active", "gauge", (), "Workflows followed now",
               "workflows followed now (1 during a replay/follow, 0 for a load; `serve`: every workflow it follows)"),
    MetricSpec("streamer_event_latency_seconds", "histogram", (), "Event handed to the bus -> endpoint acknowledged",
               "from the source handing an event to the bus (a followed line is read as it is appended) to the "
               "endpoint acknowledging it; one observation per event per endpoint"),
)
"""Every metric streamer serves, in the order a scrape lists them."""
ENDPOINT_FAMILIES: Final = (
    "streamer_events_out", "streamer_endpoint_buffer_events", "streamer_endpoint_overflow_bytes",
    "streamer_endpoint_errors", "streamer_endpoint_reconnects", "streamer_endpoint_lag_seconds",
    "streamer_endpoint_spooled_events", "streamer_endpoint_held_events", "streamer_endpoint_up")
"""The per-endpoint metrics, in the order of a row of `Metrics.collect`."""
SPEC: Final = {spec.name: spec for spec in METRICS}


def _family(name: str, **extra: Any) -> Any:
    """The prometheus-client family of the declared metric `name`."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    spec = SPEC[name]
    kinds: dict[str, Any] = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily,
                             "histogram": HistogramMetricFamily}
    labels = {"labels": list(spec.labels)} if spec.labels else {}
    return kinds[spec.kind](spec.name, spec.help, **labels, **extra)


class MetricsError(ValueError):
    """A bad `--metrics` address (usage error)."""


SOURCE_LABELS = {"EventFileSource": "file", "ProvenanceSource": "file", "WorkflowSource": "workflow",
                 "ServeSource": "workflow", "JobstateSource": "jobstate", "QueueSource": "queue", "AMQPSource": "amqp"}


def source_label(source: Any) -> str:
    """The `source` label of a source object: file, workflow, jobstate, queue, amqp."""
    name = type(source).__name__
    return SOURCE_LABELS.get(name, name.removesuffix("Source").lower() or "source")


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `:PORT` (all interfaces) or `[::1]:PORT`."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise MetricsError(f"--metrics {text!r}: expected HOST:PORT (e.g. 127.0.0.1:9464)")
    return host.strip("[]") or "0.0.0.0", int(port)


class Latency:
    """A histogram fed per source batch with a weight (events), cheaper than one observe per event."""

    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float, weight: int) -> None:
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.counts[i] += weight
                break
        self.total += seconds * weight
        self.count += weight


def endpoint_health(route: Any) -> str | None:
    """Why this route's endpoint is not healthy, or None."""
    if route.failed is not None:
        return f"failed: {route.failed}"
    check = getattr(route.endpoint, "health", None)
    return check() if callable(check) else None


def _reconnects(endpoint: Any) -> int:
    connects = getattr(endpoint, "connects", None)  # the AMQP endpoint counts its connections
    if isinstance(connects, int):
        return max(0, connects - 1)
    stats = getattr(endpoint, "retry_stats", None)
    return int(getattr(stats, "by_kind", {}).get("connection lost", 0)) if stats is not None else 0


def _errors(route: Any) -> int:
    endpoint = route.endpoint
    stats = getattr(endpoint, "retry_stats", None)
    return ((route.failed is not None) + int(getattr(endpoint, "unencodable", 0))
            + int(getattr(endpoint, "dead_lettered", 0)) + int(getattr(stats, "total", 0) if stats else 0))


class Metrics:
    """The metrics of one process: every bus attached, served over HTTP."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self.buses: list[tuple[Any, str]] = []
        self.checks: dict[int, Callable[[], str | None]] = {}
        self.clients: dict[int, Any] = {}
        """Sources talking to a broker (`node`, `name`), by bus: `streamer_amqp_node`."""
        """Health of the sources (a collector's broker), by bus."""
        self.latency = Latency()
        self.retired: dict[str, list[int]] = {}
        """Endpoint name -> [delivered, errors, reconnects] of the buses detached (`streamer serve`'s ended runs)."""
        self.retired_in: dict[str, int] = {}
        self.retired_dropped: dict[str, int] = {}
        self.owners: dict[int, tuple[str, Any]] = {}
        """Endpoint objects that spooled or failed (`Endpoint.pending`), by id: name and last `Pending`.
        Kept after their bus detached, so what they spooled and never delivered stays out of the counters."""
        self.highest: dict[str, float] = {}
        """events_out as last served, per endpoint: a counter never goes back (a batch is counted by the bus
        a moment after the spool took it)."""
        self.workflows: Callable[[], int] = lambda: 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # `collect` below
        self._server: asyncio.base_events.Server | None = None

    def attach(self, bus: Any, *, source: str, health: Callable[[], str | None] | None = None,
               node: Any = None) -> None:
        """Count `bus`; `health()`: None while its source is fine, else why not (shown by /healthz); `node`: a
        source with a `node` (the broker it reads from now) and a `name`."""
        self.buses.append((bus, source))
        bus.on_delivered = self._delivered
        if health is not None:
            self.checks[id(bus)] = health
        if node is not None and hasattr(node, "node"):
            self.clients[id(bus)] = node

    def detach(self, bus: Any) -> None:
        """Stop watching `bus` (its run ended); what it counted stays in the counters."""
        for b, source in self.buses:
            if b is bus:
                self.retired_in[source] = self.retired_in.get(source, 0) + bus.published_events
                for reason, count in bus.dropped.items():
                    self.retired_dropped[reason] = self.retired_dropped.get(reason, 0) + count
                for route in bus.routes:
                    done = self.retired.setdefault(route.name, [0, 0, 0])
                    done[0] += route.stats.delivered
                    done[1] += _errors(route)
                    done[2] += _reconnects(route.endpoint)
                    self._remember(route)
        self.buses = [(b, s) for b, s in self.buses if b is not bus]
        self.checks.pop(id(bus), None)
        self.clients.pop(id(bus), None)

    def _remember(self, route: Any) -> Any:
        """The `Pending` of `route`'s endpoint, remembered by owner when it ever spooled or failed."""
        pending = route.endpoint.pending()
        if pending.spooled_total or pending.drained or pending.failures:
            self.owners[pending.owner] = (route.name, pending)
        return pending

    def _delivered(self, route: Any, times: list[tuple[float, int]]) -> None:
        now = time.monotonic()
        for started, count in times:
            self.latency.observe(now - started, count)

    def routes(self) -> Iterator[tuple[Any, Any]]:
        for bus, _ in self.buses:
            for route in bus.routes:
                yield bus, route

    # ------------------------------------------------------------ prometheus-client collector

    def collect(self) -> Iterator[Any]:
        events_in = _family("streamer_events_in")
        per_source: dict[str, int] = dict(self.retired_in)
        for bus, source in self.buses:
            per_source[source] = per_source.get(source, 0) + bus.published_events
        for source, count in per_source.items():
            events_in.add_metric([source], count)
        yield events_in
        dropped = _family("streamer_input_dropped")
        per_reason = dict(self.retired_dropped)
        for bus, _ in self.buses:
            for reason, count in bus.dropped.items():
                per_reason[reason] = per_reason.get(reason, 0) + count
        for reason, count in sorted(per_reason.items()):
            dropped.add_metric([reason], count)
        yield dropped
        # one sample per endpoint name: a shared endpoint has a route in every followed workflow's bus
        per: dict[str, list[float]] = {name: [done[0], 0, 0, done[1], done[2], 0.0, 0, 0, 1]
                                       for name, done in self.retired.items()}
        now, seen = time.monotonic(), set()
        for bus, route in self.routes():
            parked = route.overflow
            row = per.setdefault(route.name, [0, 0, 0, 0, 0, 0.0, 0, 0, 1])
            row[0] += route.stats.delivered
            row[1] += route.buffered + (parked.events if parked is not None else 0)
            row[2] += parked.size if parked is not None else 0
            row[3] += _errors(route)
            row[4] += _reconnects(route.endpoint)
            row[5] = max(row[5], bus.lag(route))
            pending = self._remember(route)
            row[8] = 0 if endpoint_health(route) is not None else row[8]
            if pending.owner in seen:
                continue
            seen.add(pending.owner)
            row[6] += pending.spooled
            row[7] += pending.held
            if pending.since is not None and pending.spooled:
                row[5] = max(row[5], now - pending.since)
        for name, pending in self.owners.values():  # the spooled events not delivered are not out
            row = per.setdefault(name, [0, 0, 0, 0, 0, 0.0, 0, 0, 1])
            row[0] -= pending.spooled_total - pending.drained
            row[3] += pending.failures
        families = [_family(name) for name in ENDPOINT_FAMILIES]
        for name, row in per.items():
            row[0] = self.highest[name] = max(self.highest.get(name, 0), row[0])
            for family, value in zip(families, row):
                family.add_metric([name], value)
        yield from families
        sources = _family("streamer_source_up")
        reachable: dict[str, int] = {}
        for bus, source in self.buses:
            check = self.checks.get(id(bus))
            if check is not None:
                reachable[source] = min(reachable.get(source, 1), 0 if check() else 1)
        for source, value in reachable.items():
            sources.add_metric([source], value)
        yield sources
        yield self._nodes()
        active = _family("streamer_workflows_active")
        active.add_metric([], self.workflows())
        yield active
        cumulative, buckets = 0, []
        for bound, count in zip(BUCKETS, self.latency.counts):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield _family("streamer_event_latency_seconds", buckets=buckets, sum_value=self.latency.total)

    def _nodes(self) -> Any:
        """`streamer_amqp_node{client, node} 1`: the broker each AMQP endpoint and collector uses now."""
        nodes = _family("streamer_amqp_node")
        seen: set[str] = set()
        clients = [(c.name, c.node) for c in self.clients.values()]
        clients += [(route.name, getattr(route.endpoint, "node", None)) for _, route in self.routes()]
        for name, node in clients:
            if isinstance(node, str) and node and name not in seen:
                seen.add(name)
                nodes.add_metric([str(name), node], 1)
        return nodes

    # ------------------------------------------------------------ health and HTTP

    def health(self) -> list[str]:
        """Reasons the process is unhealthy (empty: healthy)."""
        reasons = [problem for check in self.checks.values() if (problem := check())]
        for _, route in self.routes():
            problem = endpoint_health(route)
            if problem:
                reasons.append(f"{route.name}: {problem}")
        return reasons

    async def start(self, address: str) -> None:
        host, port = parse_address(address)
        try:
            self._server = await asyncio.start_server(self._handle, host, port)
        except OSError as exc:
            raise MetricsError(f"--metrics {address}: cannot listen: {exc.strerror or exc}") from None
        log.info("metrics on http://%s:%d/metrics, health on /healthz", host, port)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            path = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else "/"
            path = path.split("?")[0]
            if path == "/metrics":
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
            elif path == "/healthz":
                reasons = self.health()
                status = "503 Service Unavailable" if reasons else "200 OK"
                body = ("\n".join(reasons) if reasons else "ok").encode() + b"\n"
                ctype = "text/plain; charset=utf-8"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"try /metrics or /healthz\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None


async def start_exporter(address: str, *, workflows: Callable[[], int] | None = None) -> Metrics:
    """A `Metrics` serving `address` (HOST:PORT), for processes that run several buses (`streamer serve`):
    `attach(bus, source=...)` each bus once it is built and `detach(bus)` once it closed;
    `workflows()` gives `streamer_workflows_active`. `await exporter.stop()` at exit."""
    exporter = Metrics()
    if workflows is not None:
        exporter.workflows = workflows
    await exporter.start(address)
    return exporter
