"""Site benchmark: P publishers -> a 3-node RabbitMQ cluster -> C partitioned collectors -> PostgreSQL, next to a
direct load of the same events, interleaved.

    python bench/bench_site.py [--workflows 4] [--jobs 600] [--publishers 2] [--partitions 4] [--rounds 3]
                               [--queue-type quorum] [--local] [--reference TREE] [--json OUT]
                               [--site-rate 87000,260000]

Input: `--workflows` generated workflows (`streamer.synth`, `--jobs` jobs each, hierarchical: a sub-workflow
stays with its root's partition) replayed once to BP files. Servers of the bench's own
(`tests/support/ownservers.py`): a 3-node RabbitMQ cluster (consistent-hash exchange plugin) and a PostgreSQL
server, both removed afterwards. Each round, interleaved, every mode on a fresh database:

  direct        `streamer load FILES --dest postgresql://…` (the reference);
  1 partition   `streamer topology URL/EXCHANGE --partitions 1` (quorum queues), then P publishers (`streamer load
                FILES --dest amqp://H1,H2,H3/…/EXCHANGE`, every broker given, the files dealt round-robin) publish
                everything, then one collector (`streamer load amqp://H1,H2,H3/…/QUEUE?idle=3`) loads it;
  C partitions  the same with `--partitions C` and C collectors at once, one per queue, into one database.

Publishing and collecting are measured one after the other, so that each tier's events/s is its own and not the
share of the two cores it won from the other tier. `--local` runs today's quick mode instead: the shared local
broker (one queue; C competing collectors, `single_active=false`), still the bench's own PostgreSQL.

Per mode and tier it prints events/s (events over the tier's own wall time; a collector's `idle` wait taken off)
and CPU µs per event: publishers and collectors (user + sys of their process tree, `bench/reference.py`), the
broker (the cluster's own `beam.smp` processes, reaped children included; with `--local` every `beam.smp` on the
machine, an upper bound) and PostgreSQL (that server's postmaster and backends, reaped backends included: every
backend of the server works for the run, plus the lock sampler's own). Then summed peak RSS, the load average,
waits on the per-workflow batch lock (`pghelp.LockWaits`, sampled every 0.1 s) and the rows check (every site
database equals the round's direct load, `pghelp.rows_diff`, which names every table that differs before their
rows, and the partition queues are empty once their collectors ended; a database that differs is dumped, `pg_dump
-Fc`, into the work directory beside the mode's logs). Medians of `--rounds`. Last, the capacity a site of
`--site-rate` events/s needs, from the C-partition figures (`capacity`), the CPU the cluster burns idle (measured
for 15 s before the first round) taken off the broker's. `--json OUT` writes every figure.
`--reference TREE` runs another checkout's streamer the same way (before/after in one run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.reference import THIS, Run, precompile, python_of, run_measured  # noqa: E402

IDLE = 3.0
TIERS = ("publishers", "broker", "collectors", "postgresql")
SITE_RATES = "87000,260000"
"""The issue's site: 200 submit hosts x 50 workflows x 5,000 jobs a day, on average and at peak."""


@dataclass
class Tier:
    cpu: float
    """CPU seconds (user + sys)."""
    rss_kib: int
    """Peak RSS summed over the tier's processes."""
    wall: float
    """Seconds the tier worked on the events."""


@dataclass
class Result:
    mode: str
    events: int
    load: float
    tiers: dict[str, Tier] = field(default_factory=dict)
    lock_waits: int = 0
    lock_samples: int = 0
    rows_equal: bool | None = None
    left: int = 0
    """Messages left in the partition queues once the collectors ended (a collector that stopped early)."""


# ---------------------------------------------------------------- measuring the servers

