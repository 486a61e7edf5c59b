"""A run's endpoints and its bus: endpoints built from their specs, one route each (filter, buffer, batch),
exactly-once endpoints resumed from the source's checkpoint, the bus given to the source as its downstream."""

from __future__ import annotations

from typing import Any

from streamer.config.settings import EndpointSpec
from streamer.core.bus import Bus, make_route
from streamer.endpoints import create_endpoint
from streamer.endpoints.base import Endpoint
from streamer.events.codec import JSON_LINES
from streamer.sources.base import Source

Routed = tuple[Endpoint, EndpointSpec]
"""An endpoint and the spec of its route (`events`, `buffer`, `batch`)."""


def build_endpoints(specs: list[EndpointSpec], defaults: dict[str, Any] | None = None) -> list[Routed]:
    """An endpoint per spec, `defaults` under each spec's own options (`{"replay": True}`)."""
    return [(create_endpoint(spec.url, {**(defaults or {}), **spec.options}), spec) for spec in specs]


def unfiltered(endpoint: Endpoint) -> Routed:
    """An endpoint built by the caller, given every event (its own `?events=` aside)."""
    return endpoint, EndpointSpec(url=endpoint.url)


def connect(source: Source, endpoints: list[Routed], *, on_error: str) -> Bus:
    """The bus from `source` to `endpoints`, committing to the source, which it is the downstream of."""
    # the bus parks events in overflow files with the Stampede codec: it knows records, not events
    routes = [make_route(endpoint, spec.events, codec=JSON_LINES, buffer=spec.buffer, batch=spec.batch)
              for endpoint, spec in endpoints]
    saved = source.endpoint_marks()
    for endpoint, _ in endpoints:  # exactly-once endpoints undo what they wrote after the checkpoint resumed from
        key = endpoint.state_key
        if key is not None and key in saved:
            endpoint.resume(saved[key])
    bus = Bus(routes, on_error=on_error, commit=source.commit)
    source.downstream = bus
    return bus
