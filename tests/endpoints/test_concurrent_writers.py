"""Many writers, one database (PostgreSQL, MySQL/MariaDB and SQLite): rows of separate loads, every writer
succeeds."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamer.endpoints import create_endpoint
from streamer.util.urls import EndpointURL
from tests.support import dbcompare
from tests.support.dbstream import batches, golden_events, synthetic
from tests.endpoints.test_db import assert_same, golden_snapshot, load
from tests.endpoints.test_mysql import _query as mysql_query, mysql_db, mysql_snapshot  # noqa: F401 (a fixture)
from tests.support.pghelp import pg_snapshot

ROOT = Path(__file__).resolve().parents[2]


async def _same_workflow_twice(url: str, golden: Path) -> tuple[object, object]:
    """Two replaying writers of one workflow, batches interleaved: neither deletes the other's rows."""
    events = golden_events(golden, "hierarchical_wf_success")
    a, b = create_endpoint(EndpointURL.parse(url)), create_endpoint(EndpointURL.parse(url))
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
    await _twice_gives_one_load(pg_db, pg_snapshot, golden)


async def _twice_gives_one_load(url: str, snapshot: Any, golden: Path) -> None:
    a, b = await _same_workflow_twice(f"{url}?replay=true", golden)
    assert a.rejected == [] and b.rejected == []
    assert_same(await snapshot(url), golden_snapshot(golden, "hierarchical_wf_success"))


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


# ---------------------------------------------------------------- MySQL / MariaDB (issue 27.7)

@pytest.mark.mysql
@pytest.mark.corpus
async def test_mysql_same_workflow_loaded_twice_at_once(mysql_db: str, golden: Path) -> None:  # noqa: F811
    await _twice_gives_one_load(mysql_db, mysql_snapshot, golden)


def _root_streams(golden: Path) -> list[list]:
    """Eight workflows (the golden four, twice with fresh uuids), each root with its sub-workflows."""
    by_root: dict[str, list] = {}
    for event in synthetic(golden, 2):
        by_root.setdefault(event.fields.get("root.xwf.id") or event.fields["xwf.id"], []).append(event)
    return list(by_root.values())


MYSQL_ROUNDS = 10


def assert_same_but_rc_meta(actual: dbcompare.Snapshot, expected: dbcompare.Snapshot, written: set) -> None:
    """Equal rows, but `rc_meta`: one value per (lfn, key), shared by every workflow naming the file, holds the
    last writer's (monitord's rule): there, each (lfn, key) once, with a value one of the workflows wrote."""
    got, want = actual.pop("rc_meta"), expected.pop("rc_meta")
    try:
        assert sorted(row[:2] for row in got.elements()) == sorted(row[:2] for row in want.elements())
        assert set(got) <= written
        assert_same(actual, expected)
    finally:
        actual["rc_meta"], expected["rc_meta"] = got, want


async def _writers_at_once(url: str, streams: list[list], size: int) -> list:
    """One endpoint (its own connection) per stream, their batches interleaved as the server takes them."""
    endpoints = [create_endpoint(EndpointURL.parse(url)) for _ in streams]

    async def writer(endpoint: object, events: list) -> None:
        await endpoint.open()  # type: ignore[attr-defined]
        try:
            for chunk in batches(events, size):
                await endpoint.write(chunk)  # type: ignore[attr-defined]
                await asyncio.sleep(0)
        finally:
            await endpoint.close()  # type: ignore[attr-defined]

    await asyncio.gather(*(writer(e, events) for e, events in zip(endpoints, streams)))
    return endpoints


@pytest.mark.mysql
@pytest.mark.corpus
@pytest.mark.timeout(300)
def test_mysql_nine_writers_one_workflow_twice(tmp_path: Path, golden: Path, mysql_server: str) -> None:
    """Nine writers at once into one MariaDB database, eight workflows and the first one a second time (both
    replaying it), ten rounds: every writer succeeds and the rows are those of separate loads. The first
    round runs nine `streamer load` processes (each must exit 0); the other nine run the nine writers in this
    process (each with its own connection: as separate to the server as processes), which interleaves their
    batches more tightly than processes starting one after the other do, in a fraction of the time."""
    from streamer.events import bp

    streams = _root_streams(golden)
    assert len(streams) == 8
    writers = [*streams, streams[0]]
    names = [f"streamer_test_{uuid.uuid4().hex[:12]}" for _ in range(MYSQL_ROUNDS + 1)]
    try:
        reference = f"{mysql_server}/{names[0]}"
        for events in streams:  # separate loads, one after the other
            asyncio.run(load(reference, events, 500))
        expected = asyncio.run(mysql_snapshot(reference))
        assert dbcompare.counts(expected)["workflow"] == 10  # two hierarchical roots with a sub-workflow each
        written = {(e.fields["lfn.id"], e.fields["key"], e.fields["value"]) for events in streams for e in events
                   if e.name == "stampede.rc.meta"}
        for round_, name in enumerate(names[1:]):
            url = f"{mysql_server}/{name}?replay=true"
            if round_ == 0:
                files = []
                for i, events in enumerate(writers):
                    path = tmp_path / f"writer{i}.bp"
                    path.write_text("".join(bp.format_event(e) + "\n" for e in events))
                    files.append(path)
                procs = [subprocess.Popen([sys.executable, "-m", "streamer", "load", str(path), "--dest",
                                           f"{url}&batch=40", "-q"], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True) for path in files]
                results = [proc.communicate(timeout=240) for proc in procs]
                assert [proc.returncode for proc in procs] == [0] * 9, [err for _, err in results if err]
            else:
                endpoints = asyncio.run(_writers_at_once(url, writers, 37 + round_))
                assert [e.rejected for e in endpoints] == [[]] * 9
            assert_same_but_rc_meta(asyncio.run(mysql_snapshot(f"{mysql_server}/{name}")), expected, written)
    finally:
        for name in names:
            asyncio.run(mysql_query(mysql_server, None, f'DROP DATABASE IF EXISTS "{name}"'))
