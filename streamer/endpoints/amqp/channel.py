"""aiormq's channel as the AMQP publisher's hot path uses it — the one module that
touches aiormq's undocumented channel attributes.

aiormq's per-message `basic_publish` (one task, one socket write and one lock
round per message) manages ~6,000 messages/s. Here a window of messages is
marshalled into AMQP frames at once and queued on the channel's write queue in
one write, with each confirmation future registered in the channel's own
tables, so aiormq resolves them as the broker's acks/nacks/returns arrive. The
attributes used (`confirmations`, `message_id_delivery_tag`, `delivery_tag`,
`lock`, `write_queue`, `number`, `max_content_size`) are aiormq 7's
(`aiormq>=7.2,<8` in pyproject); a change there shows up in this module only.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Callable, Sequence

from aiormq.abc import ChannelFrame
from pamqp import frame as pframe
from pamqp.commands import Basic

Item = tuple[str, str, int, bytes, bytes]
"""(routing key, message_id, timestamp, body, encoded headers table (`headers_table`, or b"" for none))."""

_FRAME = struct.Struct(">BHI")
_HEADER_START = struct.Struct(">HHQH")
_CONTENT_TYPE = b"\x10application/json"
_PROPERTY_FLAGS = 0x8000 | 0x1000 | 0x0080 | 0x0040  # content_type, delivery_mode, message_id, timestamp
_HEADERS_FLAG = 0x2000
_LONG = struct.Struct(">I")


def _table_entry(key: str, value: str) -> bytes:
    name, text = key.encode(), value.encode()[:65535]
    return bytes((len(name),)) + name + b"S" + _LONG.pack(len(text)) + text


def headers_table(wf_uuid: str, root_wf_uuid: str) -> bytes:
    """The AMQP field table `{wf_uuid: ..., root_wf_uuid: ...}`, encoded (long strings, AMQP 0-9-1 §4.2.5.5):
    what a consistent-hash exchange hashes (`hash-header`) to keep a workflow tree on one queue."""
    entries = _table_entry("root_wf_uuid", root_wf_uuid) + _table_entry("wf_uuid", wf_uuid)
    return _LONG.pack(len(entries)) + entries


def content_header_frame(channel: int, body_size: int, message_id: str, timestamp: int,
                         headers: bytes = b"") -> bytes:
    """Content header frame: JSON, `headers` (an encoded table) if any, persistent, message_id and timestamp
    (AMQP 0-9-1 §4.2.6)."""
    mid = message_id.encode()
    flags = _PROPERTY_FLAGS | (_HEADERS_FLAG if headers else 0)
    payload = b"".join((
        _HEADER_START.pack(60, 0, body_size, flags), _CONTENT_TYPE, headers, b"\x02",
        bytes((len(mid),)), mid, struct.pack(">Q", timestamp),
    ))
    return _FRAME.pack(2, channel, len(payload)) + payload + b"\xce"


def body_frames(channel: int, body: bytes, max_size: int) -> bytes:
    if len(body) <= max_size:
        return _FRAME.pack(3, channel, len(body)) + body + b"\xce"
    return b"".join(body_frames(channel, body[i:i + max_size], max_size) for i in range(0, len(body), max_size))


def is_ack(confirmation: Any) -> bool:
    """A confirmation future's result says the broker took the message (not returned as unroutable)."""
    return isinstance(confirmation, Basic.Ack)


class RawChannel:
    """Publishes windows of messages straight into one aiormq channel, confirmations registered there."""

    def __init__(self, raw: Any, exchange: str, mandatory: bool) -> None:
        self.raw = raw
        self.exchange = exchange
        self.mandatory = mandatory
        self.max_body: int = raw.max_content_size
        self._publish_frames: dict[str, bytes] = {}

    @property
    def is_closed(self) -> bool:
        return bool(self.raw.is_closed)

    def _publish_frame(self, key: str) -> bytes:
        frame = self._publish_frames.get(key)
        if frame is None:
            method = Basic.Publish(exchange=self.exchange, routing_key=key, mandatory=self.mandatory)
            frame = self._publish_frames[key] = pframe.marshal(method, self.raw.number)
        return frame

    async def publish(self, items: Sequence[Item],
                      register: Callable[[list[asyncio.Future]], None]) -> list[asyncio.Future]:
        """Queue the frames of `items` in one write; the futures resolve on the broker's confirms.

        `register` sees the futures before the write, so a connection lost meanwhile can fail them."""
        raw = self.raw
        number = raw.number
        futures: list[asyncio.Future] = []
        parts: list[bytes] = []
        create_future = asyncio.get_running_loop().create_future
        async with raw.lock:
            confirmations = raw.confirmations
            tags = raw.message_id_delivery_tag
            tag = raw.delivery_tag
            for key, message_id, timestamp, body, headers in items:
                tag += 1
                future = create_future()
                confirmations[tag] = future
                tags[message_id] = tag  # lets aiormq match a returned (unroutable) message
                futures.append(future)
                parts.append(self._publish_frame(key))
                parts.append(content_header_frame(number, len(body), message_id, timestamp, headers))
                parts.append(body_frames(number, body, self.max_body))
            raw.delivery_tag = tag
            register(futures)
            await raw.write_queue.put(ChannelFrame(payload=b"".join(parts), should_close=False))
        return futures

    def forget(self, items: Sequence[Item]) -> None:
        """Drop the returned-message lookup of a settled window."""
        tags = self.raw.message_id_delivery_tag
        for item in items:
            tags.pop(item[1], None)