def _tree_cpu(pids: list[int]) -> float:
    """User + sys seconds of the processes `pids` and their descendants, the children they reaped included (a
    PostgreSQL backend that exited is counted in its postmaster's)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


class Servers(threading.Thread):
    """CPU and summed peak RSS of server process trees by tier ({"broker": [beam pids], "postgresql": [pid]})
    from start() to finish(): CPU from before/after totals, RSS sampled every 0.25 s."""

    def __init__(self, roots: dict[str, list[int]]) -> None:
        super().__init__(daemon=True)
        self.roots = roots
        self.before = {tier: _tree_cpu(pids) for tier, pids in roots.items()}
        self.peaks: dict[str, dict[int, int]] = {tier: {} for tier in roots}
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        while True:
            for tier, pids in self.roots.items():
                for pid in pids:
                    try:
                        root = psutil.Process(pid)
                        for proc in [root, *root.children(recursive=True)]:
                            peaks = self.peaks[tier]
                            peaks[proc.pid] = max(peaks.get(proc.pid, 0), proc.memory_info().rss // 1024)
                    except psutil.Error:
                        continue
            if self.stop.wait(0.25):
                return

    def finish(self, walls: dict[str, float]) -> dict[str, Tier]:
        self.stop.set()
        self.join()
        return {tier: Tier(_tree_cpu(pids) - self.before[tier], sum(self.peaks[tier].values()), walls[tier])
                for tier, pids in self.roots.items()}


# ---------------------------------------------------------------- the site

def all_at_once(commands: list[list[str]]) -> list[str]:
    """One shell running `commands` at once; it fails when one of them fails."""
    starts = " ".join(f"{shlex.join(c)} & p{i}=$!;" for i, c in enumerate(commands))
    waits = " ".join(f"wait $p{i} || s=1;" for i in range(len(commands)))
    return ["sh", "-c", f"{starts} s=0; {waits} exit $s"]


def _streamer(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "streamer", *args], capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"streamer {' '.join(args[:2])}: {done.stderr[-2000:]}")
    return done.stdout


@dataclass
class Site:
    amqp: str
    """amqp://user:pass@H1,H2,H3/vhost (no exchange)."""
    pg: str
    """postgresql://…/postgres of the bench's own server."""
    roots: Callable[[], dict[str, list[int]]]
    work: Path
    queue_type: str = "quorum"
    local: bool = False

    def declare(self, partitions: int) -> tuple[str, list[str]]:
        """A new exchange and the collectors' queue URLs: `streamer topology` partitions, or (`local`) one queue
        the collectors share."""
        exchange = f"bench-{secrets.token_hex(4)}"
        if not self.local:
            queues = _streamer("topology", f"{self.amqp}/{exchange}", "--partitions", str(partitions),
                               "--queue-type", self.queue_type).split()
            return exchange, [f"{self.amqp}/{q}?idle={IDLE}" for q in queues]
        asyncio.run(_declare_shared(self.amqp, exchange))
        share = "" if partitions == 1 else "&single_active=false"
        return exchange, [f"{self.amqp}/{exchange}.all?idle={IDLE}{share}"] * partitions


async def _declare_shared(amqp: str, exchange: str, remove: bool = False) -> None:
    """The exchange and its one queue on the shared broker, or (`remove`) the exchange deleted (its queue went
    with its last consumer)."""
    import aio_pika

    async with await aio_pika.connect(amqp.replace("%2F", "")) as conn:
        channel = await conn.channel()
        if remove:
            await channel.exchange_delete(exchange)
            return
        source = await channel.declare_exchange(exchange, "topic", durable=True)
        queue = await channel.declare_queue(f"{exchange}.all", durable=True, auto_delete=True)
        await queue.bind(source, "#")


async def _left_in(amqp: str, queue_urls: list[str]) -> int:
    """Messages left in the partition queues after their collectors ended (0 unless one ended early): asked of
    the first node."""
    import aio_pika

    head, _, rest = amqp.partition("@")
    hosts, _, vhost = rest.partition("/")
    async with await aio_pika.connect(f"{head}@{hosts.split(',')[0]}/{vhost}") as conn:
        channel = await conn.channel()
        left = 0
        for url in dict.fromkeys(queue_urls):
            name = url.rsplit("/", 1)[1].split("?", 1)[0]
            left += (await channel.declare_queue(name, passive=True)).declaration_result.message_count or 0
        return left


def tree_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


async def _collect(command: list[str], db: str, site: Site, log: Path, env: dict[str, str]) -> tuple[Run, Any]:
    from tests.support.pghelp import LockWaits

    with LockWaits(db, interval=0.1) as waits:
        run = await asyncio.to_thread(run_measured, command, site.work, log, env)
    return run, waits


