"""The Stampede DB side of the deploy pipeline on the machine's real PostgreSQL.

deploy/postgres/init/10-roles.sh runs against a database of its own (roles
named for this run, dropped afterwards); the writer role creates the Stampede
tables (their DDL taken from the golden monitord databases) and loads the four
golden workflows; then every SQL query of the Grafana Stampede-DB dashboard
runs as the read-only Grafana role, with Grafana's macros expanded, and its
rows are compared with the same facts computed here straight from SQLite.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import secrets
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import asyncpg
import pytest

from tests.conftest import PG_HOST, PG_PORT
from tests.support.pghelp import admin

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "deploy" / "postgres" / "init" / "10-roles.sh"
BUILDER = ROOT / "deploy" / "grafana" / "build_dashboards.py"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "stampede-db.json"
TABLES = ("workflow", "workflowstate", "host", "job", "job_instance", "jobstate", "task", "invocation",
          "integrity")
GOLDEN = ("hierarchical_wf_success", "process_wf_failure", "process_wf_success", "sample_wf_held")
OFFSET = 1000  # golden database k keeps its ids + k*OFFSET, as one DB of many workflows would

pytestmark = [pytest.mark.postgres, pytest.mark.corpus]


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("build_dashboards", BUILDER)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["build_dashboards"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# ---------------------------------------------------------------- Grafana macros

def _macro_args(sql: str, start: int) -> tuple[str, int]:
    """Text between the parenthesis at `start` and its match, and the index after it."""
    depth = 0
    for i in range(start, len(sql)):
        depth += {"(": 1, ")": -1}.get(sql[i], 0)
        if depth == 0:
            return sql[start + 1:i], i + 1
    raise ValueError("unbalanced macro")


def expand(sql: str, workflow_ids: list[int]) -> str:
    """Grafana's PostgreSQL macros over an all-time range, `$workflow` = All."""
    out = sql
    for name, render in (
        ("$__unixEpochGroupAlias", lambda a: f'floor(({a.rsplit(",", 1)[0]}) / 60) * 60 AS "time"'),
        ("$__unixEpochFilter", lambda a: f"({a}) BETWEEN 0 AND 4102444800"),
    ):
        while (at := out.find(name + "(")) >= 0:
            args, end = _macro_args(out, at + len(name))
            out = out[:at] + render(args) + out[end:]
    out = out.replace("$workflow", ",".join(f"'{i}'" for i in workflow_ids))  # Grafana quotes multi-values
    assert "$" not in out, out
    return out


def test_macro_expansion() -> None:
    sql = "SELECT $__unixEpochGroupAlias(js.timestamp, $__interval) WHERE $__unixEpochFilter(max(x.t)) AND a IN ($workflow)"
    assert expand(sql, [1, 2]) == ('SELECT floor((js.timestamp) / 60) * 60 AS "time" '
                                   "WHERE (max(x.t)) BETWEEN 0 AND 4102444800 AND a IN ('1','2')")


# ---------------------------------------------------------------- schema and data

def pg_ddl(sqlite_sql: str) -> str:
    """SQLite DDL of a Stampede table -> PostgreSQL (same tables and columns)."""
    keep = []
    for line in sqlite_sql.splitlines():
        text = line.strip()
        if text.startswith(("FOREIGN KEY", "CHECK (")) or (text.startswith("CONSTRAINT") and "CHECK" in text):
            continue
        keep.append(re.sub(r"^(\s*)user ", r'\1"user" ', line).replace("DATETIME", "TIMESTAMP"))
    ddl = "\n".join(keep)
    return re.sub(r",\s*\)\s*$", "\n)", ddl.rstrip())


def _shift(table: str, columns: list[str], kinds: list[str], row: tuple[Any, ...], k: int) -> tuple[Any, ...]:
    out = []
    for column, kind, value in zip(columns, kinds, row):
        if value is not None and kind == "INTEGER" and column.endswith("_id"):
            value += k * OFFSET
        elif value is not None and kind == "BOOLEAN":
            value = bool(value)
        elif value is not None and kind.startswith("NUMERIC"):
            value = Decimal(str(value))
        out.append(value)
    return tuple(out)


def sqlite_rows(golden: Path, name: str, table: str) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    with sqlite3.connect(golden / f"{name}.stampede.db") as db:
        info = db.execute(f"PRAGMA table_info({table})").fetchall()
        rows = db.execute(f"SELECT * FROM {table}").fetchall()
    return [c[1] for c in info], [c[2] for c in info], rows


