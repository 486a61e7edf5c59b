"""Connecting to RabbitMQ: the broker URL, TLS, and one plain connection with plain-worded failures.

Shared by the AMQP endpoint (publishing, `streamer/endpoints/amqp/endpoint.py`) and the
AMQP sources (`streamer tail`, the collector of `streamer load amqp://...`,
`streamer/sources/`), so neither layer imports the other.

URL: `amqp[s]://[user:pass@]host[:port][,host[:port]...]/[vhost/]name`, the
vhost URL-encoded (`%2F` for `/`); `name` is the exchange (publishing, tail) or
the queue (collector).

Several brokers (the nodes of one RabbitMQ cluster): `connect` tries them in the
order given and takes the first that answers; after a loss, `connect(...,
after=NODE)` starts with the node after the one lost, so a client fails over to
the next node at once instead of waiting for the dead one. Only when every node
refuses does the caller see `BrokerUnavailable` (and a publisher spools). The
node in use is logged (`connected to NODE`, no password) and kept on the
connection (`node_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import aio_pika

from streamer.amqp import frames
from streamer.amqp.errors import classify
from streamer.core.options import is_true
from streamer.util.urls import EndpointURL, mask

CONNECT_TIMEOUT = 10.0
log = logging.getLogger("streamer.amqp")


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
    """Where to publish: broker addresses (one or the nodes of a cluster), credentials, vhost and exchange."""

    tls: bool
    host: str
    port: int
    user: str
    password: str
    vhost: str
    exchange: str
    more: tuple[tuple[str, int], ...] = ()
    """The other brokers after (host, port), in the order given."""

    @property
    def nodes(self) -> list[tuple[str, int]]:
        """Every broker address, in the order given."""
        return [(self.host, self.port), *self.more]

    @property
    def display(self) -> str:
        """The target without its password (safe to log)."""
        scheme = "amqps" if self.tls else "amqp"
        vhost = self.vhost.replace("%", "%25").replace("/", "%2F")
        hosts = ",".join(node_name(host, port) for host, port in self.nodes)
        return f"{scheme}://{self.user}@{hosts}/{vhost}/{self.exchange}"


def node_name(host: str, port: int) -> str:
    """`host:port` (`[v6]:port`) of one broker."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _nodes(url: EndpointURL, default_port: int) -> list[tuple[str, int]]:
    """The URL's hosts (`h1[:p1],h2[:p2],[::1]:p3`) as [(host, port), ...], each checked."""
    nodes: list[tuple[str, int]] = []
    for host in url.hosts:
        if not host.name:
            raise AMQPURLError(f"{url.masked_base}: no broker host" + (" in a comma-separated list" if nodes or
                                                                       len(url.hosts) > 1 else ""))
        try:
            port = host.port_number(default_port)
        except ValueError:
            port = 0
        if port == 0 and host.port:
            raise AMQPURLError(f"{url.masked_base}: bad port {host.port!r} for broker {host.name}")
        nodes.append((host.name, port))
    return nodes


