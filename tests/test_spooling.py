"""The spooling layer (`streamer/endpoints/spooling.py`) around a PostgreSQL endpoint, on a cluster of the
test's own (`ownservers.py`) that the test stops in the middle of a live `streamer follow`:

- while the server is down streamer keeps reading: the batches go to the spool (it grows), the checkpoint
  moves on; once the server is back the spool drains, and the database holds exactly the rows of a clean load;
- SIGKILL of streamer while batches are spooled, then a rerun with the same state and spool: the spool is
  replayed first, and the rows are again exactly those of a clean load (nothing lost, nothing twice);
- the same layer around the MySQL endpoint, the machine's MariaDB reached through a TCP proxy the test cuts:
  a batch written meanwhile is spooled (nothing reaches the server), and replayed in order once it is back.

The workflow grows while streamer follows it (`streamer.synth`), so the outage lands in the middle of the load
by construction.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

import dbcompare
from amqphelp import Forwarder
from conftest import MYSQL_HOST, MYSQL_PORT
from dbstream import golden_events
from ownservers import PgCluster, own_postgres
from streamer.endpoints import create_endpoint
from streamer.endpoints.spooling import Spooling, with_spool
from streamer.synth import generate, iter_dagman_chunks
from test_db import assert_same, golden_snapshot
from test_mysql import mysql_db, mysql_snapshot  # noqa: F401 (a fixture)
from test_faults import _pg_rows, _rows_seen, clean_replay, follow_cmd, grow


def spooled_bytes(spool: Path) -> int:
    return sum(p.stat().st_size for p in spool.glob("*.seg")) if spool.is_dir() else 0


def wait_for(what: str, condition: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"{what}: streamer exited with {proc.returncode}: {proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


def follow_into_stopped_server(cluster: PgCluster, submit: Path, chunks: list[str], dagman_out: Path, state: Path,
                               dest: str, upto: int) -> subprocess.Popen[str]:
    """`streamer follow` into `dest`; the server stopped once rows go in; the workflow grown to chunk `upto`
    meanwhile; returns once events are spooled and the checkpoint moved past them."""
    proc = subprocess.Popen(follow_cmd(submit, state, dest), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    grow(dagman_out, chunks[:12])
    wait_for("rows in the database", lambda: asyncio.run(_rows_seen(cluster.dsn)) > 0, proc)
    cluster.ctl("stop", "-m", "fast")  # connections cut, as a crash or failover would
    grow(dagman_out, chunks[12:upto])
    wait_for("batches in the spool", lambda: spooled_bytes(state.parent / "pg.spool") > 0, proc)
    checkpoint = state.read_bytes()
    wait_for("the checkpoint moving past spooled batches", lambda: state.read_bytes() != checkpoint, proc)
    return proc


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
    state = tmp_path / "state.json"
    with own_postgres() as cluster:
        dest = f"{cluster.dsn}?batch=500&spool={spool}&spool_grace=1"
        proc = follow_into_stopped_server(cluster, submit, chunks, dagman_out, state, dest, upto=20)
        try:
            first, checkpoint = spooled_bytes(spool), state.read_bytes()
            grow(dagman_out, chunks[20:28])  # the server is still down: the source is not held back
            wait_for("the spool growing", lambda: spooled_bytes(spool) > first, proc)
            wait_for("the checkpoint moving on", lambda: state.read_bytes() != checkpoint, proc)
            during = spooled_bytes(spool)
            cluster.ctl("start")
            cluster.wait_ready()
            grow(dagman_out, chunks[28:])
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        loaded = asyncio.run(_pg_rows(cluster.dsn))
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
        dest = f"{cluster.dsn}?batch=500&spool={spool}&spool_grace=1"
        proc = follow_into_stopped_server(cluster, submit, chunks, dagman_out, state, dest, upto=24)
        try:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        left = spooled_bytes(spool)
        assert left > 0
        cluster.ctl("start")
        cluster.wait_ready()
        grow(dagman_out, chunks[24:], pause=0)
        rerun = subprocess.run(follow_cmd(submit, state, dest), capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert "spooled by an earlier run" in rerun.stderr
        loaded = asyncio.run(_pg_rows(cluster.dsn))
    assert spooled_bytes(spool) == 0
    print(f"\nkilled with {left:,} bytes spooled; the rerun replayed them first: rows equal a clean load")
    _assert_same(loaded, clean)


@pytest.mark.mysql
@pytest.mark.corpus
async def test_mysql_through_a_cut_connection_spools_and_replays_in_order(golden: Path, mysql_db: str,
                                                                         tmp_path: Path) -> None:
    events = golden_events(golden, "process_wf_failure")
    forwarder = Forwarder(MYSQL_HOST, MYSQL_PORT)
    proxied = await forwarder.start()
    url = mysql_db.replace(f"@{MYSQL_HOST}:{MYSQL_PORT}/", f"@127.0.0.1:{proxied}/")
    endpoint = with_spool(create_endpoint(f"{url}?spool={tmp_path / 'spool'}&spool_grace=0.5&retry_for=0.5"))
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
