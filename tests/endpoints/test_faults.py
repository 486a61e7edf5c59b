"""Faults on real servers of the test's own (`ownservers.py`), and a file endpoint on a full filesystem.

- RabbitMQ stopped and started twice, then killed (SIGKILL) once, while `streamer follow` publishes a
  live workflow of more than 50,000 events: every event arrives; any duplicate is a re-send (the same
  `message_id`).
- PostgreSQL restarted in the middle of a live `streamer follow`: the run goes on, and the database
  ends with exactly the rows of a clean load.
- A JSONL file on a full filesystem (a small tmpfs mounted by the test; `RLIMIT_FSIZE` where mounting
  is not allowed): a clear error naming the file; after space returns, the rerun leaves every event
  in the file exactly once.

The workflows grow while streamer follows them (`streamer.synth`: the dagman.out is appended piece by
piece), so each fault lands in the middle of the load by construction, not by timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import aio_pika
import asyncpg
import pytest

from streamer.synth import generate, iter_dagman_chunks
from tests.support import dbcompare
from tests.support.amqphelp import unique
from tests.support.ownservers import own_postgres, own_rabbitmq
from tests.support.pghelp import pg_snapshot


def follow_cmd(submit: Path, state: Path, *dests: str, follow: bool = True) -> list[str]:
    cmd = [sys.executable, "-m", "streamer", "follow" if follow else "replay", str(submit), "--timezone", "UTC",
           "-q", "--state", str(state), "--no-jobstate"]
    for dest in dests:
        cmd += ["--dest", dest]
    return cmd


def clean_replay(tmp: Path, submit: Path, *dests: str) -> None:
    done = subprocess.run(follow_cmd(submit, tmp / "clean.state", *dests, follow=False), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def grow(dagman_out: Path, chunks: list[str], pause: float = 0.05) -> None:
    for chunk in chunks:
        with open(dagman_out, "a") as fh:
            fh.write(chunk)
        time.sleep(pause)


def ids_of(path: Path) -> list[str]:
    return [json.loads(line)["event_id"] for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- RabbitMQ

async def _declare_queue(url: str, exchange: str, queue: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        ex = await channel.declare_exchange(exchange, "topic", durable=True)
        q = await channel.declare_queue(queue, durable=True)
        await q.bind(ex, "#")
    finally:
        await connection.close()


async def _drain(url: str, queue: str) -> list[str]:
    connection = await aio_pika.connect(url)
    ids: list[str] = []
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=5000)
        q = await channel.declare_queue(queue, durable=True, passive=True)
        async with q.iterator(no_ack=True) as messages:
            while True:
                try:
                    message = await asyncio.wait_for(messages.__anext__(), timeout=5)
                except (asyncio.TimeoutError, StopAsyncIteration):
                    break
                ids.append(message.message_id)
    finally:
        await connection.close()
    return ids


@pytest.mark.rabbitmq
@pytest.mark.timeout(900)
def test_rabbitmq_stopped_twice_killed_once_during_50000_events(tmp_path: Path) -> None:
    submit = generate(tmp_path / "wf", jobs=1850, seed=21)
    finished = tmp_path / "finished"
    shutil.copytree(submit, finished, symlinks=True)
    clean_replay(tmp_path, finished, f"file://{tmp_path}/clean.jsonl")
    expected = ids_of(tmp_path / "clean.jsonl")
    assert len(expected) >= 50_000

    chunks = list(iter_dagman_chunks(submit, pieces=60, seed=2))
    dagman_out = next(submit.glob("*.dag.dagman.out"))
    with own_rabbitmq() as broker:
        exchange, queue = unique("streamer-fault"), unique("streamer-fault-q")
        asyncio.run(_declare_queue(broker.url, exchange, queue))
        env = {**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "xdg")}
        dest = f"{broker.url}/{exchange}?events=*&confirm_timeout=5&retry_max=2&drain_timeout=240"
        proc = subprocess.Popen(follow_cmd(submit, tmp_path / "state.json", dest), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            quarter = len(chunks) // 4
            grow(dagman_out, chunks[:quarter])
            time.sleep(1)
            broker.stop()                       # 1st: clean shutdown
            grow(dagman_out, chunks[quarter:2 * quarter])
            broker.start()
            time.sleep(1)
            broker.stop()                       # 2nd
            grow(dagman_out, chunks[2 * quarter:3 * quarter])
            broker.start()
            time.sleep(1)
            broker.kill()                       # SIGKILL of the Erlang VM
            grow(dagman_out, chunks[3 * quarter:])
            broker.start()
            _, err = proc.communicate(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        got = asyncio.run(_drain(broker.url, queue))
    counts = Counter(got)
    lost = set(expected) - set(counts)
    foreign = set(counts) - set(expected)
    resent = sum(n - 1 for n in counts.values())
    print(f"\nRabbitMQ stopped twice, killed once: {len(expected)} events, {len(got)} messages, "
          f"lost {len(lost)}, duplicates {resent} (same message_id re-sends), foreign {len(foreign)}")
    assert not lost
    assert not foreign


# ---------------------------------------------------------------- PostgreSQL

async def _rows_seen(dsn: str) -> int:
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError):
        return 0
    try:
        if not await conn.fetchval("SELECT to_regclass('jobstate') IS NOT NULL"):
            return 0
        return await conn.fetchval("SELECT count(*) FROM jobstate")
    finally:
        await conn.close()


@pytest.mark.postgres
@pytest.mark.timeout(600)
def test_postgres_restarted_mid_load_rows_equal_clean_load(tmp_path: Path) -> None:
    submit = generate(tmp_path / "wf", jobs=300, scenario="retry,held", seed=31)
    finished = tmp_path / "finished"
    shutil.copytree(submit, finished, symlinks=True)
    clean_replay(tmp_path, finished, f"sqlite:///{tmp_path}/clean.db")
    chunks = list(iter_dagman_chunks(submit, pieces=40, seed=4))
    dagman_out = next(submit.glob("*.dag.dagman.out"))
    with own_postgres() as cluster:
        proc = subprocess.Popen(follow_cmd(submit, tmp_path / "state.json", f"{cluster.dsn}?batch=500"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            grow(dagman_out, chunks[:20])
            deadline = time.monotonic() + 60
            while asyncio.run(_rows_seen(cluster.dsn)) == 0:  # rows are going in: restart now
                assert time.monotonic() < deadline, "nothing written in 60 s"
                time.sleep(0.1)
            before = asyncio.run(_rows_seen(cluster.dsn))
            cluster.ctl("stop", "-m", "fast")  # connections cut, as a crash or failover would
            time.sleep(1)
            cluster.ctl("start")
            cluster.wait_ready()
            grow(dagman_out, chunks[20:])
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert not [line for line in err.splitlines() if "ERROR" in line or "never retrieved" in line
                    or "Resetting connection" in line], err  # a recovered fault is a WARNING at most
        loaded = asyncio.run(pg_snapshot(cluster.dsn))
    clean = dbcompare.sqlite_snapshot(str(tmp_path / "clean.db"))
    diff = dbcompare.compare(loaded, clean)
    total = sum(dbcompare.counts(clean).values())
    print(f"\nPostgreSQL restarted after {before} jobstate rows: {total} rows, equal to a clean load: {not diff}")
    assert before < sum(clean["jobstate"].values())
    assert not diff, dbcompare.format_diff(diff)


LEFT_BEHIND = """
import asyncio, gc, sys
import asyncpg
from streamer.util.runtime import run, setup_logging

