"""BSON: pegasus-monitord's `-e bson` file encoding, one BSON document per event, back to back.

monitord 5.x (`Pegasus/monitoring/event_output.py`, `bson_encode`) writes, for each event, the document of
its keyword arguments — the Stampede field names with `.` written as `__` (`xwf__id`, `job_inst__id`), `ts`
as epoch seconds — and `event` (the full `stampede.…` name) last, with no separator. It needs the optional
`bson` package; streamer encodes the subset of BSON these documents use itself: strings, integers (int32,
or int64 when larger), doubles, booleans, null, and lists/dicts as arrays/documents.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable, Sequence

from streamer.events.event import Event

INT32 = (-(2 ** 31), 2 ** 31 - 1)


def _cstring(text: str) -> bytes:
    data = text.encode("utf-8")
    if b"\x00" in data:
        raise ValueError(f"BSON key {text!r} holds a NUL byte")
    return data + b"\x00"


def _element(key: str, value: Any) -> bytes:
    name = _cstring(key)
    if isinstance(value, bool):
        return b"\x08" + name + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        if INT32[0] <= value <= INT32[1]:
            return b"\x10" + name + struct.pack("<i", value)
        return b"\x12" + name + struct.pack("<q", value)
    if isinstance(value, float):
        return b"\x01" + name + struct.pack("<d", value)
    if value is None:
        return b"\x0a" + name
    if isinstance(value, dict):
        return b"\x03" + name + document(value.items())
    if isinstance(value, (list, tuple)):
        return b"\x04" + name + document((str(i), item) for i, item in enumerate(value))
    data = str(value).encode("utf-8")
    return b"\x02" + name + struct.pack("<i", len(data) + 1) + data + b"\x00"


def document(items: Iterable[tuple[str, Any]]) -> bytes:
    """A BSON document of `items`, in their order."""
    body = b"".join(_element(key, value) for key, value in items)
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def dumps(event: Event) -> bytes:
    """One event as monitord's BSON document."""
    items = [(key.replace(".", "__"), value) for key, value in event.fields.items() if key != "event"]
    items.append(("event", event.name))
    return document(items)


def join(events: Sequence[Event]) -> bytes:
    """The documents of `events`, back to back (monitord writes no separator)."""
    return b"".join(map(dumps, events))
