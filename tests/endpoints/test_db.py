"""Stampede database endpoints: golden equality, idempotence, crashes, bad input.

Events come from the golden monitord streams (`../shared/golden/NAME.bp`);
each database is compared with monitord's own `NAME.stampede.db` table by
table through natural keys (`dbcompare`), for SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

from streamer.endpoints import EndpointError, create_endpoint
from streamer.endpoints.db.sqlite import default_path, sqlite_path
from streamer.events import Event
from streamer.util.urls import EndpointURL
from tests.support import dbcompare
from tests.support.dbstream import NAMES, batches, golden_events, synthetic
from tests.support.pghelp import pg_snapshot

import asyncpg

TESTS = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- helpers

async def load(url: str, events: Sequence[Event], size: int = 50, **options: Any) -> Any:
    endpoint = create_endpoint(EndpointURL.parse(url), options or None)
    await endpoint.open()
    try:
        for chunk in batches(list(events), size):
            await endpoint.write(chunk)
    finally:
        await endpoint.close()
    return endpoint


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"  # path is absolute: four slashes


def assert_same(actual: dbcompare.Snapshot, expected: dbcompare.Snapshot) -> None:
    diff = dbcompare.compare(actual, expected)
    assert not diff, "databases differ:\n" + dbcompare.format_diff(diff)


def golden_snapshot(golden: Path, name: str) -> dbcompare.Snapshot:
    return dbcompare.sqlite_snapshot(str(golden / f"{name}.stampede.db"))




# ---------------------------------------------------------------- schema

def test_sqlite_schema_matches_monitord(tmp_path: Path, golden: Path) -> None:
    """Tables, columns (type, NOT NULL, PK), indexes and foreign keys as monitord's."""
    asyncio.run(load(sqlite_url(tmp_path / "s.db"), []))

    def describe(path: Path) -> dict[str, Any]:
        conn = sqlite3.connect(path)
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name != 'sqlite_sequence' ORDER BY name")]
        out = {t: ([r[1:] for r in conn.execute(f'PRAGMA table_info("{t}")')],
                   sorted(r[2:] for r in conn.execute(f'PRAGMA foreign_key_list("{t}")')),
                   sorted(r[1] for r in conn.execute(f'PRAGMA index_list("{t}")')))
               for t in tables}
        out["dbversion rows"] = conn.execute("SELECT version_number, version FROM dbversion").fetchall()
        conn.close()
        return out

    assert describe(tmp_path / "s.db") == describe(golden / "process_wf_success.stampede.db")


def test_sqlite_endpoints_share_a_few_writer_threads_one_call_at_a_time(tmp_path: Path, golden: Path) -> None:
    """Every sqlite3 call runs off the loop, in the process's few shared writer threads (serve has a DB
    per workflow: not a thread each); each endpoint's calls never overlap and keep their order, so
    twelve DBs written at once each equal monitord's."""
    import threading
    import time

    from streamer.endpoints.db.sqlite import WRITER_THREADS

    count = 12
    threads: set[str] = set()
    peak_threads = 0
    overlaps: list[str] = []

    async def one(i: int) -> None:
        nonlocal peak_threads
        endpoint = create_endpoint(EndpointURL.parse(sqlite_url(tmp_path / f"t{i}.db")))
        await endpoint.open()
        inside = [0]

        def traced(_sql: str) -> None:
            threads.add(threading.current_thread().name)
            inside[0] += 1
            if inside[0] > 1:
                overlaps.append(f"endpoint {i}")
            time.sleep(0.0005)  # widen the window in which a second call of this endpoint would overlap
            inside[0] -= 1

        await endpoint._run(endpoint._conn.set_trace_callback, traced)
        for chunk in batches(golden_events(golden, "process_wf_success"), 10):
            await endpoint.write(chunk)
            peak_threads = max(peak_threads, sum(t.name.startswith("streamer-sqlite")
                                                 for t in threading.enumerate()))
        await endpoint.close()

    async def run() -> None:
        await asyncio.gather(*(one(i) for i in range(count)))

    asyncio.run(run())
    assert threads and all(name.startswith("streamer-sqlite") for name in threads), threads
    assert 1 <= len(threads) <= WRITER_THREADS < count
    assert peak_threads <= WRITER_THREADS
    assert overlaps == []
    expected = golden_snapshot(golden, "process_wf_success")
    for i in range(count):
        assert_same(dbcompare.sqlite_snapshot(str(tmp_path / f"t{i}.db")), expected)


