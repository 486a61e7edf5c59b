"""Compare two Stampede databases table by table, through natural keys.

Auto-assigned ids differ between two loads (and between backends), so every
id is replaced by what it stands for: a workflow by its uuid, a job by
(workflow uuid, exec_job_id), a job instance by (job, submit seq), a host by
(site, hostname, ip), an lfn by its name. Wall-clock columns
(`dbversion.version_timestamp`) are left out. Rows compare as multisets, so
a duplicated row is a difference too.

Use: `diff = compare(rows_of(sqlite_fetch(a)), rows_of(sqlite_fetch(b)))`;
for PostgreSQL, run `QUERIES` with any driver and pass the rows to
`normalize`. `format_diff` prints each difference precisely.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from decimal import Decimal
from typing import Any, Callable, Iterable, Sequence

_JI = ("(SELECT w.wf_uuid FROM job j JOIN workflow w ON w.wf_id = j.wf_id WHERE j.job_id = i.job_id), "
       "(SELECT j.exec_job_id FROM job j WHERE j.job_id = i.job_id), i.job_submit_seq")

QUERIES: dict[str, str] = {
    "dbversion": "SELECT version_number, version FROM dbversion",
    "workflow": (
        'SELECT w.wf_uuid, w.dag_file_name, w.timestamp, w.submit_hostname, w.submit_dir, w.planner_arguments, '
        'w."user", w.grid_dn, w.planner_version, w.dax_label, w.dax_version, w.dax_file, w.db_url, '
        "(SELECT p.wf_uuid FROM workflow p WHERE p.wf_id = w.parent_wf_id), "
        "(SELECT r.wf_uuid FROM workflow r WHERE r.wf_id = w.root_wf_id) FROM workflow w"),
    "workflowstate": ("SELECT w.wf_uuid, s.state, s.timestamp, s.restart_count, s.status, s.reason "
                      "FROM workflowstate s JOIN workflow w ON w.wf_id = s.wf_id"),
    "workflow_meta": 'SELECT w.wf_uuid, m."key", m.value FROM workflow_meta m JOIN workflow w ON w.wf_id = m.wf_id',
    "host": ("SELECT w.wf_uuid, h.site, h.hostname, h.ip, h.uname, h.total_memory "
             "FROM host h JOIN workflow w ON w.wf_id = h.wf_id"),
    "job": ("SELECT w.wf_uuid, j.exec_job_id, j.submit_file, j.type_desc, j.clustered, j.max_retries, "
            "j.executable, j.argv, j.task_count FROM job j JOIN workflow w ON w.wf_id = j.wf_id"),
    "job_edge": ("SELECT w.wf_uuid, e.parent_exec_job_id, e.child_exec_job_id "
                 "FROM job_edge e JOIN workflow w ON w.wf_id = e.wf_id"),
    "task_edge": ("SELECT w.wf_uuid, e.parent_abs_task_id, e.child_abs_task_id "
                  "FROM task_edge e JOIN workflow w ON w.wf_id = e.wf_id"),
    "job_instance": (
        f"SELECT {_JI}, "
        "(SELECT h.site || '/' || h.hostname || '/' || h.ip FROM host h WHERE h.host_id = i.host_id), "
        'i.sched_id, i.site, i."user", i.work_dir, i.cluster_start, i.cluster_duration, i.local_duration, '
        "(SELECT w.wf_uuid FROM workflow w WHERE w.wf_id = i.subwf_id), i.stdout_file, i.stdout_text, "
        "i.stderr_file, i.stderr_text, i.stdin_file, i.multiplier_factor, i.exitcode FROM job_instance i"),
    "jobstate": (f"SELECT {_JI}, s.state, s.timestamp, s.jobstate_submit_seq, s.reason "
                 "FROM jobstate s JOIN job_instance i ON i.job_instance_id = s.job_instance_id"),
    "task": ("SELECT w.wf_uuid, t.abs_task_id, (SELECT j.exec_job_id FROM job j WHERE j.job_id = t.job_id), "
             "t.transformation, t.argv, t.type_desc FROM task t JOIN workflow w ON w.wf_id = t.wf_id"),
    "task_meta": ('SELECT w.wf_uuid, t.abs_task_id, m."key", m.value FROM task_meta m '
                  "JOIN task t ON t.task_id = m.task_id JOIN workflow w ON w.wf_id = t.wf_id"),
    "invocation": (
        f"SELECT (SELECT w.wf_uuid FROM workflow w WHERE w.wf_id = v.wf_id), {_JI}, v.task_submit_seq, "
        "v.start_time, v.remote_duration, v.remote_cpu_time, v.exitcode, v.transformation, v.executable, "
        "v.argv, v.abs_task_id, v.maxrss, v.avg_cpu FROM invocation v "
        "JOIN job_instance i ON i.job_instance_id = v.job_instance_id"),
    "integrity": (
        f"SELECT (SELECT w.wf_uuid FROM workflow w WHERE w.wf_id = g.wf_id), {_JI}, g.type, g.file_type, "
        "g.count, g.duration FROM integrity g JOIN job_instance i ON i.job_instance_id = g.job_instance_id"),
    "tag": (f"SELECT (SELECT w.wf_uuid FROM workflow w WHERE w.wf_id = g.wf_id), {_JI}, g.name, g.count "
            "FROM tag g JOIN job_instance i ON i.job_instance_id = g.job_instance_id"),
    "rc_lfn": "SELECT lfn FROM rc_lfn",
    "rc_pfn": "SELECT l.lfn, p.pfn, p.site FROM rc_pfn p JOIN rc_lfn l ON l.lfn_id = p.lfn_id",
    "rc_meta": 'SELECT l.lfn, m."key", m.value FROM rc_meta m JOIN rc_lfn l ON l.lfn_id = m.lfn_id',
    "workflow_files": ("SELECT w.wf_uuid, t.abs_task_id, l.lfn, f.file_type FROM workflow_files f "
                       "JOIN workflow w ON w.wf_id = f.wf_id JOIN task t ON t.task_id = f.task_id "
                       "JOIN rc_lfn l ON l.lfn_id = f.lfn_id"),
    "master_workflow": "SELECT wf_uuid FROM master_workflow",
    "master_workflowstate": "SELECT wf_id, state FROM master_workflowstate",
    "ensemble": "SELECT name FROM ensemble",
    "ensemble_workflow": "SELECT name FROM ensemble_workflow",
    "trigger": 'SELECT name FROM "trigger"',
}


def _norm(value: Any) -> Any:
    """Numbers compare by value (SQLite NUMERIC, PostgreSQL Decimal, BP's 6 decimals)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        return round(value, 6)
    return value


def normalize(rows: Iterable[Sequence[Any]]) -> Counter:
    return Counter(tuple(_norm(v) for v in row) for row in rows)


Snapshot = dict[str, Counter]


def snapshot(fetch: Callable[[str], Iterable[Sequence[Any]]]) -> Snapshot:
    """Every table's rows, ids replaced by natural keys (`fetch(sql)` runs one query)."""
    return {table: normalize(fetch(sql)) for table, sql in QUERIES.items()}


def sqlite_snapshot(path: str) -> Snapshot:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return snapshot(lambda sql: conn.execute(sql).fetchall())
    finally:
        conn.close()


async def postgres_snapshot(conn: Any) -> Snapshot:
    """Same through an asyncpg connection."""
    out: Snapshot = {}
    for table, sql in QUERIES.items():
        out[table] = normalize(tuple(r) for r in await conn.fetch(sql))
    return out


def compare(actual: Snapshot, expected: Snapshot) -> dict[str, tuple[list, list]]:
    """table -> (rows only in actual, rows only in expected); empty when equal."""
    diff = {}
    for table in sorted(set(actual) | set(expected)):
        a, e = actual.get(table, Counter()), expected.get(table, Counter())
        extra, missing = a - e, e - a
        if extra or missing:
            diff[table] = (sorted(extra.elements(), key=repr), sorted(missing.elements(), key=repr))
    return diff


def format_diff(diff: dict[str, tuple[list, list]], width: int = 400) -> str:
    lines = []
    for table, (extra, missing) in diff.items():
        lines.append(f"table {table}: {len(extra)} unexpected row(s), {len(missing)} missing row(s)")
        for row in extra:
            lines.append(f"  + {repr(row)[:width]}")
        for row in missing:
            lines.append(f"  - {repr(row)[:width]}")
    return "\n".join(lines)


def counts(snap: Snapshot) -> dict[str, int]:
    return {table: sum(rows.values()) for table, rows in snap.items()}
