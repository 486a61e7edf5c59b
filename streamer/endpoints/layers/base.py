"""A layer around an endpoint: the endpoint interface, each call passed to the endpoint inside.

Behaviours any endpoint can take — dead letters (`deadletter.py`), a spool
while the endpoint is away (`spooling.py`) — are layers, not code inside the
endpoints: a layer subclasses `Layer` and overrides only what it changes.
Counters and state the summary and the metrics read (`stats`, `published`,
`retry_stats`, ...) are looked up on the inner endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from streamer.events import Event
from streamer.endpoints.base import Endpoint, Pending


FORWARDED = frozenset({"unconfirmed_ids"})
"""Attributes set on a layer that belong to the endpoint inside (AMQP: record the unconfirmed message ids)."""


class Layer(Endpoint):
    """`inner`, with every call passed through; subclasses change what they are for."""

    def __init__(self, inner: Endpoint) -> None:
        super().__init__(inner.url, inner.options)
        self.inner = inner
        self.default_events = inner.default_events  # type: ignore[misc]
        self.spool_grace = inner.spool_grace  # type: ignore[misc]
        self.state_key = inner.state_key

    def __getattr__(self, name: str) -> Any:  # counters and state the summary and metrics read
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        """The inner endpoint's switches set through the layer go to it (tests, diagnostics)."""
        if name in FORWARDED and "inner" in self.__dict__:
            setattr(self.inner, name, value)
        else:
            object.__setattr__(self, name, value)

    @property
    def unencodable(self) -> int:
        return self.inner.unencodable

    @unencodable.setter
    def unencodable(self, value: int) -> None:
        pass  # Endpoint.__init__ sets it; the inner endpoint's count is the one that matters

    @property
    def name(self) -> str:
        return self.inner.name

    async def open(self) -> None:
        await self.inner.open()

    def prepare(self, events: Sequence[Event]) -> None:
        self.inner.prepare(events)

    async def write(self, batch: Sequence[Event]) -> None:
        await self.inner.write(batch)

    async def write_marked(self, batch: Sequence[Event], ends: Sequence[int]) -> list[Any]:
        return await self.inner.write_marked(batch, ends)

    def resume(self, mark: Any) -> None:
        self.inner.resume(mark)

    def mark(self) -> Any:
        return self.inner.mark()

    def holding(self) -> bool:
        return self.inner.holding()

    def health(self) -> str | None:
        return self.inner.health()

    def pending(self) -> Pending:
        return self.inner.pending()

    def give_up_after(self, seconds: float) -> None:
        self.inner.give_up_after(seconds)

    def undelivered(self) -> list[tuple[int, str]]:
        return self.inner.undelivered()

    def default_spool(self) -> Path | None:
        return self.inner.default_spool()

    def leftover_spools(self) -> list[Path]:
        return self.inner.leftover_spools()

    async def flush(self) -> None:
        await self.inner.flush()

    async def close(self) -> None:
        await self.inner.close()
