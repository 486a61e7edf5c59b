"""Chimbuko provenance records in PostgreSQL and SQLite: rows equal the records, beside the Stampede schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from streamer.endpoints import create_endpoint
from streamer.endpoints.db.schema import provenance as provenance_schema
from streamer.events import Event, bp, chimbuko
from streamer.synth.provenance import generate
from streamer.util.urls import EndpointURL

import asyncpg

COLLECTIONS = generate(ranks=4, steps=5, per_step=6, seed=5, algorithm="sstd")
assert len(COLLECTIONS["normalexecs"]) >= provenance_schema.COPY_THRESHOLD  # the COPY path is taken
ALL = [(c, r) for c, records in COLLECTIONS.items() for r in records]
EVENTS = [chimbuko.event_from_record(r, collection=c) for c, r in ALL]
STAMPEDE = [bp.parse_line(line) for line in (
    "ts=2023-03-04T06:23:33.000000Z event=stampede.wf.plan level=Info xwf.id=ea17e8ac-02ac-4909-b5e3-16e367392556 "
    "submit.hostname=host submit.dir=/tmp/x planner.arguments=- user=u grid_dn=null "
    "planner.version=5.1.3 dag.file.name=x.dag dax.label=x dax.index=0 dax.version=1.1 dax.file=/tmp/x.yml",
)]


def expected_rows() -> dict[str, dict[str, dict[str, Any]]]:
    """table -> event id -> the record without null values (a NULL column is a null or absent key)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for event, (_, record) in zip(EVENTS, ALL):
        table = provenance_schema.BY_EVENT[event.name].collection
        out.setdefault(table, {})[event.id] = {k: v for k, v in record.items() if v is not None}
    return out


async def load(url: str, events: list[Event], size: int = 40) -> Any:
    endpoint = create_endpoint(EndpointURL.parse(url))
    await endpoint.open()
    try:
        for start in range(0, len(events), size):
            await endpoint.write(events[start:start + size])
    finally:
        await endpoint.close()
    return endpoint


def test_default_filters_take_provenance_records() -> None:
    from streamer.endpoints.db.postgres import PostgresEndpoint
    from streamer.endpoints.db.sqlite import SQLiteEndpoint

    assert PostgresEndpoint.default_events == SQLiteEndpoint.default_events == "stampede.*,chimbuko.*"


def test_table_layout() -> None:
    sql = provenance_schema.create_sql("postgresql")
    assert sql[0] == "CREATE SCHEMA IF NOT EXISTS chimbuko"
    assert 'CREATE INDEX IF NOT EXISTS chimbuko_anomalies_score ON chimbuko."anomalies" ("outlier_score" DESC)' in sql
    assert [t.collection for t in provenance_schema.TABLES] == list(chimbuko.COLLECTIONS)
    assert all(s.startswith("CREATE") and "chimbuko_" in s for s in provenance_schema.create_sql("sqlite"))


# ---------------------------------------------------------------- SQLite

