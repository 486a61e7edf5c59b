"""Tables of Chimbuko provenance records (`chimbuko.*` events) in PostgreSQL, SQLite and MySQL.

One table per collection, beside the Stampede schema and never inside it: in
PostgreSQL the tables live in their own schema, `chimbuko` (`chimbuko.anomalies`,
...); in SQLite and MySQL/MariaDB, whose schema is the database itself, they
are prefixed (`chimbuko_anomalies`, ...).
Pegasus's tools never see them. They are created on the first provenance
record an endpoint receives.

Every table has `event_id` (the stable id: a record's identity, see
`streamer.events.chimbuko`) as primary key. Scalar fields are columns named
after the record's keys (`event_label` for the record's `event_id`,
`sonata_id` for Sonata's `__id`); nested parts (call stacks, counters,
windows, statistics, models) are JSON columns (JSONB in PostgreSQL, JSON text
in SQLite and MySQL), and keys the schema does not know go to `extra`. A NULL column is
a key that was null or absent. Records of the main database are inserted
once (a re-read record is dropped); the global database's statistics and
models are replaced by a newer record of the same identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from streamer.events import Event, chimbuko

PG_SCHEMA = "chimbuko"
SQLITE_PREFIX = "chimbuko_"

_TYPES = {  # kind -> (SQLite, PostgreSQL, MySQL)
    "int": ("INTEGER", "BIGINT", "BIGINT"),
    "num": ("REAL", "DOUBLE PRECISION", "DOUBLE"),
    "text": ("TEXT", "TEXT", "TEXT"),
    "bool": ("BOOLEAN", "BOOLEAN", "BOOLEAN"),
    "json": ("TEXT", "JSONB", "LONGTEXT"),
}
_DIALECTS = ("sqlite", "postgresql", "mysql")
MYSQL_INDEXED_PREFIX = 191
"""Characters of a text column a MySQL index keeps (InnoDB keys are bounded: 191 utf8mb4 characters fit)."""


@dataclass(frozen=True)
class RecordTable:
    collection: str
    event: str
    columns: tuple[tuple[str, str, str], ...]
    """(column, event field, kind)."""
    indexes: tuple[tuple[str, str], ...]
    """(index suffix, column list)."""
    replace: bool = False
    """Global statistics: a newer record of the same identity replaces the row."""

    @property
    def column_names(self) -> tuple[str, ...]:
        return ("event_id", *(c for c, _, _ in self.columns), "extra")

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(f for _, f, _ in self.columns)


_FUNCTION_COLUMNS = (
    ("event_label", "event.label", "text"), ("pid", "pid", "int"), ("rid", "rid", "int"), ("tid", "tid", "int"),
    ("io_step", "io_step", "int"), ("fid", "fid", "int"), ("func", "func", "text"),
    ("entry", "entry", "num"), ("exit", "exit", "num"),
    ("runtime_total", "runtime_total", "num"), ("runtime_exclusive", "runtime_exclusive", "num"),
    ("outlier_score", "outlier_score", "num"), ("outlier_severity", "outlier_severity", "num"),
    ("is_gpu_event", "is_gpu_event", "bool"), ("hostname", "hostname", "text"),
    ("io_step_tstart", "io_step_tstart", "num"), ("io_step_tend", "io_step_tend", "num"),
    ("sonata_id", "sonata.id", "int"), ("version", "version", "json"),
    ("call_stack", "call_stack", "json"), ("counter_events", "counter_events", "json"),
    ("algo_params", "algo_params", "json"), ("gpu_location", "gpu_location", "json"),
    ("gpu_parent", "gpu_parent", "json"), ("event_window", "event_window", "json"),
    ("node_state", "node_state", "json"),
)
_FUNCTION_INDEXES = (("func", "func"), ("fid", "fid"), ("rank_step", "pid, rid, io_step"), ("entry", "entry"))

TABLES: tuple[RecordTable, ...] = (
    RecordTable("anomalies", "chimbuko.anomaly", _FUNCTION_COLUMNS,
                _FUNCTION_INDEXES + (("score", "outlier_score DESC"),)),
    RecordTable("normalexecs", "chimbuko.normalexec", _FUNCTION_COLUMNS, _FUNCTION_INDEXES),
    RecordTable("metadata", "chimbuko.metadata",
                (("pid", "pid", "int"), ("rid", "rid", "int"), ("tid", "tid", "int"), ("descr", "descr", "text"),
                 ("value", "value", "json"), ("sonata_id", "sonata.id", "int")),
                (("rank", "pid, rid"), ("descr", "descr"))),
    RecordTable("func_stats", "chimbuko.func_stats",
                (("app", "app", "int"), ("fid", "fid", "int"), ("fname", "fname", "text"),
                 ("anomaly_metrics", "anomaly_metrics", "json"), ("runtime_profile", "runtime_profile", "json"),
                 ("sonata_id", "sonata.id", "int")),
                (("fname", "fname"), ("app_fid", "app, fid")), replace=True),
    RecordTable("counter_stats", "chimbuko.counter_stats",
                (("app", "app", "int"), ("counter", "counter", "text"), ("stats", "stats", "json"),
                 ("sonata_id", "sonata.id", "int")),
                (("counter", "counter"),), replace=True),
    RecordTable("ad_model", "chimbuko.ad_model",
                (("pid", "pid", "int"), ("fid", "fid", "int"), ("func_name", "func_name", "text"),
                 ("model", "model", "json"), ("sonata_id", "sonata.id", "int")),
                (("func", "func_name"), ("pid_fid", "pid, fid")), replace=True),
)
BY_EVENT = {t.event: t for t in TABLES}


def split(events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """(provenance record events, the others), each in order."""
    records = [e for e in events if e.name.startswith(chimbuko.PREFIX)]
    if not records:
        return [], list(events)
    return records, [e for e in events if not e.name.startswith(chimbuko.PREFIX)]


def table_name(table: RecordTable, dialect: str) -> str:
    return f'{PG_SCHEMA}."{table.collection}"' if dialect == "postgresql" else f'"{SQLITE_PREFIX}{table.collection}"'


def create_sql(dialect: str) -> list[str]:
    """Statements creating the schema, tables and indexes when missing (MySQL: indexes inside CREATE TABLE,
    which MySQL 8 needs: it has no CREATE INDEX IF NOT EXISTS)."""
    which = _DIALECTS.index(dialect)
    out = [f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}"] if dialect == "postgresql" else []
    for table in TABLES:
        name = table_name(table, dialect)
        kinds = {column: kind for column, _, kind in table.columns}
        cols = ['"event_id" VARCHAR(64) PRIMARY KEY' if dialect == "mysql" else '"event_id" TEXT PRIMARY KEY']
        cols += [f'"{column}" {_TYPES[kind][which]}' for column, _, kind in table.columns]
        cols.append(f'"extra" {_TYPES["json"][which]}')
        indexes = []
        for suffix, columns in table.indexes:
            index = f"chimbuko_{table.collection}_{suffix}"
            quoted = ", ".join(_quote_index_column(c, kinds, dialect) for c in columns.split(", "))
            indexes.append((index, quoted))
        if dialect == "mysql":
            cols += [f'KEY "{index}" ({quoted})' for index, quoted in indexes]
            out.append(f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)}) "
                       "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
            continue
        out.append(f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)})")
        out += [f"CREATE INDEX IF NOT EXISTS {index} ON {name} ({quoted})" for index, quoted in indexes]
    return out


def _quote_index_column(text: str, kinds: dict[str, str], dialect: str) -> str:
    column, _, order = text.partition(" ")
    prefix = f"({MYSQL_INDEXED_PREFIX})" if dialect == "mysql" and kinds.get(column) == "text" else ""
    return f'"{column}"{prefix}' + (f" {order}" if order else "")


def insert_sql(table: RecordTable, dialect: str, source: str | None = None) -> str:
    """INSERT of a table's rows (from VALUES, or SELECT from `source`), idempotent on event_id."""
    cols = table.column_names
    names = ", ".join(f'"{c}"' for c in cols)
    if dialect == "mysql":
        head = f"INSERT INTO {table_name(table, dialect)} ({names}) VALUES ({', '.join(['%s'] * len(cols))})"
        if table.replace:
            return head + " ON DUPLICATE KEY UPDATE " + ", ".join(f'"{c}" = VALUES("{c}")' for c in cols[1:])
        return head + ' ON DUPLICATE KEY UPDATE "event_id" = "event_id"'
    if source is None:
        marks = ", ".join(f"${i}" for i in range(1, len(cols) + 1)) if dialect == "postgresql" else \
            ", ".join("?" * len(cols))
        head = f"INSERT INTO {table_name(table, dialect)} ({names}) VALUES ({marks})"
    else:
        head = f"INSERT INTO {table_name(table, dialect)} ({names}) SELECT {names} FROM {source}"
        if dialect == "sqlite":
            head += " WHERE true"  # SQLite's upsert after a SELECT needs it to parse ON CONFLICT
    if table.replace:
        sets = ", ".join(f'"{c}" = excluded."{c}"' for c in cols[1:])
        return f"{head} ON CONFLICT (event_id) DO UPDATE SET {sets}"
    return f"{head} ON CONFLICT (event_id) DO NOTHING"


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def row_of(event: Event, table: RecordTable, dialect: str) -> tuple[Any, ...]:
    """The row of one record event, in `table.column_names` order."""
    plan, known = _plan(table, dialect)
    fields = event.fields
    dumps = orjson.dumps
    row: list[Any] = [event.id]
    for field, how in plan:
        value = fields.get(field)
        if value is not None and how:
            value = dumps(value).decode() if how == 1 else int(value)
        row.append(value)
    if known.issuperset(fields):
        row.append(None)
    else:
        row.append(_json({k: v for k, v in fields.items() if k not in known}))
    return tuple(row)


