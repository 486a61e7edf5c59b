"""AMQP benchmark: events/s to RabbitMQ with publisher confirms, next to a JSONL file write.

    python bench/bench_amqp.py [--events 200000] [--url amqp://guest:guest@127.0.0.1:5672/%2F]
                               [--batch 5000] [--window 2000] [--shared ../shared]

Builds the events by repeating the corpus streams (each copy made distinct by
a `rep` field), then in the same run measures, batch by batch as the bus
calls them:
  jsonl  the file endpoint writing the same events (reference);
  amqp   the AMQP endpoint to a fresh durable topic exchange with a durable
         queue bound `#` (persistent messages, so the broker writes them to
         disk before confirming; `--queue transient|none` to take the broker's
         disk out); `write` returns only once every message of the batch is
         confirmed.
Prints both rates and their ratio; the exchange and queue are deleted afterwards.
Target: >= 20,000 events/s on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aio_pika  # noqa: E402

from streamer.endpoints import create_endpoint  # noqa: E402
from streamer.events import Event, bp, jsonenc  # noqa: E402
from streamer.util.urls import EndpointURL


def build_events(shared: Path, target: int) -> list[Event]:
    base: list[Event] = []
    for path in sorted((shared / "corpus" / "bp").glob("*.bp")) + sorted((shared / "golden").glob("*.bp")):
        for line in path.read_text(errors="replace").splitlines():
            if line.strip():
                try:
                    base.append(bp.parse_line(line))
                except ValueError:
                    continue
    events: list[Event] = []
    rep = 0
    while len(events) < target:
        events.extend(Event(e.name, {**e.fields, "rep": rep}) for e in base)
        rep += 1
    return events[:target]


CPU: dict[str, float] = {}


async def timed_writes(endpoint, events: list[Event], batch: int, label: str) -> float:
    """Wall seconds of writing `events` batch by batch; CPU seconds of this process go to CPU[label]."""
    await endpoint.open()
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(events), batch):
        await endpoint.write(events[start:start + batch])
    await endpoint.flush()
    await endpoint.close()
    CPU[label] = time.process_time() - cpu
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F", help="broker and vhost")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--window", type=int, default=2000)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--queue", choices=("durable", "transient", "none"), default="durable",
                        help="what is bound to the exchange: a durable queue (broker writes to disk), "
                             "a non-durable one, or nothing (messages are confirmed and dropped)")
    args = parser.parse_args()

    events = build_events(args.shared, args.events)
    for event in events:  # both endpoints share the cached JSON encoding: encode once, up front
        jsonenc.dumps(event)
    print(f"{len(events):,} events, batches of {args.batch:,}")

    with tempfile.TemporaryDirectory(prefix="bench-amqp-") as tmp:
        file_seconds = await timed_writes(create_endpoint(EndpointURL.parse(f"file://{tmp}/events.jsonl?events=*&fsync=true")),
                                          events, args.batch, "file")
        exchange = f"bench-{secrets.token_hex(4)}"
        connection = await aio_pika.connect(args.url)
        channel = await connection.channel()
        exchange_obj = await channel.declare_exchange(exchange, "topic", durable=True)
        queue = await channel.declare_queue(exchange, durable=args.queue == "durable")
        if args.queue != "none":
            await queue.bind(exchange_obj, "#")
        try:
            mandatory = "false" if args.queue == "none" else "true"
            endpoint = create_endpoint(EndpointURL.parse(f"{args.url}/{exchange}?events=*&window={args.window}&spool={tmp}/spool"
                                       f"&mandatory={mandatory}"))
            amqp_seconds = await timed_writes(endpoint, events, args.batch, "amqp")
            queued = (await channel.declare_queue(exchange, passive=True)).declaration_result.message_count
        finally:
            await queue.delete(if_unused=False, if_empty=False)
            await exchange_obj.delete()
            await connection.close()

    file_rate = len(events) / file_seconds
    amqp_rate = len(events) / amqp_seconds
    print(f"jsonl file         : {file_rate:12,.0f} events/s ({file_seconds:.2f} s)")
    print(f"amqp ({args.queue} queue): {amqp_rate:12,.0f} events/s ({amqp_seconds:.2f} s, confirmed {endpoint.published:,}, "
          f"queued {queued:,}, spooled {endpoint.spooled:,})")
    print(f"streamer's own CPU for the AMQP run: {CPU['amqp']:.2f} s, i.e. capacity "
          f"{len(events) / max(CPU['amqp'], 1e-9):,.0f} events/s per core; the rest of the wall time is the broker")
    print(f"ratio amqp/jsonl: {amqp_rate / file_rate:.2f}   target >= 20,000 events/s: "
          f"{'met' if amqp_rate >= 20_000 else 'NOT met'}")


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
