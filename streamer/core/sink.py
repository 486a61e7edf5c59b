"""What the bus needs of an endpoint: its name and options, and writes that return once acknowledged.

`streamer.endpoints.base.Endpoint` is the implementation every endpoint
shares; the bus sees only this protocol, so it knows neither endpoints nor
what their records say.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar

from streamer.core.record import Record

R_contra = TypeVar("R_contra", bound=Record, contravariant=True)


class Sink(Protocol[R_contra]):
    """An endpoint as the bus drives it (see `streamer.endpoints.base.Endpoint` for each method's contract)."""

    @property
    def name(self) -> str:
        """Display name (no secrets): in logs and the end summary."""

    @property
    def default_events(self) -> str:
        """Filter used when neither the route nor the `events` option gives one."""

    @property
    def state_key(self) -> str | None:
        """Set by a sink that resumes exactly (`mark`, `write_marked`); None otherwise."""

    def option(self, key: str, default: Any = None) -> Any: ...

    async def open(self) -> None: ...

    def prepare(self, events: Sequence[R_contra]) -> None: ...

    async def write(self, batch: Sequence[R_contra]) -> None: ...

    async def write_marked(self, batch: Sequence[R_contra], ends: Sequence[int]) -> list[Any]: ...

    def mark(self) -> Any: ...

    def holding(self) -> bool: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...
