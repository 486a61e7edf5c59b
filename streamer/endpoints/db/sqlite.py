"""SQLite endpoint: `sqlite:///relative/wf.stampede.db`, `sqlite:////absolute/wf.stampede.db`.

The embedded default of `streamer replay` / `follow`, named like monitord's
(`<dag basename>.stampede.db` next to the workflow, see `default_path`).

sqlite3 calls block, so they run in worker threads: a few
(`WRITER_THREADS`) shared by every SQLite endpoint of the process, not one
each (serve writes a DB per workflow: a hundred threads would fight the
parse thread and the event loop for the GIL). Each endpoint has one
connection and runs one call at a time, in order. A batch is one transaction (`BEGIN IMMEDIATE` ... `COMMIT`) of a
few `executemany` calls; WAL mode lets Pegasus's tools read while we write.
`write` returns after COMMIT, with `synchronous=FULL` by default so an
acknowledged batch survives a power cut (`?synchronous=normal` trades that
for speed; a killed process loses nothing either way). Several processes may
write one file at once: see `sqlitewriters.py`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

from streamer.events import Event
from streamer.util.urls import EndpointURL
from streamer.endpoints.db.schema import stampede as schema
from streamer.endpoints import options as option_specs
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.endpoints.db.common import WriteStats
from streamer.endpoints.db.schema import provenance as provenance_schema
from streamer.endpoints.db.schema import version as schema_version
from streamer.endpoints.layers.resilience import RetryPolicy, RetryStats, TransientError, retrying_sync, sqlite_fault
from streamer.endpoints.db.sqlitewriters import FileWriterLocks
from streamer.endpoints.db.ids import MaxCounters
from streamer.endpoints.db.loader import Loader
from streamer.endpoints.db.plan import SQLITE, Plan, doomed_sql, expunge_statements


WRITER_THREADS = 4
"""Threads that run the sqlite3 calls of every SQLite endpoint of the process (each endpoint's calls
one at a time, in order). Most of a write waits for the disk (fsync) without the GIL: a few threads
keep several DBs' commits in flight; more would only queue for the GIL."""
_writer_pool: ThreadPoolExecutor | None = None
_writer_pool_lock = threading.Lock()


def writer_pool() -> ThreadPoolExecutor:
    """The shared pool of `WRITER_THREADS` threads (created on first use; threads are not tied to a loop)."""
    global _writer_pool
    with _writer_pool_lock:
        if _writer_pool is None:
            _writer_pool = ThreadPoolExecutor(max_workers=WRITER_THREADS, thread_name_prefix="streamer-sqlite")
        return _writer_pool


def sqlite_path(url: EndpointURL) -> str:
    """The file of a `sqlite:` URL (SQLAlchemy's convention: 3 slashes relative, 4 absolute)."""
    base = f"{url.scheme}://{url.netloc}{url.path}"
    if url.scheme != "sqlite" or url.netloc or not url.path.startswith("/"):
        raise EndpointError(f"bad SQLite URL {base!r}: expected sqlite:///relative.db or sqlite:////abs.db")
    path = url.path[1:]
    if not path:
        raise EndpointError(f"SQLite URL {base!r} names no file")
    return path


def missing_directory(url: EndpointURL, path: str) -> None:
    """Refuse a database whose directory does not exist, as `file://` does: a typo (or three slashes meant as
    four, `sqlite:///tmp/x.db` in /tmp writing /tmp/tmp/x.db) must not create a tree silently."""
    parent = Path(path).absolute().parent
    if parent.is_dir():
        return
    hint = "" if Path(path).is_absolute() else (
        f"; three slashes are relative to the current directory, for /{path} write sqlite:////{path} (four)")
    raise EndpointError(f"{url.masked}: directory {parent} of {Path(path).absolute()} does not exist "
                        f"(create it first){hint}")