def run_mode(site: Site, tree: Path, label: str, files: list[Path], events: int, publishers: int,
             partitions: int, direct_db: str | None) -> tuple[Result, str]:
    """One mode on a fresh database (partitions 0: the direct load): its figures, and the database's URL."""
    from tests.support.pghelp import admin, database_url, random_name, rows_diff

    name = random_name("bench_site")
    asyncio.run(admin(site.pg, f"CREATE DATABASE {name}"))
    db = database_url(site.pg, name)
    py, env = python_of(tree), tree_env(tree)
    result = Result(label, events, os.getloadavg()[0])
    roots = site.roots()
    if partitions == 0:
        del roots["broker"]  # a direct load has none
    servers = Servers(roots)
    servers.start()
    if partitions == 0:
        run, waits = asyncio.run(_collect([py, "-m", "streamer", "load", *map(str, files), "--dest", db, "-q"], db,
                                          site, site.work / f"{name}-direct.log", env))
        result.tiers["collectors"] = Tier(run.cpu, run.rss_sum_kib, run.wall)
        walls = {"postgresql": run.wall}
    else:
        exchange, queues = site.declare(partitions)
        spool = site.work / f"spool-{exchange}"
        pubs = [[py, "-m", "streamer", "load", *map(str, files[i::publishers]), "--dest",
                 f"{site.amqp}/{exchange}?events=*&spool={spool}/{i}", "-q"]
                for i in range(publishers) if files[i::publishers]]
        pub = run_measured(all_at_once(pubs), site.work, site.work / f"{name}-publishers.log", env)
        colls = [[py, "-m", "streamer", "load", queue, "--dest", db] for queue in queues]  # their summaries kept
        run, waits = asyncio.run(_collect(all_at_once(colls), db, site, site.work / f"{name}-collectors.log", env))
        if site.local:  # its one queue went with its last consumer
            asyncio.run(_declare_shared(site.amqp, exchange, remove=True))
        else:
            result.left = asyncio.run(_left_in(site.amqp, queues))
            if result.left:
                print(f"{label}: {result.left} messages left in the queues after the collectors ended", flush=True)
        result.tiers["publishers"] = Tier(pub.cpu, pub.rss_sum_kib, pub.wall)
        result.tiers["collectors"] = Tier(run.cpu, run.rss_sum_kib, run.wall - IDLE)
        walls = {"broker": pub.wall + run.wall - IDLE, "postgresql": run.wall - IDLE}
    result.tiers.update(servers.finish(walls))
    result.lock_waits, result.lock_samples = waits.waits, waits.samples
    if direct_db is not None:
        diff = asyncio.run(rows_diff(db, direct_db))
        if diff:  # kept for a look: the server goes with the bench
            dump = site.work / f"{name}-differs.dump"
            subprocess.run(["pg_dump", "-Fc", "-f", str(dump), db], check=False)
            print(f"{label}: rows differ from the direct load (database dumped to {dump}, logs "
                  f"{site.work}/{name}-*.log):\n{diff[:3000]}", flush=True)
        result.rows_equal = not diff and not result.left
    return result, db


# ---------------------------------------------------------------- figures

def summarize(results: list[Result]) -> list[dict[str, Any]]:
    """Medians by mode (in the order first run): events/s of the whole mode (the events over the collectors' wall,
    or the direct load's), and per tier events/s over its own wall, CPU µs/event and peak RSS MiB."""
    by: dict[str, list[Result]] = {}
    for r in results:
        by.setdefault(r.mode, []).append(r)
    med = statistics.median
    rows = []
    for mode, runs in by.items():
        tiers = {}
        for tier in TIERS:
            got = [r.tiers[tier] for r in runs if tier in r.tiers]
            if got:
                n = runs[0].events
                tiers[tier] = {"events_s": med(n / max(t.wall, 1e-9) for t in got),
                               "cpu_us": med(t.cpu * 1e6 / n for t in got),
                               "rss_mib": med(t.rss_kib / 1024 for t in got)}
        rows.append({"mode": mode, "runs": len(runs), "events": runs[0].events,
                     "events_s": tiers["collectors"]["events_s"], "tiers": tiers,
                     "load": [min(r.load for r in runs), max(r.load for r in runs)],
                     "lock_waits": sum(r.lock_waits for r in runs), "lock_samples": sum(r.lock_samples for r in runs),
                     "rows": ("equal" if all(r.rows_equal for r in runs) else "n/a" if
                              all(r.rows_equal is None for r in runs) else "DIFFER")})
    return rows


