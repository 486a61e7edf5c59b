"""Transient faults of a database batch are retried (`streamer/endpoints/layers/resilience.py`), on real servers.

- a real PostgreSQL deadlock between the endpoint and another session on shared replica-catalog rows:
  the server aborts the endpoint's transaction, the batch is written again, rows equal monitord's;
- a real SQLite `database is locked` (another connection holds the write lock past the busy timeout):
  retried until the lock is released;
- the policy itself: quiet while a fault is short, a clear error once it persists past `retry_for`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from pathlib import Path

import asyncpg
import pytest

from streamer.endpoints import EndpointError, create_endpoint
from streamer.endpoints.layers.resilience import DEADLOCK, LOCK_TIMEOUT, RetryPolicy, RetryStats, TransientError, retrying
from streamer.util.urls import EndpointURL
from tests.support import dbcompare
from tests.support.dbstream import golden_events
from tests.endpoints.test_db import assert_same, golden_snapshot
from tests.support.pghelp import pg_snapshot

RC_EVENTS = ("stampede.rc.pfn", "stampede.rc.meta", "stampede.wf.map.file")


@pytest.mark.postgres
@pytest.mark.corpus
async def test_postgres_deadlock_is_retried(pg_db: str, golden: Path) -> None:  # noqa: F811
    events = golden_events(golden, "hierarchical_wf_success")
    rest = [e for e in events if e.name not in RC_EVENTS]
    rc = [e for e in events if e.name in RC_EVENTS]
    lfns = sorted({e.fields["lfn.id"] for e in rc})
    assert len(lfns) >= 2
    first, last = lfns[0], lfns[-1]

    endpoint = create_endpoint(EndpointURL.parse(pg_db))
    await endpoint.open()
    other = await asyncpg.connect(pg_db)
    try:
        await endpoint.write(rest)
        await other.execute("SET deadlock_timeout = '30s'")  # the endpoint's session detects the cycle
        tx = other.transaction()
        await tx.start()
        await other.execute("INSERT INTO rc_lfn (lfn) VALUES ($1)", last)  # the endpoint will wait on it

        write = asyncio.create_task(endpoint.write(rc))  # locks `first`, then waits for `last`
        watcher = await asyncpg.connect(pg_db)
        try:
            for _ in range(200):
                waiting = await watcher.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
                if waiting:
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the endpoint never waited for the other session's row")
        finally:
            await watcher.close()
        # now `first` closes the cycle: the server aborts the endpoint's transaction (40P01)
        await other.execute("INSERT INTO rc_lfn (lfn) VALUES ($1)", first)
        await tx.commit()
        await asyncio.wait_for(write, 60)
    finally:
        await other.close()
        await endpoint.close()
    assert endpoint.retry_stats.by_kind == {DEADLOCK: 1}
    assert_same(await pg_snapshot(pg_db), golden_snapshot(golden, "hierarchical_wf_success"))


@pytest.mark.corpus
def test_sqlite_database_is_locked_is_retried(tmp_path: Path, golden: Path) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    db = tmp_path / "locked.db"
    endpoint = create_endpoint(EndpointURL.parse(f"sqlite:///{db}?busy_timeout=0.1"))
    held = threading.Event()

    def hold_lock() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # the write lock, for longer than the endpoint's busy timeout
        held.set()
        time.sleep(1.5)
        conn.execute("COMMIT")
        conn.close()

    async def run() -> None:
        await endpoint.open()
        thread = threading.Thread(target=hold_lock)
        thread.start()
        held.wait(10)
        await endpoint.write(events)
        thread.join()
        await endpoint.close()

    asyncio.run(run())
    assert endpoint.retry_stats.by_kind.get(LOCK_TIMEOUT, 0) >= 1
    assert_same(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "hierarchical_wf_success"))


def test_a_sqlite_database_locked_while_it_is_opened_is_retried(tmp_path: Path) -> None:
    """Several runs opening one new database at once: the one that finds it locked (here: held exclusively for
    longer than its busy timeout, as the switch to WAL can be refused at once) waits and opens it; it ended with
    "not a usable SQLite database: database is locked" (bench/concurrency.py, 5 runs into one file, in CI)."""
    db = tmp_path / "shared.db"
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN EXCLUSIVE")
    threading.Timer(0.5, lambda: holder.execute("COMMIT")).start()
    endpoint = create_endpoint(EndpointURL.parse(f"sqlite:///{db}?busy_timeout=0.1&retry_for=20"))

    async def run() -> None:
        await endpoint.open()
        await endpoint.close()

    try:
        asyncio.run(run())
    finally:
        holder.close()
    assert endpoint.retry_stats.by_kind.get(LOCK_TIMEOUT, 0) >= 1
    tables = {row[0] for row in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"workflow", "job", "dbversion"} <= tables


async def test_short_faults_are_quiet_and_persistent_ones_fail(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    async def twice_then_ok() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TransientError(DEADLOCK, "deadlock detected")
        return "written"

    stats = RetryStats()
    with caplog.at_level(logging.WARNING, logger="streamer.endpoints.db"):
        assert await retrying("db", "batch", twice_then_ok, RetryPolicy(first_delay=0.001), stats) == "written"
    assert stats.by_kind == {DEADLOCK: 2}
    assert not caplog.records  # cured by a retry: not news

    async def always() -> None:
        raise TransientError(LOCK_TIMEOUT, "database is locked")

    policy = RetryPolicy(retry_for=0.3, first_delay=0.01, max_delay=0.05, quiet_for=0.1)
    with caplog.at_level(logging.WARNING, logger="streamer.endpoints.db"):
        with pytest.raises(EndpointError) as err:
            await retrying("sqlite:///x.db", "batch of 5 events", always, policy)
    message = str(err.value)
    assert message.startswith("sqlite:///x.db: batch of 5 events failed: lock timeout persisted for 0 s over ")
    assert message.endswith("(retry_for=0.3): database is locked")
    assert [r.getMessage().split(" still failing")[0] for r in caplog.records] == ["sqlite:///x.db: batch of 5 events"]
