"""The collector (`streamer load amqp://…/QUEUE`): publishers -> RabbitMQ -> competing collectors -> PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator

import aio_pika
import asyncpg
import orjson
import pytest

from streamer.config.settings import EndpointSpec
from streamer.endpoints import EndpointError, create_endpoint
from streamer.endpoints.base import Endpoint
from streamer.endpoints.db.common import WriteStats, hold_orphans
from streamer.endpoints.db.ids import IdPool
from streamer.endpoints.db.loader import Loader
from streamer.endpoints.db.plan import POSTGRESQL
from streamer.endpoints.layers.resilience import STALE_IDS
from streamer.events import bp, jsonenc
from streamer.run.pipeline import Run, RunOptions
from streamer.run.wiring import build_endpoints, unfiltered
from streamer.sources.amqp.queue import QueueSource
from streamer.synth import generate
from streamer.util.urls import EndpointURL
from tests.support import dbcompare
from tests.support.amqphelp import Holding, read_held, unique
from tests.support.pghelp import assert_same_rows, fresh_database, pg_snapshot
from tests.support.commands import start_streamer
from tests.support.commands import streamer as _streamer


def run_ok(*args: str) -> subprocess.CompletedProcess[str]:
    return _streamer(*args, check=True)


class Refusing(Endpoint):
    """An endpoint whose writes fail (a database that went away)."""

    calls = 0

    async def write(self, batch: Any) -> None:
        self.calls += 1
        raise EndpointError("refused")


WORKFLOWS = (("success", 1), ("retry", 2), ("hierarchical", 3))


@pytest.fixture(scope="module")
def event_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three synthetic workflows (one hierarchical) replayed to BP files."""
    base = tmp_path_factory.mktemp("collector")
    files = []
    for scenario, seed in WORKFLOWS:
        submit = generate(base / f"wf{seed}", jobs=5, scenario=scenario, seed=seed, label=f"w{seed}")
        out = base / f"wf{seed}.bp"
        run_ok("replay", str(submit), "--dest", str(out), "--no-jobstate", "--timezone", "UTC", "-q")
        files.append(out)
    return files


@pytest.fixture
async def databases(postgres_dsn: str) -> AsyncIterator[tuple[str, str]]:
    async with fresh_database(postgres_dsn, "streamer_coll") as one, \
            fresh_database(postgres_dsn, "streamer_coll") as two:
        yield one, two


@pytest.fixture
async def declared_here(amqp_url: str) -> AsyncIterator[list[tuple[str, str]]]:
    """Exchanges and queues a test declared on the shared broker: deleted afterwards, pass or fail."""
    names: list[tuple[str, str]] = []
    yield names
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    for kind, name in names:
        channel = await connection.channel()
        try:
            await (channel.queue_delete(name) if kind == "queue" else channel.exchange_delete(name))
        except Exception:
            pass
    await connection.close()


async def _consumers(channel: Any, queue: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while (await channel.declare_queue(queue, passive=True)).declaration_result.consumer_count < count:
        assert time.monotonic() < deadline, f"never {count} consumers on {queue}"
        await asyncio.sleep(0.05)


async def pg_count(dsn: str, table: str) -> int:
    try:
        conn = await asyncpg.connect(dsn)
    except Exception:
        return 0
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))
    except asyncpg.exceptions.UndefinedTableError:
        return 0
    finally:
        await conn.close()


async def queue_depth(amqp_url: str, queue: str) -> int:
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    try:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return int(declared.declaration_result.message_count)
    finally:
        await connection.close()


def events_read(err: str) -> int:
    return int(re.search(r"([\d,]+) events read", err)[1].replace(",", ""))


async def publish_three(amqp_url: str, exchange: str, queue: str, event_files: list[Path], tmp_path: Path) -> None:
    """Three submit hosts publish their workflows at once through the exchange (each its own spool, as on its
    own host); all of it is in the queue."""
    publishers = [start_streamer("load", str(f), "--dest", f"{amqp_url}/{exchange}?events=*&spool={tmp_path / f.stem}",
                           "-q") for f in event_files]
    for publisher in publishers:
        _, err = publisher.communicate(timeout=60)
        assert publisher.returncode == 0, err
    assert await queue_depth(amqp_url, queue) == sum(len(f.read_text().splitlines()) for f in event_files)


