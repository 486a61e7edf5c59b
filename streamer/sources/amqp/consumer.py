"""The collector's consumer, below aio-pika: deliveries appended to a list by the channel's own frame reader.

aio-pika builds an `IncomingMessage` and aiormq starts a task per delivery; at a collector's rates (thousands of
messages a second, each one small event) that was most of its CPU. Here the aiormq channel's delivery handler
is replaced on that one channel: it reads the content header and body frames that follow a `Basic.Deliver` and
appends `(delivery tag, body, properties)` to `Deliveries.items`, waking the batch gatherer through one event.
No message object, no task, no callback per delivery.

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

log = logging.getLogger("streamer.collector")

Delivery = tuple[int, bytes, Any]
"""(delivery tag, body, its content header: `amqp.frames.properties` gives its `headers`, `message_id`, …)."""


class Deliveries:
    """What the consumers of one aiormq channel delivered, not yet taken."""

    def __init__(self, channel: Any, name: str, receiver: Any = None) -> None:
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
        if receiver is not None:  # the connection's frame reader hands deliveries over raw (`amqp/frames.py`)
            receiver.tap(channel.number, self)
        else:  # the channel's reader calls its `_on_deliver_frame` for every Basic.Deliver: this instance's instead
            setattr(channel, "_on_deliver_frame", self._on_deliver)
        channel.on_consumer_cancel_callbacks.add(self._on_cancel)

    def add(self, tag: int, body: bytes, header: Any) -> None:
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

    async def _on_deliver(self, frame: Any) -> None:
        get = self.channel._get_frame
        header = await get()
        size = header.body_size
        body = b""
        if size:
            body = (await get()).value
            if len(body) < size:  # a body over the frame size comes in several frames
                parts = [body]
                got = len(body)
                while got < size:
                    part = (await get()).value
                    parts.append(part)
                    got += len(part)
                body = b"".join(parts)
        self.add(frame.delivery_tag, body, header.properties)

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


def _unused(message: Any) -> None:  # pragma: no cover - `Deliveries._on_deliver` takes every delivery
    """aiormq wants a consumer callback; deliveries never reach it."""
