"""MySQL / MariaDB endpoint against the machine's MariaDB: schema as Pegasus makes it, rows equal to
PostgreSQL's and monitord's for every corpus dir, idempotence, concurrent writers, errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from streamer.endpoints import create_endpoint
from streamer.endpoints.db.mysql import MySQLEndpoint, parse_target
from streamer.endpoints.db.schema.stampede import WIDENED
from streamer.util.urls import EndpointURL
from tests.support import dbcompare
from tests.support.dbstream import NAMES, golden_events, synthetic
from tests.endpoints.test_db import assert_same, golden_snapshot, load
from tests.endpoints.test_db_tools import _copy_submit_dir
from tests.monitor.test_replay_db import replay, without_total_memory
from tests.support.pghelp import pg_snapshot

import asyncmy

pytestmark = pytest.mark.mysql


async def _connect(server: str, database: str | None = None) -> Any:
    target = parse_target(EndpointURL.parse(f"{server}/{database or 'x'}"))
    kwargs: dict[str, Any] = dict(host=target.host, port=target.port, user=target.user, autocommit=True,
                                  init_command="SET SESSION sql_mode = 'ANSI_QUOTES,PIPES_AS_CONCAT'")
    if database:
        kwargs["database"] = database
    return await asyncmy.connect(**kwargs)


async def _query(server: str, database: str | None, sql: str) -> list[tuple]:
    conn = await _connect(server, database)
    try:
        async with conn.cursor() as cur:
            await cur.execute(sql)
            return [tuple(r) for r in await cur.fetchall()]
    finally:
        conn.close()


@pytest.fixture
async def mysql_db(mysql_server: str) -> AsyncIterator[str]:
    """A fresh database name per test (the endpoint creates it), dropped afterwards."""
    name = f"streamer_test_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{mysql_server}/{name}"
    finally:
        await _query(mysql_server, None, f'DROP DATABASE IF EXISTS "{name}"')


async def mysql_snapshot(url: str) -> dbcompare.Snapshot:
    server, database = url.rsplit("/", 1)
    conn = await _connect(server, database)
    try:
        out: dbcompare.Snapshot = {}
        async with conn.cursor() as cur:
            for table, sql in dbcompare.QUERIES.items():
                await cur.execute(sql)
                out[table] = dbcompare.normalize(tuple(r) for r in await cur.fetchall())
        return out
    finally:
        conn.close()


# ---------------------------------------------------------------- schema

def _sorted_enum(column_type: str) -> str:
    if not column_type.startswith("enum("):
        return column_type
    return "enum(" + ",".join(sorted(column_type[5:-1].split(","))) + ")"


async def _describe(server: str, database: str) -> dict[str, Any]:
    columns = await _query(server, database, (
        "SELECT table_name, column_name, column_type, is_nullable, extra FROM information_schema.columns "
        f"WHERE table_schema = '{database}' ORDER BY table_name, ordinal_position"))
    uniques = await _query(server, database, (
        "SELECT table_name, index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index) "
        f"FROM information_schema.statistics WHERE table_schema = '{database}' "
        "GROUP BY table_name, index_name, non_unique"))
    fks = await _query(server, database, (
        "SELECT k.table_name, k.column_name, k.referenced_table_name, k.referenced_column_name, r.delete_rule "
        "FROM information_schema.key_column_usage k JOIN information_schema.referential_constraints r "
        "ON r.constraint_schema = k.constraint_schema AND r.constraint_name = k.constraint_name "
        f"WHERE k.table_schema = '{database}' AND k.referenced_table_name IS NOT NULL"))
    engines = await _query(server, database, (
        "SELECT table_name, engine, table_collation FROM information_schema.tables "
        f"WHERE table_schema = '{database}'"))
    # MySQL names the implicit index of a foreign key after its column; Pegasus's CREATE TABLE gets those,
    # streamer's explicit KEYs are the unique and _COL indexes only: compare unique indexes and named ones
    named = sorted(u for u in uniques if u[2] == 0 or u[1].endswith("_COL") or u[1] == "PRIMARY")
    # Pegasus builds some enumerations from Python sets: their label order changes from run to run
    columns = [(t, c, _sorted_enum(k), n, e) for t, c, k, n, e in columns]
    return {"columns": sorted(columns), "indexes": named, "fks": sorted(fks), "engines": sorted(engines)}


async def test_schema_is_pegasus_own(mysql_server: str) -> None:
    ours = f"streamer_test_{uuid.uuid4().hex[:12]}"
    theirs = f"streamer_test_{uuid.uuid4().hex[:12]}"
    try:
        endpoint = create_endpoint(EndpointURL.parse(f"{mysql_server}/{ours}"))
        await endpoint.open()
        await endpoint.close()
        await _query(mysql_server, None, f'CREATE DATABASE "{theirs}"')
        made = subprocess.run([sys.executable, "-m", "Pegasus.cli.pegasus-db-admin", "create",
                               f"{mysql_server}/{theirs}"], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        a, b = await _describe(mysql_server, ours), await _describe(mysql_server, theirs)
        assert len(a["columns"]) > 150
        # wider than Pegasus's INTEGER on purpose (docs/guide/databases.md): BIGINT where Pegasus's own schema is too narrow
        assert sorted((t, c, k) for t, c, k, _, _ in a["columns"] if (t, c) in WIDENED) == \
            [("host", "total_memory", "bigint(20)"), ("invocation", "maxrss", "bigint(20)")]
        for side in (a, b):
            side["columns"] = [(t, c, None if (t, c) in WIDENED else k, n, e) for t, c, k, n, e in side["columns"]]
        for key in ("columns", "indexes", "fks"):
            assert a[key] == b[key], key
        assert {(t, e) for t, e, _ in a["engines"]} == {(t, e) for t, e, _ in b["engines"]}
        assert {c.split("_")[0] for _, _, c in a["engines"]} == {"utf8mb4"}
        # and Pegasus's tool accepts streamer's database as current
        check = subprocess.run([sys.executable, "-m", "Pegasus.cli.pegasus-db-admin", "check",
                                f"{mysql_server}/{ours}"], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    finally:
        for name in (ours, theirs):
            await _query(mysql_server, None, f'DROP DATABASE IF EXISTS "{name}"')


# ---------------------------------------------------------------- rows

@pytest.mark.corpus
@pytest.mark.postgres
@pytest.mark.parametrize("name", NAMES)
async def test_replay_rows_equal_postgresql_and_monitord(tmp_path: Path, corpus: Path, golden: Path, pg_db: str,  # noqa: F811
                                                         mysql_db: str, name: str) -> None:
    submit = _copy_submit_dir(corpus, name, tmp_path, monitord_state=False)
    replay(submit, mysql_db, pg_db)
    maria = await mysql_snapshot(mysql_db)
    assert_same(maria, await pg_snapshot(pg_db))
    assert_same(without_total_memory(maria), golden_snapshot(golden, name))
    assert dbcompare.counts(maria)["jobstate"] > 0


@pytest.mark.corpus
async def test_double_load_and_resent_batches_change_nothing(golden: Path, mysql_db: str) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    await load(mysql_db, events, 37)
    once = await mysql_snapshot(mysql_db)
    await load(mysql_db, events, 50)  # a new writer, every event again (a restart that re-sends)
    endpoint = await load(mysql_db, events[len(events) // 2:], 11)
    assert endpoint.rejected == []
    assert_same(await mysql_snapshot(mysql_db), once)
    assert_same(once, golden_snapshot(golden, "hierarchical_wf_success"))


@pytest.mark.corpus
async def test_replay_option_replaces_the_workflow(golden: Path, mysql_db: str) -> None:
    events = golden_events(golden, "process_wf_success")
    await load(mysql_db, events, 100)
    first = await mysql_snapshot(mysql_db)
    await _query(*mysql_db.rsplit("/", 1), "UPDATE job SET max_retries = 99")
    await load(mysql_db, events, 100, replay=True)
    assert_same(await mysql_snapshot(mysql_db), first)


@pytest.mark.corpus
def test_concurrent_writers_share_one_database(tmp_path: Path, golden: Path, mysql_db: str) -> None:
    """Four processes load different workflows at once; the rows are those of one writer loading all."""
    events = list(synthetic(golden, 8))
    by_wf: dict[str, list] = {}
    for event in events:
        by_wf.setdefault(event.fields.get("root.xwf.id") or event.fields.get("xwf.id"), []).append(event)
    from streamer.events import bp

    files = []
    groups = [list(by_wf.values())[i::4] for i in range(4)]
    for i, group in enumerate(groups):
        path = tmp_path / f"part{i}.bp"
        path.write_text("".join(bp.format_event(e) + "\n" for wf in group for e in wf))
        files.append(path)
    procs = [subprocess.Popen([sys.executable, "-m", "streamer", "load", str(p), "--dest",
                               f"{mysql_db}?batch=300", "-q"], stderr=subprocess.PIPE, text=True) for p in files]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    together = asyncio.run(mysql_snapshot(mysql_db))
    single = str(tmp_path / "single.db")
    asyncio.run(load(f"sqlite:///{single}", events, 500))
    expected = dbcompare.sqlite_snapshot(single)
    # rc_meta is keyed by file name only (shared by every workflow): its value is the last writer's
    assert {r[:2] for r in together.pop("rc_meta")} == {r[:2] for r in expected.pop("rc_meta")}
    assert_same(together, expected)
    assert dbcompare.counts(together)["workflow"] == sum(1 for e in events if e.name == "stampede.wf.plan") > 8


# ---------------------------------------------------------------- errors

def test_bad_password_is_masked_and_clear(tmp_path: Path, mysql_server: str) -> None:
    url = mysql_server.replace("mysql://root@", "mysql://nosuchuser:s3cret@") + "/whatever"
    log = tmp_path / "x.bp"
    log.write_text("ts=2020-01-01T00:00:00Z event=stampede.xwf.meta level=Info key=k value=v\n")
    run = subprocess.run([sys.executable, "-m", "streamer", "load", str(log), "--dest", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "s3cret" not in run.stderr and "nosuchuser:***@" in run.stderr
    assert "Access denied" in run.stderr and "Traceback" not in run.stderr


def test_url_forms() -> None:
    for url in ("mysql://u:p@db.example:3307/stampede", "mariadb://u:p@db.example:3307/stampede",
                "mysql+pymysql://u:p@db.example:3307/stampede"):
        endpoint = create_endpoint(EndpointURL.parse(url))
        assert isinstance(endpoint, MySQLEndpoint)
        t = endpoint.target
        assert (t.host, t.port, t.user, t.password, t.database) == ("db.example", 3307, "u", "p", "stampede")
        assert "p@" not in endpoint.name
    with pytest.raises(Exception, match="give the database"):
        create_endpoint(EndpointURL.parse("mysql://u@host/"))


@pytest.mark.corpus
async def test_connection_killed_between_batches_is_retried(golden: Path, mysql_db: str) -> None:
    """The server drops the endpoint's connection (KILL): it reconnects, rewrites the batch, and the
    rows are those of one clean load."""
    events = golden_events(golden, "process_wf_failure")
    endpoint = create_endpoint(EndpointURL.parse(mysql_db))
    await endpoint.open()
    server, database = mysql_db.rsplit("/", 1)
    chunks = [events[i:i + 25] for i in range(0, len(events), 25)]
    try:
        for number, chunk in enumerate(chunks):
            if number % 2 == 1:  # the connection dies while idle between batches
                async with endpoint._conn.cursor() as cur:
                    await cur.execute("SELECT CONNECTION_ID()")
                    (conn_id,) = await cur.fetchone()
                await _query(server, None, f"KILL CONNECTION {conn_id}")
            await endpoint.write(chunk)
    finally:
        await endpoint.close()
    assert endpoint.stats.retries >= len(chunks) // 2
    assert endpoint.rejected == []
    assert_same(await mysql_snapshot(mysql_db), golden_snapshot(golden, "process_wf_failure"))


@pytest.mark.corpus
@pytest.mark.parametrize("resume", ["from-start", "from-checkpoint"])
async def test_kill9_then_resume_equals_clean_load(mysql_db: str, tmp_path: Path, golden: Path, python: str,
                                                    resume: str) -> None:
    from tests.endpoints.test_db import COPIES, KILL_AFTER, SIZE, _clean_sqlite, _run_and_kill

    checkpoint = tmp_path / "ckpt" if resume == "from-checkpoint" else None
    await asyncio.to_thread(_run_and_kill, python, mysql_db, golden, COPIES, SIZE, KILL_AFTER, checkpoint)
    clean = await asyncio.to_thread(_clean_sqlite, tmp_path, golden, COPIES)
    assert_same(await mysql_snapshot(mysql_db), clean)


# ---------------------------------------------------------------- against monitord itself

def _statistics(submit: Path, url: str) -> dict[str, str]:
    props = submit.parent / f"{submit.name}.properties"
    props.write_text(f"pegasus.monitord.output = {url}\n")
    run = subprocess.run([sys.executable, "-m", "Pegasus.cli.pegasus-statistics", "--conf", str(props), "-s", "all",
                          str(submit)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return {p.name: p.read_text() for p in sorted((submit / "statistics").iterdir())}


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["process_wf_failure", "hierarchical_wf_success"])
async def test_same_rows_and_statistics_as_monitord_into_mariadb(tmp_path: Path, corpus: Path, mysql_server: str,
                                                                 name: str) -> None:
    """The real pegasus-monitord (pegasus-wms 5.1.3) and streamer, each replaying the corpus dir into its own
    MariaDB database: the same rows, and pegasus-statistics prints the same on both."""
    import os

    theirs_db, ours_db = (f"streamer_test_{uuid.uuid4().hex[:12]}" for _ in range(2))
    theirs_url, ours_url = f"{mysql_server}/{theirs_db}", f"{mysql_server}/{ours_db}"
    try:
        await _query(mysql_server, None, f'CREATE DATABASE "{theirs_db}"')
        theirs = _copy_submit_dir(corpus, name, tmp_path / "monitord", monitord_state=False)
        dagman_out = next(theirs.glob("*.dagman.out")).name
        run = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "Pegasus.cli.pegasus-monitord", "-r",
                                                       "--dest", theirs_url, dagman_out], cwd=theirs,
                                      env={**os.environ, "TZ": "UTC"}, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        ours = _copy_submit_dir(corpus, name, tmp_path / "streamer", monitord_state=False)
        await asyncio.to_thread(replay, ours, ours_url)
        assert_same(without_total_memory(await mysql_snapshot(ours_url)), await mysql_snapshot(theirs_url))
        assert await asyncio.to_thread(_statistics, ours, ours_url) == \
            await asyncio.to_thread(_statistics, theirs, theirs_url)
    finally:
        for db in (theirs_db, ours_db):
            await _query(mysql_server, None, f'DROP DATABASE IF EXISTS "{db}"')


def test_replica_catalog_and_updates_are_multi_row_statements() -> None:
    """asyncmy's executemany sends an INSERT ... SELECT or an UPDATE once per row: each is one statement here."""
    from streamer.endpoints.db.mysql import statements
    from streamer.endpoints.db.plan import Plan

    plan = Plan()
    for i in range(100):
        plan.rc_lfn[f"f{i}"] = None
        plan.rc_meta[(f"f{i}", "size")] = str(i)
        plan.rc_pfn[(f"f{i}", f"file:///d/f{i}", None)] = None
        plan.wf_files[(1, 2, f"f{i}")] = "input"
        plan.updates.setdefault("job_instance", {})[i + 1] = {"exitcode": 0, "local_duration": 1.5}
    calls = {sql.split(" ")[0] + " " + sql.split(" ")[2 if sql.startswith("INSERT") else 1]: len(rows)
             for sql, rows in statements(plan)}
    assert calls == {"INSERT rc_lfn": 100, "UPDATE job_instance": 1, "INSERT rc_pfn": 1, "INSERT rc_meta": 1,
                     "INSERT workflow_files": 1}  # rc_lfn: INSERT ... VALUES, which asyncmy sends as one statement