def sqlite_rows(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for table in provenance_schema.TABLES:
        for row in conn.execute(f"SELECT * FROM chimbuko_{table.collection}"):
            out.setdefault(table.collection, {})[row["event_id"]] = provenance_schema.record_of_row(table, dict(row))
    conn.close()
    return out


async def test_sqlite_rows_equal_the_records_and_reloads_add_nothing(tmp_path: Path) -> None:
    db = tmp_path / "wf.stampede.db"
    await load(f"sqlite:///{db}", STAMPEDE + EVENTS)
    assert sqlite_rows(db) == expected_rows()
    await load(f"sqlite:///{db}", EVENTS[::-1], size=17)  # a re-read: every record a duplicate
    assert sqlite_rows(db) == expected_rows()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM workflow").fetchone() == (1,)  # the Stampede schema beside it
    top = conn.execute("SELECT func, rid, io_step FROM chimbuko_anomalies ORDER BY outlier_score DESC LIMIT 1").fetchone()
    best = max(COLLECTIONS["anomalies"], key=lambda r: r["outlier_score"])
    assert top == (best["func"], best["rid"], best["io_step"])
    plan = " ".join(r[-1] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM chimbuko_normalexecs WHERE func = 'main'"))
    assert "chimbuko_normalexecs_func" in plan


async def test_sqlite_global_statistics_are_replaced_by_newer_records(tmp_path: Path) -> None:
    db = tmp_path / "prov.db"
    await load(f"sqlite:///{db}", EVENTS)
    first = COLLECTIONS["func_stats"][0]
    newer = {**first, "runtime_profile": {**first["runtime_profile"], "note": "rerun"}, "__id": 77}
    await load(f"sqlite:///{db}", [chimbuko.event_from_record(newer, collection="func_stats")])
    event_id = chimbuko.event_from_record(first, collection="func_stats").id
    assert sqlite_rows(db)["func_stats"][event_id] == {k: v for k, v in newer.items() if v is not None}


async def test_unknown_keys_are_kept_in_extra(tmp_path: Path) -> None:
    db = tmp_path / "prov.db"
    record = {**COLLECTIONS["metadata"][0], "source": {"plugin": "tau"}, "note": "x"}
    event = chimbuko.event_from_record(record, collection="metadata")
    await load(f"sqlite:///{db}", [event])
    assert sqlite_rows(db)["metadata"][event.id] == record


# ---------------------------------------------------------------- PostgreSQL



async def pg_rows(dsn: str) -> dict[str, dict[str, dict[str, Any]]]:
    conn = await asyncpg.connect(dsn)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for table in provenance_schema.TABLES:
            for row in await conn.fetch(f'SELECT * FROM chimbuko."{table.collection}"'):
                out.setdefault(table.collection, {})[row["event_id"]] = \
                    provenance_schema.record_of_row(table, dict(row))
    finally:
        await conn.close()
    return out


@pytest.mark.postgres
@pytest.mark.parametrize("size", [40, 5000])  # executemany and COPY paths
async def test_postgres_rows_equal_the_records_beside_the_stampede_schema(pg_db: str, size: int) -> None:
    await load(pg_db, STAMPEDE + EVENTS, size=size)
    assert await pg_rows(pg_db) == expected_rows()
    await load(pg_db, EVENTS, size=size)  # re-read: nothing added
    assert await pg_rows(pg_db) == expected_rows()
    conn = await asyncpg.connect(pg_db)
    try:
        public = {r[0] for r in await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
        assert "workflow" in public and not any("chimbuko" in t or t in chimbuko.COLLECTIONS for t in public)
        assert await conn.fetchval("SELECT COUNT(*) FROM workflow") == 1
        ours = {r[0] for r in await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'chimbuko'")}
        assert ours == set(chimbuko.COLLECTIONS)
        indexes = {r[0] for r in await conn.fetch("SELECT indexname FROM pg_indexes WHERE schemaname = 'chimbuko'")}
        assert {"chimbuko_anomalies_func", "chimbuko_anomalies_rank_step", "chimbuko_anomalies_entry",
                "chimbuko_anomalies_score", "chimbuko_normalexecs_fid", "chimbuko_func_stats_fname"} <= indexes
        stack = await conn.fetchval(
            "SELECT call_stack->0->>'func' FROM chimbuko.anomalies ORDER BY outlier_score DESC LIMIT 1")
        best = max(COLLECTIONS["anomalies"], key=lambda r: r["outlier_score"])
        assert stack == best["call_stack"][0]["func"]
    finally:
        await conn.close()


# ---------------------------------------------------------------- MySQL / MariaDB (issue 26.20)

@pytest.fixture
async def mysql_url(mysql_server: str) -> Any:
    from tests.endpoints.test_mysql import _query

    name = f"streamer_test_{__import__('uuid').uuid4().hex[:12]}"
    try:
        yield f"{mysql_server}/{name}"
    finally:
        await _query(mysql_server, None, f'DROP DATABASE IF EXISTS "{name}"')


async def mysql_rows(url: str) -> dict[str, dict[str, dict[str, Any]]]:
    from tests.endpoints.test_mysql import _query

    server, database = url.rsplit("/", 1)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for table in provenance_schema.TABLES:
        names = ("event_id", *(c for c, _, _ in table.columns), "extra")
        quoted = ", ".join(f'"{n}"' for n in names)
        for row in await _query(server, database, f'SELECT {quoted} FROM "chimbuko_{table.collection}"'):
            record = dict(zip(names, row))
            out.setdefault(table.collection, {})[record["event_id"]] = provenance_schema.record_of_row(table, record)
    return out


@pytest.mark.mysql
@pytest.mark.parametrize("size", [40, 5000])
async def test_mysql_rows_equal_the_records_beside_the_stampede_schema(mysql_url: str, size: int) -> None:
    from streamer.endpoints.db.mysql import MySQLEndpoint
    from tests.endpoints.test_mysql import _query

    assert MySQLEndpoint.default_events == "stampede.*,chimbuko.*"  # routed there by default, as to the others
    endpoint = await load(mysql_url, STAMPEDE + EVENTS, size=size)
    assert endpoint.stats.events == len(STAMPEDE + EVENTS)  # what the summary says was written
    assert await mysql_rows(mysql_url) == expected_rows()
    await load(mysql_url, EVENTS[::-1], size=17)  # re-read: nothing added
    assert await mysql_rows(mysql_url) == expected_rows()
    # global statistics: a newer record of the same identity replaces the row
    first = COLLECTIONS["func_stats"][0]
    newer = {**first, "runtime_profile": {**first["runtime_profile"], "note": "rerun"}, "__id": 77}
    event_id = chimbuko.event_from_record(first, collection="func_stats").id
    await load(mysql_url, [chimbuko.event_from_record(newer, collection="func_stats")])
    assert (await mysql_rows(mysql_url))["func_stats"][event_id] == {k: v for k, v in newer.items() if v is not None}
    server, database = mysql_url.rsplit("/", 1)
    tables = {r[0] for r in await _query(server, database, "SHOW TABLES")}
    assert {f"chimbuko_{c}" for c in chimbuko.COLLECTIONS} <= tables and "workflow" in tables
    assert await _query(server, database, "SELECT COUNT(*) FROM workflow") == [(1,)]
    indexes = {r[2] for r in await _query(server, database, 'SHOW INDEX FROM "chimbuko_anomalies"')}
    assert {"chimbuko_anomalies_func", "chimbuko_anomalies_rank_step", "chimbuko_anomalies_score"} <= indexes


@pytest.mark.mysql
def test_mysql_load_of_records_keeps_them_all(tmp_path: Path, mysql_url: str, python: str) -> None:
    """`streamer load records.jsonl --dest mysql://…` writes every record, as SQLite does (not `0 -> … ok`)."""
    import asyncio
    import subprocess

    from streamer.events import jsonenc

    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join(jsonenc.dumps(e) + b"\n" for e in EVENTS[:10]))
    run = subprocess.run([python, "-m", "streamer", "load", str(path), "--dest", mysql_url, "--dest",
                          f"sqlite:///{tmp_path}/x.db"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    got = asyncio.run(mysql_rows(mysql_url))
    assert sum(len(rows) for rows in got.values()) == 10
    assert got == sqlite_rows(tmp_path / "x.db")