def test_sqlite_url_forms(tmp_path: Path) -> None:
    assert sqlite_path(EndpointURL.parse("sqlite:///rel/wf.stampede.db")) == "rel/wf.stampede.db"
    assert sqlite_path(EndpointURL.parse("sqlite:////abs/wf.stampede.db?replay=true")) == "/abs/wf.stampede.db"
    with pytest.raises(EndpointError, match="expected sqlite:///relative.db"):
        sqlite_path(EndpointURL.parse("sqlite://host/x.db"))
    assert default_path("/run/0001/diamond-0.dag") == Path("/run/0001/diamond-0.stampede.db")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        asyncio.run(load("sqlite:///rel.db", []))
        (tmp_path / "sub").mkdir()
        asyncio.run(load("sqlite:///sub/rel.db", []))
    finally:
        os.chdir(cwd)
    assert (tmp_path / "rel.db").is_file() and (tmp_path / "sub" / "rel.db").is_file()


def test_sqlite_three_slashes_to_a_missing_directory_is_refused(tmp_path: Path) -> None:
    """`cd /tmp && streamer load x.bp --dest sqlite:///tmp/x.db` meant /tmp/x.db: it must not create
    /tmp/tmp/x.db (and every directory on the way) and say ok; like file://, a missing directory is refused,
    naming the absolute path it would write and the four-slash form."""
    source = tmp_path / "x.bp"
    source.write_text("ts=2023-11-14T22:13:01.000000Z event=stampede.xwf.start level=Info "
                      "xwf.id=1e2a3b4c-0000-4000-8000-000000000001 restart_count=0\n")
    done = subprocess.run([sys.executable, "-m", "streamer", "load", "x.bp", "--dest", "sqlite:///tmp/x.db"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0, done.stderr
    assert not (tmp_path / "tmp").exists()
    assert f"{tmp_path}/tmp/x.db" in done.stderr, done.stderr
    assert "sqlite:////tmp/x.db" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    with pytest.raises(EndpointError, match="does not exist"):
        asyncio.run(load(f"sqlite:///{tmp_path}/no/such/dir/x.db", []))
    assert not (tmp_path / "no").exists()


# ---------------------------------------------------------------- golden equality

@pytest.mark.corpus
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [1, 40, 100000])
def test_sqlite_equals_monitord(tmp_path: Path, golden: Path, name: str, size: int) -> None:
    db = tmp_path / f"{name}.stampede.db"
    endpoint = asyncio.run(load(sqlite_url(db), golden_events(golden, name), size))
    assert endpoint.rejected == []
    assert_same(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, name))


@pytest.mark.corpus
@pytest.mark.postgres
@pytest.mark.parametrize("name", NAMES)
async def test_postgres_equals_monitord(pg_db: str, golden: Path, name: str) -> None:
    endpoint = await load(pg_db, golden_events(golden, name), 40)
    assert endpoint.rejected == []
    assert_same(await pg_snapshot(pg_db), golden_snapshot(golden, name))


