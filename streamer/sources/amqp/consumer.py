"""The collector's consumer, below aio-pika: deliveries appended to a list by the connection's frame reader.

aio-pika builds an `IncomingMessage` and aiormq starts a task per delivery; at a collector's rates (thousands of
messages a second, each one small event) that was most of its CPU. The collector's connection is opened with
`raw_deliveries` (`amqp/connection.connect`): it reads with the buffered frame reader of `amqp/frames.py`, and
`Deliveries` taps its channel there, so the reader hands each delivery over raw and `Deliveries.add` appends
`(delivery tag, body, content header)` to `Deliveries.items`, waking the batch gatherer through one event. No
message object, no frame decoded, no task, no callback per delivery. This is the one delivery path: a connection
without that reader (every other AMQP connection: publishers, `tail`, `status`) cannot be consumed from here.

- Every delivery on the channel is kept, whichever of its consumers it came for: a window change on a quorum
  queue starts a new consumer and cancels the old one (`QueueSource._set_window`), and what the old one had
  delivered must still be written before the acknowledgement of a later tag (`multiple`) covers it.
- A consumer the broker cancels (`Basic.Cancel`: the queue deleted, or its leader lost in a cluster) delivers
  nothing more while the channel and the connection live on: `lost` completes, and the source counts it as a
  lost connection (reconnect, consume again; what was unacknowledged is redelivered).
- Acknowledgements and rejections are the aiormq channel's (`basic_ack(tag, multiple=True)` per committed batch).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streamer.amqp.frames import FrameReceiver

log = logging.getLogger("streamer.collector")

Delivery = tuple[int, bytes, bytes]
"""(delivery tag, body, its raw content header: `amqp.frames.properties` gives its `headers`, `message_id`, …)."""


class Deliveries:
    """What the consumers of one aiormq channel delivered, not yet taken."""

    def __init__(self, channel: Any, name: str, receiver: FrameReceiver | None) -> None:
        """`receiver`: the frame reader of the channel's connection (`connection.receiver`, opened with
        `raw_deliveries`)."""
        if receiver is None:
            raise RuntimeError(f"{name}: the collector's connection has no frame reader (connect it with "
                               "raw_deliveries=True)")
        self.channel = channel
        """The aiormq channel (`await aio_pika_channel.get_underlay_channel()`)."""
        self.name = name
        self.items: list[Delivery] = []
        self.want = 1
        self.ready = asyncio.Event()
        """Set while `items` holds at least `want` deliveries (`expect`)."""
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Completed once the broker cancelled the current consumer."""
        self.tag = ""
        """The current consumer's tag."""
        receiver.tap(channel.number, self)  # the reader hands this channel's deliveries to `add`, raw
        channel.on_consumer_cancel_callbacks.add(self._on_cancel)

    def add(self, tag: int, body: bytes, header: bytes) -> None:
        """A delivery (its raw content header: `frames.properties` decodes it when asked)."""
        items = self.items
        items.append((tag, body, header))
        if len(items) >= self.want:
            self.ready.set()

    async def consume(self, queue: str, arguments: dict[str, Any] | None = None) -> str:
        """Start a consumer on `queue` (the current one from now on); its tag."""
        ok = await self.channel.basic_consume(queue, _unused, arguments=arguments)
        self.tag = str(ok.consumer_tag)
        return self.tag

    async def cancel(self, tag: str) -> None:
        await self.channel.basic_cancel(tag)

    def _on_cancel(self, frame: Any) -> None:
        if frame.consumer_tag == self.tag and not self.lost.done():
            log.warning("%s: the broker cancelled the consumer (queue deleted, or its leader node lost): "
                        "consuming again", self.name)
            self.lost.set_result(None)

    def expect(self, count: int) -> None:
        """`ready` from now on once `count` deliveries wait (one wake-up per batch, not per delivery)."""
        self.want = count
        if len(self.items) >= count:
            self.ready.set()
        else:
            self.ready.clear()

    def take(self, limit: int) -> list[Delivery]:
        """Up to `limit` deliveries, oldest first (`ready` is then for one delivery again)."""
        items = self.items
        if len(items) <= limit:
            taken, self.items = items, []
        else:
            taken, self.items = items[:limit], items[limit:]
        self.expect(1)
        return taken

    async def ack(self, tag: int) -> None:
        """Acknowledge every delivery up to `tag`."""
        await self.channel.basic_ack(tag, multiple=True)

    async def reject(self, tag: int) -> None:
        """Reject one delivery, not requeued (a dead-letter exchange keeps it)."""
        await self.channel.basic_reject(tag, requeue=False)


def _unused(message: Any) -> None:  # pragma: no cover - the frame reader hands every delivery to `add`
    """aiormq wants a consumer callback; deliveries never reach it."""
