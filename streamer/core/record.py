"""The two things the core knows of what it carries: a record has a `name` (routes
filter on it), and a codec turns records into one line of bytes and back."""

from __future__ import annotations

from typing import Protocol, TypeVar

R = TypeVar("R")


class Record(Protocol):
    """What the bus routes: named; anything else about it is the endpoints' business."""

    @property
    def name(self) -> str: ...


class Codec(Protocol[R]):
    """Records <-> bytes of one line (no newline inside), injected where the core stores records."""

    def encode(self, record: R) -> bytes: ...

    def decode(self, data: bytes) -> R: ...
