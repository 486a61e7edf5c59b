"""Stampede events -> Stampede rows, shared by the SQLite and PostgreSQL endpoints.

The loader reproduces what monitord's `workflow_loader` writes (which event
fills which table, `root_wf_id` / `parent_wf_id`, the host of each job
instance, sub-workflow links, the jobstate names derived from event and
status, integrity, tag, replica-catalog and metadata rows) but is built for
batches: it turns a whole batch into a `Plan` of rows per table, entirely in
memory, and the backend writes the plan in one transaction.

Why ids live in memory: every row that other rows point at (workflow, job,
job_instance, task, host) gets its id from the loader, so a batch needs no
round trip per event. The caches are filled from the database once per
workflow (`seed_sql` / `seed`) the first time a batch mentions it; that is
also what makes a restart after `kill -9` safe: re-sent events find the rows
already there and change nothing (every insert is `ON CONFLICT DO NOTHING`
on the table's natural key, replica-catalog rows are matched by their lfn).

A failed transaction leaves the caches ahead of the database: the backend
calls `reset()` and the next attempt re-reads what is really committed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence

from ..events import Event
from . import stampede_schema as schema

log = logging.getLogger("streamer.endpoints.db")


class Rejected(ValueError):
    """An event the loader cannot turn into rows (the message says why)."""


class IdSource(Protocol):
    def next(self, table: str) -> int: ...


# ---------------------------------------------------------------- SQL dialects

@dataclass(frozen=True)
class SQLDialect:
    """The few differences between SQLite and PostgreSQL the loader's SQL needs."""

    name: schema.Dialect

    def ph(self, i: int) -> str:
        """Placeholder of parameter `i` (1-based)."""
        return f"?{i}" if self.name == "sqlite" else f"${i}"

    def phs(self, n: int, start: int = 1) -> str:
        return ", ".join(self.ph(start + i) for i in range(n))

    def any_of(self, expr: str, values: Sequence[Any], start: int = 1) -> tuple[str, list[Any]]:
        """`expr IN (values)` with parameters."""
        if self.name == "sqlite":
            return f"{expr} IN ({self.phs(len(values), start)})", list(values)
        return f"{expr} = ANY({self.ph(start)})", [list(values)]

    @property
    def same(self) -> str:
        """Null-safe equality."""
        return "IS" if self.name == "sqlite" else "IS NOT DISTINCT FROM"


SQLITE = SQLDialect("sqlite")
POSTGRESQL = SQLDialect("postgresql")

ID_TABLES: dict[str, str] = {
    "workflow": "wf_id", "job": "job_id", "job_instance": "job_instance_id", "task": "task_id",
    "host": "host_id", "invocation": "invocation_id", "integrity": "integrity_id", "tag": "tag_id",
}
"""Tables whose primary key the loader assigns -> that key."""

# Event (short name) -> table that gets a new id for it, to reserve ids per batch.
_ID_DEMAND: dict[str, str] = {
    "stampede.wf.plan": "workflow", "stampede.job.info": "job", "stampede.task.info": "task",
    "stampede.job_inst.submit.start": "job_instance", "stampede.job_inst.pre.start": "job_instance",
    "stampede.job_inst.host.info": "host", "stampede.inv.end": "invocation",
    "stampede.int.metric": "integrity", "stampede.job_inst.tag": "tag",
}

# Field name (dots as underscores) -> column, where monitord renames.
_RENAME = {
    "xwf_id": "wf_uuid", "task_id": "abs_task_id", "child_task_id": "child_abs_task_id",
    "parent_task_id": "parent_abs_task_id", "job_id": "exec_job_id",
    "child_job_id": "child_exec_job_id", "parent_job_id": "parent_exec_job_id",
    "job_inst_id": "job_submit_seq", "js_id": "jobstate_submit_seq",
    "cluster_dur": "cluster_duration", "local_dur": "local_duration",
    "inv_id": "task_submit_seq", "dur": "remote_duration",
}
# Columns the loader fills itself (ids and links), never from an event field.
_MANAGED = {"wf_id", "job_id", "job_instance_id", "host_id", "subwf_id", "task_id", "lfn_id",
            "parent_wf_id", "root_wf_id", "wf_uuid", "exec_job_id", "job_submit_seq",
            "timestamp", "invocation_id", "integrity_id", "tag_id"}

