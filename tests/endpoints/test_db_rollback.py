"""A batch rolled back after the loader planned it, then written again; batches redelivered after a lost
acknowledgement: the loader's caches (workflow, job, job-instance, task and host ids, which job instances have
their host) must hold only what is committed, on PostgreSQL, SQLite and MySQL alike (issue 24: suspected when a
partitioned collector's database lacked rows; the caches are dropped with every failed transaction).

Each backend's `_apply` is wrapped: on chosen batches it writes every row of the plan, then raises that backend's
own transient error (a serialization failure, a locked database, a deadlock), so the transaction really rolls
back with the rows in it and the endpoint retries. The database must equal one loaded without faults.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest

from streamer.endpoints.db import mysql, postgres, sqlite
from streamer.events import Event, bp
from streamer.synth import generate
from tests.endpoints.test_db import assert_same, load, sqlite_url
from tests.endpoints.test_mysql import _query, mysql_snapshot
from tests.support import dbcompare
from tests.support.pghelp import fresh_database, pg_snapshot

BATCH = 40
FAIL_AT = {2, 5, 9, 14}
"""Batches whose first attempt is rolled back after all its rows were written."""


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[Event]:
    """A hierarchical workflow with retries (hosts shared by the root and its sub-workflow), in order."""
    base = tmp_path_factory.mktemp("rollback")
    submit = generate(base / "wf", jobs=40, scenario="hierarchical,retry", seed=77, label="rb")
    out = base / "wf.bp"
    done = subprocess.run([sys.executable, "-m", "streamer", "replay", str(submit), "--dest", str(out),
                           "--no-jobstate", "--timezone", "UTC", "-q"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    parsed = [bp.parse_line(line) for line in out.read_text().splitlines()]
    assert sum(e.name == "stampede.job_inst.host.info" for e in parsed) > 40
    assert len(parsed) > max(FAIL_AT) * BATCH
    return parsed


def _pg_fault() -> BaseException:
    import asyncpg

    return asyncpg.exceptions.SerializationError("could not serialize access (injected)")


def _mysql_fault() -> BaseException:
    from asyncmy import errors

    return errors.MySQLError(1213, "Deadlock found when trying to get lock (injected)")


def _sqlite_fault() -> BaseException:
    import sqlite3

    return sqlite3.OperationalError("database is locked (injected)")


class Faults:
    """The first attempt of each batch in FAIL_AT raises, after writing its rows (`_apply` is called once per
    attempt; a rolled-back batch is attempted again)."""

    def __init__(self, fault: Callable[[], BaseException]) -> None:
        self.fault, self.written, self.failed = fault, 0, set()  # type: Callable[[], BaseException], int, set[int]

    @property
    def raised(self) -> int:
        return len(self.failed)

    def due(self) -> bool:
        batch = self.written + 1
        if batch in FAIL_AT and batch not in self.failed:
            self.failed.add(batch)
            return True
        self.written = batch
        return False


def _patch(monkeypatch: pytest.MonkeyPatch, module: Any, faults: Faults) -> None:
    apply = module._apply
    if module is sqlite:
        def wrapped(conn: Any, plan: Any) -> None:
            apply(conn, plan)
            if faults.due():
                raise faults.fault()
        monkeypatch.setattr(module, "_apply", wrapped)
    else:
        async def wrapped_async(conn: Any, plan: Any) -> None:
            await apply(conn, plan)
            if faults.due():
                raise faults.fault()
        monkeypatch.setattr(module, "_apply", wrapped_async)


async def _roundtrip(monkeypatch: pytest.MonkeyPatch, module: Any, fault: Callable[[], BaseException],
                     clean: str, faulty: str, events: list[Event],
                     snapshot: Callable[[str], Any]) -> None:
    await load(clean, events, BATCH)
    expected = await snapshot(clean)
    assert dbcompare.counts(expected)["host"] > 10
    faults = Faults(fault)
    _patch(monkeypatch, module, faults)
    endpoint = await load(faulty, events, BATCH)
    assert faults.raised == len(FAIL_AT)  # every chosen batch was rolled back once, then written
    assert endpoint.rejected == []
    monkeypatch.undo()
    assert_same(await snapshot(faulty), expected)
    # a broker redelivering after a lost acknowledgement: the second half again, by a writer whose caches are warm
    again = await load(faulty, events[len(events) // 2:], BATCH)
    assert again.rejected == []
    assert_same(await snapshot(faulty), expected)


@pytest.mark.postgres
async def test_postgres_caches_hold_only_what_is_committed(monkeypatch: pytest.MonkeyPatch, postgres_dsn: str,
                                                          events: list[Event]) -> None:
    async with fresh_database(postgres_dsn, "rb_clean") as clean, fresh_database(postgres_dsn, "rb") as faulty:
        await _roundtrip(monkeypatch, postgres, _pg_fault, clean, faulty, events, pg_snapshot)


async def test_sqlite_caches_hold_only_what_is_committed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        events: list[Event]) -> None:
    async def snapshot(url: str) -> dbcompare.Snapshot:
        return dbcompare.sqlite_snapshot(url.removeprefix("sqlite:///"))

    await _roundtrip(monkeypatch, sqlite, _sqlite_fault, sqlite_url(tmp_path / "clean.db"),
                     sqlite_url(tmp_path / "faulty.db"), events, snapshot)


@pytest.fixture
async def mysql_pair(mysql_server: str) -> AsyncIterator[tuple[str, str]]:
    names = [f"streamer_test_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    try:
        yield f"{mysql_server}/{names[0]}", f"{mysql_server}/{names[1]}"
    finally:
        for name in names:
            await _query(mysql_server, None, f'DROP DATABASE IF EXISTS "{name}"')


@pytest.mark.mysql
async def test_mysql_caches_hold_only_what_is_committed(monkeypatch: pytest.MonkeyPatch, mysql_pair: tuple[str, str],
                                                       events: list[Event]) -> None:
    await _roundtrip(monkeypatch, mysql, _mysql_fault, *mysql_pair, events, mysql_snapshot)