def format_summary(rows: list[dict[str, Any]]) -> str:
    """The summary as a table: a line per mode, a column group per tier (events/s, CPU µs/event)."""
    head = f"{'mode':<22} {'events/s':>8} " + " ".join(f"{t + ' ev/s µs/ev':>23}" for t in TIERS)
    lines = [head + f" {'RSS MiB':>8} {'load':>9} {'lock waits':>12} rows"]
    for row in rows:
        cells = []
        for tier in TIERS:
            t = row["tiers"].get(tier)
            cells.append(f"{t['events_s']:>14,.0f} {t['cpu_us']:>8.1f}" if t else f"{'–':>14} {'–':>8}")
        rss = sum(t["rss_mib"] for t in row["tiers"].values())
        load = f"{row['load'][0]:.1f}-{row['load'][1]:.1f}"
        waits = f"{row['lock_waits']}/{row['lock_samples']}"
        lines.append(f"{row['mode']:<22} {row['events_s']:>8,.0f} " + " ".join(cells)
                     + f" {rss:>8,.0f} {load:>9} {waits:>12} {row['rows']}")
    return "\n".join(lines)


def capacity(row: dict[str, Any], partitions: int, rates: list[float], broker_idle: float = 0.0) -> dict[str, Any]:
    """What a site needs, from one partitioned mode's medians (`summarize`): a collector is one process on at
    most one core, so it loads 1e6 / (its µs/event) events/s on a core of its own; PostgreSQL, the broker and the
    publishers need rate x µs/event / 1e6 cores. Partition queues: one per collector. `broker_idle` (CPU-s a
    second the brokers burn with no traffic) is taken off the broker's CPU over its wall first."""
    t = {tier: dict(v) for tier, v in row["tiers"].items()}
    if "broker" in t:
        t["broker"]["cpu_us"] -= broker_idle * 1e6 / t["broker"]["events_s"]
    per_core = {tier: 1e6 / t[tier]["cpu_us"] for tier in TIERS if tier in t and t[tier]["cpu_us"] > 0}
    measured = {"events_s_per_collector": row["events_s"] / partitions,
                "events_s_per_partition_queue": row["events_s"] / partitions,
                "events_s_per_collector_core": per_core.get("collectors", 0.0),
                "events_s_per_postgresql_core": per_core.get("postgresql", 0.0),
                "events_s_per_broker_core": per_core.get("broker", 0.0),
                "events_s_per_publisher_core": per_core.get("publishers", 0.0)}
    sites = []
    for rate in rates:
        collectors = math.ceil(rate / per_core["collectors"])
        sites.append({"events_s": rate, "collectors": collectors, "partition_queues": collectors,
                      "postgresql_cores": rate / per_core["postgresql"], "broker_cores": rate / per_core["broker"],
                      "publisher_cores": rate / per_core["publishers"]})
    return {"from": row["mode"], "broker_idle": broker_idle, "measured": measured, "sites": sites}


def format_capacity(cap: dict[str, Any]) -> str:
    m = cap["measured"]
    lines = [f"capacity, from {cap['from']} (a core = 1,000,000 µs of CPU a second; the brokers' idle "
             f"{cap['broker_idle']:.2f} CPU-s/s taken off):",
             f"  measured here: {m['events_s_per_collector']:,.0f} events/s per collector and per partition queue "
             f"(wall, this machine)",
             f"  per core of its own: collector {m['events_s_per_collector_core']:,.0f}, PostgreSQL "
             f"{m['events_s_per_postgresql_core']:,.0f}, broker {m['events_s_per_broker_core']:,.0f}, publisher "
             f"{m['events_s_per_publisher_core']:,.0f} events/s"]
    for s in cap["sites"]:
        lines.append(f"  a site of {s['events_s']:,.0f} events/s: {s['collectors']} collectors on "
                     f"{s['partition_queues']} partition queues, {s['postgresql_cores']:.1f} PostgreSQL cores, "
                     f"{s['broker_cores']:.1f} broker cores, {s['publisher_cores']:.1f} publisher cores in all")
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def broker_idle(roots: Callable[[], dict[str, list[int]]], seconds: float = 15.0) -> float:
    """CPU-s a second the brokers burn with no traffic (timers, the cluster's own traffic), over `seconds`."""
    pids = roots()["broker"]
    before = _tree_cpu(pids)
    time.sleep(seconds)
    return (_tree_cpu(pids) - before) / seconds


