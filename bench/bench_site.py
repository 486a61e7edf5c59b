"""Site benchmark: P publishers -> RabbitMQ -> C collectors -> PostgreSQL, next to a direct load.

    python bench/bench_site.py [--workflows 4] [--jobs 1000] [--publishers 2] [--collectors 1,4]
                               [--rounds 3] [--reference TREE] [--batch 5000]
                               [--pg postgresql://postgres@127.0.0.1:5432/postgres]
                               [--amqp amqp://guest:guest@127.0.0.1:5672/%2F]

Input: `--workflows` generated workflows (`streamer.synth`, `--jobs` jobs each, the last one hierarchical)
replayed once to BP files. Each round, interleaved, on fresh databases:

  direct     `streamer load FILES --dest postgresql://...` (the reference);
  site C     P publishers (`streamer load FILE --dest amqp://.../EXCHANGE`, files dealt round-robin) and C
             collectors (`streamer load amqp://.../QUEUE?idle=...` into one database) at the same time. Until
             partition headers exist the C collectors compete on one queue (`single_active=false`).

Per tier it prints events/s and CPU µs per event: publishers and collectors (user + sys of each process, sampled
with psutil until it exits), the broker (the `beam.smp` processes' CPU over the run: the local broker is shared,
so other engineers' traffic counts too) and PostgreSQL (the CPU of the run's database backends, sampled), wall
seconds, summed peak RSS, the lock waits seen (samples of the database's backends waiting on a lock, advisory
locks named) and the rows check (the collected database equals the direct load, table by table, by natural keys).
Medians of `--rounds`; the load average with each figure. `--reference TREE` runs another checkout the same way
(before/after in one run). A collector's wall excludes its final `idle` wait.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from tests.support import dbcompare  # noqa: E402
from tests.support.pghelp import admin, database_url, pg_snapshot, random_name  # noqa: E402

IDLE = 3.0


@dataclass
class Tier:
    cpu: float = 0.0
    rss: int = 0
    wall: float = 0.0


@dataclass
class Result:
    label: str
    events: int
    wall: float
    tiers: dict[str, Tier] = field(default_factory=dict)
    lock_waits: dict[str, int] = field(default_factory=dict)
    rows_equal: bool | None = None
    load: float = 0.0


class Sampler(threading.Thread):
    """CPU and peak RSS of processes (and their children), and of a database's backends, every 0.2 s."""

    def __init__(self, dsn: str | None, db: str | None) -> None:
        super().__init__(daemon=True)
        self.procs: dict[str, list[psutil.Process]] = {}
        self.cpu: dict[int, float] = {}
        self.rss: dict[int, int] = {}
        self.tier_of: dict[int, str] = {}
        self.db = db
        self.dsn = dsn
        self.waits: dict[str, int] = {}
        self.stop = threading.Event()

    def watch(self, tier: str, pid: int) -> None:
        self.tier_of[pid] = tier

    def _sample_tree(self) -> None:
        for pid, tier in list(self.tier_of.items()):
            try:
                proc = psutil.Process(pid)
                for p in [proc, *proc.children(recursive=True)]:
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                    self.rss[p.pid] = max(self.rss.get(p.pid, 0), p.memory_info().rss)
                    self.tier_of.setdefault(p.pid, tier)
            except psutil.Error:
                continue

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.dsn) if self.dsn else None
        try:
            while not self.stop.is_set():
                self._sample_tree()
                if conn is not None:
                    rows = await conn.fetch(
                        "SELECT pid, wait_event_type, wait_event FROM pg_stat_activity WHERE datname = $1 "
                        "AND pid <> pg_backend_pid()", self.db)
                    for pid, wtype, wevent in rows:
                        self.tier_of.setdefault(pid, "postgresql")
                        if wtype == "Lock":
                            self.waits[wevent] = self.waits.get(wevent, 0) + 1
                await asyncio.sleep(0.2)
        finally:
            if conn is not None:
                await conn.close()

    def tiers(self) -> dict[str, Tier]:
        out: dict[str, Tier] = {}
        for pid, cpu in self.cpu.items():
            tier = out.setdefault(self.tier_of[pid], Tier())
            tier.cpu += cpu
            tier.rss += self.rss.get(pid, 0)
        return out


