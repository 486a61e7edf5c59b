"""A connect cancelled as its attempt fails ends cancelled (not "broker unavailable", retried for ever).

Python 3.11's `asyncio.wait_for` hands its caller the awaited coroutine's own failure when the caller's
cancellation and that failure come in one turn of the loop. `connect` took that for a broker away, so the
cancellation was lost: a spool's drainer cancelled by `close` after SIGTERM kept reconnecting, and
`load --follow` to a broker that went away did not end (test_spooling's mistyped-port test, now and then, under
load). The attempt here fails in the very turn its caller is cancelled, as a broker resetting the connection
at that moment does."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest

from streamer.amqp.connection import BrokerUnavailable, connect, parse_target
from streamer.util.urls import EndpointURL

TARGET = parse_target(EndpointURL.parse("amqp://guest:guest@127.0.0.1:1,127.0.0.1:2/%2F/x"))


async def test_a_cancel_that_comes_with_the_attempt_s_failure_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []
    caller: list[asyncio.Task[Any]] = []

    async def reset_as_cancelled(**kwargs: Any) -> None:
        attempts.append(kwargs["port"])
        caller[0].cancel()  # the caller is cancelled ...
        raise ConnectionResetError(104, "Connection reset by peer")  # ... as the broker resets the connection

    monkeypatch.setattr(aio_pika, "connect", reset_as_cancelled)
    task = asyncio.create_task(connect(TARGET, {"connect_timeout": 3}))
    caller.append(task)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert attempts == [1], "the next node was tried after the cancellation"


async def test_a_failure_without_a_cancel_is_still_not_now(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []

    async def reset(**kwargs: Any) -> None:
        attempts.append(kwargs["port"])
        raise ConnectionResetError(104, "Connection reset by peer")

    monkeypatch.setattr(aio_pika, "connect", reset)
    with pytest.raises(BrokerUnavailable) as refused:
        await connect(TARGET, {"connect_timeout": 3})
    assert attempts == [1, 2] and not refused.value.permanent
    assert "127.0.0.1:1: " in str(refused.value) and "127.0.0.1:2: " in str(refused.value)
