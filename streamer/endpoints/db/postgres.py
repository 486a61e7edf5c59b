"""PostgreSQL endpoint: `postgresql://user[:password]@host:port/database` (asyncpg).

One batch = one transaction on a pooled connection: the loader plans the
batch's rows in memory (ids included), then a handful of `executemany`
calls write them. Ids come from the tables' sequences, reserved for the
whole batch in one round trip, so several streamers (one per workflow, as
with monitord) can share a database.

A lost connection (server restart, `pg_terminate_backend`, network), a
deadlock, a serialization failure or a lock timeout rolls the transaction
back; the endpoint forgets its cached ids and `resilience.retrying` writes the
batch again after a back-off (reconnecting first when the connection is gone).
Many writers may share the database: see `pgwriters.py` for how they keep out
of each other's way. Because every insert is idempotent on
the table's natural key, a batch whose COMMIT reached the server but whose
acknowledgement did not is written again without duplicating anything.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

from streamer.events import Event
from streamer.util.urls import EndpointURL, mask
from streamer.endpoints.db.schema import stampede as schema
from streamer.endpoints import options as option_specs
from streamer.endpoints.base import Endpoint, EndpointError, Pending
from streamer.endpoints.db.common import WriteStats, hold_orphans
from streamer.endpoints.db.schema import provenance as provenance_schema
from streamer.endpoints.db.schema import version as schema_version
from streamer.endpoints.db.pgwriters import WriterLocks
from streamer.endpoints.layers.resilience import (CONNECTION, STALE_IDS, Rejected, RetryPolicy, RetryStats,
                                                  TransientError, first_connection, postgres_fault, rejects_content,
                                                  retrying)
from streamer.endpoints.db.ids import ID_TABLES, IdPool, reserve_postgres
from streamer.endpoints.db.loader import Loader
from streamer.endpoints.db import pgbulk
from streamer.endpoints.db.plan import FRESH_TABLES, POSTGRESQL, Plan, doomed_sql, expunge_statements

log = logging.getLogger("streamer.endpoints.db")

try:
    import asyncpg
except ModuleNotFoundError:  # pragma: no cover - asyncpg is a runtime dependency
    asyncpg = None

_ADVISORY_LOCK = 0x5354414D  # "STAM": serialises schema creation between writers


def _connection_errors() -> tuple[type[BaseException], ...]:
    return (
        OSError,
        asyncio.TimeoutError,
        asyncpg.exceptions.ConnectionDoesNotExistError,
        asyncpg.exceptions.InterfaceError,
        asyncpg.exceptions.PostgresConnectionError,
        asyncpg.exceptions.OperatorInterventionError,  # pg_terminate_backend, shutdown
        asyncpg.exceptions.CannotConnectNowError,
        asyncpg.exceptions.InternalClientError,
    )


class PostgresEndpoint(Endpoint):
    """Stampede schema in PostgreSQL, batched, reconnecting."""
    declared_options = option_specs.POSTGRES

    schemes = ("postgresql", "postgres")
    default_events = "stampede.*,chimbuko.*"

    def __init__(self, url: EndpointURL, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        if asyncpg is None:
            raise EndpointError("postgresql:// needs the asyncpg package")
        self.dsn = url.pg_dsn
        self.stats = WriteStats()
        # Bigger transactions pay the commit and the per-statement costs less often.
        self.options.setdefault("batch", 20_000)
        self.retry_for = float(self.option("retry_for", 300))
        """Seconds a transient fault (lost connection, deadlock, ...) may persist before the endpoint fails."""
        self.wait_parents = float(self.option("wait_parents", 0))
        hold_orphans(self.stats, self.wait_parents)
        self._holding_lock = asyncio.Lock()
        self.retry_stats = RetryStats()
        self._pool: Any = None
        self._writers: WriterLocks | None = None
        self._ids = IdPool()
        self._loader = Loader(POSTGRESQL, self._ids, replay=self.flag("replay"))
        self._loader.links_wait = self.wait_parents > 0
        self._sequences: dict[str, str] = {}

    @property
    def rejected(self) -> list[str]:
        return list(self.stats.rejected)

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(retry_for=self.retry_for)

    def give_up_after(self, seconds: float) -> None:
        self.retry_for = seconds

    # -- lifecycle ----------------------------------------------------------

    async def open(self) -> None:
        # A wrong host or port should not keep a command waiting for minutes: `connect_for` (30 s).
        policy = first_connection(self.retry_for, float(self.option("connect_for", 30)))
        await retrying(self.name, "connect", self._connect_once, policy, self.retry_stats)

    async def _connect_once(self) -> None:
        try:
            await self._connect()
        except BaseException as exc:
            kind = postgres_fault(exc, _connection_errors())
            if kind is not None:
                raise TransientError(kind, str(exc) or type(exc).__name__) from None
            if isinstance(exc, asyncpg.exceptions.PostgresError):
                raise EndpointError(f"{self.name}: {mask(str(exc))}") from None
            raise

    async def _connect(self) -> None:
        await self.close()
        try:
            first = await asyncpg.connect(self.dsn, timeout=30)
        except (asyncpg.exceptions.InvalidCatalogNameError, asyncpg.exceptions.InvalidAuthorizationSpecificationError,
                asyncpg.exceptions.InvalidPasswordError) as exc:
            raise EndpointError(f"{self.name}: {mask(str(exc))}") from None
        try:  # the schema first: the pool's connections set up staging tables like its tables
            await _ensure_schema(first, self.name, upgrade=self.flag("upgrade_schema"))
            self._sequences = {
                t: await first.fetchval("SELECT pg_get_serial_sequence($1, $2)", t, pk)
                for t, pk in ID_TABLES.items()
            }
        except BaseException:
            await first.close()
            raise
        # The first connection stays: it holds this writer's presence locks (see `writers`).
        self._writers = WriterLocks(first)
        self._pool = await asyncpg.create_pool(self.dsn, min_size=0, max_size=2, command_timeout=300,
                                               init=_create_staging)

    def holding(self) -> bool:
        return self.stats.waiting()

    def pending(self) -> Pending:
        return Pending(held=len(self.stats.holding or ()), owner=id(self))

    async def flush(self) -> None:
        if self.stats.waiting():  # events waiting for another writer's parent rows: now, or refused
            await self.stats.settle(self._retry_held, self.wait_parents)

    async def _retry_held(self) -> None:
        async with self._holding_lock:
            await self.stats.retry_held(self.name, self._loader, self.wait_parents, self._write_events)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        if self._writers is not None:
            writers, self._writers = self._writers, None
            if writers.waits:
                log.info("%s: %d batches waited for another writer's batch of the same workflow", self.name,
                         writers.waits)
            self.lock_waits = writers.waits
            await writers.close()

    # -- writing --------------------------------------------------------------

    async def write(self, batch: Sequence[Event]) -> None:
        if batch:
            records, events = provenance_schema.split(batch)
            if events:
                async with self._holding_lock:
                    await self._write_events(events)
                    await self.stats.retry_held(self.name, self._loader, self.wait_parents, self._write_events)
            if records:  # Chimbuko provenance records: their own tables (provenance_schema.py)
                await retrying(self.name, f"batch of {len(records)} provenance records",
                               lambda: self._attempt(records, self._write_records),
                               self.policy, self.retry_stats, between=self._recover)
            self.stats.retries = self.retry_stats.total

    async def _write_events(self, events: list[Event]) -> None:
        await retrying(self.name, f"batch of {len(events)} events", lambda: self._attempt(events, self._write_once),
                       self.policy, self.retry_stats, between=self._recover)

    async def _write_records(self, records: list[Event]) -> None:
        async with self._pool.acquire() as conn:
            if not getattr(self, "_records_ready", False):
                await provenance_schema.ensure_postgres(conn)
                self._records_ready = True
            async with conn.transaction():
                rows = await provenance_schema.write_postgres(conn, records)
        self.stats.events += len(records)
        self.stats.rows += rows
        self.stats.batches += 1

    def _drop_connections(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()
        writers, self._writers = self._writers, None
        if writers is not None:
            writers.conn.terminate()

    async def _recover(self, kind: str) -> None:
        """Before a new attempt: a lost connection is replaced (the pool and the presence locks)."""
        if kind == CONNECTION or self._pool is None:
            await self._connect_once()

    async def _attempt(self, events: list[Event], write: Any) -> None:
        """One try of a batch; transient faults become `TransientError` (the transaction rolled back)."""
        try:
            if self._pool is None:
                await self._connect_once()
            await write(events)
        except TransientError:
            self._loader.reset()
            raise
        except BaseException as exc:
            self._loader.reset()
            kind = postgres_fault(exc, _connection_errors()) or _stale_ids(exc)
            if kind == CONNECTION:
                self._drop_connections()  # no pool left to keep re-dialling a server that is away
            if kind is not None:
                raise TransientError(kind, str(exc) or type(exc).__name__) from None
            if isinstance(exc, asyncpg.exceptions.PostgresError) or rejects_content(exc):
                raise (Rejected if rejects_content(exc) else EndpointError)(
                    f"{self.name}: batch of {len(events)} events not written: {mask(str(exc))}") from None
            raise

    async def _write_once(self, events: list[Event]) -> None:
        loader = self._loader
        writers = self._writers
        if writers is None:
            raise EndpointError(f"{self.name}: write before open or after close")
        uuids = loader.mentioned_uuids(events)
        await writers.announce(uuids)
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                # One writer per workflow at a time (locks taken in one order: no deadlock between them);
                # what another writer of the same workflow committed is re-read before planning.
                loader.share(await writers.serialize(conn, uuids))
                unknown = loader.unknown_uuids(events)
                queries = loader.seed_sql(unknown) if unknown else []
                while queries:
                    results = {name: [tuple(r) for r in await conn.fetch(sql, *params)]
                               for name, sql, params in queries}
                    queries = loader.seed(unknown, results)
                await reserve_postgres(conn, self._ids, self._sequences, loader.id_demand(events))
                plan = loader.plan(events)
                await _apply(conn, plan)
        loader.committed()
        self.stats.record(plan, self.name)


def _stale_ids(exc: BaseException) -> str | None:
    """`STALE_IDS` when a new row of a FRESH table conflicts on its natural key: another writer inserted it
    since this one cached the workflow's ids. `pgwriters` sees the writers present at each batch, not one
    that came and went between two of ours (a collector killed mid-way, its messages redelivered to us)."""
    if getattr(exc, "sqlstate", None) == "23505" and getattr(exc, "table_name", None) in FRESH_TABLES:
        return STALE_IDS
    return None


COPY_THRESHOLD = 64
"""From this many rows, a table's inserts go through COPY."""