def beam_cpu() -> float:
    total = 0.0
    for p in psutil.process_iter(["name"]):
        if p.info["name"] == "beam.smp":
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    return total


def streamer_cmd(tree: Path) -> list[str]:
    return [sys.executable, "-m", "streamer"]


def env_of(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def prepare(work: Path, workflows: int, jobs: int) -> list[Path]:
    from streamer.synth import generate

    files = []
    for i in range(workflows):
        out = work / f"wf{i}.bp"
        if not out.exists():
            scenario = "hierarchical" if i == workflows - 1 and workflows > 1 else "success"
            submit = generate(work / f"wf{i}", jobs=jobs, scenario=scenario, seed=i + 1, label=f"site{i}")
            subprocess.run([*streamer_cmd(ROOT), "replay", str(submit), "--dest", str(out), "--no-jobstate",
                            "--timezone", "UTC", "-q"], check=True, env=env_of(ROOT))
        files.append(out)
    return files


async def fresh_db(pg: str) -> str:
    name = random_name("streamer_site")
    await admin(pg, f"CREATE DATABASE {name}")
    return name


async def amqp_setup(amqp: str, exchange: str, queues: list[str]) -> None:
    import aio_pika

    connection = await aio_pika.connect(amqp.replace("%2F", ""))
    channel = await connection.channel()
    ex = await channel.declare_exchange(exchange, "topic", durable=True)
    for q in queues:
        queue = await channel.declare_queue(q, durable=True)
        await queue.bind(ex, routing_key="#")
    await connection.close()


async def amqp_teardown(amqp: str, exchange: str, queues: list[str]) -> None:
    import aio_pika

    connection = await aio_pika.connect(amqp.replace("%2F", ""))
    channel = await connection.channel()
    for q in queues:
        await channel.queue_delete(q)
    await channel.exchange_delete(exchange)
    await connection.close()


def run_round(tree: Path, label: str, files: list[Path], pg: str, amqp: str, publishers: int,
              collectors: int, batch: int, events: int, reference_db: str | None) -> tuple[Result, str]:
    """One run: direct (collectors == 0) or the site; the database name it filled."""
    db = asyncio.run(fresh_db(pg))
    url = database_url(pg, db)
    sampler = Sampler(pg, db)
    sampler.start()
    load = os.getloadavg()[0]
    env = env_of(tree)
    cmd = streamer_cmd(tree)
    started = time.monotonic()
    beam0 = beam_cpu()
    exchange = queue = ""
    if collectors == 0:
        proc = subprocess.Popen([*cmd, "load", *map(str, files), "--dest", url, "-q"], env=env, cwd=tree)
        sampler.watch("direct", proc.pid)
        if proc.wait() != 0:
            raise SystemExit(f"{label}: direct load failed")
        wall = time.monotonic() - started
        walls = {"direct": wall}
    else:
        exchange, queue = f"bench-site-{secrets.token_hex(4)}", f"bench-site-{secrets.token_hex(4)}"
        asyncio.run(amqp_setup(amqp, exchange, [queue]))
        share = "" if collectors == 1 else "&single_active=false"
        colls = [subprocess.Popen([*cmd, "load", f"{amqp}/{queue}?idle={IDLE}{share}",
                                   "--dest", url, "-q"], env=env, cwd=tree) for _ in range(collectors)]
        for c in colls:
            sampler.watch("collector", c.pid)
        pubs = []
        spools = tempfile.mkdtemp(prefix="bench_site_spool")  # one per publisher, as on hosts of their own
        for i in range(publishers):
            mine = files[i::publishers]
            if mine:
                p = subprocess.Popen([*cmd, "load", *map(str, mine), "--dest",
                                      f"{amqp}/{exchange}?events=stampede.*&spool={spools}/p{i}", "-q"],
                                     env=env, cwd=tree)
                sampler.watch("publisher", p.pid)
                pubs.append(p)
        pub_start = time.monotonic()
        for p in pubs:
            if p.wait() != 0:
                raise SystemExit(f"{label}: a publisher failed")
        pub_wall = time.monotonic() - pub_start
        for c in colls:
            if c.wait() != 0:
                raise SystemExit(f"{label}: a collector failed")
        wall = time.monotonic() - started - IDLE
        walls = {"publisher": pub_wall, "collector": wall}
    sampler.stop.set()
    sampler.join()
    tiers = sampler.tiers()
    if collectors:
        tiers["broker"] = Tier(cpu=beam_cpu() - beam0)
        asyncio.run(amqp_teardown(amqp, exchange, [queue]))
    for name, w in walls.items():
        tiers.setdefault(name, Tier()).wall = w
    result = Result(label, events, wall, tiers, sampler.waits, load=load)
    if reference_db is not None:
        async def same() -> bool:
            got, expected = await pg_snapshot(url), await pg_snapshot(database_url(pg, reference_db))
            for snap in (got, expected):  # rc_meta of a file several workflows name: the first to come wins
                snap["rc_meta"] = Counter({row[:2]: n for row, n in snap["rc_meta"].items()})
            diff = dbcompare.compare(got, expected)
            if diff:
                print(f"{label}: rows differ from the direct load:\n{dbcompare.format_diff(diff)[:2000]}")
            return not diff
        result.rows_equal = asyncio.run(same())
    return result, db


def count_events(files: list[Path]) -> int:
    return sum(sum(1 for line in f.open("rb") if line.strip()) for f in files)


def report(results: list[Result]) -> None:
    by: dict[str, list[Result]] = {}
    for r in results:
        by.setdefault(r.label, []).append(r)
    print(f"{'run':<24} {'events/s':>9} {'wall s':>7}  tier CPU µs/event (publisher, broker, collector|direct, "
          f"postgresql)  RSS MB  load  lock waits  rows")
    for label, runs in by.items():
        med = statistics.median
        rate = med(r.events / r.wall for r in runs)
        wall = med(r.wall for r in runs)
        tiers = sorted({t for r in runs for t in r.tiers})
        per = {t: med(r.tiers.get(t, Tier()).cpu * 1e6 / r.events for r in runs) for t in tiers}
        rss = med(sum(t.rss for t in r.tiers.values()) / 2**20 for r in runs)
        waits: dict[str, int] = {}
        for r in runs:
            for k, v in r.lock_waits.items():
                waits[k] = waits.get(k, 0) + v
        rows = {r.rows_equal for r in runs}
        print(f"{label:<24} {rate:>9,.0f} {wall:>7.1f}  "
              + ", ".join(f"{t} {v:,.1f}" for t, v in per.items())
              + f"  {rss:,.0f}  {med(r.load for r in runs):.1f}  {waits or 0}  "
              + ("equal" if rows == {True} else "n/a" if rows == {None} else "DIFFER"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflows", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--publishers", type=int, default=2)
    parser.add_argument("--collectors", default="1,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--reference", type=Path, default=None, help="another checkout, run the same way")
    parser.add_argument("--work", type=Path, default=None, help="where the generated workflows are kept")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    args = parser.parse_args()
    work = args.work or Path(tempfile.gettempdir()) / f"bench_site_{args.workflows}x{args.jobs}"
    work.mkdir(parents=True, exist_ok=True)
    files = prepare(work, args.workflows, args.jobs)
    events = count_events(files)
    print(f"{len(files)} workflows, {events:,} events; load average {os.getloadavg()[0]:.1f}", flush=True)
    trees = [(ROOT, "")] + ([(args.reference.resolve(), "ref ")] if args.reference else [])
    counts = [int(c) for c in args.collectors.split(",") if c]
    results: list[Result] = []
    dbs: list[str] = []
    try:
        for _ in range(args.rounds):
            for tree, tag in trees:
                direct, ref_db = run_round(tree, f"{tag}direct", files, args.pg, args.amqp, 0, 0, args.batch,
                                           events, None)
                results.append(direct)
                dbs.append(ref_db)
                for c in counts:
                    r, db = run_round(tree, f"{tag}site P={args.publishers} C={c}", files, args.pg, args.amqp,
                                      args.publishers, c, args.batch, events, ref_db)
                    results.append(r)
                    dbs.append(db)
                print(f"round done ({len(results)} runs)", flush=True)
    finally:
        for db in dbs:
            asyncio.run(admin(args.pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
    report(results)


if __name__ == "__main__":
    main()
