"""Many writers, one database (PostgreSQL and SQLite): rows of separate loads, every writer succeeds."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from streamer.endpoints import create_endpoint
from tests.support import dbcompare
from tests.support.dbstream import batches, golden_events
from tests.endpoints.test_db import assert_same, golden_snapshot
from tests.support.pghelp import pg_snapshot

ROOT = Path(__file__).resolve().parents[2]


async def _same_workflow_twice(url: str, golden: Path) -> tuple[object, object]:
    """Two replaying writers of one workflow, batches interleaved: neither deletes the other's rows."""
    events = golden_events(golden, "hierarchical_wf_success")
    a, b = create_endpoint(url), create_endpoint(url)
    await a.open()
    await b.open()
    try:
        for chunk in batches(events, 37):
            await a.write(chunk)
            await b.write(chunk)
    finally:
        await a.close()
        await b.close()
    return a, b


@pytest.mark.postgres
@pytest.mark.corpus
async def test_postgres_same_workflow_loaded_twice_at_once(pg_db: str, golden: Path) -> None:  # noqa: F811
    a, b = await _same_workflow_twice(f"{pg_db}?replay=true", golden)
    assert a.rejected == [] and b.rejected == []
    assert_same(await pg_snapshot(pg_db), golden_snapshot(golden, "hierarchical_wf_success"))


@pytest.mark.corpus
def test_sqlite_same_workflow_loaded_twice_at_once(tmp_path: Path, golden: Path) -> None:
    db = tmp_path / "twice.db"
    a, b = asyncio.run(_same_workflow_twice(f"sqlite:///{db}?replay=true", golden))
    assert a.rejected == [] and b.rejected == []
    assert_same(dbcompare.sqlite_snapshot(str(db)), golden_snapshot(golden, "hierarchical_wf_success"))


@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_bench_concurrency_small(postgres_dsn: str) -> None:
    """`bench/concurrency.py` at a small size: 4 workflows + one twice, 5 processes per database."""
    import subprocess
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "concurrency.py"), "--workflows", "4", "--jobs", "40",
                           "--pg", postgres_dsn], capture_output=True, text=True, timeout=900)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("rows equal to separate loads: yes") == 2
    assert done.stdout.count(": exit 0 after") == 10