def prepare(work: Path, workflows: int, jobs: int) -> list[Path]:
    from streamer.synth import generate

    files = []
    for i in range(workflows):
        out = work / f"wf{i}.bp"
        if not out.exists():
            submit = generate(work / f"wf{i}", jobs=jobs, scenario="hierarchical", seed=5000 + 10 * i, label=f"b{i}")
            _streamer("replay", str(submit), "--dest", str(out), "--no-jobstate", "--timezone", "UTC", "-q")
        files.append(out)
    return files


def mode_label(tag: str, collectors: int, local: bool) -> str:
    s = "s" * (collectors > 1)
    return f"{tag}{collectors} collector{s}, 1 queue" if local else f"{tag}{collectors} partition{s}"


def servers(stack: ExitStack, local: bool) -> tuple[str, str, Callable[[], dict[str, list[int]]]]:
    """The broker URL, the PostgreSQL URL and the servers' process ids by tier, of servers of the bench's own."""
    import psutil

    from tests.support.ownservers import own_postgres, own_rabbitmq_cluster

    pg = stack.enter_context(own_postgres())
    if local:
        def roots() -> dict[str, list[int]]:
            beams = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "beam.smp"]
            return {"broker": beams, "postgresql": [pg.pid()]}
        return "amqp://guest:guest@127.0.0.1:5672/%2F", pg.dsn, roots
    cluster = stack.enter_context(own_rabbitmq_cluster(3))
    return cluster.url(), pg.dsn, lambda: {"broker": [n.pid() for n in cluster.nodes], "postgresql": [pg.pid()]}


def main() -> int:
    from tests.support.pghelp import admin

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflows", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--publishers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4, help="C: the partitioned mode's queues and collectors")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queue-type", choices=("quorum", "classic"), default="quorum")
    parser.add_argument("--local", action="store_true", help="the shared local broker, one queue (quick runs)")
    parser.add_argument("--reference", type=Path, help="another checkout, run the same way")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every figure here")
    parser.add_argument("--site-rate", default=SITE_RATES, help="events/s of the site to size (comma-separated)")
    parser.add_argument("--work", type=Path, help="where the generated workflows are kept")
    args = parser.parse_args()
    work = args.work or Path(tempfile.gettempdir()) / f"bench_site_{args.workflows}x{args.jobs}"
    work.mkdir(parents=True, exist_ok=True)
    trees = [(THIS, "")] + ([(args.reference.resolve(), "ref ")] if args.reference else [])
    for tree, _ in trees:
        precompile(tree)
    files = prepare(work, args.workflows, args.jobs)
    events = sum(len(f.read_bytes().splitlines()) for f in files)
    modes = sorted({1, args.partitions})
    results: list[Result] = []
    with ExitStack() as stack:
        amqp, pg, roots = servers(stack, args.local)
        site = Site(amqp, pg, roots, work, args.queue_type, args.local)
        idle = 0.0 if args.local else broker_idle(roots)  # the shared broker's idle is other engineers' traffic
        print(f"{len(files)} workflows, {events:,} events; {'local broker' if args.local else '3-node cluster'} "
              f"(idle {idle:.2f} CPU-s/s); load average {os.getloadavg()[0]:.1f}", flush=True)
        for i in range(1, args.rounds + 1):
            for tree, tag in trees:
                dbs = []
                direct, direct_db = run_mode(site, tree, f"{tag}direct", files, events, 0, 0, None)
                results.append(direct)
                dbs.append(direct_db)
                for c in modes:
                    label = mode_label(tag, c, args.local)
                    r, db = run_mode(site, tree, label, files, events, args.publishers, c, direct_db)
                    results.append(r)
                    dbs.append(db)
                for db in dbs:
                    asyncio.run(admin(pg, f"DROP DATABASE IF EXISTS {db.rsplit('/', 1)[1]} WITH (FORCE)"))
            print(f"round {i} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = summarize(results)
    print(format_summary(rows))
    rates = [float(r) for r in args.site_rate.split(",") if r]
    partitioned = next(row for row in rows if row["mode"] == mode_label("", args.partitions, args.local))
    cap = capacity(partitioned, args.partitions, rates, idle)
    if cap:
        print(format_capacity(cap))
    if args.json:
        args.json.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                                         "events": events, "publishers": args.publishers, "local": args.local,
                                         "broker_idle": idle,
                                         "summary": rows, "capacity": cap,
                                         "runs": [asdict(r) for r in results]}, indent=1))
    return 0 if all(r.rows_equal is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