_JOBSTATES: dict[str, tuple[str, str]] = {  # event -> (state if status == -1, state if 0)
    "stampede.job_inst.pre.start": ("PRE_SCRIPT_STARTED", "PRE_SCRIPT_STARTED"),
    "stampede.job_inst.pre.term": ("PRE_SCRIPT_TERMINATED", "PRE_SCRIPT_TERMINATED"),
    "stampede.job_inst.pre.end": ("PRE_SCRIPT_FAILED", "PRE_SCRIPT_SUCCESS"),
    "stampede.job_inst.submit.end": ("SUBMIT_FAILED", "SUBMIT"),
    "stampede.job_inst.main.start": ("EXECUTE", "EXECUTE"),
    "stampede.job_inst.main.term": ("JOB_EVICTED", "JOB_TERMINATED"),
    "stampede.job_inst.main.end": ("JOB_FAILURE", "JOB_SUCCESS"),
    "stampede.job_inst.post.start": ("POST_SCRIPT_STARTED", "POST_SCRIPT_STARTED"),
    "stampede.job_inst.post.term": ("POST_SCRIPT_TERMINATED", "POST_SCRIPT_TERMINATED"),
    "stampede.job_inst.post.end": ("POST_SCRIPT_FAILED", "POST_SCRIPT_SUCCESS"),
    "stampede.job_inst.held.start": ("JOB_HELD", "JOB_HELD"),
    "stampede.job_inst.held.end": ("JOB_RELEASED", "JOB_RELEASED"),
    "stampede.job_inst.image.info": ("IMAGE_SIZE", "IMAGE_SIZE"),
    "stampede.job_inst.abort.info": ("JOB_ABORTED", "JOB_ABORTED"),
    "stampede.job_inst.grid.submit.end": ("GRID_SUBMIT_FAILED", "GRID_SUBMIT"),
    "stampede.job_inst.globus.submit.end": ("GLOBUS_SUBMIT_FAILED", "GLOBUS_SUBMIT"),
}
_NOOP = {
    "stampede.static.start", "stampede.static.end", "stampede.static.meta.start",
    "stampede.static.meta.end", "stampede.job_inst.grid.submit.start",
    "stampede.job_inst.globus.submit.start", "stampede.job_inst.composite", "stampede.inv.start",
    "stampede.task.monitoring",
}

_LINKING = frozenset({"stampede.wf.plan", "stampede.xwf.map.subwf_job"})
"""Events naming a workflow other than their own (root, parent, sub-workflow)."""

_COLUMNS = {t.name: t.column_names for t in schema.TABLES}
_NOT_NULL = {t.name: tuple(c.name for c in t.columns if c.not_null and c.kind != "id") for t in schema.TABLES}
_MAX_LEN = {t.name: tuple((c.name, int(c.kind[4:])) for c in t.columns if c.kind.startswith("str:"))
            for t in schema.TABLES}
_INT32 = {t.name: tuple(c.name for c in t.columns if c.kind == "int") for t in schema.TABLES}
_ENUMS = {
    ("job", "type_desc"): set(schema.JOB_TYPES),
    ("integrity", "type"): {"check", "compute"},
    ("integrity", "file_type"): {"input", "output", None},
}


_TABLE_ENUMS: dict[str, tuple[tuple[str, set[Any]], ...]] = {}
for (_tbl, _col), _allowed in _ENUMS.items():
    _TABLE_ENUMS[_tbl] = _TABLE_ENUMS.get(_tbl, ()) + ((_col, _allowed),)


def _validate(table: str, cols: dict[str, Any], *, strict_length: bool, partial: bool = False) -> None:
    """Refuse a row the database would refuse, so one bad event cannot fail its whole batch."""
    required = _NOT_NULL[table]
    if None in map(cols.get, required):  # the common case, all present, checked at C speed
        for name in required:
            if cols.get(name) is None and (not partial or name in cols):
                raise Rejected(f"no value for {table}.{name} (NOT NULL)")
    for name, allowed in _TABLE_ENUMS.get(table, ()):
        if (not partial or name in cols) and cols.get(name) not in allowed:
            raise Rejected(f"{table}.{name} = {cols.get(name)!r} is not one of {sorted(a for a in allowed if a)}")
    if strict_length:  # PostgreSQL and MySQL: INTEGER is 32 bits (SQLite's is 64, as the event schema's)
        for name in _INT32[table]:
            value = cols.get(name)
            if value.__class__ is int and not -2**31 <= value < 2**31:
                raise Rejected(f"{table}.{name} = {value} does not fit the column (INTEGER, 32 bits)")
        for name, limit in _MAX_LEN[table]:
            value = cols.get(name)
            if value.__class__ is str and len(value) > limit:
                raise Rejected(f"{table}.{name} is {len(value)} characters long, the column holds {limit}")


_SHAPES: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, str], ...]] = {}


def _undot(fields: dict[str, Any], table: str) -> dict[str, Any]:
    """Event fields -> the columns of `table` they fill (monitord's renaming)."""
    shape = (table, tuple(fields))
    pairs = _SHAPES.get(shape)
    if pairs is None:  # events come in few shapes: map each shape's fields once
        cols = _COLUMNS[table]
        found = []
        for key in shape[1]:
            attr = key.replace(".", "_")
            attr = _RENAME.get(attr, attr)
            if attr in cols and attr not in _MANAGED:
                found.append((key, attr))
        if len(_SHAPES) > 4096:
            _SHAPES.clear()
        pairs = _SHAPES[shape] = tuple(found)
    out = {attr: fields[key] for key, attr in pairs}
    argv = out.get("argv")
    if argv is not None:
        out["argv"] = _sanitize_argv(argv)
    return out