def parse_target(url: EndpointURL, *, need_exchange: bool = True) -> AMQPTarget:
    """`amqp[s]://[user:pass@]host[:port][,host[:port]...]/[vhost/]exchange` (vhost URL-encoded) as a target."""
    if url.scheme not in ("amqp", "amqps"):
        raise AMQPURLError(f"not an AMQP URL: {url.masked_base}")
    hosts = _nodes(url, 5671 if url.scheme == "amqps" else 5672)
    segments = url.segments
    if segments and segments[-1] == "" and len(segments) > 1:
        segments = segments[:-1]
    if len(segments) >= 2:
        vhost, exchange = unquote("/".join(segments[:-1])), unquote(segments[-1])
    elif len(segments) == 1:
        vhost, exchange = "/", unquote(segments[0])
    else:
        vhost, exchange = "/", ""
    if not exchange and need_exchange:
        raise AMQPURLError(f"{url.masked_base}: no exchange (expected amqp://host/vhost/exchange)")
    return AMQPTarget(
        tls=url.scheme == "amqps", host=hosts[0][0], port=hosts[0][1],
        user=url.user or "guest", password="guest" if url.password is None else url.password,
        vhost=vhost or "/", exchange=exchange, more=tuple(hosts[1:]),
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
    node = ""
    """`host:port` of the broker this connection is to."""
    receiver: frames.FrameReceiver | None = None
    """Its buffered frame reader (`amqp/frames.py`: the collector's consumer taps its channel there), when it
    was opened with `raw_deliveries`; None when it reads with aiormq's own."""

    """aio-pika's connection, closed when connecting fails: else the garbage collector finalises it later,
    possibly in a worker thread where it can only print `RuntimeWarning: coroutine 'Connection.close' was
    never awaited` over the user's terminal (seen while the broker is away)."""

    async def connect(self, timeout: Any = None) -> None:
        try:
            await super().connect(timeout)
        except BaseException:
            await asyncio.shield(self.close())
            raise


def failover_order(target: AMQPTarget, after: str | None = None) -> list[tuple[str, int]]:
    """The brokers in the order to try: as given, or, after losing node `after`, from the one after it
    (the lost one last)."""
    nodes = target.nodes
    names = [node_name(*node) for node in nodes]
    if after in names:
        start = names.index(after) + 1
        return nodes[start:] + nodes[:start]
    return nodes


def node_of(connection: Any) -> str:
    """`host:port` of the broker `connection` is to ('' if unknown)."""
    return str(getattr(connection, "node", "") or "")


async def connect(target: AMQPTarget, options: dict[str, Any], *, name: str = "streamer",
                  after: str | None = None, raw_deliveries: bool = False) -> aio_pika.abc.AbstractConnection:
    """A plain (non-robust) aio-pika connection to the first broker that answers (`failover_order`):
    reconnecting is the caller's job. BrokerUnavailable when none does (permanent if one refused for good:
    a wrong password or vhost is wrong on every node of a cluster).

    `raw_deliveries`: the connection reads with `amqp/frames.FrameReceiver` (its `receiver`), whose tapped
    channels take deliveries raw: the collector's. Any other connection reads with aiormq's own reader."""
    timeout = float(options.get("connect_timeout", CONNECT_TIMEOUT))
    kwargs: dict[str, Any] = dict(
        login=target.user, password=target.password, virtualhost=target.vhost, timeout=timeout,
        heartbeat=int(options.get("heartbeat", 60)), client_properties={"connection_name": name},
    )
    if target.tls:
        kwargs.update(ssl=True, ssl_context=tls_context(options))
    failures: list[str] = []
    for host, port in failover_order(target, after):
        node = node_name(host, port)
        try:
            readers: contextlib.AbstractContextManager[list[frames.FrameReceiver]] = (
                frames.capture() if raw_deliveries else contextlib.nullcontext([]))
            with readers as receivers:
                connection = await asyncio.wait_for(
                    aio_pika.connect(host=host, port=port, **kwargs, connection_class=_Connection), timeout + 1)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # refused, DNS, TLS, timeout: "not now"; auth, vhost: permanent
            _raise_if_cancelled(exc)
            reason, permanent = classify(exc, target)
            if permanent:
                where = f" ({node})" if target.more else ""
                raise BrokerUnavailable(f"cannot connect to {target.display}{where}: {reason}",
                                        permanent=True) from None
            failures.append(f"{node}: {reason}" if len(target.more) else reason)
            continue
        if isinstance(connection, _Connection):
            connection.node = node
            connection.receiver = receivers[-1] if receivers else None
        if target.more:
            log.info("%s: connected to %s", name, node)
        return connection
    raise BrokerUnavailable(f"cannot connect to {target.display}: {'; '.join(failures)}")


def _raise_if_cancelled(exc: BaseException) -> None:
    """CancelledError when this task was cancelled: Python 3.11's `asyncio.wait_for` gives the awaited
    connect's own failure instead when both come in one turn of the loop (the broker resetting the connection
    as a signal stops the run). Taken for "not now", that cancellation was lost: the spool's drainer went on
    reconnecting and `load` did not end after SIGTERM (test_spooling's mistyped-port test, now and then)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from exc


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
