"""Id reservation: which tables get ids from the loader, how many a batch may
take, and each dialect's way of reserving them before the batch is planned
(PostgreSQL: its sequences; SQLite and MySQL: above the table's maximum, under
the write lock)."""

from __future__ import annotations

from collections import deque
import sqlite3
from typing import Any, Iterable, Protocol

from streamer.events import Event
from streamer.endpoints.db.schema import stampede as schema


class IdSource(Protocol):
    def next(self, table: str) -> int: ...



ID_TABLES: dict[str, str] = {
    "workflow": "wf_id", "job": "job_id", "job_instance": "job_instance_id", "task": "task_id",
    "host": "host_id", "invocation": "invocation_id", "integrity": "integrity_id", "tag": "tag_id",
}
"""Tables whose primary key the loader assigns -> that key."""

# Event (short name) -> table that gets a new id for it, to reserve ids per batch.
ID_DEMAND: dict[str, str] = {
    "stampede.wf.plan": "workflow", "stampede.job.info": "job", "stampede.task.info": "task",
    "stampede.job_inst.submit.start": "job_instance", "stampede.job_inst.pre.start": "job_instance",
    "stampede.job_inst.host.info": "host", "stampede.inv.end": "invocation",
    "stampede.int.metric": "integrity", "stampede.job_inst.tag": "tag",
}


def id_demand(events: Iterable[Event]) -> dict[str, int]:
    """At most how many new ids per table this batch takes (to reserve them at once)."""
    demand: dict[str, int] = {}
    for event in events:
        table = ID_DEMAND.get(event.name)
        if table:
            demand[table] = demand.get(table, 0) + 1
    return demand


class IdPool:
    """Ids reserved for a batch, handed out by the loader (PostgreSQL, MySQL)."""

    def __init__(self) -> None:
        self.free: dict[str, deque[int]] = {t: deque() for t in ID_TABLES}

    def next(self, table: str) -> int:
        try:
            return self.free[table].popleft()
        except IndexError:
            raise RuntimeError(f"no id reserved for table {table}") from None

    def shortfall(self, demand: dict[str, int]) -> dict[str, int]:
        return {t: n - len(self.free[t]) for t, n in demand.items() if n > len(self.free[t])}

    def clear(self) -> None:
        for free in self.free.values():
            free.clear()


async def reserve_postgres(conn: Any, pool: IdPool, sequences: dict[str, str], demand: dict[str, int]) -> None:
    """Top up the pool from the tables' sequences for this batch, in one round trip (at least 64 at a time)."""
    short = pool.shortfall(demand)
    if not short:
        return
    tables = list(short)
    parts = [f"SELECT {i}, nextval('{sequences[t]}') FROM generate_series(1, ${i + 1})"
             for i, t in enumerate(tables)]
    rows = await conn.fetch(" UNION ALL ".join(parts), *(max(short[t], 64) for t in tables))
    for index, value in rows:
        pool.free[tables[index]].append(value)


async def reserve_mysql(cur: Any, pool: IdPool, demand: dict[str, int]) -> None:
    """Ids for this batch: above each table's maximum (the lock keeps other writers out until commit)."""
    for table, count in demand.items():
        pk = ID_TABLES[table]
        await cur.execute(f"SELECT COALESCE(MAX({pk}), 0) FROM {schema.quote(table)}")
        (top,) = await cur.fetchone()
        pool.free[table].extend(range(int(top) + 1, int(top) + 1 + count))


class MaxCounters:
    """SQLite: ids from MAX(id) + 1, re-read under the write lock at the start of every batch."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.reload()

    def reload(self) -> None:
        self.last = {
            table: self.conn.execute(f"SELECT COALESCE(MAX({pk}), 0) FROM {table}").fetchone()[0]
            for table, pk in ID_TABLES.items()
        }

    def next(self, table: str) -> int:
        self.last[table] += 1
        return self.last[table]