def _sanitize_argv(argv: Any) -> str:
    """monitord escapes backslashes and single quotes of argv before storing it."""
    return str(argv).replace("\\", "\\\\").replace("'", "\\'")


def _need(event: Event, key: str) -> Any:
    value = event.fields.get(key)
    if value is None:
        raise Rejected(f"missing field {key}")
    return value


# ---------------------------------------------------------------- the plan

@dataclass
class Plan:
    """The rows one batch writes, grouped per table, in dependency order."""

    expunge: list[str] = field(default_factory=list)
    """Workflow uuids whose rows (and sub-workflows') are deleted first (replay)."""
    inserts: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)
    updates: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    rc_lfn: dict[str, None] = field(default_factory=dict)
    rc_pfn: dict[tuple[str, str, Any], None] = field(default_factory=dict)
    rc_meta: dict[tuple[str, str], Any] = field(default_factory=dict)
    wf_files: dict[tuple[int, int, str], Any] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    refused: list[tuple[Event, str]] = field(default_factory=list)
    """The rejected events themselves, with the reason (for a dead-letter file: `deadletter.py`)."""
    events: int = 0
    strict: bool = False
    """Check VARCHAR lengths (PostgreSQL enforces them, SQLite does not)."""

    def insert(self, table: str, key: Any, row: dict[str, Any]) -> None:
        _validate(table, row, strict_length=self.strict)
        self.inserts.setdefault(table, {}).setdefault(key, row)

    def update(self, table: str, pk: int, cols: dict[str, Any]) -> None:
        """Change columns of a row: folded into its insert when it is new in this batch."""
        _validate(table, cols, strict_length=self.strict, partial=True)
        pending = self.inserts.get(table, {}).get(pk)
        if pending is not None:
            pending.update(cols)
        else:
            self.updates.setdefault(table, {}).setdefault(pk, {}).update(cols)

    @property
    def row_count(self) -> int:
        """Rows this plan inserts (updates of rows written earlier not counted)."""
        return (sum(len(r) for r in self.inserts.values())
                + len(self.rc_lfn) + len(self.rc_pfn) + len(self.rc_meta) + len(self.wf_files))

    def statements(self, d: SQLDialect) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """(SQL, parameter rows) in an order the foreign keys accept."""
        before, tables, after = self.phases(d)
        plain = [(insert_sql(d, table, cols), rows) for table, cols, rows in tables]
        return before + plain + after

    def phases(self, d: SQLDialect) -> tuple[list[tuple[str, list[tuple[Any, ...]]]],
                                             list[tuple[str, tuple[str, ...], list[tuple[Any, ...]]]],
                                             list[tuple[str, list[tuple[Any, ...]]]]]:
        """The plan in three steps: statements, (table, columns, rows) of plain inserts, statements.

        The middle step is where a backend can use a faster bulk path (COPY).
        """
        before: list[tuple[str, list[tuple[Any, ...]]]] = []
        if self.rc_lfn:
            # Shared by every workflow naming the file: rows locked in one (sorted) order, so concurrent
            # writers wait for each other rather than deadlock, and see each other's rc_pfn rows.
            before.append((f"INSERT INTO rc_lfn (lfn) VALUES ({d.ph(1)}) "
                           "ON CONFLICT (lfn) DO UPDATE SET lfn = excluded.lfn",
                           [(lfn,) for lfn in sorted(self.rc_lfn)]))
        tables = []
        for table in _INSERT_ORDER:
            rows = self.inserts.get(table)
            if rows:
                cols = _COLUMNS[table]
                tables.append((table, cols, [tuple(map(r.get, cols)) for r in rows.values()]))
        after: list[tuple[str, list[tuple[Any, ...]]]] = []
        for table, changes in self.updates.items():
            after.extend(_update_statements(d, table, changes))
        if self.rc_pfn:
            after.append((
                f"INSERT INTO rc_pfn (lfn_id, pfn, site) SELECT l.lfn_id, CAST({d.ph(2)} AS VARCHAR), "
                f"CAST({d.ph(3)} AS VARCHAR) FROM rc_lfn l "
                f"WHERE l.lfn = {d.ph(1)} AND NOT EXISTS (SELECT 1 FROM rc_pfn p WHERE p.lfn_id = l.lfn_id "
                f"AND p.pfn = CAST({d.ph(2)} AS VARCHAR) AND p.site {d.same} CAST({d.ph(3)} AS VARCHAR)) "
                "ON CONFLICT DO NOTHING",
                sorted(self.rc_pfn, key=_sort_key)))
        if self.rc_meta:
            after.append((
                f'INSERT INTO rc_meta (lfn_id, "key", value) SELECT lfn_id, CAST({d.ph(2)} AS VARCHAR), '
                f'CAST({d.ph(3)} AS VARCHAR) FROM rc_lfn '
                f'WHERE lfn = {d.ph(1)} ON CONFLICT (lfn_id, "key") DO UPDATE SET value = excluded.value',
                [(lfn, key, value) for (lfn, key), value in sorted(self.rc_meta.items(), key=_sort_key)]))
        if self.wf_files:
            after.append((
                "INSERT INTO workflow_files (wf_id, task_id, lfn_id, file_type) SELECT "
                f"CAST({d.ph(1)} AS BIGINT), CAST({d.ph(2)} AS BIGINT), lfn_id, CAST({d.ph(4)} AS VARCHAR) "
                f"FROM rc_lfn WHERE lfn = {d.ph(3)} ON CONFLICT DO NOTHING",
                [(wf, task, lfn, ft) for (wf, task, lfn), ft in self.wf_files.items()]))
        return before, tables, after


