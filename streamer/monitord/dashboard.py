"""The master workflow (dashboard) database: what pegasus-dashboard lists.

Like monitord, the root workflow (not its sub-workflows) gets a
`master_workflow` row (from `wf.plan`, with `db_url` = its Stampede database)
and a `master_workflowstate` row for each `xwf.start` / `xwf.end`
(WORKFLOW_STARTED / WORKFLOW_TERMINATED). A replay first deletes the earlier
registration of the workflow (monitord's `delete_dashboard_workflow`), so it is
registered again from scratch. The database is SQLite (default
`~/.pegasus/workflow.db`) or PostgreSQL, with the whole Pegasus schema created
when missing (as monitord does: it shares the Stampede DDL).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from streamer.config.settings import EndpointSpec
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.events import Event
from streamer.util.urls import EndpointURL, mask

log = logging.getLogger("streamer.monitord")

EVENTS = "stampede.wf.plan,stampede.xwf.start,stampede.xwf.end"
STATES = {"stampede.xwf.start": "WORKFLOW_STARTED", "stampede.xwf.end": "WORKFLOW_TERMINATED"}
WF_COLUMNS = ("wf_uuid", "dax_label", "dax_version", "dax_file", "dag_file_name", "timestamp", "submit_hostname",
              "submit_dir", "planner_arguments", "user", "grid_dn", "planner_version", "db_url", "archived")


def workflow_row(event: Event, db_url: str | None) -> tuple[Any, ...]:
    f = event.fields
    grid_dn = f.get("grid_dn")
    return (f.get("xwf.id"), f.get("dax.label"), f.get("dax.version"), f.get("dax.file"), f.get("dag.file.name"),
            f.get("ts"), f.get("submit.hostname"), f.get("submit.dir"), None, f.get("user"),
            None if grid_dn in (None, "null") else grid_dn, f.get("planner.version"), db_url, False)


def state_row(event: Event) -> tuple[Any, ...]:
    f = event.fields
    status = f.get("status") if event.name == "stampede.xwf.end" else None
    return (STATES[event.name], f.get("ts"), int(f.get("restart_count") or 0), status, f.get("reason"))


class DashboardEndpoint(Endpoint):
    """Registers workflows and their state changes in the master DB."""

    default_events = EVENTS

    def __init__(self, url: EndpointURL, *, db_url: str | None, replay: bool) -> None:
        super().__init__(url, {"overflow": "off", "events": EVENTS})
        self.db_url = db_url
        self.replay = replay
        self.kind = url.kind
        if self.kind not in ("sqlite", "postgresql"):
            raise EndpointError(f"master database {url.masked}: only sqlite:// and postgresql:// are supported")
        self._expunged: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: Any = None

    @property
    def name(self) -> str:
        return f"master DB {self.url.masked}"

    async def open(self) -> None:
        if self.kind == "sqlite":
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamer-dashboard")
            await asyncio.get_running_loop().run_in_executor(self._executor, self._open_sqlite)
        else:
            import asyncpg

            from streamer.endpoints.db.postgres import _ensure_schema

            self._conn = await asyncpg.connect(self.url.pg_dsn, timeout=30)
            await _ensure_schema(self._conn, self.name)

    def _open_sqlite(self) -> None:
        import sqlite3
        from pathlib import Path

        from streamer.endpoints.db.sqlite import _ensure_schema, sqlite_path

        path = Path(sqlite_path(self.url))
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
            _ensure_schema(conn, self.name)
        except sqlite3.Error as exc:
            raise EndpointError(f"{self.name}: {exc}") from None
        if path.stat().st_mode & 0o077 and str(path).endswith("/.pegasus/workflow.db"):
            path.chmod(0o600)  # as Pegasus creates the user's master DB
        self._conn = conn

    async def write(self, batch: Sequence[Event]) -> None:
        ops = []
        for event in batch:
            uuid = event.fields.get("xwf.id")
            if not isinstance(uuid, str) or event.fields.get("root.xwf.id", uuid) != uuid:
                continue  # sub-workflows are not registered (as monitord)
            if event.name == "stampede.wf.plan":
                expunge = self.replay and uuid not in self._expunged
                self._expunged.add(uuid)
                ops.append(("wf", uuid, expunge, workflow_row(event, self.db_url)))
            elif event.name in STATES:
                ops.append(("state", uuid, False, state_row(event)))
        if not ops:
            return
        if self.kind == "sqlite":
            assert self._executor is not None
            await asyncio.get_running_loop().run_in_executor(self._executor, self._write_sqlite, ops)
        else:
            await self._write_postgres(ops)

    def _write_sqlite(self, ops: list[tuple[str, str, bool, tuple[Any, ...]]]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for kind, uuid, expunge, row in ops:
                if kind == "wf":
                    if expunge:
                        conn.execute("DELETE FROM master_workflowstate WHERE wf_id IN "
                                     "(SELECT wf_id FROM master_workflow WHERE wf_uuid = ?)", (uuid,))
                        conn.execute("DELETE FROM master_workflow WHERE wf_uuid = ?", (uuid,))
                    cols = ", ".join(f'"{c}"' for c in WF_COLUMNS)
                    conn.execute(f"INSERT OR IGNORE INTO master_workflow ({cols}) VALUES "
                                 f"({', '.join('?' * len(WF_COLUMNS))})", row)
                else:
                    found = conn.execute("SELECT wf_id FROM master_workflow WHERE wf_uuid = ?", (uuid,)).fetchone()
                    if found is None:
                        log.warning("%s: state of unregistered workflow %s skipped", self.name, uuid)
                        continue
                    conn.execute("INSERT OR IGNORE INTO master_workflowstate (wf_id, state, timestamp, restart_count, "
                                 "status, reason) VALUES (?, ?, ?, ?, ?, ?)", (found[0], *row))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def _write_postgres(self, ops: list[tuple[str, str, bool, tuple[Any, ...]]]) -> None:
        from decimal import Decimal

        conn = self._conn
        ops = [(k, u, e, tuple(Decimal(str(v)) if isinstance(v, float) else v for v in row)) for k, u, e, row in ops]
        async with conn.transaction():
            for kind, uuid, expunge, row in ops:
                if kind == "wf":
                    if expunge:
                        await conn.execute("DELETE FROM master_workflowstate WHERE wf_id IN "
                                           "(SELECT wf_id FROM master_workflow WHERE wf_uuid = $1)", uuid)
                        await conn.execute("DELETE FROM master_workflow WHERE wf_uuid = $1", uuid)
                    cols = ", ".join(f'"{c}"' for c in WF_COLUMNS)
                    marks = ", ".join(f"${i}" for i in range(1, len(WF_COLUMNS) + 1))
                    await conn.execute(f"INSERT INTO master_workflow ({cols}) VALUES ({marks}) "
                                       "ON CONFLICT DO NOTHING", *row)
                else:
                    wf_id = await conn.fetchval("SELECT wf_id FROM master_workflow WHERE wf_uuid = $1", uuid)
                    if wf_id is None:
                        log.warning("%s: state of unregistered workflow %s skipped", self.name, uuid)
                        continue
                    await conn.execute("INSERT INTO master_workflowstate (wf_id, state, timestamp, restart_count, "
                                       "status, reason) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                                       wf_id, *row)

    async def close(self) -> None:
        if self.kind == "sqlite" and self._executor is not None:
            if self._conn is not None:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._conn.close)
            self._executor.shutdown(wait=True)
            self._executor = None
        elif self._conn is not None:
            await self._conn.close()
        self._conn = None


def dashboard_endpoint(url: EndpointURL, *, replay: bool,
                       db_url: str | None = None) -> tuple[Endpoint, EndpointSpec] | None:
    """The master DB endpoint and its spec, or None (logged) when the URL cannot be used."""
    try:
        endpoint = DashboardEndpoint(url, db_url=db_url, replay=replay)
    except (EndpointError, ValueError) as exc:
        log.error("cannot create dashboard events output... disabling dashboard event output! (%s)", mask(str(exc)))
        return None
    return endpoint, EndpointSpec(url=url, events=EVENTS)
