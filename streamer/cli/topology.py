"""`streamer topology`: declare a site's partitioned RabbitMQ topology, or print it as RabbitMQ definitions."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from streamer.amqp.topology import HASH_HEADER, Partitions, TopologyError, declare_partitions, partitions

DESCRIPTION = f"""\
Declare the partitions a site's collectors read: the publishers' topic exchange
is bound (#) to a consistent-hash exchange (RabbitMQ's bundled
rabbitmq_consistent_hash_exchange plugin: rabbitmq-plugins enable it on every
node) hashing the {HASH_HEADER} header every streamer publisher sets, feeding N
durable queues PREFIX.0 ... PREFIX.N-1 (quorum queues unless --queue-type says
otherwise). A workflow and its sub-workflows always land on the same queue, so
N collectors, one per queue, own disjoint workflows and never wait on one
another's database locks.

Declaring is idempotent: run it again with a larger --partitions to add queues
(the hash ring then sends about 1/N of the workflows to the new queues; a
workflow under way when that happens has its later events on another queue,
which the database endpoint absorbs, waiting for parent rows as competing
collectors do). Shrinking is not done here: drain a queue, then delete it.
"""

EPILOG = """\
examples:
  streamer topology 'amqp://admin:PASS@rmq1,rmq2,rmq3/pegasus/workflows' --partitions 4
      then one collector per queue (on any hosts):
      streamer load 'amqp://collector:PASS@rmq1,rmq2,rmq3/pegasus/workflows.part.0' --dest postgresql://...
  streamer topology 'amqp://rmq1/pegasus/workflows' --partitions 8 --max-length-bytes 20G
  streamer topology 'amqp://rmq1/pegasus/workflows' --partitions 4 --definitions > partitions.json
      (RabbitMQ definitions: rabbitmqctl import_definitions partitions.json, or load_definitions)
"""


def add_topology_command(commands: Any, formatter: type[argparse.HelpFormatter]) -> argparse.ArgumentParser:
    cmd = commands.add_parser("topology", help="declare partition queues by workflow (consistent-hash exchange) "
                                               "for N collectors", description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=formatter)
    cmd.add_argument("url", metavar="AMQP_URL",
                     help="amqp://user:pass@host[,host...]/vhost/EXCHANGE: the publishers' exchange (a user that "
                          "may configure it and the queues)")
    cmd.add_argument("-n", "--partitions", type=int, required=True, metavar="N", help="number of queues")
    cmd.add_argument("--prefix", metavar="NAME", help="queue names NAME.0 ... (default: EXCHANGE.part)")
    cmd.add_argument("--queue-type", choices=("quorum", "classic", "stream"), default="quorum",
                     help="quorum (default: replicated, the recommendation), classic, or stream")
    cmd.add_argument("--max-length", metavar="N", help="messages a queue holds at most")
    cmd.add_argument("--max-length-bytes", metavar="SIZE", help="bytes a queue holds at most (e.g. 20G)")
    cmd.add_argument("--delivery-limit", metavar="N",
                     help="quorum: deliveries of a message before it is dead-lettered (default 20; 0: no limit)")
    cmd.add_argument("--dead-letter-exchange", metavar="NAME",
                     help="where poison messages go (default PREFIX.dead, a fanout exchange with a queue of "
                          "that name)")
    cmd.add_argument("--max-age", metavar="AGE", help="stream: retention, e.g. 7D")
    cmd.add_argument("--definitions", action="store_true",
                     help="print the topology as RabbitMQ definitions (JSON) instead of declaring it")
    return cmd


def topology_of(args: argparse.Namespace, exchange: str) -> Partitions:
    options = {"queue_type": args.queue_type, "max_length": args.max_length,
               "max_length_bytes": args.max_length_bytes, "delivery_limit": args.delivery_limit,
               "dead_letter_exchange": args.dead_letter_exchange, "max_age": args.max_age}
    return partitions(exchange, args.partitions, {k: v for k, v in options.items() if v is not None}, args.prefix)


async def run_topology(args: argparse.Namespace) -> int:
    from streamer.amqp.connection import AMQPURLError, BrokerUnavailable, connect, parse_target
    from streamer.util.urls import EndpointURL, URLError, mask

    try:
        target = parse_target(EndpointURL.parse(args.url))
        topology = topology_of(args, target.exchange)
    except (AMQPURLError, URLError, TopologyError) as exc:
        raise TopologyError(mask(str(exc))) from None
    if args.definitions:
        json.dump(topology.definitions(target.vhost), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    try:
        connection = await connect(target, {}, name="streamer topology")
    except BrokerUnavailable as exc:
        sys.stderr.write(f"streamer: error: {exc}\n")
        return 1
    try:
        channel = await connection.channel()
        names = await declare_partitions(channel, topology)
    except Exception as exc:  # plugin missing, refused, precondition: say so
        text = mask(str(exc) or type(exc).__name__)
        if "x-consistent-hash" in text or "invalid exchange type" in text.lower():
            text += " (enable the plugin on every node: rabbitmq-plugins enable rabbitmq_consistent_hash_exchange)"
        sys.stderr.write(f"streamer: error: {target.display}: {text}\n")
        return 1
    finally:
        await connection.close()
    sys.stderr.write(f"streamer: {target.display}: {len(names)} partition queues ({topology.queue.queue_type}) "
                     f"fed by {topology.hash_exchange} (hash-header {HASH_HEADER}); run one collector per queue:\n")
    for name in names:
        sys.stdout.write(f"{name}\n")
    return 0