# Rows of FRESH_TABLES cannot exist yet: COPY (or INSERT without ON CONFLICT) straight into the table; a
# conflict means the cached ids are stale (`_stale_ids`: the batch is written again after re-reading). The others
# go through a staging table and ON CONFLICT DO NOTHING, which makes re-sent
# events harmless.


async def _apply(conn: Any, plan: Plan) -> None:
    for uuid in plan.expunge:
        ids = [r[0] for r in await conn.fetch(doomed_sql(POSTGRESQL), uuid)]
        if ids:
            for sql in expunge_statements(POSTGRESQL, ids):
                await conn.execute(sql)
    _, tables, _ = plan.phases(POSTGRESQL)
    before, after = pgbulk.replica_catalog(plan)
    for sql, args in before:
        await conn.execute(sql, *args)
    for table, cols, rows in tables:
        if len(rows) < COPY_THRESHOLD:  # one statement of arrays (`pgbulk`), not one per row
            sql, args = pgbulk.insert(table, cols, rows, idempotent=table not in FRESH_TABLES)
            await conn.execute(sql, *args)
        elif table in FRESH_TABLES:  # cannot conflict: straight in
            await conn.copy_records_to_table(table, records=rows, columns=list(cols))
        else:
            await _copy_insert(conn, table, cols, rows)
    for table, changes in plan.updates.items():
        for sql, args in pgbulk.update(table, changes):
            await conn.execute(sql, *args)
    for sql, args in after:
        await conn.execute(sql, *args)


