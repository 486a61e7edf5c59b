"""Declaring RabbitMQ queues and the site topology: queue types, the arguments a site needs, partitions.

Shared by the collector (`streamer load amqp://…/QUEUE?declare=true&queue_type=quorum`,
`sources/amqp/queue.py`) and `streamer topology` (`cli/topology.py`), so both declare the same things.

- **Queue types**: `classic`, `quorum` (RabbitMQ's replicated queue: the recommendation for a site),
  `stream` (a replicated append-only log a new collector can read from the start).
- **Arguments**: `max_length`, `max_length_bytes` (`512M`), `delivery_limit` (quorum: a message delivered that
  many times without an acknowledgement is dead-lettered, not delivered round and round),
  `dead_letter_exchange` (declared as a durable fanout exchange with a queue of the same name bound to it, so
  dead letters are kept), `max_age` (a stream's retention, e.g. `7D`). A quorum queue gets
  `delivery_limit=20` and `dead_letter_exchange=QUEUE.dead` unless given (`delivery_limit=0`: no limit).
- **Partitions** (`Partitions`): the publishers' topic exchange is bound (`#`) to a consistent-hash exchange
  (the bundled `rabbitmq_consistent_hash_exchange` plugin) that hashes the `root_wf_uuid` header every
  streamer publisher sets (`endpoints/amqp/endpoint.py`), feeding N queues `PREFIX.0` … `PREFIX.N-1`; a workflow and
  its sub-workflows always land on the same queue, so N collectors, one per queue, own disjoint workflows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from streamer.core.options import OptionError, parse_size

QUEUE_TYPES = ("classic", "quorum", "stream")
DECLARE_OPTIONS = ("queue_type", "max_length", "max_length_bytes", "delivery_limit", "dead_letter_exchange",
                   "max_age")
"""URL options (or config keys) that shape a queue the collector declares."""
QUORUM_DELIVERY_LIMIT = 20
HASH_HEADER = "root_wf_uuid"
"""The header the partition exchange hashes: a workflow tree stays on one queue."""
_AGE = re.compile(r"^\d+[YMDhms]$")


class TopologyError(ValueError):
    """A queue or topology option that cannot be used (a usage error)."""


@dataclass(frozen=True)
class QueueSpec:
    """A queue to declare: its name, type and arguments (RabbitMQ's `x-…`), and its dead-letter exchange."""

    name: str
    queue_type: str = "classic"
    arguments: tuple[tuple[str, Any], ...] = ()
    dead_letter_exchange: str | None = None

    @property
    def x_arguments(self) -> dict[str, Any]:
        return dict(self.arguments)


def queue_spec(name: str, options: dict[str, Any], *, single_active: bool = False) -> QueueSpec:
    """The queue `options` (DECLARE_OPTIONS) describe; TopologyError naming the bad option."""
    queue_type = str(options.get("queue_type") or "classic").lower()
    if queue_type not in QUEUE_TYPES:
        raise TopologyError(f"queue_type must be one of {', '.join(QUEUE_TYPES)}, not {queue_type!r}")
    args: dict[str, Any] = {}
    if queue_type != "classic":
        args["x-queue-type"] = queue_type
    if single_active and queue_type != "stream":
        args["x-single-active-consumer"] = True
    try:
        if options.get("max_length") not in (None, ""):
            args["x-max-length"] = _count("max_length", options["max_length"])
        if options.get("max_length_bytes") not in (None, ""):
            args["x-max-length-bytes"] = parse_size(options["max_length_bytes"])
    except OptionError as exc:
        raise TopologyError(f"max_length_bytes: {exc}") from None
    limit = options.get("delivery_limit")
    dlx = options.get("dead_letter_exchange") or None
    if queue_type == "quorum":
        limit = QUORUM_DELIVERY_LIMIT if limit in (None, "") else limit
        dlx = dlx or f"{name}.dead"
    if limit not in (None, "") and _count("delivery_limit", limit):
        if queue_type != "quorum":
            raise TopologyError(f"delivery_limit needs queue_type=quorum (RabbitMQ counts deliveries only in a "
                                f"quorum queue), not {queue_type}")
        args["x-delivery-limit"] = _count("delivery_limit", limit)
    if dlx:
        if queue_type == "stream":
            raise TopologyError("a stream keeps every message: dead_letter_exchange does not apply to it")
        args["x-dead-letter-exchange"] = str(dlx)
    age = options.get("max_age")
    if age not in (None, ""):
        if queue_type != "stream" or not _AGE.match(str(age)):
            raise TopologyError(f"max_age {age!r}: a stream's retention, e.g. 7D, 12h, 30m (queue_type=stream)")
        args["x-max-age"] = str(age)
    return QueueSpec(name, queue_type, tuple(args.items()), str(dlx) if dlx else None)


def _count(option: str, value: Any) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise TopologyError(f"{option} must be a whole number, not {value!r}") from None
    if number < 0:
        raise TopologyError(f"{option} must not be negative ({number})")
    return number


async def declare_queue(channel: Any, spec: QueueSpec) -> Any:
    """Declare `spec` (durable) and its dead-letter exchange and queue; the aio-pika queue."""
    if spec.dead_letter_exchange:
        dead = await channel.declare_exchange(spec.dead_letter_exchange, "fanout", durable=True)
        dead_args = {"x-queue-type": "quorum"} if spec.queue_type == "quorum" else None
        kept = await channel.declare_queue(spec.dead_letter_exchange, durable=True, arguments=dead_args)
        await kept.bind(dead, routing_key="#")
    return await channel.declare_queue(spec.name, durable=True, arguments=spec.x_arguments or None)


# ---------------------------------------------------------------- partitions


@dataclass(frozen=True)
class Partitions:
    """N queues fed by a consistent-hash exchange on `root_wf_uuid`, itself bound to the publishers' exchange."""

    exchange: str
    """The publishers' topic exchange."""
    count: int
    prefix: str
    queue: QueueSpec
    """The shape of every partition queue (its name is replaced by `PREFIX.i`)."""

    @property
    def hash_exchange(self) -> str:
        return f"{self.prefix}.hash"

    def queue_names(self) -> list[str]:
        return [f"{self.prefix}.{i}" for i in range(self.count)]

    def definitions(self, vhost: str) -> dict[str, Any]:
        """The topology as RabbitMQ definitions (`rabbitmqctl import_definitions`, `load_definitions`)."""
        exchanges = [
            {"name": self.exchange, "vhost": vhost, "type": "topic", "durable": True, "auto_delete": False,
             "internal": False, "arguments": {}},
            {"name": self.hash_exchange, "vhost": vhost, "type": "x-consistent-hash", "durable": True,
             "auto_delete": False, "internal": False, "arguments": {"hash-header": HASH_HEADER}},
        ]
        queues, bindings = [], [
            {"source": self.exchange, "vhost": vhost, "destination": self.hash_exchange,
             "destination_type": "exchange", "routing_key": "#", "arguments": {}}]
        for name in self.queue_names():
            queues.append({"name": name, "vhost": vhost, "durable": True, "auto_delete": False,
                           "arguments": self.queue.x_arguments})
            bindings.append({"source": self.hash_exchange, "vhost": vhost, "destination": name,
                             "destination_type": "queue", "routing_key": "1", "arguments": {}})
        if self.queue.dead_letter_exchange:
            dead = self.queue.dead_letter_exchange
            exchanges.append({"name": dead, "vhost": vhost, "type": "fanout", "durable": True, "auto_delete": False,
                              "internal": False, "arguments": {}})
            queues.append({"name": dead, "vhost": vhost, "durable": True, "auto_delete": False,
                           "arguments": {"x-queue-type": "quorum"} if self.queue.queue_type == "quorum" else {}})
            bindings.append({"source": dead, "vhost": vhost, "destination": dead, "destination_type": "queue",
                             "routing_key": "#", "arguments": {}})
        return {"exchanges": exchanges, "queues": queues, "bindings": bindings}


def partitions(exchange: str, count: int, options: dict[str, Any], prefix: str | None = None) -> Partitions:
    """The partition topology of `exchange`: `count` queues `PREFIX.i` (default prefix `EXCHANGE.part`) shaped
    by `options` (DECLARE_OPTIONS; quorum unless `queue_type` says otherwise)."""
    if count < 1:
        raise TopologyError(f"--partitions must be at least 1, not {count}")
    prefix = prefix or f"{exchange}.part"
    shape = {"queue_type": "quorum", **options}
    if shape.get("dead_letter_exchange") in (None, "") and str(shape["queue_type"]).lower() == "quorum":
        shape["dead_letter_exchange"] = f"{prefix}.dead"  # one dead-letter queue for all partitions
    return Partitions(exchange, count, prefix, queue_spec(prefix, shape))


async def declare_partitions(channel: Any, topology: Partitions) -> list[str]:
    """Declare the exchanges, the N queues and their bindings (idempotent: growing N only adds queues)."""
    source = await channel.declare_exchange(topology.exchange, "topic", durable=True)
    hashing = await channel.declare_exchange(topology.hash_exchange, "x-consistent-hash", durable=True,
                                             arguments={"hash-header": HASH_HEADER})
    await hashing.bind(source, routing_key="#")
    for name in topology.queue_names():
        queue = await declare_queue(channel, QueueSpec(name, topology.queue.queue_type, topology.queue.arguments,
                                                       topology.queue.dead_letter_exchange))
        await queue.bind(hashing, routing_key="1")  # weight 1: every queue an equal share of the hash ring
    return topology.queue_names()
