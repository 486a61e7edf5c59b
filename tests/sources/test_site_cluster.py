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
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import aio_pika
import pytest

from tests.support.ownservers import RabbitCluster, own_postgres, own_rabbitmq_cluster
from tests.support.pghelp import LockWaits, assert_same_rows, fresh_database, fresh_database_sync
from tests.sources.test_collector import events_read, pg_count

pytestmark = [pytest.mark.slow, pytest.mark.rabbitmq, pytest.mark.postgres, pytest.mark.timeout(600)]

WORKFLOWS = 6
JOBS = 300
"""6 hierarchical workflows of 300 jobs: ~50k events (the module runs on one worker: it is the suite's long pole)."""


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

    submit = generate(base / f"wf{index}", jobs=JOBS, scenario="hierarchical", seed=1000 + 10 * index, label=f"s{index}")
    out = base / f"wf{index}.bp"
    done = subprocess.run([sys.executable, "-m", "streamer", "replay", str(submit), "--dest", str(out),
                           "--no-jobstate", "--timezone", "UTC", "-q"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def event_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("site")
    with ThreadPoolExecutor(2) as pool:
        files = list(pool.map(lambda i: _generate(base, i), range(WORKFLOWS)))
    assert sum(len(f.read_bytes().splitlines()) for f in files) >= 40_000
    return files


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[RabbitCluster, str]]:
    """The cluster and the PostgreSQL server (`postgresql://…/postgres`) of this module."""
    with own_postgres() as pg, own_rabbitmq_cluster(3) as cluster:
        yield cluster, pg.dsn


@pytest.fixture(scope="module")
def direct(site: tuple[RabbitCluster, str], event_files: list[Path]) -> Iterator[str]:
    """The same files loaded straight into a database: what every collected database must equal."""
    with fresh_database_sync(site[1], "direct") as url:
        finish(streamer("load", *map(str, event_files), "--dest", url, "-q"))
        yield url


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
                  logs: list[Path], timeout: float = 180) -> None:
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


async def test_quorum_partitions_survive_the_leader_node_killed(site: tuple[RabbitCluster, str],
                                                                event_files: list[Path], direct: str,
                                                                tmp_path: Path) -> None:
    cluster, server = site
    queues = declare_partitions(cluster, "wfq", 2)
    async with fresh_database(server, "collected") as collected:
        logs = [tmp_path / f"collector-{name}.log" for name in queues]
        collectors = [streamer("load", f"{cluster.url()}/{name}", "--dest", collected, "-v", log=log)
                      for name, log in zip(queues, logs)]
        pubs = publishers(cluster.url(), "wfq", event_files, tmp_path)
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
        stop(collectors)
        await assert_same_rows(collected, direct)
    assert published_in < 120


async def test_a_stream_from_first_resumes_after_sigkill(site: tuple[RabbitCluster, str], event_files: list[Path],
                                                         direct: str, tmp_path: Path) -> None:
    cluster, server = site
    stream, exchange = "wfs.log", "wfs"
    url = cluster.url()
    async with await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{cluster.alive()[0].port}/") as conn:
        channel = await conn.channel()
        source = await channel.declare_exchange(exchange, "topic", durable=True)
        queue = await channel.declare_queue(stream, durable=True, arguments={"x-queue-type": "stream"})
        await queue.bind(source, "#")
    for publisher in publishers(url, exchange, event_files, tmp_path / "spool"):
        await asyncio.to_thread(finish, publisher)
    total = total_events(event_files)
    env = {"STREAMER_STATE_DIR": str(tmp_path / "state")}
    async with fresh_database(server, "stream") as collected:
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
        await assert_same_rows(collected, direct)


async def test_four_partitioned_collectors_never_wait_for_one_another(site: tuple[RabbitCluster, str],
                                                                      event_files: list[Path], direct: str,
                                                                      tmp_path: Path) -> None:
    cluster, server = site
    queues = declare_partitions(cluster, "wfp", 4, "--queue-type", "classic")
    for publisher in publishers(cluster.url(), "wfp", event_files, tmp_path):
        await asyncio.to_thread(finish, publisher)
    depths = await asyncio.to_thread(queue_depths, cluster, queues)
    assert sum(depths.values()) == total_events(event_files)
    assert sum(1 for n in depths.values() if n) >= 2, depths  # the workflows are spread
    async with fresh_database(server, "parts") as collected:
        with LockWaits(collected) as waits:
            collectors = [streamer("load", f"{cluster.url()}/{name}?idle=5", "--dest", collected, "-v")
                          for name in queues]
            logs = [await asyncio.to_thread(finish, c) for c in collectors]
        assert waits.samples > 10 and waits.waits == 0
        assert not [line for log in logs for line in log.splitlines() if "waited for another writer" in line]
        await assert_same_rows(collected, direct)