class Stampede:
    def __init__(self, dsn_reader: str, workflow_ids: list[int]) -> None:
        self.dsn_reader = dsn_reader
        self.workflow_ids = workflow_ids

    async def query(self, sql: str) -> list[asyncpg.Record]:
        connection = await asyncpg.connect(self.dsn_reader)
        try:
            return await connection.fetch(expand(sql, self.workflow_ids))
        finally:
            await connection.close()


def _admin_dsn() -> str:
    return f"postgresql://{os.environ.get('STREAMER_PG_USER', 'postgres')}@{PG_HOST}:{PG_PORT}/postgres"


@contextmanager
def provisioned() -> Iterator[tuple[str, str]]:
    """A fresh database set up by 10-roles.sh: yields (writer DSN, reader DSN); all dropped after."""
    from tests.conftest import port_open, unavailable

    if not port_open(PG_HOST, PG_PORT):
        unavailable(f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}")
    suffix = secrets.token_hex(4)
    db, writer, reader = f"streamer_deploy_{suffix}", f"stampede_w_{suffix}", f"grafana_r_{suffix}"
    asyncio.run(admin(_admin_dsn(), f'CREATE DATABASE "{db}"'))
    try:
        env = {**os.environ, "PGHOST": PG_HOST, "PGPORT": str(PG_PORT),
               "POSTGRES_USER": os.environ.get("STREAMER_PG_USER", "postgres"), "POSTGRES_DB": db,
               "STREAMER_DB_USER": writer, "STREAMER_DB_PASSWORD": "w'pw\"1",
               "GRAFANA_DB_USER": reader, "GRAFANA_DB_PASSWORD": "r'pw\"2"}
        for _ in range(2):  # safe to run again
            done = subprocess.run(["bash", str(INIT)], env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == f"10-roles.sh: roles {writer} and {reader} ready"
        yield (f"postgresql://{writer}@{PG_HOST}:{PG_PORT}/{db}", f"postgresql://{reader}@{PG_HOST}:{PG_PORT}/{db}")
    finally:
        asyncio.run(admin(_admin_dsn(), f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)',
                          f'DROP ROLE IF EXISTS "{reader}"', f'DROP ROLE IF EXISTS "{writer}"'))


def golden_workflow_ids(golden: Path) -> list[int]:
    return sorted(k * OFFSET + 1 + i for k, name in enumerate(GOLDEN)
                  for i in range(len(sqlite_rows(golden, name, "workflow")[2])))


@pytest.fixture(scope="module")
def stampede(golden: Path) -> Iterator[Stampede]:
    """The golden Stampede DBs copied table by table (independent of streamer's loader)."""
    with provisioned() as (writer, reader):
        asyncio.run(_load(golden, writer))
        yield Stampede(reader, golden_workflow_ids(golden))


