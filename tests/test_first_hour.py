"""Issue 16: the first hour of a new user (items 1, 2, 4, 5, 6, 7, 8), each reproduced first."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest

from streamer.cli import main
from streamer.endpoints import create_endpoint
from streamer.events import Event, bp


@pytest.fixture(autouse=True)
def restore_logging():
    """main() installs its stderr handler on the root logger: put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def read_bp(path: Path) -> list[Event]:
    return [bp.parse_line(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
async def pg_db(postgres_dsn: str) -> AsyncIterator[str]:
    asyncpg = pytest.importorskip("asyncpg")
    name = f"streamer_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_dsn)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


# ---------------------------------------------------------------- item 1: PostgreSQL column widths

async def _load(url: str, events: list[Event]) -> list[str]:
    endpoint = create_endpoint(url)
    await endpoint.open()
    try:
        for start in range(0, len(events), 2000):
            await endpoint.write(events[start:start + 2000])
    finally:
        await endpoint.close()
    return endpoint.rejected  # type: ignore[attr-defined]


CORPUS_BP = ("montage-1.0.bp", "blackdiamond.bp", "output-file.bp", "output-file-old.bp")


async def test_item1_every_corpus_bp_file_loads_into_postgresql_with_nothing_refused(pg_db: str,
                                                                                    corpus: Path) -> None:
    names = sorted(p.name for p in (corpus / "bp").glob("*.bp"))
    assert names == sorted(CORPUS_BP)  # a new corpus file must be added here
    import asyncpg

    for name in names:
        events = read_bp(corpus / "bp" / name)
        rejected = await _load(pg_db, events)
        if name == "output-file.bp":
            # Triana's stream declares its jobs as `unit:common.string.X` (job.info, wf.map.task_job) and
            # reports them as `X` (job_inst.*, inv.*): events naming a job never declared are refused, one by one
            declared = {e.fields["job.id"] for e in events if e.name == "stampede.job.info"}
            for message in rejected:
                job = message.split("unknown job ", 1)[1].split(" (no stampede.job.info", 1)[0]
                assert job not in declared, message
            assert len(rejected) == 34
        else:
            assert rejected == [], name
    conn = await asyncpg.connect(pg_db)
    try:  # montage's host.info total_memory in bytes: beyond INTEGER, the column is BIGINT
        assert await conn.fetchval("SELECT count(*) FROM host WHERE total_memory = 4158918656") >= 1
        assert await conn.fetchval("SELECT count(*) FROM host WHERE total_memory = 42275557376") >= 1  # 4.0
    finally:
        await conn.close()


async def test_item1_a_value_no_column_holds_rejects_that_event_only(pg_db: str, corpus: Path) -> None:
    events = read_bp(corpus / "bp" / "montage-1.0.bp")
    index = next(i for i, e in enumerate(events) if e.name == "stampede.job_inst.main.end")
    bad = events[index]
    events[index] = Event(bad.name, {**bad.fields, "exitcode": 2**40})
    rejected = await _load(pg_db, events)
    assert len(rejected) == 1
    assert rejected[0].startswith("rejected event stampede.job_inst.main.end")
    assert "job_instance.exitcode = 1099511627776 does not fit the column (INTEGER, 32 bits)" in rejected[0]
