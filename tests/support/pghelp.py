"""PostgreSQL helpers of the tests and the benchmarks: admin statements, fresh databases dropped afterwards,
a database's rows as a `dbcompare` snapshot.

`dsn` is a URL of the server's maintenance database (`postgresql://postgres@127.0.0.1:5432/postgres`); a fresh
database is created beside it under a random name (helpers run at the same time share the server) and dropped
`WITH (FORCE)` on the way out, pass or fail.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager, contextmanager
from typing import AsyncIterator, Iterator

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