def default_path(dag_file: str | os.PathLike[str]) -> Path:
    """Where monitord puts the database of a workflow: `<dag basename>.stampede.db` beside it."""
    dag = Path(dag_file)
    name = dag.name[: -len(".dag")] if dag.name.endswith(".dag") else dag.stem
    return dag.with_name(f"{name}.stampede.db")


class SQLiteEndpoint(Endpoint):
    """Stampede schema in a SQLite file, written from the shared `writer_pool`, one call at a time."""
    declared_options = option_specs.SQLITE

    schemes = ("sqlite",)
    default_events = "stampede.*,chimbuko.*"

    def __init__(self, url: EndpointURL, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        self.path = sqlite_path(url)
        self.stats = WriteStats()
        self._open = False
        self._order: asyncio.Lock | None = None  # calls start in the order they were made...
        self._busy = threading.Lock()  # ...and never overlap (a cancelled caller leaves its call running)
        self._conn: sqlite3.Connection | None = None
        self._loader: Loader | None = None
        self._ids: MaxCounters | None = None
        self._writers: FileWriterLocks | None = None
        self.policy = RetryPolicy(retry_for=float(self.option("retry_for", 300)))
        """`database is locked` (another writer held the file past the busy timeout) is retried this long."""
        self.retry_stats = RetryStats()

    @property
    def rejected(self) -> list[str]:
        return list(self.stats.rejected)

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._open, "endpoint not open"
        if self._order is None:
            self._order = asyncio.Lock()
        async with self._order:
            return await asyncio.get_running_loop().run_in_executor(writer_pool(), self._serialised, fn, args)

    def _serialised(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        with self._busy:
            return fn(*args)

    async def open(self) -> None:
        self._open = True
        try:
            await self._run(self._open_sync)
        except BaseException:
            self._open = False
            raise

    async def write(self, batch: Sequence[Event]) -> None:
        if batch:
            await self._run(self._write_sync, list(batch))

    async def close(self) -> None:
        if not self._open:
            return
        await self._run(self._close_sync)
        self._open = False

    # -- in a writer thread ----------------------------------------------

    def _open_sync(self) -> None:
        missing_directory(self.url, self.path)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=float(self.option("busy_timeout", 30)),
                                   check_same_thread=False)  # any thread of the pool, one at a time
        except sqlite3.Error as exc:
            raise EndpointError(f"{self.name}: cannot open {self.path}: {exc}") from None
        def prepare() -> None:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={sync}")
                _ensure_schema(conn, self.name, upgrade=self.flag("upgrade_schema"))
            except sqlite3.OperationalError as exc:
                # several runs opening one new database at once: the switch to WAL can be refused at once
                # (SQLite does not wait its busy timeout there), "database is locked": try again
                kind = sqlite_fault(exc)
                if kind is None:
                    raise
                raise TransientError(kind, f"{self.path}: {exc}") from None

        try:
            sync = str(self.option("synchronous", "full")).upper()
            if sync not in ("OFF", "NORMAL", "FULL", "EXTRA"):
                raise EndpointError(f"{self.name}: synchronous must be off, normal, full or extra")
            retrying_sync(self.name, "opening the database", prepare, self.policy, self.retry_stats)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise EndpointError(f"{self.name}: {self.path} is not a usable SQLite database: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._writers = FileWriterLocks(self.path)
        self._ids = MaxCounters(conn)
        self._loader = Loader(SQLITE, self._ids, replay=self.flag("replay"))

    def _write_sync(self, batch: list[Event]) -> None:
        records, batch = provenance_schema.split(batch)
        if records:  # Chimbuko provenance records: their own tables (provenance_schema.py)
            retrying_sync(self.name, f"batch of {len(records)} provenance records",
                          lambda: self._write_records_sync(records), self.policy, self.retry_stats)
        if batch:
            retrying_sync(self.name, f"batch of {len(batch)} events", lambda: self._attempt(batch), self.policy,
                          self.retry_stats)
        self.stats.retries = self.retry_stats.total

    def _write_records_sync(self, records: list[Event]) -> None:
        conn = self._conn
        assert conn is not None
        try:
            conn.execute("BEGIN IMMEDIATE")
            if not getattr(self, "_records_ready", False):
                provenance_schema.ensure_sqlite(conn)
            rows = provenance_schema.write_sqlite(conn, records)
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            kind = sqlite_fault(exc)
            if kind is not None:
                raise TransientError(kind, f"{self.path}: {exc}") from None
            if isinstance(exc, sqlite3.Error):
                raise EndpointError(
                    f"{self.name}: batch of {len(records)} provenance records not written: {exc}") from None
            raise
        self._records_ready = True
        self.stats.events += len(records)
        self.stats.rows += rows
        self.stats.batches += 1

    def _attempt(self, batch: list[Event]) -> None:
        conn, loader, writers = self._conn, self._loader, self._writers
        assert conn is not None and loader is not None and self._ids is not None and writers is not None
        uuids = loader.mentioned_uuids(batch)
        writers.announce(uuids)
        try:
            # Take the write lock first: what we read (ids, existing rows) stays true until COMMIT,
            # even if another process writes the same file between our batches.
            conn.execute("BEGIN IMMEDIATE")
            loader.share(writers.shared_with_others(uuids))  # re-read their ids, never expunge their rows
            self._ids.reload()
            unknown = loader.unknown_uuids(batch)
            for start in range(0, len(unknown), 400):
                chunk = unknown[start:start + 400]
                queries = loader.seed_sql(chunk)
                while queries:
                    results = {name: conn.execute(sql, params).fetchall() for name, sql, params in queries}
                    queries = loader.seed(chunk, results)
            plan = loader.plan(batch)
            _apply(conn, plan)
            conn.execute("COMMIT")
        except BaseException as exc:
            # The caches ran ahead of what is committed: forget them, re-read next time.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            loader.reset()
            kind = sqlite_fault(exc)
            if kind is not None:
                raise TransientError(kind, f"{self.path}: {exc}") from None
            if isinstance(exc, sqlite3.Error):
                raise EndpointError(f"{self.name}: batch of {len(batch)} events not written: {exc}") from None
            raise
        loader.committed()
        self.stats.record(plan, self.name)

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._writers is not None:
            self._writers.close()
            self._writers = None


def _apply(conn: sqlite3.Connection, plan: Plan) -> None:
    for uuid in plan.expunge:
        ids = [row[0] for row in conn.execute(doomed_sql(SQLITE), (uuid,))]
        if ids:
            for sql in expunge_statements(SQLITE, ids):
                conn.execute(sql)
    for sql, rows in plan.statements(SQLITE):
        conn.executemany(sql, rows)


def _existing_tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {name: [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')] for name in names}


def _ensure_schema(conn: sqlite3.Connection, endpoint_name: str, *, upgrade: bool = False) -> None:
    """Create the schema when missing; upgrade (when asked) or refuse an older one; refuse another schema."""
    check = schema_version.SchemaCheck(endpoint_name, upgrade=upgrade, dialect="sqlite")
    conn.execute("BEGIN IMMEDIATE")
    try:
        existing = _existing_tables(conn)
        if check.reads_version(existing):
            check.found(conn.execute(schema_version.LATEST_VERSION_SQL).fetchone())
        for sql in check.upgrade_sql(existing):
            conn.execute(sql)
        missing = check.missing(_existing_tables(conn) if check.upgraded else existing)
        for table in schema.TABLES:
            if table.name in missing:
                conn.execute(schema.create_table_sql(table, "sqlite"))
            for sql in schema.create_index_sql(table, "sqlite"):
                conn.execute(sql)
        if (row := check.version_row()) is not None:
            conn.execute("INSERT INTO dbversion (version_number, version, version_timestamp) VALUES (?, ?, ?)", row)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