async def kill_once_rows_arrive(collected: str, collector: subprocess.Popen[str]) -> None:
    """SIGKILL the collector once rows are arriving in the database (mid-way)."""
    deadline = time.monotonic() + 60
    while await pg_count(collected, "jobstate") == 0:
        assert time.monotonic() < deadline, "no rows reached the database"
        await asyncio.sleep(0.02)
    os.kill(collector.pid, signal.SIGKILL)


@pytest.mark.rabbitmq
@pytest.mark.postgres
@pytest.mark.timeout(180)
async def test_two_collectors_share_one_queue(event_files: list[Path], databases: tuple[str, str], amqp_url: str,
                                              declared_here: list[tuple[str, str]]) -> None:
    """Competing consumers: each collector gets part of every workflow (a job's instance events may reach
    one before the other committed its job.info: the database endpoint waits for it), together all."""
    direct, collected = databases
    run_ok("load", *map(str, event_files), "--dest", direct, "-q")
    queue = unique("streamer-share-q")
    declared_here.append(("queue", queue))
    source = f"{amqp_url}/{queue}?declare=true&single_active=false&prefetch=50&idle=3"
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=True)  # what `?declare=true` makes: a plain durable queue
        collectors = [start_streamer("load", source, "--dest", collected) for _ in range(2)]
        await _consumers(channel, queue, 2)
        total = 0
        for f in event_files:  # straight to the queue (the default exchange), as a site's exchange routes them
            for line in f.read_text().splitlines():
                body = jsonenc.dumps(bp.parse_line(line))  # monitord's JSON form, as the AMQP endpoint sends
                await channel.default_exchange.publish(aio_pika.Message(body if isinstance(body, bytes)
                                                                        else body.encode()), routing_key=queue)
                total += 1
    finally:
        await connection.close()
    reads = []
    for collector in collectors:
        _, err = collector.communicate(timeout=120)
        assert collector.returncode == 0, err
        assert "refused" not in err and "rejected" not in err, err
        reads.append(events_read(err))
    assert all(n > 0 for n in reads) and sum(reads) == total, reads  # shared, each message once
    await assert_same_rows(collected, direct)


@pytest.mark.rabbitmq
@pytest.mark.postgres
@pytest.mark.timeout(180)
async def test_three_publishers_two_collectors_one_killed(event_files: list[Path], databases: tuple[str, str],
                                                          amqp_url: str, tmp_path: Path,
                                                          declared_here: list[tuple[str, str]]) -> None:
    direct, collected = databases
    run_ok("load", *map(str, event_files), "--dest", direct, "-q")
    exchange, queue = unique("streamer-coll-ex"), unique("streamer-coll-q")
    declared_here.extend([("exchange", exchange), ("queue", queue)])
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()  # the site's set-up: what `?declare=true&bind=` would make
    await channel.declare_exchange(exchange, "topic", durable=True)
    declared = await channel.declare_queue(queue, durable=True, arguments={"x-single-active-consumer": True})
    await declared.bind(exchange, routing_key="#")
    try:
        await publish_three(amqp_url, exchange, queue, event_files, tmp_path)
        # prefetch=2: small batches keep the active one busy long enough to be killed mid-way on a fast machine
        # (with 20 it could load all ~600 events before the standby had even joined)
        source = f"{amqp_url}/{queue}?declare=true&single_active=true&bind={exchange}&prefetch=2&idle=3"
        collectors = [start_streamer("load", source, "--dest", collected)]
        await _consumers(channel, queue, 1)  # the first is the active consumer, the second its standby
        collectors.append(start_streamer("load", source, "--dest", collected))
        await _consumers(channel, queue, 2)
        await kill_once_rows_arrive(collected, collectors[0])  # the active one
    finally:
        await connection.close()
    _, err = collectors[1].communicate(timeout=120)
    collectors[0].wait(timeout=10)
    assert collectors[0].returncode == -signal.SIGKILL
    assert collectors[1].returncode == 0, err
    # killed mid-way: work was left for the standby (its messages, unacknowledged by the killed one, came back;
    # the queue's ready count right after the kill may still be 0 while the broker requeues them)
    assert events_read(err) > 0, err
    assert " -> postgresql://" in err and "ok" in err  # the survivor's summary
    assert await queue_depth(amqp_url, queue) == 0
    await assert_same_rows(collected, direct)
    assert dbcompare.counts(await pg_snapshot(direct))["job_instance"] > 0


