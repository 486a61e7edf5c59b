"""MySQL / MariaDB endpoint: `mysql://user[:password]@host[:port]/database` (asyncmy).

Pegasus's URL form (`mysql://username:userpass@hostname/database_name`, seed
003); `mariadb://` and SQLAlchemy's `mysql+pymysql://` / `mysql+mysqldb://`
are the same endpoint. The database is created if missing (utf8mb4), and the
Stampede schema in it as Pegasus creates it in MySQL
(`stampede_schema_mysql.py`), checked and upgraded like the other databases
(`schema_version.py`).

One batch = one transaction, planned by the shared loader. Writers share a
database safely: each batch runs under the named lock `streamer.stampede`
(GET_LOCK), takes its new ids from the tables' current maximum under that
lock and commits before releasing it, so two streamers never hand out the
same id. The same workflow loaded by two writers at once is told by presence
locks (`mysqlwriters.py`): the later one joins the load rather than deleting
it, both re-read its ids; a row another writer inserted between two batches
(a foreign key that fails, 1452) is read again and the batch retried. Every
insert is idempotent on the table's natural key (`ON DUPLICATE KEY UPDATE` of
nothing), so a batch re-sent after a crash or a lost connection changes nothing.
A lost connection is retried with back-off for `retry_for` seconds (default
300), like the PostgreSQL endpoint.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import unquote

from streamer.events import Event
from streamer.util import safenames
from streamer.util.urls import EndpointURL, Host, mask
from streamer.endpoints.db.schema import version as schema_version
from streamer.endpoints.db.schema import stampede as schema
from streamer.endpoints.db.schema import mysql as mysql_schema
from streamer.endpoints.db.schema import provenance as provenance_schema
from streamer.endpoints import options as option_specs
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.endpoints.db.common import WriteStats
from streamer.endpoints.db.ids import ID_TABLES, IdPool, reserve_mysql
from streamer.endpoints.layers import resilience
from streamer.endpoints.layers.resilience import (CONNECTION, DEADLOCK, STALE_IDS, RetryPolicy, RetryStats,
                                                  TransientError, first_connection, retrying)
from streamer.endpoints.db.loader import Loader
from streamer.endpoints.db.mysqlwriters import WriterSlots
from streamer.endpoints.db.plan import Plan, SQLDialect, doomed_sql, expunge_statements

log = logging.getLogger("streamer.endpoints.db")

try:
    import asyncmy
    from asyncmy import errors as mysql_errors
except ModuleNotFoundError:  # pragma: no cover - asyncmy is a runtime dependency
    asyncmy = None  # type: ignore[assignment]
    mysql_errors = None  # type: ignore[assignment]

LOCK_NAME = "streamer.stampede"
"""Named lock every writer takes for a batch (and for creating the schema)."""
LOCK_TIMEOUT = 300
SQL_MODE = ("ANSI_QUOTES,STRICT_TRANS_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
            "NO_ENGINE_SUBSTITUTION")
_LOST = {2003, 2006, 2013, 2055, 1927, 1053}
"""Client/server error codes of a connection that went away (or never came)."""


@dataclass(frozen=True)
class _MySQLDialect(SQLDialect):
    """The loader's SQL in MySQL: `%s` placeholders, `IN (...)` lists, `<=>` for null-safe equality."""

    def ph(self, i: int) -> str:
        return "%s"

    def any_of(self, expr: str, values: Sequence[Any], start: int = 1) -> tuple[str, list[Any]]:
        return f"{expr} IN ({', '.join(['%s'] * len(values))})", list(values)

    @property
    def same(self) -> str:
        return "<=>"


MYSQL = _MySQLDialect("mysql")  # type: ignore[arg-type]


@dataclass(frozen=True)
class MySQLTarget:
    host: str
    port: int
    user: str
    password: str | None
    database: str


def parse_target(url: EndpointURL) -> MySQLTarget:
    database = unquote(url.path.lstrip("/"))
    if not database or "/" in database:
        raise EndpointError(f"{url.masked}: give the database as the URL's path (mysql://user@host/database)")
    try:
        safenames.sql_identifier(database, "database")
    except safenames.UnsafeName as exc:
        raise EndpointError(f"{url.masked}: {exc}") from None
    host = url.hosts[0] if url.hosts else Host("")
    try:
        port = host.port_number(3306) or 3306
    except ValueError:
        raise EndpointError(f"{url.masked}: bad port") from None
    return MySQLTarget(host.name or "localhost", port, url.user or getpass.getuser(), url.password, database)


def _code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _is_lost(exc: BaseException) -> bool:
    if isinstance(exc, (OSError, asyncio.TimeoutError, ConnectionError)):
        return True
    if mysql_errors is not None and isinstance(exc, (mysql_errors.OperationalError, mysql_errors.InterfaceError)):
        return _code(exc) in _LOST or _code(exc) is None
    return False