_plans: dict[tuple[str, str], tuple[list[tuple[str, int]], frozenset[str]]] = {}


def _plan(table: RecordTable, dialect: str) -> tuple[list[tuple[str, int]], frozenset[str]]:
    """(field, 0 as it is / 1 JSON text / 2 integer) per column, and the fields with a column."""
    key = (table.collection, dialect)
    plan = _plans.get(key)
    if plan is None:
        steps = [(field, 1 if kind == "json" else 2 if kind == "bool" and dialect != "postgresql" else 0)
                 for _, field, kind in table.columns]
        plan = _plans[key] = (steps, table.fields)
    return plan


def rows_by_table(events: Sequence[Event], dialect: str) -> list[tuple[RecordTable, list[tuple[Any, ...]]]]:
    """Rows grouped by table, in the order the tables are listed; a later record of an id wins."""
    grouped: dict[str, dict[str, tuple[Any, ...]]] = {}
    for event in events:
        table = BY_EVENT.get(event.name)
        if table is None:
            continue
        grouped.setdefault(event.name, {})[event.id] = row_of(event, table, dialect)
    return [(t, list(grouped[t.event].values())) for t in TABLES if t.event in grouped]


def record_of_row(table: RecordTable, row: dict[str, Any]) -> dict[str, Any]:
    """The record a row holds (NULL columns left out): what users' scripts get back."""
    record: dict[str, Any] = {}
    for column, field, kind in table.columns:
        value = row.get(column)
        if value is None:
            continue
        if kind == "json" and isinstance(value, str):
            value = orjson.loads(value)
        elif kind == "bool":
            value = bool(value)
        record[chimbuko.RECORD_KEYS.get(field, field)] = value
    extra = row.get("extra")
    if extra is not None:
        for key, value in (orjson.loads(extra) if isinstance(extra, str) else extra).items():
            record[chimbuko.RECORD_KEYS.get(key, key)] = value
    return record


