"""Pegasus's own tools read the databases streamer writes.

`pegasus-statistics -s all` and `pegasus-analyzer` (PyPI `pegasus-wms`, run
unchanged) on a copy of each corpus submit dir, once with monitord's golden
database in place and once with streamer's: outputs must be identical (both
copies sit at the same relative path; log timestamps are the only thing
masked).

PostgreSQL: Pegasus 5.1.3's statistics and analyzer queries are not valid
PostgreSQL (`GROUP BY` without the selected columns), so on monitord's own
PostgreSQL database they fail too; the test checks that streamer's
PostgreSQL schema is column for column the one monitord creates there, and
that the tools behave on it exactly as on monitord's.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.endpoints.db.schema.stampede import WIDENED
from tests.support.dbstream import NAMES, golden_events
from tests.endpoints.test_db import load
from tests.support.pghelp import fresh_database_sync

import asyncpg

pytestmark = pytest.mark.corpus

_LOG_TS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}:", re.M)


def _dag_name(submit_dir: Path) -> str:
    for line in (submit_dir / "braindump.yml").read_text().splitlines():
        if line.startswith("dag:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise AssertionError(f"no dag in {submit_dir}/braindump.yml")


def _copy_submit_dir(corpus: Path, name: str, parent: Path, *, monitord_state: bool = True) -> Path:
    """A copy of the corpus dir without its database.

    The tools refuse to run unless `monitord.started` and `monitord.done` say
    loading finished, so those stay (`monitord_state=False` removes them too,
    and jobstate.log: what `pegasus-monitord -r` starts from).
    """
    target = parent / name
    shutil.copytree(corpus / "pegasus" / name, target)
    for path in target.rglob("*"):
        if path.name.endswith((".stampede.db", ".stampede.db-wal", ".stampede.db-shm")) or (
                path.name.startswith("monitord.") or path.name == "jobstate.log") and not monitord_state:
            path.unlink()
    if monitord_state:  # as a finished `monitord -r` leaves it (the corpus dirs may be mid-recovery)
        for marker in ("monitord.started", "monitord.done"):
            (target / marker).write_text("2023-03-04T00:00:00+0000 1.000\n")
        (target / "monitord.recover").unlink(missing_ok=True)
    return target


def _run_tools(cwd: Path, name: str, *extra: str) -> dict[str, str]:
    env = {**os.environ, "TZ": "UTC"}
    out: dict[str, str] = {}
    for tool, args in (("statistics", ["-s", "all"]), ("analyzer", [])):
        proc = subprocess.run(
            [sys.executable, "-m", f"Pegasus.cli.pegasus-{tool}", *extra, *args, name],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        )
        out[tool] = _LOG_TS.sub("<time>:", proc.stdout + proc.stderr) + f"\nexit status {proc.returncode}"
    stats = cwd / name / "statistics"
    for path in sorted(stats.glob("*.txt")) if stats.is_dir() else ():
        out[f"statistics/{path.name}"] = path.read_text()
    return out


def _assert_same_outputs(ours: dict[str, str], theirs: dict[str, str]) -> None:
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key] == theirs[key], f"{key} differs"


@pytest.mark.parametrize("name", NAMES)
def test_statistics_and_analyzer_on_streamer_sqlite(tmp_path: Path, corpus: Path, golden: Path, name: str) -> None:
    ours_dir = _copy_submit_dir(corpus, name, tmp_path / "ours")
    theirs_dir = _copy_submit_dir(corpus, name, tmp_path / "monitord")
    db_name = _dag_name(ours_dir).removesuffix(".dag") + ".stampede.db"
    shutil.copy(golden / f"{name}.stampede.db", theirs_dir / db_name)
    asyncio.run(load(f"sqlite:///{ours_dir / db_name}", golden_events(golden, name), 100))

    theirs = _run_tools(tmp_path / "monitord", name)
    ours = _run_tools(tmp_path / "ours", name)
    assert "exit status 0" in theirs["statistics"]
    assert "statistics/summary.txt" in theirs and "statistics/jobs.txt" in theirs
    assert "Workflow Status" in theirs["analyzer"]
    _assert_same_outputs(ours, theirs)


async def _pg_columns(dsn: str) -> dict[str, list[tuple]]:
    conn = await asyncpg.connect(dsn)
    rows = await conn.fetch(
        "SELECT table_name, column_name, data_type, character_maximum_length, numeric_precision, "
        "numeric_scale, is_nullable FROM information_schema.columns WHERE table_schema = 'public' "
        "ORDER BY table_name, ordinal_position")
    await conn.close()
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(tuple(r[1:]))
    return out


@pytest.mark.postgres
def test_tools_on_streamer_postgres_behave_as_on_monitord_postgres(
        tmp_path: Path, corpus: Path, golden: Path, postgres_dsn: str) -> None:
    name = "process_wf_success"
    with fresh_database_sync(postgres_dsn) as ours_dsn, fresh_database_sync(postgres_dsn) as theirs_dsn:
        asyncio.run(load(ours_dsn, golden_events(golden, name), 100))
        # monitord itself, replaying the same submit dir into its own PostgreSQL database
        monitord_dir = _copy_submit_dir(corpus, name, tmp_path / "replay", monitord_state=False)
        proc = subprocess.run(
            [sys.executable, "-m", "Pegasus.cli.pegasus-monitord", "-r", "--dest", theirs_dsn,
             _dag_name(monitord_dir) + ".dagman.out"],
            cwd=monitord_dir, env={**os.environ, "TZ": "UTC"}, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]

        ours_cols, theirs_cols = asyncio.run(_pg_columns(ours_dsn)), asyncio.run(_pg_columns(theirs_dsn))
        # wider than Pegasus's INTEGER on purpose (docs/guide/databases.md): bytes of memory do not fit 32 bits
        assert sorted((t, c[0], c[1]) for t, cols in ours_cols.items() for c in cols if (t, c[0]) in WIDENED) == \
            [("host", "total_memory", "bigint"), ("invocation", "maxrss", "bigint")]
        for cols in (ours_cols, theirs_cols):
            for table, rows in cols.items():
                rows[:] = [(r[0], None, None, None, None, r[5]) if (table, r[0]) in WIDENED else r for r in rows]
        assert ours_cols == theirs_cols

        outputs = []
        for label, dsn in (("ours", ours_dsn), ("monitord", theirs_dsn)):
            _copy_submit_dir(corpus, name, tmp_path / label)
            props = tmp_path / label / "pg.properties"
            props.write_text(f"pegasus.monitord.output = {dsn}\n")
            out = _run_tools(tmp_path / label, name, "-c", str(props))
            outputs.append({k: v.replace(dsn, "<db>") for k, v in out.items()})
        ours, theirs = outputs
        # What Pegasus 5.1.3 can compute on PostgreSQL, it computes alike on both.
        assert "Failed to generate 5 type(s) of statistics" in theirs["statistics"]
        assert "GroupingError" in theirs["analyzer"]
        assert ours["statistics/jobs.txt"] == theirs["statistics/jobs.txt"]
        sqlite_dir = _copy_submit_dir(corpus, name, tmp_path / "sqlite")
        shutil.copy(golden / f"{name}.stampede.db", sqlite_dir / (_dag_name(sqlite_dir)[:-4] + ".stampede.db"))
        assert ours["statistics/jobs.txt"] == _run_tools(tmp_path / "sqlite", name)["statistics/jobs.txt"]
        _assert_same_outputs(ours, theirs)
