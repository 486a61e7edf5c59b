"""Connecting to RabbitMQ: the broker URL, TLS, and one plain connection with plain-worded failures.

Shared by the AMQP endpoint (publishing, `streamer/endpoints/amqp/endpoint.py`) and the
AMQP sources (`streamer tail`, the collector of `streamer load amqp://...`,
`streamer/sources/`), so neither layer imports the other.

URL: `amqp[s]://[user:pass@]host[:port]/[vhost/]name`, the vhost URL-encoded
(`%2F` for `/`); `name` is the exchange (publishing, tail) or the queue (collector).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika

from streamer.amqp.errors import classify
from streamer.core.options import is_true
from streamer.util.urls import mask

CONNECT_TIMEOUT = 10.0


class AMQPURLError(ValueError):
    """A broker URL that cannot be used (a usage error: exit 2)."""


class BrokerUnavailable(Exception):
    """The broker cannot take messages right now (unreachable, connection lost, no confirms).

    `permanent` marks failures retrying will not fix (bad credentials, exchange
    declared with other properties, access refused): fatal when opening.
    """

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


_PERMANENT = ("ACCESS_REFUSED", "PRECONDITION_FAILED", "NOT_FOUND", "NOT_ALLOWED", "authentication", "Authentication")


# ---------------------------------------------------------------- URL and options

@dataclass(frozen=True)
class AMQPTarget:
    """Where to publish: broker address, credentials, vhost and exchange."""

    tls: bool
    host: str
    port: int
    user: str
    password: str
    vhost: str
    exchange: str

    @property
    def display(self) -> str:
        """The target without its password (safe to log)."""
        scheme = "amqps" if self.tls else "amqp"
        vhost = self.vhost.replace("%", "%25").replace("/", "%2F")
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{vhost}/{self.exchange}"


def parse_target(url: str, *, need_exchange: bool = True) -> AMQPTarget:
    """Split `amqp[s]://[user:pass@]host[:port]/[vhost/]exchange` (vhost URL-encoded)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("amqp", "amqps"):
        raise AMQPURLError(f"not an AMQP URL: {mask(url)}")
    if not parts.hostname:
        raise AMQPURLError(f"{mask(url)}: no broker host")
    segments = parts.path.split("/")[1:] if parts.path else []
    if segments and segments[-1] == "" and len(segments) > 1:
        segments = segments[:-1]
    if len(segments) >= 2:
        vhost, exchange = unquote("/".join(segments[:-1])), unquote(segments[-1])
    elif len(segments) == 1:
        vhost, exchange = "/", unquote(segments[0])
    else:
        vhost, exchange = "/", ""
    if not exchange and need_exchange:
        raise AMQPURLError(f"{mask(url)}: no exchange (expected amqp://host/vhost/exchange)")
    try:
        port = parts.port or (5671 if scheme == "amqps" else 5672)
    except ValueError:
        raise AMQPURLError(f"{mask(url)}: bad port") from None
    return AMQPTarget(
        tls=scheme == "amqps", host=parts.hostname, port=port,
        user=unquote(parts.username) if parts.username else "guest",
        password=unquote(parts.password) if parts.password else "guest",
        vhost=vhost or "/", exchange=exchange,
    )


def tls_context(options: dict[str, Any]) -> ssl.SSLContext:
    """TLS for amqps: system CAs or `cafile`, client cert `certfile`/`keyfile`, `verify=false` to skip checks."""
    context = ssl.create_default_context(cafile=options.get("cafile") or None)
    if options.get("certfile"):
        context.load_cert_chain(options["certfile"], options.get("keyfile") or None)
    if not is_true(options.get("verify", True)):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _Connection(aio_pika.Connection):
    """aio-pika's connection, closed when connecting fails: else the garbage collector finalises it later,
    possibly in a worker thread where it can only print `RuntimeWarning: coroutine 'Connection.close' was
    never awaited` over the user's terminal (seen while the broker is away)."""

    async def connect(self, timeout: Any = None) -> None:
        try:
            await super().connect(timeout)
        except BaseException:
            await asyncio.shield(self.close())
            raise


async def connect(target: AMQPTarget, options: dict[str, Any], *,
                  name: str = "streamer") -> aio_pika.abc.AbstractConnection:
    """A plain (non-robust) aio-pika connection: reconnecting is the caller's job."""
    timeout = float(options.get("connect_timeout", CONNECT_TIMEOUT))
    kwargs: dict[str, Any] = dict(
        host=target.host, port=target.port, login=target.user, password=target.password,
        virtualhost=target.vhost, timeout=timeout, heartbeat=int(options.get("heartbeat", 60)),
        client_properties={"connection_name": name},
    )
    if target.tls:
        kwargs.update(ssl=True, ssl_context=tls_context(options))
    try:
        return await asyncio.wait_for(aio_pika.connect(**kwargs, connection_class=_Connection), timeout + 1)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # refused, DNS, TLS, timeout: "not now"; auth, vhost: permanent
        reason, permanent = classify(exc, target)
        raise BrokerUnavailable(f"cannot connect to {target.display}: {reason}", permanent=permanent) from None


def closed_future(connection: aio_pika.abc.AbstractConnection) -> asyncio.Future[None]:
    """A future the connection's closing completes (on the running loop)."""
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done(*_: Any) -> None:
        if not closed.done():
            closed.set_result(None)

    connection.close_callbacks.add(done)
    return closed


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return mask(text)