async def _load(golden: Path, dsn_writer: str) -> None:
    """As the writer role (so the reader sees the tables through default privileges)."""
    connection = await asyncpg.connect(dsn_writer)
    try:
        with sqlite3.connect(golden / f"{GOLDEN[0]}.stampede.db") as db:
            for table in TABLES:
                (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
                await connection.execute(pg_ddl(ddl))
        for k, name in enumerate(GOLDEN):
            for table in TABLES:
                columns, kinds, rows = sqlite_rows(golden, name, table)
                records = [_shift(table, columns, kinds, row, k) for row in rows]
                await connection.copy_records_to_table(table, records=records, columns=columns)
    finally:
        await connection.close()


# ---------------------------------------------------------------- facts straight from SQLite

def facts(golden: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"status": Counter(), "states": Counter(), "failed_jobs": set(),
                              "failed_inv": 0, "durations": {}, "hosts": Counter(), "workflows": 0, "planned": 0,
                              "jobstates": 0}
    for name in GOLDEN:
        with sqlite3.connect(golden / f"{name}.stampede.db") as db:
            for (wf_id,) in db.execute("SELECT wf_id FROM workflow"):
                rows = db.execute("SELECT timestamp, state, status FROM workflowstate WHERE wf_id=?", (wf_id,)).fetchall()
                result["workflows"] += 1
                if not rows:
                    result["planned"] += 1
                    continue
                _, state, status = max(rows, key=lambda r: (r[0], r[1]))
                result["status"]["running" if state == "WORKFLOW_STARTED" else
                                 "succeeded" if status == 0 else "failed"] += 1
            for state, count in db.execute("SELECT state, count(*) FROM jobstate GROUP BY state"):
                result["states"][state] += count
                result["jobstates"] += count
            for row in db.execute(
                    "SELECT j.exec_job_id, ji.job_submit_seq, ji.exitcode, h.hostname FROM job_instance ji "
                    "JOIN job j USING (job_id) LEFT JOIN host h USING (host_id) WHERE ji.exitcode <> 0"):
                result["failed_jobs"].add(row)
                result["hosts"][row[3] or "(unknown)"] += 1
            result["failed_inv"] += db.execute("SELECT count(*) FROM invocation WHERE exitcode <> 0").fetchone()[0]
            for transformation, count, total in db.execute(
                    "SELECT transformation, count(*), sum(remote_duration) FROM invocation GROUP BY 1"):
                old = result["durations"].get(transformation, (0, 0.0))
                result["durations"][transformation] = (old[0] + count, old[1] + total)
    return result


@pytest.fixture(scope="module")
def expected(golden: Path) -> dict[str, Any]:
    return facts(golden)


def test_golden_facts_are_not_trivial(expected: dict[str, Any]) -> None:
    assert expected["status"]["failed"] >= 1 and expected["status"]["succeeded"] >= 1
    assert expected["failed_jobs"] and expected["failed_inv"] >= 1 and len(expected["durations"]) >= 3


# ---------------------------------------------------------------- the dashboard's queries

B = _builder()


def test_dashboard_json_is_built_from_the_script() -> None:
    assert json.loads(DASHBOARD.read_text()) == B.stampede_db()
    done = subprocess.run([sys.executable, str(BUILDER), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


async def test_workflow_status(stampede: Stampede, expected: dict[str, Any]) -> None:
    (row,) = await stampede.query(B.SQL_WORKFLOW_STATUS)
    assert dict(row) == {k: expected["status"][k] for k in ("running", "succeeded", "failed")}


async def test_workflows_table(stampede: Stampede, expected: dict[str, Any]) -> None:
    rows = await stampede.query(B.SQL_WORKFLOWS)
    assert len(rows) == expected["workflows"]
    assert Counter(r["status"] for r in rows) == expected["status"] + Counter(planned=expected["planned"])
    assert Counter(r["level"] for r in rows) == Counter(root=4, sub=1)


async def test_job_states_over_time(stampede: Stampede, expected: dict[str, Any]) -> None:
    rows = await stampede.query(B.SQL_JOB_STATES)
    totals: Counter[str] = Counter()
    for row in rows:
        assert row["time"] % 60 == 0
        totals[row["metric"]] += row["value"]
    assert totals == expected["states"]


async def test_failed_jobs_with_exit_codes_and_hosts(stampede: Stampede, expected: dict[str, Any]) -> None:
    rows = await stampede.query(B.SQL_FAILED_JOBS)
    assert {(r["job"], r["try"], r["exit code"], r["host"]) for r in rows} == expected["failed_jobs"]
    assert len(rows) == len(expected["failed_jobs"])
    by_host = await stampede.query(B.SQL_FAILURES_BY_HOST)
    assert {r["host"]: r["failed job instances"] for r in by_host} == dict(expected["hosts"])


async def test_failed_invocations(stampede: Stampede, expected: dict[str, Any]) -> None:
    rows = await stampede.query(B.SQL_FAILED_INVOCATIONS)
    assert len(rows) == expected["failed_inv"]
    assert all(r["exit code"] != 0 for r in rows)


async def test_durations_per_transformation(stampede: Stampede, expected: dict[str, Any]) -> None:
    rows = await stampede.query(B.SQL_DURATIONS)
    got = {r["transformation"]: (r["invocations"], float(r["total (s)"])) for r in rows}
    assert got.keys() == expected["durations"].keys()
    for name, (count, total) in expected["durations"].items():
        assert got[name][0] == count
        assert got[name][1] == pytest.approx(total, abs=0.01)
    totals = [r["total (s)"] for r in rows]
    assert totals == sorted(totals, reverse=True)


async def test_gantt_rows(stampede: Stampede, expected: dict[str, Any]) -> None:
    rows = await stampede.query(B.SQL_GANTT)
    assert len(rows) == expected["jobstates"]
    assert [r["time"] for r in rows] == sorted(r["time"] for r in rows)
    assert all(re.fullmatch(r".+ #\d+", r["job"]) for r in rows)


async def test_workflow_variable(stampede: Stampede) -> None:
    rows = await stampede.query(B.SQL_WORKFLOW_VARIABLE)
    assert sorted(r["__value"] for r in rows) == stampede.workflow_ids


async def test_panel_field_names_are_query_columns(stampede: Stampede) -> None:
    """Transformations, x axes and stat fields name columns the queries return."""
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        (target,) = panel["targets"]
        columns = set((await stampede.query(target["rawSql"]))[0].keys())
        named = set(panel["options"].get("xField", "") and [panel["options"]["xField"]])
        for step in panel["transformations"]:
            named |= set(step["options"].get("include", {}).get("names", []))
            named |= set(step["options"].get("fields", []))
        stat_field = panel["options"].get("reduceOptions", {}).get("fields", "")
        if stat_field:
            named.add(stat_field.strip("/^$"))
        assert named <= columns, panel["title"]


async def test_reader_cannot_write(stampede: Stampede) -> None:
    connection = await asyncpg.connect(stampede.dsn_reader)
    try:
        with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError):
            await connection.execute("DELETE FROM jobstate")
        await connection.execute("SET default_transaction_read_only = off")  # a user may; grants still hold
        with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
            await connection.execute("DELETE FROM jobstate")
        with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
            await connection.execute("CREATE TABLE public.mine (x int)")
    finally:
        await connection.close()


# ---------------------------------------------------------------- end to end through streamer

@pytest.fixture(scope="module")
def loaded_by_streamer(golden: Path) -> Iterator[Stampede]:
    """`streamer load golden/*.bp --dest postgresql://` as the writer role of 10-roles.sh."""
    with provisioned() as (writer, reader):
        done = subprocess.run([sys.executable, "-m", "streamer", "load",
                               *[str(golden / f"{name}.bp") for name in GOLDEN], "--dest", writer, "-q"],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr

        async def ids() -> list[int]:
            connection = await asyncpg.connect(reader)
            try:
                return sorted(r[0] for r in await connection.fetch("SELECT wf_id FROM workflow"))
            finally:
                await connection.close()

        yield Stampede(reader, asyncio.run(ids()))


async def test_dashboard_over_a_db_streamer_wrote(loaded_by_streamer: Stampede, expected: dict[str, Any]) -> None:
    """The schema streamer creates as the owner role is readable by Grafana's role, and the
    dashboard's answers match monitord's golden databases."""
    (status,) = await loaded_by_streamer.query(B.SQL_WORKFLOW_STATUS)
    assert dict(status) == {k: expected["status"][k] for k in ("running", "succeeded", "failed")}
    failed = await loaded_by_streamer.query(B.SQL_FAILED_JOBS)
    assert {(r["job"], r["try"], r["exit code"], r["host"]) for r in failed} == expected["failed_jobs"]
    durations = await loaded_by_streamer.query(B.SQL_DURATIONS)
    assert {r["transformation"]: r["invocations"] for r in durations} == \
        {name: count for name, (count, _) in expected["durations"].items()}
    gantt = await loaded_by_streamer.query(B.SQL_GANTT)
    assert len(gantt) == expected["jobstates"]


def shipped_sql_panels() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, SQL) of every SQL target of every dashboard shipped in deploy/grafana."""
    found = []

    def walk(path: Path, panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            walk(path, panel.get("panels", []))
            for target in panel.get("targets", []):
                if "rawSql" in target:
                    found.append((path.name, panel.get("title", "?"), target["rawSql"]))

    for path in sorted((ROOT / "deploy" / "grafana").rglob("*.json")):
        walk(path, json.loads(path.read_text()).get("panels", []))
    return found


async def test_every_shipped_panel_query_runs_on_the_schema_streamer_writes(loaded_by_streamer: Stampede) -> None:
    """Every SQL panel of every shipped dashboard, over the PostgreSQL schema streamer creates (its enum
    columns included: `coalesce(ig.file_type, '-')` failed there). MySQL does not apply: no shipped dashboard
    reads a MySQL datasource (deploy/grafana/provisioning/datasources)."""
    panels = shipped_sql_panels()
    assert len(panels) >= 15 and any(title == "Integrity checks" for _, title, _ in panels)
    failures = []
    for dashboard, title, sql in panels:
        try:
            await loaded_by_streamer.query(sql)
        except asyncpg.exceptions.PostgresError as exc:
            failures.append(f"{dashboard}: {title}: {exc}")
    assert failures == []