@pytest.mark.rabbitmq
@pytest.mark.postgres
@pytest.mark.timeout(240)
@pytest.mark.parametrize("restart", [False, True], ids=["survivor-alone", "restarted"])
async def test_competing_collectors_one_killed(event_files: list[Path], databases: tuple[str, str], amqp_url: str,
                                               tmp_path: Path, declared_here: list[tuple[str, str]],
                                               restart: bool) -> None:
    """The issue's acceptance with competing consumers (`single_active=false`): three publishers -> one plain
    queue -> two collectors sharing it; one is SIGKILLed mid-way (its unacknowledged messages go back to the
    queue, behind later events of the same jobs), restarted or not: the rows equal the three direct loads."""
    direct, collected = databases
    run_ok("load", *map(str, event_files), "--dest", direct, "-q")
    exchange, queue = unique("streamer-compete-ex"), unique("streamer-compete-q")
    declared_here.extend([("exchange", exchange), ("queue", queue)])
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    await channel.declare_exchange(exchange, "topic", durable=True)
    declared = await channel.declare_queue(queue, durable=True)  # `?declare=true&single_active=false` makes this
    await declared.bind(exchange, routing_key="#")
    source = f"{amqp_url}/{queue}?declare=true&single_active=false&bind={exchange}&prefetch=20&idle=4"
    try:
        await publish_three(amqp_url, exchange, queue, event_files, tmp_path)
        collectors = [start_streamer("load", source, "--dest", collected) for _ in range(2)]
        await _consumers(channel, queue, 2)
        await kill_once_rows_arrive(collected, collectors[0])
        in_queue = await queue_depth(amqp_url, queue)
        collectors[0].wait(timeout=10)
        assert collectors[0].returncode == -signal.SIGKILL
        if restart:
            collectors[0] = start_streamer("load", source, "--dest", collected)
    finally:
        await connection.close()
    assert in_queue > 0  # killed mid-way: work was left
    survivors = collectors if restart else collectors[1:]
    for collector in survivors:
        _, err = collector.communicate(timeout=180)
        assert collector.returncode == 0, err
        assert "refused" not in err and "rejected" not in err, err
    assert await queue_depth(amqp_url, queue) == 0
    await assert_same_rows(collected, direct)


def _instance_split(path: Path) -> tuple[list[Any], list[Any]]:
    """A workflow's events without the submit.start of its first job instance, and that event: its children
    then come before it, as a killed collector's redelivered message comes behind later ones."""
    events = [bp.parse_line(line) for line in path.read_text().splitlines()]
    parent = next(e for e in events if e.name == "stampede.job_inst.submit.start")
    return [e for e in events if e is not parent], [parent]


@pytest.mark.postgres
@pytest.mark.timeout(60)
async def test_a_checkpoint_waiting_for_parents_lets_the_parent_in(event_files: list[Path],
                                                                  databases: tuple[str, str]) -> None:
    """A checkpoint's flush that waits for a held event's parent must not keep out the next write, which
    brings that parent (it used to hold the endpoint's lock for the whole wait: the children were refused)."""
    direct, collected = databases
    run_ok("load", str(event_files[0]), "--dest", direct, "-q")
    children, parent = _instance_split(event_files[0])
    endpoint = create_endpoint(EndpointURL.parse(f"{collected}?wait_parents=5"))
    await endpoint.open()
    try:
        await endpoint.write(children)
        assert endpoint.holding()
        started = time.monotonic()
        flush = asyncio.create_task(endpoint.flush())  # what the bus's checkpoint does meanwhile
        await asyncio.sleep(0.2)
        await asyncio.wait_for(endpoint.write(parent), 3)
        await asyncio.wait_for(flush, 3)
        assert time.monotonic() - started < 3 and not endpoint.holding()
        assert endpoint.rejected == []
    finally:
        await endpoint.close()
    await assert_same_rows(collected, direct)