def test_compare_reports_differences(tmp_path: Path, golden: Path) -> None:
    """The comparison itself can fail, and says where."""
    db = tmp_path / "x.db"
    asyncio.run(load(sqlite_url(db), golden_events(golden, "process_wf_success")))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE job_instance SET exitcode = 7 WHERE job_submit_seq = 2")
    conn.execute("DELETE FROM jobstate WHERE state = 'EXECUTE' AND jobstate_submit_seq = 2 AND job_instance_id = 1")
    conn.commit()
    conn.close()
    diff = dbcompare.compare(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "process_wf_success"))
    assert sorted(diff) == ["job_instance", "jobstate"]
    assert [len(diff["job_instance"][0]), len(diff["job_instance"][1])] == [1, 1]
    assert diff["job_instance"][0][0][-1] == 7 and diff["job_instance"][1][0][-1] == 0
    assert diff["jobstate"][0] == [] and len(diff["jobstate"][1]) == 1
    text = dbcompare.format_diff(diff)
    assert "table jobstate: 0 unexpected row(s), 1 missing row(s)" in text
    assert "'EXECUTE'" in text


# ---------------------------------------------------------------- idempotence and replay

@pytest.mark.corpus
def test_sqlite_double_load_changes_nothing(tmp_path: Path, golden: Path) -> None:
    db = tmp_path / "h.db"
    events = golden_events(golden, "hierarchical_wf_success")
    asyncio.run(load(sqlite_url(db), events, 30))
    asyncio.run(load(sqlite_url(db), events, 17))  # another process, other batch boundaries

    async def twice_in_one_endpoint() -> None:
        endpoint = create_endpoint(EndpointURL.parse(sqlite_url(db)))
        await endpoint.open()
        for chunk in batches(events, 25) + batches(events, 64):
            await endpoint.write(chunk)
        await endpoint.close()

    asyncio.run(twice_in_one_endpoint())
    assert_same(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "hierarchical_wf_success"))
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM dbversion").fetchone()[0] == 1
    conn.close()


@pytest.mark.corpus
@pytest.mark.postgres
async def test_postgres_double_load_changes_nothing(pg_db: str, golden: Path) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    await load(pg_db, events, 30)
    await load(pg_db, events, 11)
    assert_same(await pg_snapshot(pg_db), golden_snapshot(golden, "hierarchical_wf_success"))


@pytest.mark.corpus
@pytest.mark.postgres
async def test_postgres_double_load_large_batches(pg_db: str, tmp_path: Path, golden: Path) -> None:
    """Re-sent batches big enough to go through COPY (direct and staged) change nothing either."""
    events = list(synthetic(golden, 8))
    await load(pg_db, events, 2000)
    await load(pg_db, events[:3000], 700)  # another process re-sends a prefix
    endpoint = create_endpoint(EndpointURL.parse(pg_db))
    await endpoint.open()
    for chunk in batches(events, 1500) + batches(events, 2500):  # the same process twice
        await endpoint.write(chunk)
    await endpoint.close()
    clean = await asyncio.to_thread(_clean_sqlite, tmp_path, golden, 8)
    assert_same(await pg_snapshot(pg_db), clean)


@pytest.mark.corpus
def test_sqlite_two_writers_interleaved(tmp_path: Path, golden: Path) -> None:
    """Two endpoints on one file (different workflows), batches interleaved: no id collides."""
    events = list(synthetic(golden, 2))
    half = len(events) // 2
    db = tmp_path / "two.db"

    async def run() -> None:
        a, b = create_endpoint(EndpointURL.parse(sqlite_url(db))), create_endpoint(EndpointURL.parse(sqlite_url(db)))
        await a.open()
        await b.open()
        for chunk_a, chunk_b in zip(batches(events[:half], 40), batches(events[half:], 40)):
            await a.write(chunk_a)
            await b.write(chunk_b)
        await a.close()
        await b.close()

    asyncio.run(run())
    assert_same(dbcompare.sqlite_snapshot(str(db)), _clean_sqlite(tmp_path, golden, 2))


