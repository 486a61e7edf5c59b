"""Schema version: the latest dbversion row decides (as Pegasus reads it); older schemas are refused
with the pegasus-db-admin command that upgrades them, or upgraded with --upgrade-schema.

The old databases are made by Pegasus's own tool (pegasus-db-admin create, then downgrade to the
schema of Pegasus 4.8), so they are what a user really has."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.dagjobstate import write_plain_dag

ADMIN = [sys.executable, "-m", "Pegasus.cli.pegasus-db-admin"]


def _admin(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """pegasus-db-admin; a downgrade of a server database dumps it (`<db>-<time>.sql`) into `cwd`."""
    return subprocess.run([*ADMIN, *args], capture_output=True, text=True, cwd=cwd)


def old_database(url: str, version: int, workdir: Path) -> None:
    """A Stampede DB of `version` (8 or 9) as pegasus-db-admin leaves it: rows 14, 13, ..., version."""
    created = _admin("create", url, cwd=workdir)
    assert created.returncode == 0, created.stderr
    down = _admin("downgrade", "-f", "-V", "4.8.0", url, cwd=workdir)
    assert down.returncode == 0, down.stderr + down.stdout
    if version == 9:  # the downgrade passed through 9 (a no-op step of Pegasus's migrations): stop there
        _sql(url, "DELETE FROM dbversion WHERE version_number = 8")


def _sql(url: str, statement: str) -> list:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url[len("sqlite:///"):])
        try:
            rows = conn.execute(statement).fetchall()
            conn.commit()
            return rows
        finally:
            conn.close()
    if url.startswith("mysql"):
        return asyncio.run(_mysql(url, statement))
    import psycopg2

    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows
    finally:
        conn.close()


async def _mysql(url: str, statement: str) -> list:
    import asyncmy

    from streamer.endpoints.db.mysql import parse_target
    from streamer.util.urls import EndpointURL

    t = parse_target(EndpointURL.parse(url))
    conn = await asyncmy.connect(host=t.host, port=t.port, user=t.user, database=t.database, autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute(statement)
            return [tuple(r) for r in await cur.fetchall()]
    finally:
        conn.close()


def _replay(log: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamer", "replay", str(log), "--dest", url, *extra],
                          capture_output=True, text=True)


def _check_refused_then_upgraded(tmp_path: Path, url: str, version: int) -> None:
    log = write_plain_dag(tmp_path / "dag")
    old_database(url, version, tmp_path)
    assert _admin("check", url).returncode != 0  # Pegasus itself calls it incompatible
    before = _sql(url, "SELECT id, version_number, version FROM dbversion ORDER BY id")
    assert max(r[1] for r in before) == 14 and before[-1][1] == version  # MAX() would say 14
    refused = _replay(log, url)
    assert refused.returncode == 1
    assert (f"Stampede schema version {version} found, streamer writes version 14: upgrade it with "
            f"`pegasus-db-admin update {url}`") in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _sql(url, "SELECT id, version_number, version FROM dbversion ORDER BY id") == before
    assert _sql(url, "SELECT COUNT(*) FROM workflow") == [(0,)]  # nothing written

    upgraded = _replay(log, url, "--upgrade-schema")
    assert upgraded.returncode == 0, upgraded.stderr
    after = _sql(url, "SELECT version_number, version FROM dbversion ORDER BY id DESC LIMIT 1")
    assert after == [(14, "14.0")]
    assert _sql(url, "SELECT COUNT(*) FROM jobstate") == [(42,)]  # 39 lines with a state, and 3 PRE_SCRIPT_TERMINATED
    assert _admin("check", url).returncode == 0  # and Pegasus agrees it is current now
    # the next run finds version 14 and neither refuses nor upgrades again
    again = _replay(log, url)
    assert again.returncode == 0, again.stderr
    assert len(_sql(url, "SELECT id FROM dbversion")) == len(before) + 1


@pytest.mark.parametrize("version", [8, 9])
def test_sqlite_old_schema_refused_then_upgraded(tmp_path: Path, version: int) -> None:
    _check_refused_then_upgraded(tmp_path, f"sqlite:///{tmp_path}/old.db", version)


@pytest.mark.postgres
def test_postgresql_version_9_refused_then_upgraded(tmp_path: Path, pg_db: str) -> None:  # noqa: F811
    _check_refused_then_upgraded(tmp_path, pg_db, 9)


@pytest.mark.mysql
def test_mariadb_version_9_refused_then_upgraded(tmp_path: Path, mysql_server: str) -> None:
    name = f"streamer_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_mysql(f"{mysql_server}/mysql", f"CREATE DATABASE {name}"))
    try:
        _check_refused_then_upgraded(tmp_path, f"{mysql_server}/{name}", 9)
    finally:
        asyncio.run(_mysql(f"{mysql_server}/mysql", f"DROP DATABASE IF EXISTS {name}"))


def test_newer_schema_is_refused_with_the_downgrade_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    assert _admin("create", url).returncode == 0
    _sql(url, "INSERT INTO dbversion (version_number, version, version_timestamp) VALUES (15, '15.0', 0)")
    run = _replay(write_plain_dag(tmp_path / "dag"), url, "--upgrade-schema")
    assert run.returncode == 1
    assert "Stampede schema version 15 (written by a newer Pegasus) found" in run.stderr
    assert f"pegasus-db-admin downgrade -V 5.0.1 {url}" in run.stderr


def test_a_current_pegasus_database_is_written_as_is(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cur.db"
    assert _admin("create", url).returncode == 0
    run = _replay(write_plain_dag(tmp_path / "dag"), url)
    assert run.returncode == 0, run.stderr
    assert _sql(url, "SELECT version_number FROM dbversion") == [(14,)]
    assert _sql(url, "SELECT COUNT(*) FROM job_instance") == [(7,)]


def test_one_schema_check_decides_for_every_dialect() -> None:
    """SQLite, PostgreSQL and MySQL run the SQL; the decisions are `SchemaCheck`'s, the same for all three."""
    from streamer.endpoints.base import EndpointError
    from streamer.endpoints.db.schema.version import SchemaCheck
    from streamer.endpoints.db.schema.stampede import BY_NAME, TABLES

    dbversion = {"dbversion": list(BY_NAME["dbversion"].column_names)}
    fresh = SchemaCheck("sqlite:///x.db", upgrade=False, dialect="sqlite")
    assert not fresh.reads_version({})
    assert fresh.upgrade_sql({}) == [] and not fresh.upgraded
    assert fresh.missing({}) == {table.name for table in TABLES}
    assert fresh.version_row()[:2] == (14, "14")

    current = SchemaCheck("postgresql://h/db", upgrade=False, dialect="postgresql")
    assert current.reads_version(dbversion)
    current.found(("14", 14))
    assert current.upgrade_sql(dbversion) == [] and current.version_row() is None

    refused = SchemaCheck("mysql://u@h/db?batch=5", upgrade=False, dialect="mysql")
    refused.found(("9", 9))
    with pytest.raises(EndpointError, match=r"^mysql://u@h/db\?batch=5: Stampede schema version 9 found, .*"
                                            r"`pegasus-db-admin update mysql://u@h/db`"):
        refused.upgrade_sql(dbversion)

    old = {**dbversion, "sequences": ["id"], "invocation": ["invocation_id", "exitcode"]}
    upgrade = SchemaCheck("mysql://u@h/db", upgrade=True, dialect="mysql")
    upgrade.found(("9", 9))
    assert upgrade.upgrade_sql(old) == ["DROP TABLE sequences", "ALTER TABLE invocation ADD COLUMN maxrss INTEGER",
                                        "ALTER TABLE invocation ADD COLUMN avg_cpu NUMERIC(16, 6)"]
    assert upgrade.upgraded and upgrade.version_row()[:2] == (14, "14.0")

    newer = SchemaCheck("sqlite:///x.db", upgrade=True, dialect="sqlite")
    newer.found(("15", 15))
    with pytest.raises(EndpointError, match=r"pegasus-db-admin downgrade -V 5\.0\.1 sqlite:///x\.db"):
        newer.upgrade_sql(dbversion)
    other = SchemaCheck("sqlite:///x.db", upgrade=False, dialect="sqlite")
    with pytest.raises(EndpointError, match=r"^sqlite:///x\.db: .*job"):
        other.missing({"job": ["a", "b"]})