async def test_held_events_being_written_again_still_count_as_held() -> None:
    """While held events are written again they are out of the endpoint's list; `holding()` must still say
    so, or a checkpoint at that moment acknowledges their batch to the broker (a crash would lose them)."""
    stats = WriteStats()
    hold_orphans(stats, 5)
    event = bp.parse_line("ts=2024-01-01T00:00:00.000000Z event=stampede.job_inst.main.start level=Info "
                          "xwf.id=0d6d6a0e-0000-4000-8000-000000000001 job_inst.id=1 js.id=2 job.id=j sched.id=1.0")
    assert stats.holding is not None
    stats.holding.append((event, "unknown job j", "held", time.monotonic()))
    gate = asyncio.Event()

    async def write_again(events: list[Any]) -> None:
        await gate.wait()  # the database is being written to

    retry = asyncio.create_task(stats.retry_held("db", Loader(POSTGRESQL, IdPool()), 5, write_again))
    await asyncio.sleep(0.01)
    assert stats.holding == [] and stats.waiting()
    gate.set()
    await retry
    assert not stats.waiting()


@pytest.mark.postgres
@pytest.mark.timeout(60)
async def test_a_writer_that_came_and_went_between_two_batches(event_files: list[Path],
                                                               databases: tuple[str, str]) -> None:
    """Collector B loaded a workflow's first events; collector A loaded the rest and was killed before
    acknowledging them (gone before B's next batch: no longer among the workflow's writers); B gets them
    again. B's cached ids of that workflow are stale (the jobs A inserted): B must not write its own."""
    direct, collected = databases
    run_ok("load", str(event_files[0]), "--dest", direct, "-q")
    events = [bp.parse_line(line) for line in event_files[0].read_text().splitlines()]
    first_job = next(i for i, e in enumerate(events) if e.name == "stampede.job.info")
    b, a = (create_endpoint(EndpointURL.parse(f"{collected}?wait_parents=2")) for _ in range(2))
    await b.open()
    try:
        await b.write(events[:first_job])
        await a.open()
        try:
            await a.write(events[first_job:])
        finally:
            await a.close()  # as SIGKILL: its session, and its presence locks, are gone
        await b.write(events[first_job:])  # the broker redelivers A's unacknowledged messages to B
        await b.flush()
        assert b.rejected == [] and not b.holding()
        assert b.retry_stats.by_kind.get(STALE_IDS, 0) >= 1  # its first try met the rows A inserted
    finally:
        await b.close()
    await assert_same_rows(collected, direct)


@pytest.mark.rabbitmq
async def test_messages_are_acked_only_once_every_endpoint_has_them(amqp_url: str, tmp_path: Path) -> None:
    """A failing endpoint leaves every message in the queue; monitord's JSON without event_id is typed as
    file input is (the file endpoint then writes streamer's form, ids included)."""
    lines = [
        "ts=2023-11-14T22:13:20.000000Z event=stampede.xwf.start level=Info "
        "xwf.id=1e2a3b4c-0000-4000-8000-000000000001 restart_count=0",
        "ts=2023-11-14T22:13:21.000000Z event=stampede.job_inst.main.start level=Info "
        "xwf.id=1e2a3b4c-0000-4000-8000-000000000001 job.id=ls_ID1 job_inst.id=1 js.id=3 "
        "sched.id=12.0 stdout.file=ls.out stdout.text=None stderr.file=ls.err stderr.text=None",
    ]
    events = [bp.parse_line(line) for line in lines]
    bodies = []
    for event in events:
        obj = orjson.loads(jsonenc.dumps(event))
        obj.pop("event_id")  # monitord's own form has none
        bodies.append(orjson.dumps(obj))
    queue = unique("streamer-coll-ack")
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    await channel.declare_queue(queue, durable=True)
    try:
        for body in bodies:
            await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue)
        failing = Refusing(EndpointURL.parse("term:"))
        result = await Run(QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?idle=2")),
                           [unfiltered(failing), (create_endpoint(EndpointURL.parse(f"file://{tmp_path}/a.jsonl")), EndpointSpec(url=EndpointURL.parse("file:///a")))],
                           RunOptions(progress=False, signals=False)).run()
        assert result.exit_code == 1 and failing.calls == 1  # it had the messages, and refused them
        assert await queue_depth(amqp_url, queue) == 2
        done = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "streamer", "load", f"{amqp_url}/{queue}?idle=1&prefetch=1",
            "--dest", str(tmp_path / "b.jsonl")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert await queue_depth(amqp_url, queue) == 0
        written = (tmp_path / "b.jsonl").read_bytes().splitlines()
        assert written == [jsonenc.dumps(e) for e in events]
    finally:
        await channel.queue_delete(queue)
        await connection.close()


