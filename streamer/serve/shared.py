"""Endpoints shared by every followed workflow (one AMQP connection, one PostgreSQL pool).

Each workflow's bus gets a `SharedRoute` proxy: its own filter, buffer and
task (so a workflow's backpressure stays its own), while the real endpoint is
opened once, written by one batch at a time (a lock: endpoints are not
re-entrant) and closed once when `serve` ends or SIGHUP replaces it. A write
returns when the real endpoint acknowledged it, so each workflow's checkpoint
still advances only past what the shared endpoint holds durably. A shared file
endpoint is at-least-once (its file cannot be cut back for one workflow); the
databases drop re-sent rows by natural key, AMQP consumers by `message_id`.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from streamer.config.settings import EndpointSpec
from streamer.endpoints import create_endpoint
from streamer.endpoints.base import Endpoint, Pending
from streamer.events import Event


class SharedEndpoint:
    """One real endpoint and the lock its writers take."""

    def __init__(self, spec: EndpointSpec) -> None:
        self.spec = spec
        self.endpoint = create_endpoint(spec.url, dict(spec.options))
        self.lock = asyncio.Lock()
        self.users = 0

    async def open(self) -> None:
        await self.endpoint.open()

    async def close(self) -> None:
        async with self.lock:
            await self.endpoint.flush()
            await self.endpoint.close()

    def proxy(self) -> tuple[Endpoint, EndpointSpec]:
        return SharedRoute(self), self.spec


class SharedRoute(Endpoint):
    """A workflow's view of a shared endpoint: open/close do nothing, writes go through the lock."""

    def __init__(self, shared: SharedEndpoint) -> None:
        super().__init__(shared.endpoint.url, shared.endpoint.options)
        self.shared = shared
        self.default_events = shared.endpoint.default_events  # type: ignore[misc]

    @property
    def name(self) -> str:
        return self.shared.endpoint.name

    async def open(self) -> None:
        self.shared.users += 1

    def prepare(self, events: Sequence[Event]) -> None:
        self.shared.endpoint.prepare(events)

    async def write(self, batch: Sequence[Event]) -> None:
        async with self.shared.lock:
            await self.shared.endpoint.write(batch)

    async def flush(self) -> None:
        async with self.shared.lock:
            await self.shared.endpoint.flush()

    async def close(self) -> None:
        self.shared.users -= 1

    def pending(self) -> Pending:
        return self.shared.endpoint.pending()

    def health(self) -> str | None:
        return self.shared.endpoint.health()
