"""A batch's rows as SQL: the `Plan` (rows per table, in an order the foreign
keys accept) and the statements of each SQL dialect the loader writes for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from streamer.events import Event
from streamer.endpoints.db.schema import stampede as schema
from streamer.endpoints.db.ids import ID_TABLES
from streamer.endpoints.db.rows import COLUMNS, validate



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
    """The rejected events themselves, with the reason (`dbcommon`: dead letters, waiting for parents)."""
    events: int = 0
    strict: bool = False
    """Check VARCHAR lengths (PostgreSQL enforces them, SQLite does not)."""

    def insert(self, table: str, key: Any, row: dict[str, Any]) -> None:
        validate(table, row, strict_length=self.strict)
        self.inserts.setdefault(table, {}).setdefault(key, row)

    def update(self, table: str, pk: int, cols: dict[str, Any]) -> None:
        """Change columns of a row: folded into its insert when it is new in this batch."""
        validate(table, cols, strict_length=self.strict, partial=True)
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
        for table in INSERT_ORDER:
            rows = self.inserts.get(table)
            if rows:
                cols = COLUMNS[table]
                tables.append((table, cols, [tuple(map(r.get, cols)) for r in rows.values()]))
        after: list[tuple[str, list[tuple[Any, ...]]]] = []
        for table, changes in self.updates.items():
            after.extend(update_statements(d, table, changes))
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


def insert_sql(d: SQLDialect, table: str, cols: Sequence[str], *, idempotent: bool = True) -> str:
    """The insert of rows; `idempotent=False` for FRESH_TABLES: a conflict on the natural key fails it."""
    return (f"INSERT INTO {schema.quote(table)} ({', '.join(schema.quote(c) for c in cols)}) "
            f"VALUES ({d.phs(len(cols))})" + (" ON CONFLICT DO NOTHING" if idempotent else ""))


FRESH_TABLES = frozenset({"workflow", "job", "job_instance", "task", "host"})
"""Tables the loader inserts into only for natural keys it found absent from the database.

Their new rows cannot exist yet (one writer per workflow, as with monitord),
so a backend may bulk-load them without a conflict check; were another
writer to race us, the unique constraints fail the batch, never double rows
(PostgreSQL then forgets the cached ids and writes the batch again:
`resilience.STALE_IDS`).
"""

INSERT_ORDER = (
    "workflow", "workflowstate", "workflow_meta", "host", "job", "job_edge", "task", "task_edge",
    "task_meta", "job_instance", "jobstate", "invocation", "integrity", "tag",
)


def update_statements(d: SQLDialect, table: str,
                      changes: dict[int, dict[str, Any]]) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
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
