"""The event codec the core's overflow file is given: an `Event` as its monitord JSON line."""

from __future__ import annotations

from streamer.events import jsonenc
from streamer.events.event import Event


class JSONLineCodec:
    """`Event` <-> one line of monitord JSON (`jsonenc`)."""

    def encode(self, record: Event) -> bytes:
        return jsonenc.dumps(record)

    def decode(self, data: bytes) -> Event:
        return jsonenc.parse_line(data)


JSON_LINES = JSONLineCodec()