def _sort_key(item: Any) -> str:
    return repr(item)


def insert_sql(d: SQLDialect, table: str, cols: Sequence[str]) -> str:
    return (f"INSERT INTO {schema.quote(table)} ({', '.join(schema.quote(c) for c in cols)}) "
            f"VALUES ({d.phs(len(cols))}) ON CONFLICT DO NOTHING")


FRESH_TABLES = frozenset({"workflow", "job", "job_instance", "task", "host"})
"""Tables the loader inserts into only for natural keys it found absent from the database.

Their new rows cannot exist yet (one writer per workflow, as with monitord),
so a backend may bulk-load them without a conflict check; were another
writer to race us, the unique constraints fail the batch, never double rows.
"""

_INSERT_ORDER = (
    "workflow", "workflowstate", "workflow_meta", "host", "job", "job_edge", "task", "task_edge",
    "task_meta", "job_instance", "jobstate", "invocation", "integrity", "tag",
)


def _update_statements(d: SQLDialect, table: str, changes: dict[int, dict[str, Any]]):
    pk = ID_TABLES[table]
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for key, cols in changes.items():
        names = tuple(cols)
        groups.setdefault(names, []).append((*cols.values(), key))
    for names, rows in groups.items():
        sets = ", ".join(f"{schema.quote(c)} = {d.ph(i + 1)}" for i, c in enumerate(names))
        yield (f"UPDATE {table} SET {sets} WHERE {pk} = {d.ph(len(names) + 1)}", rows)


def expunge_statements(d: SQLDialect, wf_ids: Sequence[int]) -> list[str]:
    """Delete the rows of workflows `wf_ids` (ids are integers from the database)."""
    ids = ", ".join(str(int(i)) for i in wf_ids)
    jobs = f"SELECT job_id FROM job WHERE wf_id IN ({ids})"
    insts = f"SELECT job_instance_id FROM job_instance WHERE job_id IN ({jobs})"
    lfns = f"SELECT lfn_id FROM workflow_files WHERE wf_id IN ({ids})"
    return [
        f"DELETE FROM rc_pfn WHERE lfn_id IN ({lfns})",
        f"DELETE FROM rc_meta WHERE lfn_id IN ({lfns})",
        f"DELETE FROM rc_lfn WHERE lfn_id IN ({lfns})",
        f"DELETE FROM workflow_files WHERE wf_id IN ({ids})",
        f"DELETE FROM jobstate WHERE job_instance_id IN ({insts})",
        f"DELETE FROM tag WHERE wf_id IN ({ids})",
        f"DELETE FROM integrity WHERE wf_id IN ({ids})",
        f"DELETE FROM invocation WHERE wf_id IN ({ids})",
        f"UPDATE job_instance SET subwf_id = NULL WHERE subwf_id IN ({ids})",
        f"DELETE FROM job_instance WHERE job_id IN ({jobs})",
        f"DELETE FROM task_meta WHERE task_id IN (SELECT task_id FROM task WHERE wf_id IN ({ids}))",
        f"DELETE FROM task WHERE wf_id IN ({ids})",
        f"DELETE FROM job_edge WHERE wf_id IN ({ids})",
        f"DELETE FROM task_edge WHERE wf_id IN ({ids})",
        f"DELETE FROM job WHERE wf_id IN ({ids})",
        f"DELETE FROM host WHERE wf_id IN ({ids})",
        f"DELETE FROM workflow_meta WHERE wf_id IN ({ids})",
        f"DELETE FROM workflowstate WHERE wf_id IN ({ids})",
        f"UPDATE workflow SET parent_wf_id = NULL WHERE parent_wf_id IN ({ids}) AND wf_id NOT IN ({ids})",
        f"UPDATE workflow SET root_wf_id = NULL WHERE root_wf_id IN ({ids}) AND wf_id NOT IN ({ids})",
        f"DELETE FROM workflow WHERE wf_id IN ({ids})",
    ]


def doomed_sql(d: SQLDialect) -> str:
    """Ids of a workflow (by uuid) and all its descendants."""
    return (
        "WITH RECURSIVE doomed(wf_id) AS ("
        f"SELECT wf_id FROM workflow WHERE wf_uuid = {d.ph(1)} "
        "UNION SELECT w.wf_id FROM workflow w JOIN doomed ON w.parent_wf_id = doomed.wf_id) "
        "SELECT wf_id FROM doomed"
    )


