"""The site tier on RabbitMQ's own high availability (issue 24 acceptance), on a 3-node RabbitMQ cluster and a
PostgreSQL of the test's own:

- quorum partitions, two publishers given all three brokers, two partitioned collectors, the queue leader's node
  killed (-9) mid-way: nothing lost, rows equal a direct load;
- a stream read from `first`, the collector SIGKILLed and restarted: it resumes at the stored offset;
- four collectors on four partition queues: no waits on the per-workflow lock, rows equal.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import aio_pika
import pytest

from tests.support.dbcompare import Snapshot
from tests.support.ownservers import RabbitCluster, own_postgres, own_rabbitmq_cluster
from tests.support.pghelp import LockWaits, assert_same_rows, fresh_database, fresh_database_sync, load_rows
from tests.sources.test_collector import events_read, pg_count

pytestmark = [pytest.mark.slow, pytest.mark.rabbitmq, pytest.mark.postgres, pytest.mark.timeout(600)]

WORKFLOWS = 4
JOBS = 920
"""4 hierarchical workflows of 920 jobs: 104k events, the acceptance's 100k+ (the module runs on one worker: it is
the suite's long pole). Fewer, larger workflows than the events need: the per-workflow costs are paid 4 times."""
EVENTS = 100_000


STARTED: list[subprocess.Popen[str]] = []
"""Every streamer this module started: a test that fails half-way leaves none running into the next tests."""


@pytest.fixture(autouse=True)
def no_streamer_left() -> Iterator[None]:
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=60)