# ---------------------------------------------------------------- writers

COPY_THRESHOLD = 64

try:
    from asyncpg.exceptions import UniqueViolationError as UniqueViolation
except ModuleNotFoundError:  # pragma: no cover - asyncpg is a runtime dependency
    UniqueViolation = Exception


async def ensure_postgres(conn: Any) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('streamer chimbuko schema'))")
        for sql in create_sql("postgresql"):
            await conn.execute(sql)


async def write_postgres(conn: Any, events: Sequence[Event]) -> int:
    """Write record events inside the caller's transaction; returns the rows sent."""
    sent = 0
    for table, rows in rows_by_table(events, "postgresql"):
        sent += len(rows)
        if len(rows) < COPY_THRESHOLD:
            await conn.executemany(insert_sql(table, "postgresql"), rows)
            continue
        # Most batches are new records: COPY them straight in, under a savepoint. COPY cannot skip rows
        # that exist (a re-read); then copy into a session staging table and INSERT ... ON CONFLICT.
        try:
            async with conn.transaction():
                await conn.copy_records_to_table(table.collection, schema_name=PG_SCHEMA, records=rows,
                                                 columns=list(table.column_names))
            continue
        except UniqueViolation:
            pass
        staging = f"streamer_stage_chimbuko_{table.collection}"
        await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {staging} "
                           f"(LIKE {table_name(table, 'postgresql')}) ON COMMIT DELETE ROWS")
        await conn.copy_records_to_table(staging, records=rows, columns=list(table.column_names))
        await conn.execute(insert_sql(table, "postgresql", source=staging))
    return sent


def ensure_sqlite(conn: Any) -> None:
    for sql in create_sql("sqlite"):
        conn.execute(sql)


def write_sqlite(conn: Any, events: Sequence[Event]) -> int:
    """Write record events inside the caller's transaction; returns the rows sent."""
    sent = 0
    for table, rows in rows_by_table(events, "sqlite"):
        conn.executemany(insert_sql(table, "sqlite"), rows)
        sent += len(rows)
    return sent


async def ensure_mysql(cur: Any) -> None:
    for sql in create_sql("mysql"):
        await cur.execute(sql)


async def write_mysql(cur: Any, events: Sequence[Event]) -> int:
    """Write record events inside the caller's transaction; returns the rows sent."""
    sent = 0
    for table, rows in rows_by_table(events, "mysql"):
        await cur.executemany(insert_sql(table, "mysql"), rows)
        sent += len(rows)
    return sent
