"""A plan's rows as PostgreSQL statements of one round trip each, whatever the number of rows.

`executemany` sends one statement per row: the server plans, locks and
executes each separately (a collector's batch of a few hundred events made
tens of thousands of single-row `rc_meta`, `invocation`, `jobstate` inserts
and `job_instance` updates). Here every table's rows travel as one array per
column and one statement inserts or updates them all
(`INSERT ... SELECT ... FROM unnest($1::T[], ...)`); its text depends on the
table only, so asyncpg prepares it once per connection.

Row order is kept (`WITH ORDINALITY`) where it matters: the replica catalog's
rows are locked, and their ids drawn, in the sorted order the plan gives
(`pgwriters`: concurrent writers wait for each other rather than deadlock).

`rc_lfn`: see RC_LFN (the rows are locked, no longer rewritten at each mention).

`rc_pfn`: a replica is new unless a row with the same lfn, pfn and site
(NULL equal to NULL, as monitord's check) exists. The former single-row form
compared `site IS NOT DISTINCT FROM $3`, which no index serves, in a
generic plan made while the table was empty: the server scanned the whole
`rc_pfn` table for every replica event. The set form joins the batch's
replicas with the table once, on `(lfn_id, pfn)` (the leading columns of its
unique index), and keeps the null-safe comparison as a filter.
"""

from __future__ import annotations

from typing import Any, Sequence

from streamer.endpoints.db.ids import ID_TABLES
from streamer.endpoints.db.plan import Plan
from streamer.endpoints.db.schema import stampede as schema

Statement = tuple[str, tuple[Any, ...]]
"""SQL and its arguments (one array per column)."""


def _types(table: str) -> dict[str, tuple[str, str | None]]:
    """column -> (array element type, enumeration to cast to or None)."""
    spec = schema.BY_NAME[table]
    enums = schema.enum_types(spec)
    out: dict[str, tuple[str, str | None]] = {}
    for col in spec.columns:
        kind = "BIGINT" if col.kind == "id" else col.sql_type("postgresql")
        if col.name in enums:
            out[col.name] = ("TEXT", enums[col.name][0])
        else:
            out[col.name] = (kind.split("(")[0] if kind.startswith("VARCHAR") else kind, None)
    return out


_TYPES = {t.name: _types(t.name) for t in schema.TABLES}


def _unnest(table: str, cols: Sequence[str], start: int = 1) -> str:
    """`unnest($1::T1[], ...)` of `cols`' arrays, parameters numbered from `start`."""
    types = _TYPES[table]
    return "unnest(" + ", ".join(f"${start + i}::{types[c][0]}[]" for i, c in enumerate(cols)) + ")"


def _value(table: str, col: str, alias: str = "v") -> str:
    enum = _TYPES[table][col][1]
    ref = f"{alias}.{schema.quote(col)}"
    return f"CAST({ref} AS {enum})" if enum else ref


def _columns(rows: Sequence[Sequence[Any]], width: int) -> tuple[list[Any], ...]:
    """Rows -> one list per column."""
    return tuple(list(c) for c in zip(*rows)) if rows else tuple([] for _ in range(width))


def insert(table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]], *, idempotent: bool = True) -> Statement:
    """All `rows` of `table` in one INSERT; `idempotent=False` for FRESH_TABLES (a conflict fails it)."""
    names = ", ".join(schema.quote(c) for c in cols)
    values = ", ".join(_value(table, c) for c in cols)
    sql = (f"INSERT INTO {schema.quote(table)} ({names}) SELECT {values} FROM {_unnest(table, cols)} AS v({names})"
           + (" ON CONFLICT DO NOTHING" if idempotent else ""))
    return sql, _columns(rows, len(cols))


def update(table: str, changes: dict[int, dict[str, Any]]) -> list[Statement]:
    """The plan's updates of `table`: one UPDATE per set of changed columns (in practice one or two)."""
    pk = ID_TABLES[table]
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for key, cols in changes.items():
        groups.setdefault(tuple(cols), []).append((*cols.values(), key))
    out = []
    for names, rows in groups.items():
        columns = (*names, pk)
        aliases = ", ".join(schema.quote(c) for c in columns)
        sets = ", ".join(f"{schema.quote(c)} = {_value(table, c)}" for c in names)
        out.append((f"UPDATE {schema.quote(table)} AS t SET {sets} FROM {_unnest(table, columns)} AS v({aliases}) "
                    f"WHERE t.{pk} = v.{pk}", _columns(rows, len(columns))))
    return out


RC_LFN = ("INSERT INTO rc_lfn (lfn) SELECT v.lfn FROM unnest($1::VARCHAR[]) WITH ORDINALITY AS v(lfn, n) "
          "ORDER BY v.n ON CONFLICT (lfn) DO UPDATE SET lfn = excluded.lfn WHERE false")
"""Shared by every workflow naming the file: `DO UPDATE` locks the existing row, in the plan's sorted order;
`WHERE false` keeps it from rewriting it (PostgreSQL locks the conflicting rows whether the WHERE holds or not):
a rewrite per mention left a dead row version and index entry that every later lookup of the file walked."""

RC_PFN = ("INSERT INTO rc_pfn (lfn_id, pfn, site) SELECT l.lfn_id, v.pfn, v.site "
          "FROM unnest($1::VARCHAR[], $2::VARCHAR[], $3::VARCHAR[]) WITH ORDINALITY AS v(lfn, pfn, site, n) "
          "JOIN rc_lfn l ON l.lfn = v.lfn "
          "WHERE NOT EXISTS (SELECT 1 FROM rc_pfn p WHERE p.lfn_id = l.lfn_id AND p.pfn = v.pfn "
          "AND p.site IS NOT DISTINCT FROM v.site) ORDER BY v.n ON CONFLICT DO NOTHING")

RC_META = ('INSERT INTO rc_meta (lfn_id, "key", value) SELECT l.lfn_id, v.k, v.val '
           "FROM unnest($1::VARCHAR[], $2::VARCHAR[], $3::VARCHAR[]) WITH ORDINALITY AS v(lfn, k, val, n) "
           'JOIN rc_lfn l ON l.lfn = v.lfn ORDER BY v.n '
           'ON CONFLICT (lfn_id, "key") DO UPDATE SET value = excluded.value')

WF_FILES = ("INSERT INTO workflow_files (wf_id, task_id, lfn_id, file_type) SELECT v.wf, v.task, l.lfn_id, v.ft "
            "FROM unnest($1::BIGINT[], $2::BIGINT[], $3::VARCHAR[], $4::VARCHAR[]) WITH ORDINALITY "
            "AS v(wf, task, lfn, ft, n) JOIN rc_lfn l ON l.lfn = v.lfn ORDER BY v.n ON CONFLICT DO NOTHING")


def replica_catalog(plan: Plan) -> tuple[list[Statement], list[Statement]]:
    """(before the tables: `rc_lfn`; after them: `rc_pfn`, `rc_meta`, `workflow_files`), one statement each."""
    before: list[Statement] = []
    after: list[Statement] = []
    if plan.rc_lfn:
        before.append((RC_LFN, (sorted(plan.rc_lfn),)))
    if plan.rc_pfn:
        after.append((RC_PFN, _columns(sorted(plan.rc_pfn, key=repr), 3)))
    if plan.rc_meta:
        after.append((RC_META, _columns([(lfn, key, value) for (lfn, key), value
                                         in sorted(plan.rc_meta.items(), key=repr)], 3)))
    if plan.wf_files:
        after.append((WF_FILES, _columns([(wf, task, lfn, ft) for (wf, task, lfn), ft in plan.wf_files.items()], 4)))
    return before, after
