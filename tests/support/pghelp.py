"""PostgreSQL helpers of the tests and the benchmarks: admin statements, fresh databases dropped afterwards,
a database's rows as a `dbcompare` snapshot, two loads' rows compared, waits on the per-workflow batch lock.

`dsn` is a URL of the server's maintenance database (`postgresql://postgres@127.0.0.1:5432/postgres`); a fresh
database is created beside it under a random name (helpers run at the same time share the server) and dropped
`WITH (FORCE)` on the way out, pass or fail.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

from tests.support import dbcompare


async def admin(dsn: str, *statements: str) -> None:
    """Run `statements` in order on one connection to `dsn` (CREATE/DROP DATABASE, roles)."""
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def database_url(dsn: str, name: str) -> str:
    """The URL of database `name` on the server of `dsn`."""
    return dsn.rsplit("/", 1)[0] + f"/{name}"


def random_name(prefix: str = "streamer_test") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def fresh_database(dsn: str, prefix: str = "streamer_test") -> AsyncIterator[str]:
    """The URL of a new, empty database on the server of `dsn`; dropped on exit."""
    name = random_name(prefix)
    await admin(dsn, f"CREATE DATABASE {name}")
    try:
        yield database_url(dsn, name)
    finally:
        await admin(dsn, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def fresh_database_sync(dsn: str, prefix: str = "streamer_test") -> Iterator[str]:
    """`fresh_database` outside an event loop (synchronous tests and benchmarks)."""
    name = random_name(prefix)
    asyncio.run(admin(dsn, f"CREATE DATABASE {name}"))
    try:
        yield database_url(dsn, name)
    finally:
        asyncio.run(admin(dsn, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def pg_snapshot(dsn: str) -> dbcompare.Snapshot:
    """Every Stampede row of the database at `dsn`, comparable by natural keys (`dbcompare.postgres_snapshot`)."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return await dbcompare.postgres_snapshot(conn)
    finally:
        await conn.close()


async def load_rows(dsn: str) -> dbcompare.Snapshot:
    """The rows of the database at `dsn` as `rows_diff` compares them: rc_meta is keyed by file name across
    workflows (generated workflows share `f.ID0000001`...): its value is that of whichever workflow's event came
    first, which depends on how publishers interleaved, not on loading; it is compared by key. Take it once for a
    reference that several loads are compared with."""
    snap = await pg_snapshot(dsn)
    snap["rc_meta"] = Counter({row[:2]: n for row, n in snap["rc_meta"].items()})
    return snap


async def rows_diff(collected: str, direct: str | dbcompare.Snapshot) -> str:
    """How the rows of database `collected` differ from those of `direct` (a database, or its `load_rows`; ""
    when every table's are equal): first a line per table that differs (how many rows extra and missing), then
    the rows themselves, so that a cut print still names every table."""
    got = await load_rows(collected)
    expected = await load_rows(direct) if isinstance(direct, str) else direct
    diff = dbcompare.compare(got, expected)
    if not diff:
        return ""
    summary = "; ".join(f"{table} +{len(extra)} -{len(missing)}" for table, (extra, missing) in diff.items())
    return f"tables that differ (rows extra, missing): {summary}\n{dbcompare.format_diff(diff)}"


async def assert_same_rows(collected: str, direct: str | dbcompare.Snapshot) -> None:
    """Every table's rows of `collected` equal those of `direct` (`rows_diff`)."""
    diff = await rows_diff(collected, direct)
    assert not diff, diff


class LockWaits:
    """Samples pg_locks for per-workflow batch locks (`pgwriters.BATCH`, a two-key advisory lock) not granted in
    database `dsn`, every `interval` seconds while the `with` block runs (in a running event loop): a writer
    waiting for another's workflow. Not the schema-creation lock every writer takes once at start, nor other
    databases' locks. `waits` sums the ungranted locks seen over `samples` samples."""

    def __init__(self, dsn: str, interval: float = 0.01) -> None:
        self.dsn, self.interval, self.waits, self.samples = dsn, interval, 0, 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        import asyncpg

        from streamer.endpoints.db.pgwriters import BATCH

        conn = await asyncpg.connect(self.dsn)
        try:
            while True:
                self.waits += int(await conn.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2 "
                    "AND classid = $1::bigint::oid AND database = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database())", BATCH))
                self.samples += 1
                await asyncio.sleep(self.interval)
        finally:
            await conn.close()

    def __enter__(self) -> "LockWaits":
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()