async def _create_staging(conn: Any) -> None:
    """Per-session staging tables of the COPY path (emptied at every commit)."""
    for table in schema.TABLES:
        await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS streamer_stage_{table.name} "
                           f"(LIKE {schema.quote(table.name)}) ON COMMIT DELETE ROWS")


async def _copy_insert(conn: Any, table: str, cols: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """COPY into a per-session staging table, then one INSERT ... ON CONFLICT DO NOTHING.

    COPY cannot skip rows that already exist (a re-sent batch); the staging
    table keeps the idempotent insert while the rows travel in bulk.
    """
    staging = f"streamer_stage_{table}"
    await conn.copy_records_to_table(staging, records=rows, columns=list(cols))
    names = ", ".join(schema.quote(c) for c in cols)
    await conn.execute(
        f"INSERT INTO {schema.quote(table)} ({names}) SELECT {names} FROM {staging} ON CONFLICT DO NOTHING")


async def _existing_tables(conn: Any) -> dict[str, list[str]]:
    return schema_version.tables_of(await conn.fetch(schema_version.COLUMNS_SQL.format("current_schema()")))


async def _ensure_schema(conn: Any, endpoint_name: str, *, upgrade: bool = False) -> None:
    """Create the schema when missing; upgrade (when asked) or refuse an older one; refuse another schema."""
    check = schema_version.SchemaCheck(endpoint_name, upgrade=upgrade, dialect="postgresql")
    async with conn.transaction():
        await conn.execute(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})")
        existing = await _existing_tables(conn)
        if check.reads_version(existing):
            check.found(await conn.fetchrow(schema_version.LATEST_VERSION_SQL))
        for sql in check.upgrade_sql(existing):
            await conn.execute(sql)
        missing = check.missing(await _existing_tables(conn) if check.upgraded else existing)
        for table in schema.TABLES:
            if table.name in missing:
                for type_name, sql in schema.create_enum_sql(table):
                    if not await conn.fetchval("SELECT 1 FROM pg_type WHERE typname = $1", type_name):
                        await conn.execute(sql)
                await conn.execute(schema.create_table_sql(table, "postgresql"))
            for sql in schema.create_index_sql(table, "postgresql"):
                await conn.execute(sql)
        if (row := check.version_row()) is not None:
            await conn.execute(
                "INSERT INTO dbversion (version_number, version, version_timestamp) VALUES ($1, $2, $3)", *row)