async def main() -> int:
    pool = await asyncpg.create_pool(sys.argv[1], min_size=0, max_size=1)
    for _ in range(2):  # what a COMMIT cut off by a lost server leaves: a transaction asyncpg did not end
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.execute("CREATE TEMP TABLE t (x int)")
    await pool.close()
    loop = asyncio.get_running_loop()
    for exc in (asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
                ConnectionResetError(104, "Connection reset by peer"), ValueError("a bug, not a fault")):
        future = loop.create_future()  # an operation in flight when the connection went, awaited by no one
        future.set_exception(exc)
        del future
        gc.collect()
    await asyncio.sleep(0)
    return 0

setup_logging(0)
sys.exit(run(main()))
"""


@pytest.mark.postgres
def test_what_a_lost_connection_leaves_behind_is_one_warning(tmp_path: Path) -> None:
    """asyncpg hands the loop a reset transaction and unretrieved futures after a PostgreSQL restart; asyncio
    printed them as ERROR with tracebacks while the run went on to succeed. Each kind is one WARNING line
    now; an exception that is no connection fault still reaches asyncio's handler."""
    with own_postgres() as cluster:
        done = subprocess.run([sys.executable, "-c", LEFT_BEHIND, cluster.dsn], capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert [line for line in lines if "Resetting connection" in line] == []
    assert lines.count("streamer: WARNING: a database connection was reset with its transaction open (the server "
                       "lost it and rolled it back); the endpoint writes that batch again") == 1
    lost = [line for line in lines if line.startswith("streamer: WARNING: a connection was lost with an operation")]
    assert lost == ["streamer: WARNING: a connection was lost with an operation in flight "
                    "(ConnectionDoesNotExistError: connection was closed in the middle of operation); the endpoint "
                    "reconnects and retries"], done.stderr
    assert done.stderr.count("Future exception was never retrieved") == 1 and "a bug, not a fault" in done.stderr


# ---------------------------------------------------------------- full filesystem

def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.mark.timeout(600)
def test_file_endpoint_on_full_filesystem_then_rerun_each_event_once(tmp_path: Path) -> None:
    submit = generate(tmp_path / "wf", jobs=300, seed=41)
    clean_replay(tmp_path, submit, f"file://{tmp_path}/clean.jsonl")
    expected = ids_of(tmp_path / "clean.jsonl")
    size = (tmp_path / "clean.jsonl").stat().st_size
    events_bp = tmp_path / "events.jsonl"
    shutil.copy(tmp_path / "clean.jsonl", events_bp)

    mnt = tmp_path / "mnt"
    mounted = _mount_tmpfs(mnt, str(size // 3))
    out = mnt / "out.jsonl"
    cmd = [sys.executable, "-m", "streamer", "load", str(events_bp), "-q", "--checkpoint", str(tmp_path / "ck.json"),
           "--dest", f"file://{out}?batch=500"]
    limit = size // 3

    def fsize_limit() -> None:  # where mounting is not allowed: the same failure by RLIMIT_FSIZE
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    try:
        full = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              preexec_fn=None if mounted else fsize_limit)
        assert full.returncode == 1, full.stderr
        assert "Traceback" not in full.stderr
        reason = "No space left on device" if mounted else "File too large"
        assert f"{out}: write failed: {reason}" in full.stderr, full.stderr
        partial = out.stat().st_size
        assert 0 < partial < size
        if mounted:  # space returns
            subprocess.run(["mount", "-o", f"remount,size={size * 3}", str(mnt)], check=True)
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        got = ids_of(out)
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
    print(f"\nfull filesystem ({'tmpfs' if mounted else 'RLIMIT_FSIZE'}): failed at {partial} of {size} bytes; "
          f"after the rerun {len(got)} events, {len(got) - len(set(got))} duplicated, "
          f"{len(set(expected) - set(got))} lost")
    assert got == expected
