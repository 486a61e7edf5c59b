"""The Pegasus 5 Stampede schema (version 14), in SQLite and PostgreSQL dialects.

Pegasus's tools (`pegasus-statistics`, `pegasus-analyzer`, `pegasus-db-admin`)
open a Stampede database through their own SQLAlchemy models, so the tables
we create must match theirs column for column, constraint for constraint
(the reference is the `sqlite_master` of the databases the real monitord
writes, `../shared/golden/*.stampede.db`). The schema is described once here
as data and rendered per dialect, so the two backends cannot drift apart.

`check(existing)` compares what a database already holds with this schema
and explains any difference: a database written by another Pegasus version,
or something else entirely, is refused with a clear message instead of being
written into.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SCHEMA_VERSION = 14
"""`dbversion.version_number` of the Pegasus 5 Stampede schema."""

Dialect = Literal["sqlite", "postgresql"]

# Column kinds -> (SQLite type, PostgreSQL type). "id" is an integer primary
# key the loader assigns (SERIAL in PostgreSQL so other writers can share it).
_TYPES: dict[str, tuple[str, str]] = {
    "id": ("INTEGER", "BIGSERIAL"),
    "key": ("INTEGER", "BIGINT"),
    "int": ("INTEGER", "INTEGER"),
    "bigint": ("INTEGER", "BIGINT"),  # wider than Pegasus's INTEGER: a value the event schema allows (bytes)
    "text": ("TEXT", "TEXT"),
    "ts": ("NUMERIC(16, 6)", "NUMERIC(16, 6)"),
    "dur": ("NUMERIC(10, 3)", "NUMERIC(10, 3)"),
    "bool": ("BOOLEAN", "BOOLEAN"),
    "datetime": ("DATETIME", "TIMESTAMP WITHOUT TIME ZONE"),
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # a key of _TYPES, or "str:N" for VARCHAR(N)
    not_null: bool = False

    def sql_type(self, dialect: Dialect) -> str:
        if self.kind.startswith("str:"):
            return f"VARCHAR({self.kind[4:]})"
        return _TYPES[self.kind][0 if dialect == "sqlite" else 1]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    """UNIQUE / FOREIGN KEY / CHECK clauses, identical in both dialects."""
    indexes: tuple[tuple[str, str], ...] = ()
    """(index name, column)."""
    autoincrement: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def C(name: str, kind: str, not_null: bool = False) -> Column:
    return Column(name, kind, not_null)


def _fk(col: str, table: str, ref: str, action: str = "CASCADE") -> str:
    return f"FOREIGN KEY({col}) REFERENCES {table} ({ref}) ON DELETE {action}"


def _fk_plain(col: str, table: str, ref: str) -> str:
    return f"FOREIGN KEY({col}) REFERENCES {table} ({ref})"


def _unique(name: str, *cols: str) -> str:
    return f'CONSTRAINT "{name}" UNIQUE ({", ".join(cols)})'


def _check(name: str | None, col: str, values: tuple[str, ...]) -> str:
    listed = ", ".join(f"'{v}'" for v in values)
    prefix = f"CONSTRAINT {name} " if name else ""
    return f"{prefix}CHECK ({col} IN ({listed}))"


JOB_TYPES = (
    "unknown", "compute", "stage-in-tx", "stage-out-tx", "registration", "inter-site-tx",
    "create-dir", "staged-compute", "cleanup", "chmod", "dax", "dag",
)
WF_STATES = ("WORKFLOW_STARTED", "WORKFLOW_TERMINATED")

_WF_INFO = (
    C("dag_file_name", "str:255"), C("timestamp", "ts"), C("submit_hostname", "str:255"),
    C("submit_dir", "text"), C("planner_arguments", "text"), C("user", "str:255"),
    C("grid_dn", "str:255"), C("planner_version", "str:255"),
)
_STATE_COLS = (
    C("state", "str:19", True), C("timestamp", "ts", True), C("restart_count", "int", True),
    C("status", "int"), C("reason", "text"),
)

TABLES: tuple[Table, ...] = (
    Table("dbversion", (
        C("id", "id", True), C("version_number", "int"), C("version", "str:50", True),
        C("version_timestamp", "int", True),
    ), ("id",), autoincrement=True),
    Table("workflow", (
        C("wf_id", "id", True), C("wf_uuid", "str:255", True), *_WF_INFO,
        C("dax_label", "str:255"), C("dax_version", "str:255"), C("dax_file", "str:255"),
        C("db_url", "text"), C("parent_wf_id", "key"), C("root_wf_id", "key"),
    ), ("wf_id",), (
        _fk("parent_wf_id", "workflow", "wf_id"), _unique("UNIQUE_WF_UUID", "wf_uuid"),
    )),
    Table("rc_lfn", (C("lfn_id", "id", True), C("lfn", "str:245", True)), ("lfn_id",),
          (_unique("UNIQUE_LFN", "lfn"),)),
    Table("master_workflow", (
        C("wf_id", "id", True), C("wf_uuid", "str:255", True), C("dax_label", "str:255"),
        C("dax_version", "str:255"), C("dax_file", "str:255"), *_WF_INFO, C("db_url", "text"),
        C("archived", "bool", True),
    ), ("wf_id",), ("CHECK (archived IN (0, 1))", _unique("UNIQUE_MASTER_WF_UUID", "wf_uuid"))),
    Table("ensemble", (
        C("id", "id", True), C("name", "str:100", True), C("created", "datetime", True),
        C("updated", "datetime", True), C("state", "str:6", True), C("max_running", "int", True),
        C("max_planning", "int", True), C("username", "str:100", True),
    ), ("id",), (
        _check("ensemble_state", "state", ("HELD", "ACTIVE", "PAUSED")),
        _unique("UNIQUE_ENSEMBLE", "name", "username"),
    )),
    Table("workflowstate", (C("wf_id", "key", True), *_STATE_COLS), ("wf_id", "state", "timestamp"), (
        _fk("wf_id", "workflow", "wf_id"), _check("workflow_state", "state", WF_STATES),
    ), (("workflowstate_timestamp_COL", "timestamp"),)),
    Table("workflow_meta", (
        C("wf_id", "key", True), C("key", "str:255", True), C("value", "str:255", True),
    ), ("wf_id", "key"), (_fk("wf_id", "workflow", "wf_id"),)),
    Table("host", (
        C("host_id", "id", True), C("wf_id", "key", True), C("site", "str:255", True),
        C("hostname", "str:255", True), C("ip", "str:255", True), C("uname", "str:255"),
        C("total_memory", "bigint"),
    ), ("host_id",), (
        _fk("wf_id", "workflow", "wf_id"), _unique("UNIQUE_HOST", "wf_id", "site", "hostname", "ip"),
    )),
    Table("job", (
        C("job_id", "id", True), C("wf_id", "key", True), C("exec_job_id", "str:255", True),
        C("submit_file", "str:255", True), C("type_desc", "str:14", True), C("clustered", "bool", True),
        C("max_retries", "int", True), C("executable", "text", True), C("argv", "text"),
        C("task_count", "int", True),
    ), ("job_id",), (
        _fk("wf_id", "workflow", "wf_id"), _check("job_type_desc", "type_desc", JOB_TYPES),
        "CHECK (clustered IN (0, 1))", _unique("UNIQUE_JOB", "wf_id", "exec_job_id"),
    ), (("job_exec_job_id_COL", "exec_job_id"), ("job_type_desc_COL", "type_desc"))),
    Table("job_edge", (
        C("wf_id", "key", True), C("parent_exec_job_id", "str:255", True),
        C("child_exec_job_id", "str:255", True),
    ), ("wf_id", "parent_exec_job_id", "child_exec_job_id"), (_fk("wf_id", "workflow", "wf_id"),)),
    Table("task_edge", (
        C("wf_id", "key", True), C("parent_abs_task_id", "str:255", True),
        C("child_abs_task_id", "str:255", True),
    ), ("wf_id", "parent_abs_task_id", "child_abs_task_id"), (_fk("wf_id", "workflow", "wf_id"),)),
    Table("rc_pfn", (
        C("pfn_id", "id", True), C("lfn_id", "key", True), C("pfn", "str:245", True),
        C("site", "str:245"),
    ), ("pfn_id",), (_fk("lfn_id", "rc_lfn", "lfn_id"), _unique("UNIQUE_PFN", "lfn_id", "pfn", "site"))),
    Table("rc_meta", (
        C("lfn_id", "key", True), C("key", "str:245", True), C("value", "str:245", True),
    ), ("lfn_id", "key"), (_fk("lfn_id", "rc_lfn", "lfn_id"),)),
    Table("master_workflowstate", (C("wf_id", "key", True), *_STATE_COLS), ("wf_id", "state", "timestamp"), (
        _fk("wf_id", "master_workflow", "wf_id"), _check("master_workflow_state", "state", WF_STATES),
    )),
    Table("ensemble_workflow", (
        C("id", "id", True), C("ensemble_id", "key", True), C("name", "str:100", True),
        C("basedir", "str:512", True), C("created", "datetime", True), C("updated", "datetime", True),
        C("state", "str:11", True), C("priority", "int", True), C("wf_uuid", "str:36"),
        C("submitdir", "str:512"), C("plan_command", "str:1024", True),
    ), ("id",), (
        _fk_plain("ensemble_id", "ensemble", "id"),
        _check("ensemble_wf_state", "state", (
            "QUEUED", "PLANNING", "ABORTED", "SUCCESSFUL", "RUN_FAILED", "PLAN_FAILED",
            "READY", "RUNNING", "FAILED")),
        _unique("UNIQUE_ENSEMBLE_WORKFLOW", "ensemble_id", "name"),
    )),
    Table("trigger", (
        C("id", "id", True), C("ensemble_id", "key", True), C("name", "str:100", True),
        C("state", "str:7", True), C("workflow", "text", True), C("args", "text"),
        C("type", "str:12", True),
    ), ("id",), (
        _fk_plain("ensemble_id", "ensemble", "id"),
        _check("trigger_state", "state", ("READY", "STOPPED", "RUNNING", "FAILED")),
        _check("trigger_type", "type", ("CRON", "FILE_PATTERN")),
        _unique("UNIQUE_TRIGGER", "ensemble_id", "name"),
    )),
    Table("job_instance", (
        C("job_instance_id", "id", True), C("job_id", "key", True), C("host_id", "key"),
        C("job_submit_seq", "int", True), C("sched_id", "str:255"), C("site", "str:255"),
        C("user", "str:255"), C("work_dir", "text"), C("cluster_start", "ts"),
        C("cluster_duration", "dur"), C("local_duration", "dur"), C("subwf_id", "key"),
        C("stdout_file", "str:255"), C("stdout_text", "text"), C("stderr_file", "str:255"),
        C("stderr_text", "text"), C("stdin_file", "str:255"), C("multiplier_factor", "int", True),
        C("exitcode", "int"),
    ), ("job_instance_id",), (
        _fk("job_id", "job", "job_id"), _fk("host_id", "host", "host_id", "SET NULL"),
        _fk("subwf_id", "workflow", "wf_id", "SET NULL"),
        _unique("UNIQUE_JOB_INSTANCE", "job_id", "job_submit_seq"),
    )),
    Table("task", (
        C("task_id", "id", True), C("wf_id", "key", True), C("job_id", "key"),
        C("abs_task_id", "str:255", True), C("transformation", "text", True), C("argv", "text"),
        C("type_desc", "str:255", True),
    ), ("task_id",), (
        _fk("wf_id", "workflow", "wf_id"), _fk("job_id", "job", "job_id", "SET NULL"),
        _unique("UNIQUE_TASK", "wf_id", "abs_task_id"),
    ), (("task_abs_task_id_COL", "abs_task_id"), ("task_wf_id_COL", "wf_id"))),
    Table("jobstate", (
        C("job_instance_id", "key", True), C("state", "str:255", True), C("timestamp", "ts", True),
        C("jobstate_submit_seq", "int", True), C("reason", "text"),
    ), ("job_instance_id", "state", "timestamp", "jobstate_submit_seq"), (
        _fk("job_instance_id", "job_instance", "job_instance_id"),
    ), (("jobstate_jobstate_submit_seq_COL", "jobstate_submit_seq"),)),
    Table("tag", (
        C("tag_id", "id", True), C("wf_id", "key", True), C("job_instance_id", "key", True),
        C("name", "str:255", True), C("count", "int", True),
    ), ("tag_id",), (
        _fk("wf_id", "workflow", "wf_id"), _fk("job_instance_id", "job_instance", "job_instance_id"),
        _unique("UNIQUE_TAG", "wf_id", "job_instance_id"),
    )),
    Table("task_meta", (
        C("task_id", "key", True), C("key", "str:255", True), C("value", "str:255", True),
    ), ("task_id", "key"), (_fk("task_id", "task", "task_id"),)),
    Table("invocation", (
        C("invocation_id", "id", True), C("wf_id", "key", True), C("job_instance_id", "key", True),
        C("task_submit_seq", "int", True), C("start_time", "ts", True),
        C("remote_duration", "dur", True), C("remote_cpu_time", "dur"), C("exitcode", "int", True),
        C("transformation", "text", True), C("executable", "text", True), C("argv", "text"),
        C("abs_task_id", "str:255"), C("maxrss", "bigint"), C("avg_cpu", "ts"),
    ), ("invocation_id",), (
        _fk("wf_id", "workflow", "wf_id"), _fk("job_instance_id", "job_instance", "job_instance_id"),
        _unique("UNIQUE_INVOCATION", "job_instance_id", "task_submit_seq"),
    ), (("invoc_abs_task_id_COL", "abs_task_id"), ("invoc_wf_id_COL", "wf_id"))),
    Table("integrity", (
        C("integrity_id", "id", True), C("wf_id", "key", True), C("job_instance_id", "key", True),
        C("type", "str:7", True), C("file_type", "str:6"), C("count", "int", True),
        C("duration", "dur", True),
    ), ("integrity_id",), (
        _fk("wf_id", "workflow", "wf_id"), _fk("job_instance_id", "job_instance", "job_instance_id"),
        _check("integrity_type_desc", "type", ("check", "compute")),
        _check("integrity_file_type_desc", "file_type", ("input", "output")),
        _unique("UNIQUE_INTEGRITY", "job_instance_id", "type", "file_type"),
    )),
    Table("workflow_files", (
        C("wf_id", "key", True), C("task_id", "key", True), C("lfn_id", "key", True),
        C("file_type", "str:255"),
    ), ("wf_id", "task_id", "lfn_id"), (
        _fk("wf_id", "workflow", "wf_id"), _fk("task_id", "task", "task_id"),
        _fk("lfn_id", "rc_lfn", "lfn_id"),
    )),
)

BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}

# Names that must be quoted as identifiers (keywords in SQLite or PostgreSQL).
_ALWAYS_QUOTE = {"user", "key", "trigger"}


def quote(name: str) -> str:
    """An identifier, quoted where some dialect would read it as a keyword."""
    return f'"{name}"' if name in _ALWAYS_QUOTE else name


def _constraint_sql(text: str, dialect: Dialect) -> str:
    # PostgreSQL has a real boolean type: a CHECK (x IN (0, 1)) would not compile.
    if dialect == "postgresql" and text.startswith("CHECK (") and "IN (0, 1)" in text:
        return ""
    if dialect == "postgresql" and _ENUM_CHECK.match(text):
        return ""  # an ENUM type instead
    return text


_ENUM_CHECK = re.compile(r"^CONSTRAINT (\w+) CHECK \((\w+) IN \((.*)\)\)$")


def enum_types(table: Table) -> dict[str, tuple[str, str]]:
    """column -> (type name, `'a', 'b'` labels) of the table's enumerations.

    SQLite gets them as named CHECK constraints, PostgreSQL as ENUM types of
    the same names (what Pegasus's SQLAlchemy models create on each).
    """
    out = {}
    for text in table.constraints:
        match = _ENUM_CHECK.match(text)
        if match:
            out[match[2]] = (match[1], match[3])
    return out


def create_enum_sql(table: Table) -> list[tuple[str, str]]:
    """(type name, `CREATE TYPE`) for the PostgreSQL enumerations of `table`."""
    return [(name, f"CREATE TYPE {name} AS ENUM ({labels})") for name, labels in enum_types(table).values()]


def create_table_sql(table: Table, dialect: Dialect) -> str:
    """`CREATE TABLE` for one table (with `IF NOT EXISTS`)."""
    lines = []
    enums = enum_types(table) if dialect == "postgresql" else {}
    for col in table.columns:
        kind = enums[col.name][0] if col.name in enums else col.sql_type(dialect)
        if dialect == "postgresql" and col.kind == "id" and table.primary_key != (col.name,):
            kind = "BIGINT"
        sqlite_rowid = dialect == "sqlite" and table.autoincrement and col.kind == "id"
        not_null = " NOT NULL" if col.not_null and not sqlite_rowid else ""
        if dialect == "sqlite" and table.autoincrement and col.kind == "id":
            lines.append(f"\t{quote(col.name)} INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT")
            continue
        lines.append(f"\t{quote(col.name)} {kind}{not_null}")
    if not (dialect == "sqlite" and table.autoincrement):
        lines.append(f"\tPRIMARY KEY ({', '.join(quote(c) for c in table.primary_key)})")
    for text in table.constraints:
        text = _constraint_sql(text, dialect)
        if text:
            lines.append(f"\t{text}")
    body = ", \n".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {quote(table.name)} (\n{body}\n)"


def create_index_sql(table: Table, dialect: Dialect) -> list[str]:
    return [
        f'CREATE INDEX IF NOT EXISTS "{name}" ON {quote(table.name)} ({quote(col)})'
        for name, col in table.indexes
    ]


def ddl(dialect: Dialect) -> list[str]:
    """Every statement that creates the schema, in dependency order."""
    out: list[str] = []
    for table in TABLES:
        out.append(create_table_sql(table, dialect))
        out.extend(create_index_sql(table, dialect))
    return out


WIDENED: frozenset[tuple[str, str]] = frozenset(
    (t.name, c.name) for t in TABLES for c in t.columns if c.kind == "bigint")
"""(table, column) where streamer's type is wider than Pegasus's INTEGER (bytes do not fit 32 bits)."""


class SchemaMismatch(RuntimeError):
    """The database holds tables that are not this Stampede schema."""


def check(existing: dict[str, list[str]], version: int | None) -> list[str]:
    """Compare a database's tables (name -> column names) with this schema.

    Returns the tables to create (empty when complete). Raises SchemaMismatch
    when a table of ours exists with other columns, or when the recorded
    schema version differs: writing into it would corrupt it for Pegasus's
    tools.
    """
    if version is not None and version != SCHEMA_VERSION:
        raise SchemaMismatch(
            f"Stampede schema version {version} found, streamer writes version {SCHEMA_VERSION}"
            " (upgrade or downgrade the database with pegasus-db-admin, or use another database)"
        )
    problems = []
    missing = []
    for table in TABLES:
        cols = existing.get(table.name)
        if cols is None:
            missing.append(table.name)
        elif [c.lower() for c in cols] != list(table.column_names):
            extra = sorted(set(cols) - set(table.column_names))
            lacking = [c for c in table.column_names if c not in cols]
            detail = []
            if lacking:
                detail.append("missing columns " + ", ".join(lacking))
            if extra:
                detail.append("unknown columns " + ", ".join(extra))
            if not detail:
                detail.append("columns in another order")
            problems.append(f"table {table.name}: {'; '.join(detail)}")
    if problems:
        raise SchemaMismatch("not a Stampede schema version 14 database: " + "; ".join(problems))
    present = [t for t in TABLES if t.name not in missing]
    if present and version is None and "dbversion" not in missing:
        raise SchemaMismatch("table dbversion is empty: cannot tell the Stampede schema version")
    if present and "dbversion" in missing:
        raise SchemaMismatch(
            "Stampede tables without a dbversion table: "
            + ", ".join(t.name for t in present[:5])
            + " (a database of an unknown schema version)"
        )
    return missing
