"""PostgreSQL write path: one statement per table and batch, never one per row (`endpoints/db/pgbulk.py`).

The statements the endpoint sends are recorded on their way to the real
server (asyncpg's `Connection` methods, wrapped: the server runs them); the
rows are compared with monitord's and with SQLite's load of the same events.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from streamer.endpoints import create_endpoint
from streamer.endpoints.db import pgbulk
from streamer.endpoints.db.plan import Plan
from streamer.util.urls import EndpointURL
from tests.support import dbcompare
from tests.support.dbstream import batches, golden_events, synthetic
from tests.support.pghelp import pg_snapshot

HOT_TABLES = ("rc_lfn", "rc_pfn", "rc_meta", "workflow_files", "invocation", "integrity", "jobstate",
              "job_instance", "tag", "host")


class Recorder:
    """Every statement sent on any asyncpg connection: (sql, rows it carries)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, int]] = []
        for name in ("execute", "executemany", "fetch", "fetchval", "copy_records_to_table"):
            self._wrap(monkeypatch, name)

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        original = getattr(asyncpg.Connection, name)
        sent = self.sent

        async def recorded(conn: Any, *args: Any, **kwargs: Any) -> Any:
            if name == "executemany":
                sent.append((args[0], len(args[1])))
            elif name == "copy_records_to_table":
                sent.append((f"COPY {args[0]}", len(kwargs.get("records", ()))))
            else:
                sent.append((args[0], 1))
            return await original(conn, *args, **kwargs)

        monkeypatch.setattr(asyncpg.Connection, name, recorded)

    def per_row(self) -> list[tuple[str, int]]:
        """Statements sent once per row (executemany of more than one row)."""
        return [(sql, n) for sql, n in self.sent if n > 1 and not sql.startswith("COPY")]

    def writes_of(self, table: str) -> list[str]:
        return [sql for sql, _ in self.sent
                if sql.startswith((f"INSERT INTO {table} ", f"UPDATE {table} ", f"COPY {table}",
                                   f"COPY streamer_stage_{table}"))]


async def _load(url: str, events: list[Any], size: int) -> Any:
    endpoint = create_endpoint(EndpointURL.parse(url))
    await endpoint.open()
    try:
        for chunk in batches(events, size):
            await endpoint.write(chunk)
    finally:
        await endpoint.close()
    return endpoint


@pytest.mark.postgres
@pytest.mark.corpus
@pytest.mark.parametrize("size", [60, 5000])
async def test_no_table_is_written_one_row_per_statement(pg_db: str, golden: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    events = list(synthetic(golden, 3))
    batch_count = len(batches(events, size))
    recorder = Recorder(monkeypatch)
    endpoint = await _load(pg_db, events, size)
    monkeypatch.undo()
    assert endpoint.rejected == []
    assert recorder.per_row() == []
    for table in HOT_TABLES:  # an insert and an update per set of changed columns (job_instance: a few) per batch
        assert len(recorder.writes_of(table)) <= 4 * batch_count, (table, recorder.writes_of(table))
    if size == 5000:  # one batch: each table in one statement (COPY into staging, then one INSERT, for big ones)
        written = Counter(t for t in HOT_TABLES for _ in recorder.writes_of(t))
        assert {t: written[t] for t in ("rc_lfn", "rc_pfn", "rc_meta")} == {"rc_lfn": 1, "rc_pfn": 1, "rc_meta": 1}
        assert all(1 <= written[t] <= 2 for t in ("invocation", "integrity", "jobstate", "host")), written
    sqlite = tmp_path / "same.db"
    await _load(f"sqlite:///{sqlite}", events, size)
    diff = dbcompare.compare(await pg_snapshot(pg_db), dbcompare.sqlite_snapshot(str(sqlite)))
    assert not diff, dbcompare.format_diff(diff)


@pytest.mark.postgres
@pytest.mark.corpus
async def test_rows_equal_monitord_in_one_batch(pg_db: str, golden: Path) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    endpoint = await _load(pg_db, events, len(events))
    assert endpoint.rejected == []
    diff = dbcompare.compare(await pg_snapshot(pg_db),
                             dbcompare.sqlite_snapshot(str(golden / "hierarchical_wf_success.stampede.db")))
    assert not diff, dbcompare.format_diff(diff)


def test_a_batch_of_replica_events_is_one_statement_per_table() -> None:
    plan = Plan()
    for i in range(100):
        plan.rc_lfn[f"f{i}"] = None
        plan.rc_meta[(f"f{i}", "size")] = str(i)
        plan.rc_pfn[(f"f{i}", f"file:///d/f{i}", "local" if i % 2 else None)] = None
    before, after = pgbulk.replica_catalog(plan)
    assert [sql.split(" (")[0] for sql, _ in before + after] == [
        "INSERT INTO rc_lfn", "INSERT INTO rc_pfn", 'INSERT INTO rc_meta']
    sql, (lfns, keys, values) = after[1]
    assert lfns == [f"f{i}" for i in sorted(range(100), key=lambda i: repr(f"f{i}"))]
    assert keys == ["size"] * 100 and sorted(values, key=int) == [str(i) for i in range(100)]


def test_updates_are_one_statement_per_set_of_columns() -> None:
    changes = {i: {"exitcode": 0, "local_duration": 1.5} for i in range(50)}
    changes[7] = {"host_id": 3}
    statements = pgbulk.update("job_instance", changes)
    assert len(statements) == 2
    sql, args = statements[0]
    assert sql.startswith("UPDATE job_instance AS t SET exitcode = v.exitcode, local_duration = v.local_duration ")
    assert args == ([0] * 49, [1.5] * 49, [i for i in range(50) if i != 7])


@pytest.mark.postgres
@pytest.mark.corpus
async def test_replica_catalog_rows_are_locked_not_rewritten(pg_db: str, golden: Path) -> None:
    """Every batch naming a file locked its `rc_lfn` row by rewriting it (`DO UPDATE SET lfn = lfn`): a new row
    version and index entry per mention, which the `rc_pfn` and `rc_meta` joins then walk. Locking is enough."""
    events = list(synthetic(golden, 2))
    await _load(pg_db, events, 40)  # closing the endpoint's connections flushes their statistics
    await _load(pg_db, events, 40)  # everything again: conflicts only
    connection = await asyncpg.connect(pg_db)
    try:
        updated, rows = await connection.fetchrow(
            "SELECT n_tup_upd, (SELECT count(*) FROM rc_lfn) FROM pg_stat_user_tables WHERE relname = 'rc_lfn'")
    finally:
        await connection.close()
    assert rows > 0 and updated == 0
