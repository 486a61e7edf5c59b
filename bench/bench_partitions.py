"""Direct load vs one collector vs N partitioned collectors, into PostgreSQL, same run, interleaved.

    python bench/bench_partitions.py [--workflows 4] [--jobs 450] [--partitions 4] [--runs 3]
                                     [--pg postgresql://postgres@127.0.0.1:5432/postgres]

Generates `--workflows` hierarchical workflows (`streamer.synth`, replayed to BP files), starts a RabbitMQ node of
its own with the consistent-hash exchange plugin (`tests/support/ownservers.py`), and per run, in this order:
  direct       `streamer load FILES --dest postgresql://…/NEW`
  collector    the files published to an exchange whose one queue a single `streamer load amqp://…/QUEUE?idle=2`
               loads into a new database
  partitioned  the files published to an exchange split by `streamer topology --partitions N`, N collectors (one
               per queue) at once into one new database
Publishing is not measured; a collector's time is counted up to its last event (its `idle` wait taken off).
Prints medians of events/s and of CPU µs/event (user + system of the measured process tree).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.reference import THIS, precompile, run_measured  # noqa: E402
from tests.support.ownservers import CONSISTENT_HASH, own_rabbitmq  # noqa: E402
from tests.support.pghelp import fresh_database_sync  # noqa: E402

IDLE = 2.0


def streamer(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "streamer", *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"streamer {' '.join(args[:2])}: {done.stderr[-2000:]}")


def generate(base: Path, count: int, jobs: int) -> list[Path]:
    from streamer.synth import generate as synth

    files = []
    for i in range(count):
        submit = synth(base / f"wf{i}", jobs=jobs, scenario="hierarchical", seed=5000 + 10 * i, label=f"b{i}")
        out = base / f"wf{i}.bp"
        streamer("replay", str(submit), "--dest", str(out), "--no-jobstate", "--timezone", "UTC", "-q")
        files.append(out)
    return files


def declare_single(url: str, exchange: str) -> str:
    import asyncio

    import aio_pika

    async def run() -> str:
        async with await aio_pika.connect(url.replace("%2F", "")) as conn:
            channel = await conn.channel()
            source = await channel.declare_exchange(exchange, "topic", durable=True)
            queue = await channel.declare_queue(f"{exchange}.all", durable=True)
            await queue.bind(source, "#")
            return queue.name

    return asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflows", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=450)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    precompile(THIS)
    work = Path(tempfile.mkdtemp(prefix="bench-partitions-"))
    files = generate(work, args.workflows, args.jobs)
    events = sum(len(f.read_bytes().splitlines()) for f in files)
    py = sys.executable
    print(f"{args.workflows} workflows, {events:,} events; {args.partitions} partitions; {args.runs} runs each")
    results: dict[str, list[tuple[float, float]]] = {"direct": [], "collector": [], "partitioned": []}
    with own_rabbitmq(plugins=(CONSISTENT_HASH,)) as node:
        url = node.url
        for run in range(args.runs):
            with fresh_database_sync(args.pg, "bench_direct") as db:
                r = run_measured([py, "-m", "streamer", "load", *map(str, files), "--dest", db, "-q"], work,
                                 work / "direct.log", dict(os.environ))
                results["direct"].append((r.wall, r.cpu))
            exchange = f"bench-{secrets.token_hex(4)}"
            queue = declare_single(url, exchange)
            streamer("load", *map(str, files), "--dest", f"{url}/{exchange}?events=*&spool={work / exchange}", "-q")
            with fresh_database_sync(args.pg, "bench_one") as db:
                r = run_measured([py, "-m", "streamer", "load", f"{url}/{queue}?idle={IDLE}", "--dest", db, "-q"],
                                 work, work / "one.log", dict(os.environ))
                results["collector"].append((r.wall - IDLE, r.cpu))
            exchange = f"bench-{secrets.token_hex(4)}"
            done = subprocess.run([py, "-m", "streamer", "topology", f"{url}/{exchange}", "--partitions",
                                   str(args.partitions), "--queue-type", "classic"], capture_output=True, text=True)
            queues = done.stdout.split()
            streamer("load", *map(str, files), "--dest", f"{url}/{exchange}?events=*&spool={work / exchange}", "-q")
            with fresh_database_sync(args.pg, "bench_parts") as db:
                script = " ".join(f"'{py}' -m streamer load '{url}/{q}?idle={IDLE}' --dest '{db}' -q &"
                                  for q in queues) + " wait"
                r = run_measured(["sh", "-c", script], work, work / "parts.log", dict(os.environ))
                results["partitioned"].append((r.wall - IDLE, r.cpu))
            print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1][0]:.1f} s wall {v[-1][1]:.1f} s CPU"
                                                 for k, v in results.items()), flush=True)
    print(f"\n{'':12} {'events/s':>10} {'CPU µs/event':>13}   (medians of {args.runs}, {events:,} events)")
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:12} {events / wall:>10,.0f} {cpu / events * 1e6:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