# ---------------------------------------------------------------- the loader

@dataclass
class _Wf:
    wf_id: int
    root_wf_id: int | None
    parent_wf_id: int | None
    jobs: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)


class Loader:
    """Turns batches of events into Plans; remembers ids between batches."""

    def __init__(self, dialect: SQLDialect, ids: IdSource, *, replay: bool = False) -> None:
        self.dialect = dialect
        self.ids = ids
        self.replay = replay
        self.replaced: set[str] = set()
        """Workflow uuids already expunged and re-planned in this run (committed)."""
        self.joined: set[str] = set()
        """Workflow uuids another writer is loading too: a replay joins them rather than expunging."""
        self.reset()
        self._handlers: dict[str, Callable[[Plan, Event], None]] = {
            "stampede.wf.plan": self._workflow,
            "stampede.xwf.start": self._workflowstate,
            "stampede.xwf.end": self._workflowstate,
            "stampede.xwf.meta": self._workflow_meta,
            "stampede.job.info": self._job,
            "stampede.job.edge": self._job_edge,
            "stampede.task.info": self._task,
            "stampede.task.edge": self._task_edge,
            "stampede.task.meta": self._task_meta,
            "stampede.wf.map.task_job": self._task_map,
            "stampede.xwf.map.subwf_job": self._subwf_map,
            "stampede.job_inst.submit.start": self._job_instance_start,
            "stampede.job_inst.pre.start": self._job_instance_start,
            "stampede.job_inst.main.end": self._job_instance_end,
            "stampede.job_inst.post.end": self._job_instance_end,
            "stampede.job_inst.host.info": self._host,
            "stampede.job_inst.tag": self._tag,
            "stampede.inv.end": self._invocation,
            "stampede.int.metric": self._integrity,
            "stampede.rc.meta": self._rc_meta,
            "stampede.rc.pfn": self._rc_pfn,
            "stampede.wf.map.file": self._wf_file,
        }

    def reset(self) -> None:
        """Forget every cached id (after a failed transaction, or a reconnect)."""
        self.wfs: dict[str, _Wf | None] = {}
        """uuid -> cached workflow, or None when known to be absent from the database."""
        self.insts: dict[int, dict[int, int]] = {}  # job_id -> {submit seq -> job_instance_id}
        self.mapped: set[int] = set()  # job instances that already have their host
        self.hosts: dict[tuple[int, str, str, str], int] = {}
        self._pending_replaced: set[str] = set()

    def forget(self, uuids: Iterable[str]) -> None:
        """Drop the cached ids of these workflows (another writer changed them): the next batch re-reads."""
        for uuid in uuids:
            wf = self.wfs.pop(uuid, None)
            if wf is None:
                continue
            for job_id in wf.jobs.values():
                for inst in self.insts.pop(job_id, {}).values():
                    self.mapped.discard(inst)
            root = wf.root_wf_id
            self.hosts = {k: v for k, v in self.hosts.items() if k[0] != root}

    # -- seeding from the database ---------------------------------------

    @staticmethod
    def mentioned_uuids(events: Iterable[Event]) -> list[str]:
        """Every workflow uuid the batch names (its own and, in linking events, root, parent, sub)."""
        seen: dict[str, None] = {}
        last = None
        for event in events:
            f = event.fields
            uuid = f.get("xwf.id")
            if uuid is not last:
                last = uuid
                if isinstance(uuid, str):
                    seen[uuid] = None
            if event.name in _LINKING:
                for key in ("root.xwf.id", "parent.xwf.id", "subwf.id"):
                    other = f.get(key)
                    if isinstance(other, str):
                        seen[other] = None
        return list(seen)

    def unknown_uuids(self, events: Iterable[Event]) -> list[str]:
        """Workflow uuids the batch mentions whose ids are not cached yet."""
        seen: dict[str, None] = {}
        known = self.wfs
        last = None
        for event in events:
            f = event.fields
            uuid = f.get("xwf.id")
            if uuid is not last:  # consecutive events mostly share their workflow
                last = uuid
                if isinstance(uuid, str) and uuid not in known:
                    seen[uuid] = None
            if event.name in _LINKING:
                for key in ("root.xwf.id", "parent.xwf.id", "subwf.id"):
                    other = f.get(key)
                    if isinstance(other, str) and other not in known:
                        seen[other] = None
        return list(seen)

    def seed_sql(self, uuids: Sequence[str]) -> list[tuple[str, str, list[Any]]]:
        """(name, SQL, params): the first query of seeding; pass its rows to `seed`.

        Most batches mention only new workflows, so the ids of jobs, tasks,
        instances and hosts are asked for only when a workflow is found.
        """
        cond, params = self.dialect.any_of("w.wf_uuid", uuids)
        return [("workflow", "SELECT w.wf_uuid, w.wf_id, w.root_wf_id, w.parent_wf_id FROM workflow w "
                             f"WHERE {cond}", params)]

    def _detail_sql(self, uuids: Sequence[str]) -> list[tuple[str, str, list[Any]]]:
        cond, params = self.dialect.any_of("w.wf_uuid", uuids)
        return [
            ("job", f"SELECT w.wf_uuid, j.exec_job_id, j.job_id FROM job j JOIN workflow w ON w.wf_id = j.wf_id "
                    f"WHERE {cond}", params),
            ("task", f"SELECT w.wf_uuid, t.abs_task_id, t.task_id FROM task t JOIN workflow w ON w.wf_id = t.wf_id "
                     f"WHERE {cond}", params),
            ("job_instance", "SELECT i.job_id, i.job_submit_seq, i.job_instance_id, i.host_id FROM job_instance i "
                             "JOIN job j ON j.job_id = i.job_id JOIN workflow w ON w.wf_id = j.wf_id "
                             f"WHERE {cond}", params),
            ("host", "SELECT h.wf_id, h.site, h.hostname, h.ip, h.host_id FROM host h WHERE h.wf_id IN "
                     f"(SELECT w.root_wf_id FROM workflow w WHERE {cond})", params),
        ]

    def seed(self, uuids: Sequence[str], results: dict[str, Sequence[Sequence[Any]]]) -> list[tuple[str, str, list[Any]]]:
        """Take query results; returns the follow-up queries to run (then `seed` their rows too)."""
        for uuid in uuids:
            self.wfs.setdefault(uuid, None)
        found = []
        for uuid, wf_id, root, parent in results.get("workflow", ()):
            self.wfs[uuid] = _Wf(int(wf_id), root, parent)
            found.append(uuid)
        for uuid, exec_id, job_id in results.get("job", ()):
            self.wfs[uuid].jobs[exec_id] = job_id  # type: ignore[union-attr]
        for uuid, abs_id, task_id in results.get("task", ()):
            self.wfs[uuid].tasks[abs_id] = task_id  # type: ignore[union-attr]
        for job_id, seq, inst_id, host_id in results.get("job_instance", ()):
            self.insts.setdefault(job_id, {})[seq] = inst_id
            if host_id is not None:
                self.mapped.add(inst_id)
        for wf_id, site, hostname, ip, host_id in results.get("host", ()):
            self.hosts[(wf_id, site, hostname, ip)] = host_id
        return self._detail_sql(found) if found else []

    @staticmethod
    def id_demand(events: Iterable[Event]) -> dict[str, int]:
        """At most how many new ids per table this batch takes (to reserve them at once)."""
        demand: dict[str, int] = {}
        for event in events:
            table = _ID_DEMAND.get(event.name)
            if table:
                demand[table] = demand.get(table, 0) + 1
        return demand

    # -- planning ---------------------------------------------------------

    def plan(self, events: Sequence[Event]) -> Plan:
        """The rows of `events`; call `seed` for `unknown_uuids(events)` first."""
        plan = Plan(events=len(events), strict=self.dialect.name != "sqlite")
        for event in events:
            handler = self._handlers.get(event.name)
            if handler is None:
                if event.name in _NOOP:
                    continue
                if event.name.startswith("stampede.job_inst."):
                    handler = self._jobstate
                else:
                    plan.rejected.append(f"{_describe(event)}: no Stampede table takes this event")
                    plan.refused.append((event, "no Stampede table takes this event"))
                    continue
            try:
                handler(plan, event)
            except Rejected as exc:
                plan.rejected.append(f"{_describe(event)}: {exc}")
                plan.refused.append((event, str(exc)))
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                plan.rejected.append(f"{_describe(event)}: malformed ({type(exc).__name__}: {exc})")
                plan.refused.append((event, f"malformed ({type(exc).__name__}: {exc})"))
        return plan

    def committed(self) -> None:
        """The last plan is in the database."""
        self.replaced |= self._pending_replaced
        self._pending_replaced = set()

    # -- lookups ----------------------------------------------------------

    def _wf(self, uuid: Any) -> _Wf:
        wf = self.wfs.get(uuid) if isinstance(uuid, str) else None
        if wf is None:
            raise Rejected(f"unknown workflow {uuid} (no stampede.wf.plan loaded for it)")
        return wf

    def _job_id(self, wf: _Wf, event: Event) -> int:
        exec_id = _need(event, "job.id")
        job_id = wf.jobs.get(exec_id)
        if job_id is None:
            raise Rejected(f"unknown job {exec_id} (no stampede.job.info loaded for it)")
        return job_id

    def _inst_id(self, event: Event) -> tuple[_Wf, int]:
        wf = self._wf(event.fields.get("xwf.id"))
        job_id = self._job_id(wf, event)
        seq = _need(event, "job_inst.id")
        inst = self.insts.get(job_id, {}).get(seq)
        if inst is None:
            raise Rejected(f"unknown job instance {event.fields.get('job.id')}#{seq} (no submit/pre.start loaded)")
        return wf, inst

    # -- handlers ---------------------------------------------------------

    def _workflow(self, plan: Plan, event: Event) -> None:
        f = event.fields
        uuid = _need(event, "xwf.id")
        existing = self.wfs.get(uuid)
        if existing is not None:
            if not self.replay or uuid in self.replaced or uuid in self._pending_replaced or uuid in self.joined:
                return  # already loaded (a re-sent event, a resumed run, or another writer loading it now)
            plan.expunge.append(uuid)
            self._forget(existing)
        self._pending_replaced.add(uuid)
        row = _undot(f, "workflow")
        wf_id = self.ids.next("workflow")
        root_uuid = f.get("root.xwf.id")
        parent_uuid = f.get("parent.xwf.id")
        parent = self.wfs.get(parent_uuid) if parent_uuid else None
        if root_uuid is None or root_uuid == uuid:
            root_id: int | None = wf_id
        else:
            root = self.wfs.get(root_uuid)
            root_id = root.wf_id if root else None
        row.update(wf_id=wf_id, wf_uuid=uuid, timestamp=f.get("ts"),
                   planner_arguments=None if f.get("argv") is None else _sanitize_argv(f["argv"]),
                   parent_wf_id=parent.wf_id if parent else None, root_wf_id=root_id)
        plan.insert("workflow", wf_id, row)
        self.wfs[uuid] = _Wf(wf_id, root_id, row["parent_wf_id"])

    def _forget(self, doomed: _Wf) -> None:
        """Drop the cached ids of a workflow about to be expunged, and its descendants'."""
        ids = {doomed.wf_id}
        changed = True
        while changed:
            changed = False
            for wf in self.wfs.values():
                if wf and wf.wf_id not in ids and (wf.parent_wf_id in ids or wf.root_wf_id == doomed.wf_id):
                    ids.add(wf.wf_id)
                    changed = True
        for uuid, wf in list(self.wfs.items()):
            if wf and wf.wf_id in ids:
                for job_id in wf.jobs.values():
                    for inst in self.insts.pop(job_id, {}).values():
                        self.mapped.discard(inst)
                self.wfs[uuid] = None
        self.hosts = {k: v for k, v in self.hosts.items() if k[0] not in ids}

    def _workflowstate(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        state = "WORKFLOW_STARTED" if event.name == "stampede.xwf.start" else "WORKFLOW_TERMINATED"
        f = event.fields
        ts = _need(event, "ts")
        row = {"wf_id": wf.wf_id, "state": state, "timestamp": ts,
               "restart_count": _need(event, "restart_count"), "status": f.get("status"), "reason": f.get("reason")}
        plan.insert("workflowstate", (wf.wf_id, state, ts), row)

    def _workflow_meta(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        key = _need(event, "key")
        plan.insert("workflow_meta", (wf.wf_id, key), {"wf_id": wf.wf_id, "key": key, "value": _need(event, "value")})

    def _job(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        exec_id = _need(event, "job.id")
        if exec_id in wf.jobs:
            return
        row = _undot(event.fields, "job")
        job_id = self.ids.next("job")
        row.update(job_id=job_id, wf_id=wf.wf_id, exec_job_id=exec_id, clustered=bool(row.get("clustered")))
        plan.insert("job", job_id, row)
        wf.jobs[exec_id] = job_id

    def _job_edge(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        key = (wf.wf_id, _need(event, "parent.job.id"), _need(event, "child.job.id"))
        plan.insert("job_edge", key, dict(zip(_COLUMNS["job_edge"], key)))

    def _task(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        abs_id = _need(event, "task.id")
        if abs_id in wf.tasks:
            return
        row = _undot(event.fields, "task")
        task_id = self.ids.next("task")
        row.update(task_id=task_id, wf_id=wf.wf_id, abs_task_id=abs_id)
        plan.insert("task", task_id, row)
        wf.tasks[abs_id] = task_id

    def _task_edge(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        key = (wf.wf_id, _need(event, "parent.task.id"), _need(event, "child.task.id"))
        plan.insert("task_edge", key, dict(zip(_COLUMNS["task_edge"], key)))

    def _task_id(self, wf: _Wf, event: Event) -> int:
        abs_id = _need(event, "task.id")
        task_id = wf.tasks.get(abs_id)
        if task_id is None:
            raise Rejected(f"unknown task {abs_id} (no stampede.task.info loaded for it)")
        return task_id

    def _task_meta(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        task_id = self._task_id(wf, event)
        key = _need(event, "key")
        plan.insert("task_meta", (task_id, key), {"task_id": task_id, "key": key, "value": _need(event, "value")})

    def _task_map(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        job_id = self._job_id(wf, event)
        plan.update("task", self._task_id(wf, event), {"job_id": job_id})

    def _subwf_map(self, plan: Plan, event: Event) -> None:
        _, inst = self._inst_id(event)
        sub = self.wfs.get(event.fields.get("subwf.id"))
        plan.update("job_instance", inst, {"subwf_id": sub.wf_id if sub else None})

    def _job_instance_start(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        job_id = self._job_id(wf, event)
        seq = _need(event, "job_inst.id")
        known = self.insts.setdefault(job_id, {})
        if seq not in known:
            inst = self.ids.next("job_instance")
            row = _undot(event.fields, "job_instance")
            row.setdefault("multiplier_factor", 1)
            row.update(job_instance_id=inst, job_id=job_id, job_submit_seq=seq)
            plan.insert("job_instance", inst, row)
            known[seq] = inst
        if event.name == "stampede.job_inst.pre.start":
            self._jobstate(plan, event)

    def _job_instance_end(self, plan: Plan, event: Event) -> None:
        _, inst = self._inst_id(event)
        changes = _undot(event.fields, "job_instance")
        self._jobstate(plan, event)  # first: it refuses a bad status before anything changes
        plan.update("job_instance", inst, changes)

    def _jobstate(self, plan: Plan, event: Event) -> None:
        states = _JOBSTATES.get(event.name)
        if states is None:
            state = event.name.split(".")[2].upper()
        else:
            status = event.fields.get("status")
            status = 0 if status is None else status
            if status not in (-1, 0):
                raise Rejected(f"status {status!r} is neither 0 (success) nor -1 (failure)")
            state = states[status + 1]
        _, inst = self._inst_id(event)
        if event.fields.get("js.id") is None:
            return  # no state sequence (a 3.x lifecycle event): the state has its own event with js.id
        ts = _need(event, "ts")
        seq = _need(event, "js.id")
        row = {"job_instance_id": inst, "state": state, "timestamp": ts, "jobstate_submit_seq": seq,
               "reason": event.fields.get("reason")}
        plan.insert("jobstate", (inst, state, ts, seq), row)

    def _host(self, plan: Plan, event: Event) -> None:
        if event.fields.get("job.id") is None and event.fields.get("exec_job.id") is not None:  # Pegasus 4.0
            event = Event(event.name, {**event.fields, "job.id": event.fields["exec_job.id"]}, event.id)
        wf, inst = self._inst_id(event)
        if wf.root_wf_id is None:
            raise Rejected("workflow has no root workflow id")
        f = event.fields
        key = (wf.root_wf_id, _need(event, "site"), _need(event, "hostname"), _need(event, "ip"))
        host_id = self.hosts.get(key)
        if host_id is None:
            host_id = self.ids.next("host")
            plan.insert("host", host_id, {"host_id": host_id, "wf_id": key[0], "site": key[1], "hostname": key[2],
                                          "ip": key[3], "uname": f.get("uname"), "total_memory": f.get("total_memory")})
            self.hosts[key] = host_id
        if inst not in self.mapped:
            self.mapped.add(inst)
            plan.update("job_instance", inst, {"host_id": host_id})

    def _keyed(self, plan: Plan, event: Event, table: str, key_cols: tuple[str, ...]) -> None:
        wf, inst = self._inst_id(event)
        row = _undot(event.fields, table)
        row.update(wf_id=wf.wf_id, job_instance_id=inst)
        key = tuple(row.get(c) for c in key_cols)
        row[ID_TABLES[table]] = None  # assigned below, once we know the row is new in this batch
        if key in plan.inserts.get(table, {}):
            return
        row[ID_TABLES[table]] = self.ids.next(table)
        plan.insert(table, key, row)

    def _invocation(self, plan: Plan, event: Event) -> None:
        self._keyed(plan, event, "invocation", ("job_instance_id", "task_submit_seq"))

    def _integrity(self, plan: Plan, event: Event) -> None:
        self._keyed(plan, event, "integrity", ("job_instance_id", "type", "file_type"))

    def _tag(self, plan: Plan, event: Event) -> None:
        self._keyed(plan, event, "tag", ("wf_id", "job_instance_id"))

    def _rc_meta(self, plan: Plan, event: Event) -> None:
        self._wf(event.fields.get("xwf.id"))
        lfn = _need(event, "lfn.id")
        plan.rc_lfn[lfn] = None
        plan.rc_meta[(lfn, _need(event, "key"))] = _need(event, "value")

    def _rc_pfn(self, plan: Plan, event: Event) -> None:
        self._wf(event.fields.get("xwf.id"))
        lfn = _need(event, "lfn.id")
        plan.rc_lfn[lfn] = None
        plan.rc_pfn[(lfn, _need(event, "pfn"), event.fields.get("site"))] = None

    def _wf_file(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        task_id = self._task_id(wf, event)
        lfn = _need(event, "lfn.id")
        plan.rc_lfn[lfn] = None
        plan.wf_files[(wf.wf_id, task_id, lfn)] = event.fields.get("file_type")


def _describe(event: Event) -> str:
    return f"rejected event {event.name} (id {event.id[:16]})"
