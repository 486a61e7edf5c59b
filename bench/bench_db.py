"""Throughput of the Stampede database endpoints (SQLite, PostgreSQL, MySQL/MariaDB).

    python bench/bench_db.py [--events 200000] [--batch 5000] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
                             [--mysql mysql://root@127.0.0.1:3306] [--skip sqlite|postgres|mysql]

The stream is the four golden monitord streams repeated with fresh workflow
uuids until it holds at least `--events` events (as many workflows as
copies). Events are built before the clock starts: this measures the
endpoints (loader + database), not the BP parser. PostgreSQL runs into a
fresh database that is dropped afterwards. Targets: SQLite >= 10,000
events/s, PostgreSQL >= 50,000 events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # streamer and tests (a package)

from streamer.endpoints import create_endpoint  # noqa: E402
from streamer.util.urls import EndpointURL
from tests.support.dbstream import NAMES, batches, golden_events, synthetic  # noqa: E402
from tests.support.pghelp import fresh_database  # noqa: E402


def build_stream(golden: Path, at_least: int) -> list:
    per_copy = sum(len(golden_events(golden, name)) for name in NAMES)
    copies = -(-at_least // per_copy)
    return list(synthetic(golden, copies)), copies


async def run(url: str, events: list, size: int) -> dict:
    endpoint = create_endpoint(EndpointURL.parse(url))
    await endpoint.open()
    chunks = batches(events, size)
    start = time.perf_counter()
    for chunk in chunks:
        await endpoint.write(chunk)
    elapsed = time.perf_counter() - start
    await endpoint.close()
    stats = endpoint.stats
    return {"events": stats.events, "rows": stats.rows, "batches": stats.batches, "seconds": elapsed,
            "events/s": stats.events / elapsed, "rows/s": stats.rows / elapsed, "rejected": len(stats.rejected)}


def report(label: str, result: dict, target: int) -> None:
    verdict = "ok" if result["events/s"] >= target else f"BELOW target {target:,}"
    print(f"{label:<11} {result['events']:>8,} events {result['rows']:>8,} rows in {result['seconds']:6.2f}s  "
          f"{result['events/s']:>9,.0f} events/s {result['rows/s']:>9,.0f} rows/s  "
          f"({result['batches']} batches, {result['rejected']} rejected)  {verdict}")


async def bench_postgres(admin_dsn: str, events: list, size: int) -> dict:
    async with fresh_database(admin_dsn, "streamer_bench") as url:
        return await run(url, events, size)


async def bench_mysql(server: str, events: list, size: int) -> dict:
    """Into a fresh database (the endpoint creates it), dropped afterwards."""
    import asyncmy

    from streamer.endpoints.db.mysql import parse_target
    from streamer.util.urls import EndpointURL

    name = f"streamer_bench_{uuid.uuid4().hex[:10]}"
    try:
        return await run(f"{server}/{name}", events, size)
    finally:
        t = parse_target(EndpointURL.parse(f"{server}/{name}"))
        conn = await asyncmy.connect(host=t.host, port=t.port, user=t.user, password=t.password or "")
        async with conn.cursor() as cur:
            await cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=5000, help="events per write (the bus's default: 5000)")
    parser.add_argument("--golden", default=os.environ.get("STREAMER_SHARED", str(ROOT.parent / "shared")) + "/golden")
    parser.add_argument("--pg", default=os.environ.get("STREAMER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--mysql", default=os.environ.get("STREAMER_BENCH_MYSQL", "mysql://root@127.0.0.1:3306"),
                        help="MySQL/MariaDB server URL without database")
    parser.add_argument("--skip", choices=["sqlite", "postgres", "mysql"], action="append", default=[])
    args = parser.parse_args()

    t0 = time.perf_counter()
    events, copies = build_stream(Path(args.golden), args.events)
    print(f"stream: {len(events):,} events, {copies} copies of the 4 golden workflows "
          f"(built in {time.perf_counter() - t0:.1f}s), batches of {args.batch}")
    if "sqlite" not in args.skip:
        with tempfile.TemporaryDirectory() as tmp:
            for sync in ("full", "normal"):
                result = asyncio.run(run(f"sqlite:///{tmp}/bench-{sync}.db?synchronous={sync}", events, args.batch))
                report(f"sqlite/{sync}", result, 10_000)
    if "postgres" not in args.skip:
        report("postgresql", asyncio.run(bench_postgres(args.pg, events, args.batch)), 50_000)
        own = int(create_endpoint(EndpointURL.parse(args.pg)).option("batch"))
        if own != args.batch:
            print(f"postgresql with the endpoint's own batch size ({own:,} events, its `batch` option):")
            report("postgresql", asyncio.run(bench_postgres(args.pg, events, own)), 50_000)
    if "mysql" not in args.skip:
        report("mysql", asyncio.run(bench_mysql(args.mysql, events, args.batch)), 10_000)
        own = int(create_endpoint(EndpointURL.parse(args.mysql + "/x")).option("batch"))
        if own != args.batch:
            print(f"mysql with the endpoint's own batch size ({own:,} events, its `batch` option):")
            report("mysql", asyncio.run(bench_mysql(args.mysql, events, own)), 10_000)


if __name__ == "__main__":
    main()