def streamer(*args: str, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen[str]:
    """`python -m streamer ARGS`, its stderr piped or, for a long run, written to `log`."""
    process = subprocess.Popen([sys.executable, "-m", "streamer", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE if log is None else log.open("w"), text=True,
                               env={**os.environ, **(env or {})})
    STARTED.append(process)
    return process


def finish(process: subprocess.Popen[str], timeout: float = 300) -> str:
    _, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return err or ""


def _generate(base: Path, index: int) -> Path:
    """Workflow `index`: seeds 10 apart (the sub-workflow of seed S has the uuid of seed S + 1's root)."""
    from streamer.synth import generate

    submit = generate(base / f"wf{index}", jobs=JOBS, scenario="hierarchical", seed=1000 + 10 * index,
                      label=f"s{index}")
    out = base / f"wf{index}.bp"
    done = subprocess.run([sys.executable, "-m", "streamer", "replay", str(submit), "--dest", str(out),
                           "--no-jobstate", "--timezone", "UTC", "-q"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


@dataclass
class Site:
    cluster: RabbitCluster
    server: str
    """`postgresql://…/postgres` of the module's PostgreSQL server."""
    files: list[Path]
    """The workflows' event files (`EVENTS`+ events)."""
    direct: Snapshot
    """The rows of the files loaded straight into a database (`streamer load FILES --dest postgresql://…`): what
    every collected database must equal, read once."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The cluster, the PostgreSQL server, the event files and the direct load's rows. The cluster boots (the
    longest part) while the workflows are generated and loaded straight into PostgreSQL."""
    base = tmp_path_factory.mktemp("site")
    with ExitStack() as stack:
        pg = stack.enter_context(own_postgres())
        with ThreadPoolExecutor(1) as boot:
            booting = boot.submit(stack.enter_context, own_rabbitmq_cluster(3))
            with ThreadPoolExecutor(2) as pool:
                files = list(pool.map(lambda i: _generate(base, i), range(WORKFLOWS)))
            with fresh_database_sync(pg.dsn, "direct") as url:
                finish(streamer("load", *map(str, files), "--dest", url, "-q"))
                direct = asyncio.run(load_rows(url))
            cluster = booting.result()
        yield Site(cluster, pg.dsn, files, direct)


def total_events(files: list[Path]) -> int:
    return sum(len(f.read_bytes().splitlines()) for f in files)


def publishers(url: str, exchange: str, files: list[Path], spool: Path) -> list[subprocess.Popen[str]]:
    """Two submit hosts, each given every broker, each publishing half of the workflows."""
    halves = [files[: len(files) // 2], files[len(files) // 2:]]
    return [streamer("load", *map(str, half), "--dest", f"{url}/{exchange}?events=*&spool={spool / str(i)}", "-q")
            for i, half in enumerate(halves)]


def declare_partitions(cluster: RabbitCluster, exchange: str, count: int, *extra: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "streamer", "topology", f"{cluster.url()}/{exchange}",
                           "--partitions", str(count), *extra], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def queue_depths(cluster: RabbitCluster, names: list[str]) -> dict[str, int]:
    rows = json.loads(cluster.ctl("list_queues", "name", "messages", "--formatter", "json"))
    return {row["name"]: int(row["messages"]) for row in rows if row["name"] in names}


async def queued(port: int, names: list[str], at_least: int, timeout: float = 120) -> None:
    """Wait until the queues hold `at_least` messages ready in all (publishing is well under way)."""
    deadline = time.monotonic() + timeout
    async with await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{port}/") as conn:
        channel = await conn.channel()
        while True:
            held = 0
            for name in names:
                queue = await channel.declare_queue(name, passive=True)
                held += queue.declaration_result.message_count
            if held >= at_least:
                return
            assert time.monotonic() < deadline, "nothing was published"
            await asyncio.sleep(0.05)


async def wait_rows(dsn: str, at_least: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while await pg_count(dsn, "jobstate") < at_least:
        assert time.monotonic() < deadline, "rows did not arrive"
        await asyncio.sleep(0.1)


async def drained(cluster: RabbitCluster, names: list[str], pubs: list[subprocess.Popen[str]],
                  logs: list[Path], timeout: float = 300) -> None:
    """Every publisher done and every partition queue empty (all acknowledged); else the queues' depths and the
    tail of each collector's log (`logs`)."""
    deadline = time.monotonic() + timeout
    while True:
        if all(p.poll() is not None for p in pubs):
            depths = await asyncio.to_thread(queue_depths, cluster, names)
            if depths and all(v == 0 for v in depths.values()):
                return
        if time.monotonic() >= deadline:
            tails = "".join(f"\n--- {log.name} (last 40 lines):\n" + "\n".join(log.read_text().splitlines()[-40:])
                            for log in logs if log.exists())
            raise AssertionError(f"queues never drained: {queue_depths(cluster, names)}{tails}")
        await asyncio.sleep(0.5)


def stop(collectors: list[subprocess.Popen[str]]) -> list[str]:
    for collector in collectors:
        collector.send_signal(signal.SIGTERM)
    return [finish(collector) for collector in collectors]


def collector_reads(logs: list[Path]) -> list[int]:
    """Events each collector read, from the end line of its log."""
    return [int(re.search(r"([\d,]+) events read", log.read_text())[1].replace(",", "")) for log in logs]


async def test_quorum_partitions_survive_the_leader_node_killed(site: Site, tmp_path: Path) -> None:
    cluster = site.cluster
    total = total_events(site.files)
    assert total >= EVENTS
    queues = declare_partitions(cluster, "wfq", 2)
    async with fresh_database(site.server, "collected") as collected:
        logs = [tmp_path / f"collector-{name}.log" for name in queues]
        collectors = [streamer("load", f"{cluster.url()}/{name}", "--dest", collected, "-v", log=log)
                      for name, log in zip(queues, logs)]
        pubs = publishers(cluster.url(), "wfq", site.files, tmp_path)
        leader = await asyncio.to_thread(cluster.leader, queues[0])
        await queued(leader.port, queues, 2_000)  # mid-way: publishing and loading
        assert all(p.poll() is None for p in pubs), "the publishers were done before the kill"
        await asyncio.to_thread(leader.kill)
        started = time.monotonic()
        for publisher in pubs:
            await asyncio.to_thread(finish, publisher)
        published_in = time.monotonic() - started
        assert not [p for p in tmp_path.rglob("*.seg") if p.stat().st_size], "a publisher spooled"
        await drained(cluster, queues, pubs, logs)
        assert [c.poll() for c in collectors] == [None, None], "a collector ended before it was stopped"
        stop(collectors)
        reads = collector_reads(logs)
        assert min(reads) > 0 and sum(reads) >= total, reads  # both partitions loaded; redeliveries count twice
        await assert_same_rows(collected, site.direct)
    assert published_in < 240  # publishing the rest through the survivors, never waiting for the dead node


@pytest.fixture(scope="module")
def published(site: Site) -> tuple[str, list[str]]:
    """One publishing of every file into exchange `wfp`, bound to a stream (`wfp.log`) and to four classic
    partition queues: what the stream and the four-collector tests read (each its own copy)."""
    stream = "wfp.log"
    queues = declare_partitions(site.cluster, "wfp", 4, "--queue-type", "classic")

    async def bind_stream() -> None:
        port = site.cluster.alive()[0].port
        async with await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{port}/") as conn:
            channel = await conn.channel()
            source = await channel.declare_exchange("wfp", "topic", durable=True)
            queue = await channel.declare_queue(stream, durable=True, arguments={"x-queue-type": "stream"})
            await queue.bind(source, "#")

    asyncio.run(bind_stream())
    spool = site.files[0].parent / "spool-wfp"
    for publisher in publishers(site.cluster.url(), "wfp", site.files, spool):
        finish(publisher)
    return stream, queues


async def test_a_stream_from_first_resumes_after_sigkill(site: Site, published: tuple[str, list[str]],
                                                         tmp_path: Path) -> None:
    stream, _ = published
    url = site.cluster.url()
    total = total_events(site.files)
    env = {"STREAMER_STATE_DIR": str(tmp_path / "state")}
    async with fresh_database(site.server, "stream") as collected:
        first = streamer("load", f"{url}/{stream}?offset=first", "--dest", collected, "-q", env=env)
        await wait_rows(collected, 3_000)
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
        [state] = (tmp_path / "state" / "amqp-stream").glob("*.json")
        stored = json.loads(state.read_text())["next"]
        assert 0 < stored < total
        again = streamer("load", f"{url}/{stream}?offset=first&idle=5", "--dest", collected, env=env)
        err = await asyncio.to_thread(finish, again)
        assert events_read(err) == total - stored  # exactly from the stored offset on
        assert json.loads(state.read_text())["next"] == total
        await assert_same_rows(collected, site.direct)


async def test_four_partitioned_collectors_never_wait_for_one_another(site: Site, published: tuple[str, list[str]]
                                                                      ) -> None:
    cluster = site.cluster
    _, queues = published
    depths = await asyncio.to_thread(queue_depths, cluster, queues)
    assert sum(depths.values()) == total_events(site.files)
    assert sum(1 for n in depths.values() if n) >= 2, depths  # the workflows are spread
    async with fresh_database(site.server, "parts") as collected:
        with LockWaits(collected) as waits:
            collectors = [streamer("load", f"{cluster.url()}/{name}?idle=5", "--dest", collected, "-v")
                          for name in queues]
            logs = [await asyncio.to_thread(finish, c) for c in collectors]
        assert waits.samples > 10 and waits.waits == 0
        assert not [line for log in logs for line in log.splitlines() if "waited for another writer" in line]
        # idle ends a collector once its queue is empty and all of it acknowledged, never with messages left
        assert await asyncio.to_thread(queue_depths, cluster, queues) == dict.fromkeys(queues, 0)
        await assert_same_rows(collected, site.direct)
