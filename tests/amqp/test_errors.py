"""What a failed AMQP operation means: a loss another node (or a later try) mends, or a refusal no retry mends."""

from __future__ import annotations

import asyncio

import pytest
from aiormq.exceptions import (AMQPConnectionError, ChannelInvalidStateError, ChannelNotFoundEntity,
                               ConnectionClosed, ConnectionNotAllowed, ConnectionNotImplemented,
                               ProbableAuthenticationError)

from streamer.amqp.errors import connection_lost


@pytest.mark.parametrize("exc", [
    AMQPConnectionError("Server communication error: ConnectionResetError(104, 'Connection reset by peer')"),
    ConnectionResetError(104, "Connection reset by peer"),
    ConnectionClosed(320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"),
    ChannelInvalidStateError("<Connection: ...> closed"),
    asyncio.TimeoutError(),
])
def test_a_connection_broken_under_us_is_a_loss(exc: BaseException) -> None:
    assert connection_lost(exc)


@pytest.mark.parametrize("exc", [
    ConnectionNotImplemented(540, "NOT_IMPLEMENTED - queue 'qq' in vhost '/' does not support global qos"),
    ConnectionNotAllowed(530, "NOT_ALLOWED - vhost nope not found"),
    ProbableAuthenticationError("ACCESS_REFUSED - Login was refused"),
    ChannelNotFoundEntity(404, "NOT_FOUND - no queue 'wf' in vhost '/'"),
    ValueError("bad option"),
])
def test_a_refusal_is_not_a_loss(exc: BaseException) -> None:
    assert not connection_lost(exc)