def _tamper(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE job SET executable = 'tampered'")
    conn.execute("INSERT INTO workflow_meta (wf_id, key, value) SELECT wf_id, 'stale', 'x' FROM workflow")
    conn.commit()
    conn.close()


@pytest.mark.corpus
def test_sqlite_replay_replaces_workflow_and_subworkflows(tmp_path: Path, golden: Path) -> None:
    db = tmp_path / "r.db"
    events = golden_events(golden, "hierarchical_wf_success")
    asyncio.run(load(sqlite_url(db), events, 50))
    _tamper(db)  # rows only a delete-and-reload can restore, in the root and the sub-workflow
    asyncio.run(load(sqlite_url(db) + "?replay=true", events, 50))
    assert_same(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "hierarchical_wf_success"))


@pytest.mark.corpus
def test_sqlite_append_keeps_existing_rows(tmp_path: Path, golden: Path) -> None:
    db = tmp_path / "a.db"
    events = golden_events(golden, "hierarchical_wf_success")
    asyncio.run(load(sqlite_url(db), events, 50))
    _tamper(db)
    asyncio.run(load(sqlite_url(db), events, 50, replay=False))
    diff = dbcompare.compare(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "hierarchical_wf_success"))
    assert sorted(diff) == ["job", "workflow_meta"]
    assert len(diff["job"][0]) == 28 and len(diff["workflow_meta"][0]) == 2


@pytest.mark.corpus
@pytest.mark.postgres
async def test_postgres_replay_replaces_workflow(pg_db: str, golden: Path) -> None:
    events = golden_events(golden, "hierarchical_wf_success")
    await load(pg_db, events, 50)
    conn = await asyncpg.connect(pg_db)
    await conn.execute("UPDATE job SET executable = 'tampered'")
    await conn.close()
    await load(pg_db, events, 50, replay="true")
    assert_same(await pg_snapshot(pg_db), golden_snapshot(golden, "hierarchical_wf_success"))


# ---------------------------------------------------------------- foreign schemas

def test_sqlite_foreign_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE workflow (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(EndpointError) as info:
        asyncio.run(load(sqlite_url(db), []))
    message = str(info.value)
    assert "not a Stampede schema version 14 database" in message
    assert "table workflow: missing columns wf_id, wf_uuid" in message
    assert "unknown columns id, name" in message


def test_sqlite_other_schema_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    asyncio.run(load(sqlite_url(db), []))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE dbversion SET version_number = 13, version = '13'")
    conn.commit()
    conn.close()
    with pytest.raises(EndpointError, match=r"Stampede schema version 13 found, streamer writes version 14"):
        asyncio.run(load(sqlite_url(db), []))


def test_schema_check_explains_partial_databases() -> None:
    from streamer.endpoints.db.schema import stampede as schema

    workflow_cols = list(schema.BY_NAME["workflow"].column_names)
    with pytest.raises(schema.SchemaMismatch, match="Stampede tables without a dbversion table: workflow"):
        schema.check({"workflow": workflow_cols}, None)
    with pytest.raises(schema.SchemaMismatch, match="table workflow: columns in another order"):
        schema.check({"workflow": workflow_cols[::-1]}, 14)
    everything = {t.name: list(t.column_names) for t in schema.TABLES}
    assert schema.check(everything, 14) == []
    assert schema.check({"unrelated": ["x"]}, None) == [t.name for t in schema.TABLES]
    partial = {k: v for k, v in everything.items() if k not in ("tag", "trigger")}
    assert schema.check(partial, 14) == ["trigger", "tag"]


def test_sqlite_not_a_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "junk.db"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(EndpointError, match="is not a usable SQLite database"):
        asyncio.run(load(sqlite_url(db), []))


@pytest.mark.postgres
async def test_postgres_foreign_schema_is_refused(pg_db: str) -> None:
    conn = await asyncpg.connect(pg_db)
    await conn.execute("CREATE TABLE job (job_id SERIAL PRIMARY KEY, owner TEXT)")
    await conn.close()
    with pytest.raises(EndpointError) as info:
        await load(pg_db, [])
    assert "table job: missing columns wf_id, exec_job_id" in str(info.value)
    assert "unknown columns owner" in str(info.value)


@pytest.mark.postgres
async def test_postgres_password_is_masked(postgres_dsn: str) -> None:
    url = postgres_dsn.replace("postgres@", "postgres:s3cret@").rsplit("/", 1)[0] + "/streamer_no_such_db"
    with pytest.raises(EndpointError) as info:
        await load(url, [])
    assert "s3cret" not in str(info.value)
    assert "postgres:***@" in str(info.value)


# ---------------------------------------------------------------- malformed events

def _bad_batch(golden: Path) -> tuple[list[Event], list[str]]:
    events = golden_events(golden, "process_wf_success")
    job_info = next(e for e in events if e.name == "stampede.job.info")
    no_exec = Event(job_info.name, {**{k: v for k, v in job_info.fields.items() if k != "executable"},
                                    "job.id": "broken_job"})
    orphan = Event("stampede.job_inst.main.start", {"ts": 1, "xwf.id": job_info.fields["xwf.id"],
                                                    "job.id": "nosuchjob", "job_inst.id": 1, "js.id": 2})
    bad_status = Event("stampede.job_inst.main.end", {**next(
        e for e in events if e.name == "stampede.job_inst.main.end").fields, "status": 5})
    index = events.index(job_info) + 1
    events[index:index] = [no_exec, orphan]
    events.append(bad_status)
    return events, [
        f"rejected event stampede.job.info (id {no_exec.id[:16]}): no value for job.executable (NOT NULL)",
        f"rejected event stampede.job_inst.main.start (id {orphan.id[:16]}): "
        "unknown job nosuchjob (no stampede.job.info loaded for it)",
        f"rejected event stampede.job_inst.main.end (id {bad_status.id[:16]}): "
        "status 5 is neither 0 (success) nor -1 (failure)",
    ]


@pytest.mark.corpus
def test_sqlite_malformed_events_rejected_rest_kept(tmp_path: Path, golden: Path, caplog) -> None:
    events, expected = _bad_batch(golden)
    db = tmp_path / "m.db"
    endpoint = asyncio.run(load(sqlite_url(db), events, 1000))
    assert endpoint.rejected == expected
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records if r.name == "streamer.endpoints.db"] == expected
    assert_same(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "process_wf_success"))


