"""One confirmed publishing channel on one broker node: opened on the first node that answers (or the one
after a lost node), it sends windows of encoded items and settles their confirms."""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import aio_pika

from streamer.amqp.connection import (
    _PERMANENT,
    AMQPTarget,
    BrokerUnavailable,
    _reason,
    connect,
)
from streamer.amqp.errors import channel_refusal
from streamer.core.options import is_true
from streamer.endpoints.amqp.channel import Item, RawChannel


async def _close_quietly(connection: Any) -> None:
    try:
        await asyncio.wait_for(connection.close(), 5)
    except Exception:  # closing a broken connection: nothing to report
        pass


class Publisher:
    """One connection + confirming channel + declared exchange; publishes windows of messages."""

    def __init__(self, connection: aio_pika.abc.AbstractConnection, channel: Any, raw: Any,
                 target: AMQPTarget, mandatory: bool) -> None:
        self.target = target
        exchange = target.exchange
        self.connection = connection
        self.channel = channel
        self.raw = RawChannel(raw, exchange, mandatory)
        self.exchange = exchange
        self.lost: str | None = None
        self.refused = False
        """The broker closed the channel on a permission refusal: final."""
        self._in_flight: dict[int, list[asyncio.Future]] = {}
        connection.close_callbacks.add(self._on_close)
        channel.close_callbacks.add(self._on_close)

    def _on_close(self, *args: Any) -> None:
        """Connection or channel gone: every unconfirmed message fails now (not after a timeout)."""
        cause = next((a for a in args if isinstance(a, BaseException)), None)
        refused = channel_refusal(cause, self.target, "publishing to", "write")
        self.lost = refused or (_reason(cause) if cause is not None else "connection closed")
        self.refused = refused is not None
        for futures in self._in_flight.values():
            for future in futures:
                if not future.done():
                    future.set_exception(BrokerUnavailable(self.lost, permanent=refused is not None))
        self._in_flight.clear()

    def settled(self, futures: list[asyncio.Future], items: Sequence[Item]) -> None:
        """Forget a window once its confirms are handled."""
        self._in_flight.pop(id(futures), None)
        self.raw.forget(items)

    @classmethod
    async def open(cls, target: AMQPTarget, options: dict[str, Any], *, after: str | None = None) -> "Publisher":
        connection = await connect(target, options, name=f"streamer publisher {target.exchange}", after=after)
        try:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=False)
            declare = str(options.get("declare", "true")).lower()
            if declare == "passive":
                await channel.get_exchange(target.exchange, ensure=True)
            elif is_true(declare):
                await channel.declare_exchange(
                    target.exchange, str(options.get("exchange_type", "topic")),
                    durable=is_true(options.get("durable", True)),
                )
            raw = await channel.get_underlay_channel()
        except BaseException as exc:
            await asyncio.shield(_close_quietly(connection))
            if not isinstance(exc, Exception):
                raise
            reason = channel_refusal(exc, target, "declaring", "configure") or _reason(exc)
            raise BrokerUnavailable(f"{target.display}: exchange {target.exchange!r}: {reason}",
                                    permanent=any(p in reason for p in _PERMANENT)) from None
        return cls(connection, channel, raw, target, is_true(options.get("mandatory", True)))

    @property
    def alive(self) -> bool:
        return self.lost is None and not self.connection.is_closed and not self.raw.is_closed

    async def send(self, items: Sequence[Item]) -> list[asyncio.Future]:
        """Queue the frames of `items` in one write; the futures resolve on the broker's confirms."""
        if not self.alive:
            raise BrokerUnavailable(self.lost or "connection closed", permanent=self.refused)
        return await self.raw.publish(items, self._register)

    def _register(self, futures: list[asyncio.Future]) -> None:
        self._in_flight[id(futures)] = futures

    async def close(self) -> None:
        await _close_quietly(self.connection)