def test_collector_usage_errors(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "streamer", "load", "amqp://u:secret@127.0.0.1:1/%2F/q?prefech=3",
                           "--dest", str(tmp_path / "x.jsonl")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "unknown option(s) prefech" in done.stderr and "secret" not in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.rabbitmq
async def test_collector_reconnects_and_loses_nothing(amqp_url: str, tmp_path: Path) -> None:
    """The connection drops mid-way: the collector reconnects; what was in flight comes again."""
    events = [bp.parse_line(f"ts=2023-11-14T22:13:{i:02d}.000000Z event=stampede.xwf.start level=Info "
                            f"xwf.id=1e2a3b4c-0000-4000-8000-0000000000{i:02d} restart_count=0") for i in range(20)]
    queue = unique("streamer-coll-reconnect")
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    await channel.declare_queue(queue, durable=True)
    source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?idle=2&prefetch=3"))
    out = tmp_path / "out.jsonl"
    try:
        for event in events[:10]:
            await channel.default_exchange.publish(aio_pika.Message(jsonenc.dumps(event)), routing_key=queue)
        run = asyncio.create_task(Run(source, build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{out}"))]),
                                      RunOptions(progress=False, signals=False)).run())
        while source.received < 4:
            await asyncio.sleep(0.01)
        assert source.health() is None
        await source._connection.close()  # as if the broker had dropped it
        assert "broker unreachable" in (source.health() or "")  # /healthz says so until it is back
        for event in events[10:]:
            await channel.default_exchange.publish(aio_pika.Message(jsonenc.dumps(event)), routing_key=queue)
        result = await asyncio.wait_for(run, 60)
        assert result.exit_code == 0 and source.reconnects == 1
        assert await queue_depth(amqp_url, queue) == 0
        got = [orjson.loads(line)["event_id"] for line in out.read_bytes().splitlines()]
        assert set(got) == {e.id for e in events}  # none lost (what was in flight may come twice: at least once)
        assert len(got) - len(set(got)) <= 3  # at most the prefetch window again
    finally:
        await channel.queue_delete(queue)
        await connection.close()


@pytest.mark.rabbitmq
async def test_the_prefetch_window_widens_while_events_are_held(amqp_url: str) -> None:
    """While the endpoints hold events (nothing acknowledged), the broker must go on delivering: the parents
    they wait for may be behind them in the queue. RabbitMQ applies a per-consumer prefetch only to consumers
    started after it; the window used to stay at `prefetch` and the held events waited for ever."""
    queue = unique("streamer-coll-window")
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    await channel.declare_queue(queue, durable=True)
    source = QueueSource(EndpointURL.parse(f"{amqp_url}/{queue}?prefetch=2"))
    source.downstream = Holding()
    try:
        for i in range(10):
            event = bp.parse_line(f"ts=2023-11-14T22:13:{i:02d}.000000Z event=stampede.xwf.start level=Info "
                                  f"xwf.id=1e2a3b4c-0000-4000-8000-0000000000{i:02d} restart_count=0")
            await channel.default_exchange.publish(aio_pika.Message(jsonenc.dumps(event)), routing_key=queue)
        assert await asyncio.wait_for(read_held(source, 10), 20) == 10
    finally:
        await source.close()
        await channel.queue_delete(queue)
        await connection.close()


@pytest.mark.postgres
def test_an_orphan_is_refused_after_wait_parents(databases: tuple[str, str], tmp_path: Path) -> None:
    """An event whose job nobody loads waits `wait_parents` seconds, then is refused naming the wait."""
    _, db = databases
    orphan = tmp_path / "orphan.bp"
    orphan.write_text("ts=2024-01-01T00:00:00.000000Z event=stampede.job_inst.submit.start level=Info "
                      "xwf.id=0d6d6a0e-0000-4000-8000-000000000001 job_inst.id=1 js.id=1 job.id=never_declared "
                      "sched.id=1.0\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "streamer", "load", str(orphan), "--dest",
                           f"{db}?wait_parents=0.5"], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started >= 0.5
    assert done.returncode == 0, done.stderr
    assert "unknown workflow 0d6d6a0e-0000-4000-8000-000000000001 (no stampede.wf.plan loaded for it) " \
           "(waited 0.5 s for it)" in done.stderr


@pytest.mark.rabbitmq
@pytest.mark.timeout(120)
async def test_a_message_against_the_schema_is_dead_lettered_by_the_queue(amqp_url: str, tmp_path: Path) -> None:
    """Issue 26.21: a message that breaks the schema's constraints (`clustered=2`, `xwf.start` without
    `restart_count`) is rejected without requeueing: the queue's dead-letter exchange keeps it, where one is
    configured; the events around it are delivered and acknowledged, and the run names and counts it."""
    wf = "ea17e8ac-02ac-4909-b5e3-16e367392556"
    good = [bp.parse_line(f"ts=2023-11-14T22:13:0{i}.000000Z event=stampede.xwf.start xwf.id={wf} "
                          f"restart_count={i}") for i in range(3)]
    job = (f"ts=2023-11-14T22:13:09.000000Z event=stampede.job.info xwf.id={wf} job.id=j1 submit_file=j1.sub "
           "type=1 type_desc=compute clustered=2 max_retries=3 task_count=1 executable=/bin/true")
    bad = [jsonenc.dumps(bp.parse_line(job)),
           orjson.dumps({"event": "stampede.xwf.start", "ts": 1700000000, "xwf_id": wf})]
    bodies = [jsonenc.dumps(good[0]), bad[0], jsonenc.dumps(good[1]), bad[1], jsonenc.dumps(good[2])]
    queue, dlx, dead = unique("streamer-coll-dl"), unique("streamer-coll-dlx"), unique("streamer-coll-dead")
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    exchange = await channel.declare_exchange(dlx, aio_pika.ExchangeType.FANOUT, auto_delete=False)
    dead_queue = await channel.declare_queue(dead, durable=True)
    await dead_queue.bind(exchange)
    await channel.declare_queue(queue, durable=True, arguments={"x-dead-letter-exchange": dlx})
    try:
        for body in bodies:
            await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue)
        done = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "streamer", "load", f"{amqp_url}/{queue}?idle=1&prefetch=2",
            "--dest", str(tmp_path / "out.jsonl")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "field clustered = 2 is not within 0..1" in done.stderr
        assert "stampede.xwf.start: mandatory field restart_count missing" in done.stderr
        assert "Traceback" not in done.stderr
        written = (tmp_path / "out.jsonl").read_bytes().splitlines()
        assert written == [jsonenc.dumps(e) for e in good]
        assert await queue_depth(amqp_url, queue) == 0
        kept = []
        deadline = time.monotonic() + 10
        while len(kept) < 2 and time.monotonic() < deadline:
            message = await dead_queue.get(no_ack=True, fail=False)
            if message is None:
                await asyncio.sleep(0.1)
                continue
            kept.append(message.body)
        assert kept == bad
    finally:
        await channel.queue_delete(queue)
        await channel.queue_delete(dead)
        await channel.exchange_delete(dlx)
        await connection.close()
