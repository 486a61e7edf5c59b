"""A faster AMQP frame reader for aiormq, with deliveries taken raw on the channels a consumer taps.

aiormq reads a frame with three `readexactly` calls into a `BytesIO` under a lock and decodes every frame with
pamqp; a delivery is three frames (`Basic.Deliver`, content header, body), each then queued to the channel's
reader task. At a collector's rates that was most of its CPU (docs/benchmarks.md). `FrameReceiver` here reads
the socket in chunks and cuts frames out of its buffer; on a channel registered in `taps` (`tap`), a delivery's
three frames are never decoded into objects: the delivery tag, the raw content header and the body go straight
to the tap's `add(tag, body, header)`. Every other frame (and every frame of other channels: publisher
confirms, heartbeats, replies) is decoded by pamqp and handed to aiormq exactly as its own reader does.

aiormq counts time since the last frame it saw to find a stuck connection; while deliveries are taken here it
sees none, so a heartbeat frame is handed to it at least every `KEEPALIVE` seconds of taken deliveries.

Only the connections opened inside `capture()` read with it (`amqp/connection.connect(..., raw_deliveries=True)`,
the collector's); every other connection (publishers, `tail`, `status`) reads with aiormq's own reader. aiormq
names its reader class when a connection connects: `_install()` puts `_reader_for` there once, which gives this
reader inside `capture()` and aiormq's own everywhere else (decided by a context variable, so a publisher
connecting at the same moment as the collector in another task is not affected).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import struct
from typing import Any, Iterator, Protocol

import aiormq.connection
import pamqp.frame
from aiormq.exceptions import AMQPConnectionError, InvalidFrameError
from pamqp.exceptions import PAMQPException
from pamqp.header import ContentHeader
from pamqp.heartbeat import Heartbeat

CHUNK = 256 * 1024
KEEPALIVE = 1.0
"""Seconds of taken deliveries after which aiormq is handed a heartbeat (its stuck-connection clock)."""
_HEAD = struct.Struct(">BHI")
_U64 = struct.Struct(">Q")
_DELIVER = b"\x00\x3c\x00\x3c"  # class 60 (basic), method 60 (deliver)
_END = 0xCE
_captured: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("streamer_frame_receivers",
                                                                             default=None)


class Tap(Protocol):
    def add(self, tag: int, body: bytes, header: bytes) -> None: ...


def properties(header: bytes) -> Any:
    """The message properties (`headers`, `message_id`, …) of a raw content header payload, decoded only when
    asked."""
    decoded = ContentHeader()
    decoded.unmarshal(bytes(header))
    return decoded.properties


class FrameReceiver(aiormq.connection.FrameReceiver):
    """aiormq's frame reader, buffered, with raw deliveries for tapped channels."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        super().__init__(reader)
        self.taps: dict[int, Tap] = {}
        """Channel number -> where its deliveries go."""
        self._buf = b""
        self._pos = 0
        self._open: dict[int, list[Any]] = {}
        """Channel -> [tag, header, body size, body parts, bytes so far] of a delivery being read."""
        self._seen = 0.0
        captured = _captured.get()
        if captured is not None:
            captured.append(self)

    def tap(self, channel: int, tap: Tap) -> None:
        self.taps[channel] = tap

    def untap(self, channel: int) -> None:
        self.taps.pop(channel, None)
        self._open.pop(channel, None)

    async def _fill(self) -> None:
        try:
            data = await self.reader.read(CHUNK)
        except (ConnectionError, OSError) as exc:
            raise AMQPConnectionError(f"Server communication error: {exc!r}") from exc
        if not data:
            if self._pos >= len(self._buf):
                raise StopAsyncIteration
            raise AMQPConnectionError("Server connection unexpectedly closed in the middle of a frame")
        rest = self._buf[self._pos:]
        self._buf, self._pos = (rest + data if rest else data), 0

    async def get_frame(self) -> Any:
        if not self.started:  # the protocol header exchange: aiormq's own checks (nothing is buffered yet)
            return await super().get_frame()
        loop = asyncio.get_running_loop()
        while True:
            buf, pos = self._buf, self._pos
            if len(buf) - pos < 7:
                await self._fill()
                continue
            kind, channel, size = _HEAD.unpack_from(buf, pos)
            end = pos + 7 + size
            if len(buf) <= end:
                await self._fill()
                continue
            if buf[end] != _END:
                raise InvalidFrameError(f"frame end {buf[end]:#x}, not 0xce")
            self._pos = end + 1
            tap = self.taps.get(channel) if self.taps else None
            if tap is not None and self._take(tap, kind, channel, buf, pos + 7, end):
                now = loop.time()
                if now - self._seen >= KEEPALIVE:
                    self._seen = now
                    return 0, 0, Heartbeat()
                continue
            self._seen = loop.time()
            try:
                return pamqp.frame.unmarshal(buf[pos:end + 1])
            except PAMQPException as exc:
                raise InvalidFrameError(str(exc)) from exc

    def _take(self, tap: Tap, kind: int, channel: int, buf: bytes, start: int, end: int) -> bool:
        """Take this frame if it is part of a delivery on a tapped channel; False: decode it as usual."""
        if kind == 1:
            if buf[start:start + 4] != _DELIVER:
                return False
            tag_at = start + 5 + buf[start + 4]  # after the consumer tag (a short string)
            self._open[channel] = [_U64.unpack_from(buf, tag_at)[0], b"", 0, [], 0]
            return True
        delivery = self._open.get(channel)
        if delivery is None:
            return False
        if kind == 2:
            delivery[1] = buf[start:end]
            delivery[2] = size = _U64.unpack_from(buf, start + 4)[0]
            if size == 0:
                del self._open[channel]
                tap.add(delivery[0], b"", delivery[1])
            return True
        if kind == 3:
            part = buf[start:end]
            delivery[3].append(part)
            delivery[4] += len(part)
            if delivery[4] >= delivery[2]:
                del self._open[channel]
                parts = delivery[3]
                tap.add(delivery[0], parts[0] if len(parts) == 1 else b"".join(parts), delivery[1])
            return True
        return False


_AIORMQ_RECEIVER = aiormq.connection.FrameReceiver
"""aiormq's own reader: every connection not opened inside `capture()` reads with it."""


def _reader_for(reader: asyncio.StreamReader) -> Any:
    """The reader of a connection aiormq opens: this module's inside `capture()`, aiormq's own elsewhere."""
    if _captured.get() is None:
        return _AIORMQ_RECEIVER(reader)
    return FrameReceiver(reader)


def _install() -> None:
    """aiormq asks `_reader_for` for the reader of each connection it opens from now on (idempotent)."""
    aiormq.connection.FrameReceiver = _reader_for  # type: ignore[misc, assignment]


@contextlib.contextmanager
def capture() -> Iterator[list[FrameReceiver]]:
    """Connections opened while active (in this task and the tasks it starts) read with `FrameReceiver`; the
    list holds their readers."""
    _install()
    found: list[FrameReceiver] = []
    token = _captured.set(found)
    try:
        yield found
    finally:
        _captured.reset(token)