_TRANSIENT_CODES = {1213: DEADLOCK, 1205: resilience.LOCK_TIMEOUT, 1452: STALE_IDS}
"""ER_LOCK_DEADLOCK (the server rolled the transaction back), ER_LOCK_WAIT_TIMEOUT, ER_NO_REFERENCED_ROW_2
(a row the batch points at by a cached id is not there: another writer replaced it; the ids are read again)."""


def mysql_fault(exc: BaseException) -> str | None:
    """The transient kind of an asyncmy exception (`resilience`), or None when it is a real error."""
    if _is_lost(exc):
        return CONNECTION
    if mysql_errors is None or not isinstance(exc, mysql_errors.MySQLError):
        return None
    code = _code(exc)
    return None if code is None else _TRANSIENT_CODES.get(code)


class MySQLEndpoint(Endpoint):
    """Stampede schema in MySQL / MariaDB, batched, lock-serialised, reconnecting."""
    declared_options = option_specs.MYSQL

    schemes = ("mysql", "mariadb", "mysql+pymysql", "mysql+mysqldb", "mariadb+pymysql", "mysql+asyncmy")
    default_events = "stampede.*,chimbuko.*"

    def __init__(self, url: EndpointURL, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        if asyncmy is None:
            raise EndpointError("mysql:// needs the asyncmy package")
        self.target = parse_target(url)
        self.stats = WriteStats()
        self.options.setdefault("batch", 10_000)
        self.retry_for = float(self.option("retry_for", 300))
        self.retry_stats = RetryStats()
        self._conn: Any = None
        self._ids = IdPool()
        self._loader = Loader(MYSQL, self._ids, replay=self.flag("replay"))
        self._writers = WriterSlots(self.target.database)
        self._records_ready = False
        """The provenance tables exist (checked once, on the first provenance record)."""

    @property
    def rejected(self) -> list[str]:
        return list(self.stats.rejected)

    def give_up_after(self, seconds: float) -> None:
        self.retry_for = seconds

    # -- lifecycle ----------------------------------------------------------

    async def open(self) -> None:
        await self._retrying("connect", self._connect,
                             first=first_connection(self.retry_for, float(self.option("connect_for", 30))))

    async def _raw_connect(self, database: str | None) -> Any:
        t = self.target
        kwargs: dict[str, Any] = dict(host=t.host, port=t.port, user=t.user, charset="utf8mb4", autocommit=False,
                                      init_command=f"SET SESSION sql_mode = '{SQL_MODE}'", connect_timeout=30)
        if t.password is not None:
            kwargs["password"] = t.password
        if database is not None:
            kwargs["database"] = database
        return await asyncmy.connect(**kwargs)

    async def _connect(self) -> None:
        await self._drop()
        try:
            conn = await self._raw_connect(None)
        except mysql_errors.OperationalError as exc:
            if _is_lost(exc) and _code(exc) in (2003, 2006, 2013):
                raise
            raise EndpointError(f"{self.name}: {mask(str(exc))}") from None
        database = safenames.sql_identifier(self.target.database, "database")  # a name, never SQL
        try:
            async with conn.cursor() as cur:
                await cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                                  (self.target.database,))
                if not await cur.fetchall():  # (IF NOT EXISTS would log a server warning when it exists)
                    await cur.execute(f"CREATE DATABASE IF NOT EXISTS {database} "
                                      "CHARACTER SET utf8mb4")
                await cur.execute(f"USE {database}")
                await cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            await self._locked(conn, self._ensure_schema)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._writers.reconnected()

    async def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a dead connection cannot be closed cleanly
                pass
            self._conn = None

    async def close(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.ensure_closed()
            except Exception:  # noqa: BLE001
                self._conn.close()
            self._conn = None

    async def _locked(self, conn: Any, fn: Any, *args: Any) -> Any:
        """Run `fn(conn, *args)` holding the writers' named lock."""
        async with conn.cursor() as cur:
            await cur.execute("SELECT GET_LOCK(%s, %s)", (LOCK_NAME, LOCK_TIMEOUT))
            (got,) = await cur.fetchone()
        if got != 1:
            raise EndpointError(f"{self.name}: lock {LOCK_NAME} not obtained in {LOCK_TIMEOUT}s "
                                "(another writer stuck?)")
        try:
            return await fn(conn, *args)
        finally:
            try:
                async with conn.cursor() as cur:
                    await cur.execute("DO RELEASE_LOCK(%s)", (LOCK_NAME,))
            except Exception:  # noqa: BLE001 - a lost connection releases it anyway
                pass

    async def _ensure_schema(self, conn: Any) -> None:
        check = schema_version.SchemaCheck(self.name, upgrade=self.flag("upgrade_schema"), dialect="mysql")
        existing = await _existing_tables(conn)
        async with conn.cursor() as cur:
            if check.reads_version(existing):
                await cur.execute(schema_version.LATEST_VERSION_SQL)
                check.found(await cur.fetchone())
            for sql in check.upgrade_sql(existing):
                await cur.execute(sql)
        missing = check.missing(await _existing_tables(conn) if check.upgraded else existing)
        async with conn.cursor() as cur:
            for table in schema.TABLES:
                if table.name in missing:
                    await cur.execute(mysql_schema.create_table_sql(table))
            if (row := check.version_row()) is not None:
                await cur.execute(
                    "INSERT INTO dbversion (version_number, version, version_timestamp) VALUES (%s, %s, %s)", row)
        await conn.commit()

    # -- writing --------------------------------------------------------------

    async def write(self, batch: Sequence[Event]) -> None:
        if batch:
            records, events = provenance_schema.split(batch)
            if events:
                await self._retrying(f"batch of {len(events)} events", self._write_once, events)
            if records:  # Chimbuko provenance records: their own tables (schema/provenance.py)
                await self._retrying(f"batch of {len(records)} provenance records", self._write_records, records)

    async def _retrying(self, what: str, fn: Any, *args: Any, first: RetryPolicy | None = None) -> Any:
        """`fn(*args)`, through `resilience.retrying`: a lost connection is dropped and retried (reconnecting)
        for `retry_for` seconds (the first connection: `first`, `connect_for`); any other error fails the batch
        at once."""
        limit = first or RetryPolicy(retry_for=self.retry_for)
        policy = RetryPolicy(retry_for=limit.retry_for, setting=limit.setting, first_delay=0.1, max_delay=5.0,
                             quiet_for=0.0)

        async def attempt() -> Any:
            try:
                if fn != self._connect and self._conn is None:
                    await self._connect()
                return await fn(*args)
            except EndpointError:
                self._loader.reset()
                raise
            except Exception as exc:
                self._loader.reset()
                self._ids.clear()
                kind = mysql_fault(exc)
                if kind is None:
                    await self._rollback()
                    raise EndpointError(f"{self.name}: {what} not written: {mask(str(exc))}") from None
                if kind == CONNECTION:
                    await self._drop()
                else:
                    await self._rollback()
                raise TransientError(kind, str(exc) or type(exc).__name__) from None
            except BaseException:
                self._loader.reset()
                await self._drop()
                raise

        try:
            return await retrying(self.name, what, attempt, policy, self.retry_stats)
        finally:
            self.stats.retries = self.retry_stats.total

    async def _rollback(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.rollback()
            except Exception:  # noqa: BLE001
                await self._drop()

    async def _write_records(self, records: list[Event]) -> None:
        rows = await self._locked(self._conn, self._records_transaction, records)
        self.stats.events += len(records)
        self.stats.rows += rows
        self.stats.batches += 1

    async def _records_transaction(self, conn: Any, records: list[Event]) -> int:
        if not self._records_ready:  # CREATE TABLE commits by itself in MySQL: before the transaction
            async with conn.cursor() as cur:
                await provenance_schema.ensure_mysql(cur)
            self._records_ready = True
        rows: int = await _committed(conn, provenance_schema.write_mysql, records)
        return rows

    async def _write_once(self, events: list[Event]) -> None:
        self._ids.clear()
        try:
            plan = await self._locked(self._conn, _committed, self._plan_and_apply, events)
        finally:
            self._ids.clear()
        self._loader.committed()
        self.stats.record(plan, self.name)

    async def _plan_and_apply(self, cur: Any, events: list[Event]) -> Plan:
        loader = self._loader
        # other writers of the same workflows: re-read what they committed, never expunge their rows
        uuids = loader.mentioned_uuids(events)
        await self._writers.announce(cur, uuids)
        loader.share(await self._writers.shared_with_others(cur, uuids))
        unknown = loader.unknown_uuids(events)
        queries = loader.seed_sql(unknown) if unknown else []
        while queries:
            results = {}
            for name, sql, params in queries:
                await cur.execute(sql, params)
                results[name] = [tuple(r) for r in await cur.fetchall()]
            queries = loader.seed(unknown, results)
        await reserve_mysql(cur, self._ids, loader.id_demand(events))
        plan = loader.plan(events)
        await _apply(cur, plan)
        return plan


async def _committed(conn: Any, fn: Any, *args: Any) -> Any:
    """`fn(cursor, *args)` in one transaction: committed, or rolled back when it raises."""
    await conn.begin()
    try:
        async with conn.cursor() as cur:
            result = await fn(cur, *args)
        await conn.commit()
    except BaseException:
        try:
            await conn.rollback()
        except Exception:  # noqa: BLE001 - a lost connection has nothing to roll back
            pass
        raise
    return result


async def _existing_tables(conn: Any) -> dict[str, list[str]]:
    async with conn.cursor() as cur:
        await cur.execute(schema_version.COLUMNS_SQL.format("DATABASE()"))
        return schema_version.tables_of(await cur.fetchall())


def insert_sql(table: str, cols: Sequence[str]) -> str:
    """An insert that leaves an existing row (same natural key) as it is."""
    names = ", ".join(schema.quote(c) for c in cols)
    first = schema.quote(cols[0])
    return (f"INSERT INTO {schema.quote(table)} ({names}) VALUES ({', '.join(['%s'] * len(cols))}) "
            f"ON DUPLICATE KEY UPDATE {first} = {first}")


def statements(plan: Plan) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The plan's SQL in MySQL, in an order the foreign keys accept."""
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    if plan.rc_lfn:
        out.append(("INSERT INTO rc_lfn (lfn) VALUES (%s) ON DUPLICATE KEY UPDATE lfn = lfn",
                    [(lfn,) for lfn in plan.rc_lfn]))
    _, tables, _ = plan.phases(MYSQL)
    for table, cols, rows in tables:
        out.append((insert_sql(table, cols), rows))
    for table, changes in plan.updates.items():
        pk = ID_TABLES[table]
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for key, changed in changes.items():
            groups.setdefault(tuple(changed), []).append((*changed.values(), key))
        for names, rows in groups.items():
            sets = ", ".join(f"t.{schema.quote(c)} = v.{schema.quote(c)}" for c in names)
            for derived, params in _derived((*names, pk), rows):
                out.append((f"UPDATE {schema.quote(table)} t JOIN {derived} ON t.{pk} = v.{pk} SET {sets}",
                            [params]))
    if plan.rc_pfn:
        for derived, params in _derived(("lfn", "pfn", "site"), list(plan.rc_pfn)):
            out.append((
                f"INSERT INTO rc_pfn (lfn_id, pfn, site) SELECT l.lfn_id, v.pfn, v.site FROM {derived} "
                "JOIN rc_lfn l ON l.lfn = v.lfn WHERE NOT EXISTS (SELECT 1 FROM rc_pfn p "
                "WHERE p.lfn_id = l.lfn_id AND p.pfn = v.pfn AND p.site <=> v.site)", [params]))
    if plan.rc_meta:
        for derived, params in _derived(("lfn", "k", "val"), [(lfn, key, value) for (lfn, key), value
                                                              in plan.rc_meta.items()]):
            out.append((
                f'INSERT INTO rc_meta (lfn_id, "key", value) SELECT l.lfn_id, v.k, v.val FROM {derived} '
                "JOIN rc_lfn l ON l.lfn = v.lfn ON DUPLICATE KEY UPDATE value = v.val", [params]))
    if plan.wf_files:
        for derived, params in _derived(("wf", "task", "lfn", "ft"), [(wf, task, lfn, ft) for (wf, task, lfn), ft
                                                                      in plan.wf_files.items()]):
            out.append((
                "INSERT INTO workflow_files (wf_id, task_id, lfn_id, file_type) SELECT v.wf, v.task, l.lfn_id, v.ft "
                f"FROM {derived} JOIN rc_lfn l ON l.lfn = v.lfn "
                "ON DUPLICATE KEY UPDATE file_type = workflow_files.file_type", [params]))
    return out


DERIVED_ROWS = 500
"""Rows per multi-row statement (`_derived`): a few thousand parameters each."""


def _derived(names: Sequence[str], rows: list[tuple[Any, ...]]) -> list[tuple[str, tuple[Any, ...]]]:
    """Rows as derived tables `(SELECT %s AS a, ... UNION ALL SELECT %s, ...) v`, DERIVED_ROWS at a time, with
    their parameters: one statement per chunk where asyncmy's executemany would send one per row (it rewrites
    only INSERT ... VALUES)."""
    first = "SELECT " + ", ".join(f"%s AS {schema.quote(n)}" for n in names)
    other = " UNION ALL SELECT " + ", ".join(["%s"] * len(names))
    out = []
    for start in range(0, len(rows), DERIVED_ROWS):
        chunk = rows[start:start + DERIVED_ROWS]
        out.append((f"({first}{other * (len(chunk) - 1)}) v", tuple(x for row in chunk for x in row)))
    return out


async def _apply(cur: Any, plan: Plan) -> None:
    for uuid in plan.expunge:
        await cur.execute(doomed_sql(MYSQL), (uuid,))
        ids = [r[0] for r in await cur.fetchall()]
        if ids:
            for sql in expunge_statements(MYSQL, ids):
                await cur.execute(sql)
    for sql, rows in statements(plan):
        if rows:
            await cur.executemany(sql, rows)