@pytest.mark.corpus
@pytest.mark.postgres
async def test_postgres_malformed_events_rejected_rest_kept(pg_db: str, golden: Path) -> None:
    events, expected = _bad_batch(golden)
    long_site = Event("stampede.job_inst.host.info", {
        **next(e for e in events if e.name == "stampede.job_inst.host.info").fields, "site": "s" * 300})
    events.append(long_site)
    endpoint = await load(pg_db, events, 1000)
    assert endpoint.rejected == expected + [
        f"rejected event stampede.job_inst.host.info (id {long_site.id[:16]}): "
        "host.site is 300 characters long, the column holds 255"]
    assert_same(await pg_snapshot(pg_db), golden_snapshot(golden, "process_wf_success"))


# ---------------------------------------------------------------- crashes

def _clean_sqlite(tmp_path: Path, golden: Path, copies: int) -> dbcompare.Snapshot:
    db = tmp_path / "clean.db"
    asyncio.run(load(sqlite_url(db), list(synthetic(golden, copies)), 500))
    return dbcompare.sqlite_snapshot(str(db))


def _run_and_kill(python: str, url: str, golden: Path, copies: int, size: int, kill_after: int,
                  checkpoint: Path | None) -> None:
    """Start the loader child, SIGKILL it once `kill_after` batches are acknowledged, then rerun it to the end."""
    args = [python, str(TESTS / "support" / "dbload_child.py"), url, str(golden), str(copies), str(size)]
    if checkpoint:
        args.append(str(checkpoint))
    child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    acked = -1
    for line in child.stdout:
        if line.startswith("acked"):
            acked = int(line.split()[1])
            if acked >= kill_after:
                os.kill(child.pid, signal.SIGKILL)
                break
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, f"child ended before the kill (acked {acked})"
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.rstrip().endswith("done")


