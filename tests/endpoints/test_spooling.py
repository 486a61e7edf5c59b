"""The spooling layer (`streamer/endpoints/layers/spooling.py`) around a PostgreSQL endpoint, on a cluster of the
test's own (`ownservers.py`) that the test stops in the middle of a live `streamer follow`:

- while the server is down streamer keeps reading: the batches go to the spool (it grows), the checkpoint
  moves on; once the server is back the spool drains, and the database holds exactly the rows of a clean load;
- SIGKILL of streamer while batches are spooled, then a rerun with the same state and spool: the spool is
  replayed first, and the rows are again exactly those of a clean load (nothing lost, nothing twice);
- a file endpoint on a full filesystem (a small tmpfs): what does not fit waits in the spool, and the file
  holds every event once, in order, after space returns;
- an AMQP spool written by the earlier version (publish-ready records) is still delivered first;
- the same layer around the MySQL endpoint, the machine's MariaDB reached through a TCP proxy the test cuts:
  a batch written meanwhile is spooled (nothing reaches the server), and replayed in order once it is back.

The workflow grows while streamer follows it (`streamer.synth`), so the outage lands in the middle of the load
by construction.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support import dbcompare
from tests.support.amqphelp import Capture, Forwarder, unique
from tests.conftest import MYSQL_HOST, MYSQL_PORT, unavailable
from tests.support.dbstream import golden_events
from tests.support.ownservers import PgCluster, own_postgres
from tests.support.pghelp import pg_snapshot
from streamer.endpoints import create_endpoint
from streamer.endpoints.layers.spooling import Spooling
from streamer.events import jsonenc
from streamer.core.spool import Spool
from streamer.synth import generate, iter_dagman_chunks
from streamer.util.urls import EndpointURL
from tests.endpoints.test_db import assert_same, golden_snapshot
from tests.endpoints.test_mysql import mysql_db, mysql_snapshot  # noqa: F401 (a fixture)
from tests.endpoints.test_faults import _mount_tmpfs, _rows_seen, clean_replay, follow_cmd, grow, ids_of


def spooled_bytes(spool: Path) -> int:
    return sum(p.stat().st_size for p in spool.glob("*.seg")) if spool.is_dir() else 0


def wait_for(what: str, condition: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"{what}: streamer exited with {proc.returncode}: {proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


@contextmanager
def follow_into_stopped_server(tmp_path: Path, cluster: PgCluster, submit: Path, chunks: list[str],
                               dagman_out: Path) -> Iterator[subprocess.Popen[str]]:
    """`streamer follow` into the cluster with `?spool=tmp_path/pg.spool`; the server stopped once rows go in;
    the workflow grown to chunk 24 meanwhile. Yields once events are spooled and, after more of the workflow
    (chunks 18 to 24, which only the spool can have acknowledged), the spool grew and the checkpoint moved on;
    kills streamer at the end if it still runs."""
    state = tmp_path / "state.json"
    proc = subprocess.Popen(follow_cmd(submit, state, dest_of(tmp_path, cluster)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        grow(dagman_out, chunks[:12])
        wait_for("rows in the database", lambda: asyncio.run(_rows_seen(cluster.dsn)) > 0, proc)
        cluster.ctl("stop", "-m", "fast")  # connections cut, as a crash or failover would
        grow(dagman_out, chunks[12:18])
        wait_for("batches in the spool", lambda: spooled_bytes(tmp_path / "pg.spool") > 0, proc)
        first, checkpoint = spooled_bytes(tmp_path / "pg.spool"), state.read_bytes()
        grow(dagman_out, chunks[18:24])  # the server is still down: the source is not held back
        wait_for("the spool growing", lambda: spooled_bytes(tmp_path / "pg.spool") > first, proc)
        wait_for("the checkpoint moving on", lambda: state.read_bytes() != checkpoint, proc)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def dest_of(tmp_path: Path, cluster: PgCluster) -> str:
    return f"{cluster.dsn}?batch=500&spool={tmp_path / 'pg.spool'}&spool_grace=1"


def _setup(tmp_path: Path, seed: int) -> tuple[Path, list[str], Path, dbcompare.Snapshot]:
    submit = generate(tmp_path / "wf", jobs=300, scenario="retry,held", seed=seed)
    finished = tmp_path / "finished"
    shutil.copytree(submit, finished, symlinks=True)
    clean_replay(tmp_path, finished, f"sqlite:///{tmp_path}/clean.db")
    chunks = list(iter_dagman_chunks(submit, pieces=40, seed=seed))
    return submit, chunks, next(submit.glob("*.dag.dagman.out")), dbcompare.sqlite_snapshot(str(tmp_path / "clean.db"))


def _assert_same(loaded: dbcompare.Snapshot, clean: dbcompare.Snapshot) -> None:
    assert dbcompare.counts(loaded) == dbcompare.counts(clean)
    diff = dbcompare.compare(loaded, clean)
    assert not diff, dbcompare.format_diff(diff)


@pytest.mark.postgres
@pytest.mark.timeout(600)
def test_postgres_stopped_mid_load_spools_and_drains_rows_equal_clean_load(tmp_path: Path) -> None:
    submit, chunks, dagman_out, clean = _setup(tmp_path, seed=32)
    spool = tmp_path / "pg.spool"
    with own_postgres() as cluster:
        with follow_into_stopped_server(tmp_path, cluster, submit, chunks, dagman_out) as proc:
            during = spooled_bytes(spool)
            cluster.ctl("start")
            cluster.wait_ready()
            grow(dagman_out, chunks[24:])
            _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        loaded = asyncio.run(pg_snapshot(cluster.dsn))
    assert spooled_bytes(spool) == 0  # drained: every segment consumed
    print(f"\nspool held {during:,} bytes while PostgreSQL was down; "
          f"{sum(dbcompare.counts(clean).values())} rows after the drain, equal to a clean load")
    _assert_same(loaded, clean)


@pytest.mark.postgres
@pytest.mark.timeout(600)
def test_postgres_down_streamer_killed_while_spooled_rerun_rows_equal_clean_load(tmp_path: Path) -> None:
    submit, chunks, dagman_out, clean = _setup(tmp_path, seed=33)
    spool = tmp_path / "pg.spool"
    state = tmp_path / "state.json"
    with own_postgres() as cluster:
        with follow_into_stopped_server(tmp_path, cluster, submit, chunks, dagman_out) as proc:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        left = spooled_bytes(spool)
        assert left > 0
        cluster.ctl("start")
        cluster.wait_ready()
        grow(dagman_out, chunks[24:], pause=0)
        rerun = subprocess.run(follow_cmd(submit, state, dest_of(tmp_path, cluster)), capture_output=True, text=True,
                               timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert "spooled by an earlier run" in rerun.stderr
        loaded = asyncio.run(pg_snapshot(cluster.dsn))
    assert spooled_bytes(spool) == 0
    print(f"\nkilled with {left:,} bytes spooled; the rerun replayed them first: rows equal a clean load")
    _assert_same(loaded, clean)


@pytest.mark.mysql
@pytest.mark.corpus
async def test_mysql_through_a_cut_connection_spools_and_replays_in_order(
        golden: Path, mysql_db: str, tmp_path: Path) -> None:  # noqa: F811
    events = golden_events(golden, "process_wf_failure")
    forwarder = Forwarder(MYSQL_HOST, MYSQL_PORT)
    proxied = await forwarder.start()
    url = mysql_db.replace(f"@{MYSQL_HOST}:{MYSQL_PORT}/", f"@127.0.0.1:{proxied}/")
    endpoint = create_endpoint(EndpointURL.parse(f"{url}?spool={tmp_path / 'spool'}&spool_grace=0.5&retry_for=0.5"))
    assert isinstance(endpoint, Spooling)
    third = len(events) // 3
    try:
        forwarder.up = True
        await endpoint.open()
        await endpoint.write(events[:third])
        forwarder.down()  # the network cut: nothing reaches the server
        await endpoint.write(events[third:2 * third])
        assert endpoint.spool is not None and len(endpoint.spool) == 2 * third - third
        assert endpoint.health() is not None and "events spooled in" in str(endpoint.health())
        await endpoint.write(events[2 * third:])  # behind the spooled ones, in order
        assert len(endpoint.spool) == len(events) - third and endpoint.spooled == len(events) - third
        forwarder.up = True
        await endpoint.close()  # waits for the replay
    finally:
        await forwarder.close()
    assert endpoint.drained == len(events) - third
    assert not list((tmp_path / "spool").glob("*.seg"))
    assert_same(await mysql_snapshot(mysql_db), golden_snapshot(golden, "process_wf_failure"))


@pytest.mark.corpus
async def test_file_on_a_full_filesystem_spools_until_space_returns(golden: Path, tmp_path: Path) -> None:
    """A JSON-lines file on a tmpfs a third of the size needed, `?spool=`: no write fails, what does not fit
    waits in the spool (a half-written batch cut off), and once space returns the file holds every event once,
    in order."""
    events = golden_events(golden, "hierarchical_wf_success")
    size = len(jsonenc.join(events))
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, str(size // 3)):
        unavailable("mounting a tmpfs is not allowed here")
    out = mnt / "out.jsonl"
    endpoint = create_endpoint(EndpointURL.parse(f"file://{out}?spool={tmp_path / 'spool'}&spool_grace=0"))
    try:
        await endpoint.open()
        for start in range(0, len(events), 50):
            await endpoint.write(events[start:start + 50])  # never fails: what does not fit is spooled
        assert isinstance(endpoint, Spooling) and endpoint.spool is not None and len(endpoint.spool) > 0
        assert "write failed: No space left on device" in str(endpoint.health())
        assert out.stat().st_size <= size // 3
        subprocess.run(["mount", "-o", f"remount,size={size * 3}", str(mnt)], check=True)
        await endpoint.close()  # waits for the replay
        got = ids_of(out)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    assert endpoint.spooled > 0 and endpoint.drained == endpoint.spooled
    assert got == [e.id for e in events]


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_amqp_spool_of_an_earlier_version_is_delivered_first(amqp_url: str, golden: Path,
                                                                  tmp_path: Path) -> None:
    """The AMQP endpoint's spool used to hold publish-ready records (`key\\nid\\ntime\\nbody`); its spool is
    now the spooling layer's (events as JSON lines). A spool left by the old version is still delivered first,
    each message with its routing key and `message_id`, then the new events."""
    events = golden_events(golden, "sample_wf_held")
    spool_dir = tmp_path / "spool"
    old = Spool(spool_dir, 1 << 30)
    old.append([b"%s\n%s\n%d\n%s" % (e.name.encode(), e.id.encode(), 1_700_000_000, jsonenc.dumps(e))
                for e in events[:40]])
    old.close()
    exchange = unique("streamer-test-oldspool")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        endpoint = create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?events=*&spool={spool_dir}"))
        assert isinstance(endpoint, Spooling)
        await endpoint.open()
        await endpoint.write(events[40:])
        await endpoint.close()
        messages = await capture.wait_for(len(events))
        await capture.channel.exchange_delete(exchange)
    assert [m.message_id for m in messages] == [e.id for e in events]
    assert [m.routing_key for m in messages] == [e.name for e in events]
    assert [jsonenc.parse_line(m.body).id for m in messages] == [e.id for e in events]
    # the new events joined the spool behind the old ones while it was being delivered
    assert endpoint.drained == len(events) and endpoint.spooled == len(events) - 40
    assert not list(spool_dir.glob("*.seg"))


def _bp_lines(start: int, count: int) -> str:
    return "".join(f"ts=2023-11-14T22:13:{i % 60:02d}.000000Z event=stampede.xwf.start level=Info "
                   f"xwf.id=1e2a3b4c-0000-4000-8000-0000000000{i % 100:02d} restart_count={i}\n"
                   for i in range(start, start + count))


@pytest.mark.rabbitmq
async def test_load_to_a_mistyped_broker_port_fails_fast_and_the_corrected_run_drains_its_spool(
        amqp_url: str, tmp_path: Path) -> None:
    """`load` to a broker never reached (a port nothing listens on) exits at once, not after drain_timeout's
    300 s, saying where the events wait; SIGTERM while the broker is away ends the wait at once; the corrected
    run (the right port, same exchange) announces the spool the mistyped one left and delivers it first
    (issue 26 item 8)."""
    import os
    import sys

    from tests.support.ownservers import free_port

    env = {**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "state")}
    exchange = unique("spool-mistyped")
    first, second, third = tmp_path / "a.bp", tmp_path / "b.bp", tmp_path / "c.bp"
    first.write_text(_bp_lines(0, 5))
    second.write_text(_bp_lines(5, 3))
    third.write_text(_bp_lines(8, 2))
    wrong = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F/{exchange}?events=*"
    started = time.monotonic()
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "streamer", "load", str(first),
                                                    "--dest", wrong], capture_output=True, text=True, env=env,
                                   timeout=120)
    assert time.monotonic() - started < 60, "waited for a broker it never reached"
    assert done.returncode == 1, done.stderr
    assert "never reached" in done.stderr and "5 events" in done.stderr and str(tmp_path / "state") in done.stderr
    assert "guest:guest" not in done.stderr

    forwarder = Forwarder()  # a broker that is there, then goes away: SIGTERM must not wait 300 s for it
    port = await forwarder.start()
    forwarder.up = True
    away = f"amqp://guest:guest@127.0.0.1:{port}/%2F/{exchange}?events=*&retry_max=0.5"
    run = subprocess.Popen([sys.executable, "-m", "streamer", "load", "-v", str(second),
                            "--follow", "--dest", away],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        async with Capture(amqp_url, exchange) as capture:
            await capture.start()
            # another address of the same exchange: the mistyped run's 5 events are taken in and delivered first
            assert len(await capture.wait_for(5 + 3)) == 5 + 3
            forwarder.down()
            with second.open("a") as handle:
                handle.write(_bp_lines(20, 4))
            spools = tmp_path / "state" / "amqp-spool"
            for _ in range(300):
                if sum(spooled_bytes(p) for p in spools.iterdir()) > 0:  # the 4 new events, spooled
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("nothing spooled while the broker was away")
            run.send_signal(signal.SIGTERM)
            try:
                _, err = await asyncio.to_thread(run.communicate, timeout=60)  # not drain_timeout's 300 s
            except subprocess.TimeoutExpired:
                run.kill()
                _, err = await asyncio.to_thread(run.communicate)
                raise AssertionError(f"load --follow did not end 60 s after SIGTERM; its stderr:\n{err}") from None
            assert "5 events an earlier run spooled" in err and "4 events stay" in err, err

            right = f"{amqp_url}/{exchange}?events=*"
            done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "streamer", "load", str(third),
                                                            "--dest", right], capture_output=True, text=True,
                                           env=env, timeout=120)
            assert done.returncode == 0, done.stderr
            assert "4 events an earlier run spooled" in done.stderr, done.stderr
            messages = await capture.wait_for(3 + 5 + 4 + 2)
        assert sorted(json.loads(m.body)["restart_count"] for m in messages) == sorted(
            [*range(0, 10), *range(20, 24)])
        assert not [p for p in (tmp_path / "state" / "amqp-spool").iterdir() if any(p.glob("*.seg"))]
    finally:
        if run.poll() is None:
            run.kill()
        await forwarder.close()
