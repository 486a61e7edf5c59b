"""What the core knows of what it carries: a record has a `name` (routes filter on
it), a codec turns records into one line of bytes and back, and a source
publishes records in batches, each with the position reached after it."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Record(Protocol):
    """What the bus routes: named; anything else about it is the endpoints' business."""

    @property
    def name(self) -> str: ...


class Codec(Protocol[R]):
    """Records <-> bytes of one line (no newline inside), injected where the core stores records."""

    def encode(self, record: R) -> bytes: ...

    def decode(self, data: bytes) -> R: ...


class Batch(Protocol[R_co]):
    """Records read together by a source, and where the source stands once they are delivered
    (an opaque value the bus hands back to the source's commit; None: no position of its own)."""

    @property
    def events(self) -> Sequence[R_co]: ...

    @property
    def position(self) -> Any: ...