COPIES, SIZE, KILL_AFTER = 12, 20, 150  # ~6,700 events in ~340 batches


@pytest.mark.corpus
@pytest.mark.parametrize("resume", ["from-start", "from-checkpoint", "from-start-replay"])
def test_sqlite_kill9_then_resume_equals_clean_load(tmp_path: Path, golden: Path, python: str, resume: str) -> None:
    db = tmp_path / "crash.db"
    url = sqlite_url(db) + ("?replay=true" if resume == "from-start-replay" else "")
    checkpoint = tmp_path / "ckpt" if resume == "from-checkpoint" else None
    _run_and_kill(python, url, golden, COPIES, SIZE, KILL_AFTER, checkpoint)
    assert_same(dbcompare.sqlite_snapshot(str(db)), _clean_sqlite(tmp_path, golden, COPIES))


@pytest.mark.corpus
@pytest.mark.postgres
@pytest.mark.parametrize(("resume", "size", "kill_after"), [
    ("from-start", SIZE, KILL_AFTER), ("from-checkpoint", SIZE, KILL_AFTER),
    ("from-start", 600, 5), ("from-checkpoint", 600, 5),  # batches big enough for the COPY path
])
async def test_postgres_kill9_then_resume_equals_clean_load(
        pg_db: str, tmp_path: Path, golden: Path, python: str, resume: str, size: int, kill_after: int) -> None:
    checkpoint = tmp_path / "ckpt" if resume == "from-checkpoint" else None
    await asyncio.to_thread(_run_and_kill, python, pg_db, golden, COPIES, size, kill_after, checkpoint)
    clean = await asyncio.to_thread(_clean_sqlite, tmp_path, golden, COPIES)
    assert_same(await pg_snapshot(pg_db), clean)


@pytest.mark.corpus
@pytest.mark.postgres
async def test_postgres_reconnects_after_connections_are_cut(pg_db: str, tmp_path: Path, golden: Path) -> None:
    """pg_terminate_backend mid-load (what a server restart does to clients): nothing lost, nothing doubled."""
    dbname = pg_db.rsplit("/", 1)[1]
    events = list(synthetic(golden, 6))
    endpoint = create_endpoint(EndpointURL.parse(pg_db))
    await endpoint.open()
    admin = await asyncpg.connect(pg_db)
    cuts = 0
    try:
        for index, chunk in enumerate(batches(events, 15)):
            if index in (20, 60, 61, 120):
                cuts += await admin.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = $1 AND pid <> pg_backend_pid()", dbname)
            await endpoint.write(chunk)
    finally:
        await admin.close()
        await endpoint.close()
    assert cuts >= 4
    assert endpoint.stats.retries >= 4
    clean = await asyncio.to_thread(_clean_sqlite, tmp_path, golden, 6)
    assert_same(await pg_snapshot(pg_db), clean)


@pytest.mark.corpus
@pytest.mark.postgres
async def test_postgres_cut_during_a_write(pg_db: str, tmp_path: Path, golden: Path) -> None:
    """Connections cut while batches are in flight (not only between them)."""
    dbname = pg_db.rsplit("/", 1)[1]
    events = list(synthetic(golden, 6))
    endpoint = create_endpoint(EndpointURL.parse(pg_db))
    await endpoint.open()
    admin = await asyncpg.connect(pg_db)
    stop = asyncio.Event()

    async def cutter() -> int:
        cut = 0
        while not stop.is_set() and cut < 5:
            await asyncio.sleep(0.05)
            cut += await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid() AND state <> 'idle'", dbname)
        return cut

    task = asyncio.create_task(cutter())
    try:
        for chunk in batches(events, 15):
            await endpoint.write(chunk)
    finally:
        stop.set()
        await task
        await admin.close()
        await endpoint.close()
    clean = await asyncio.to_thread(_clean_sqlite, tmp_path, golden, 6)
    assert_same(await pg_snapshot(pg_db), clean)
