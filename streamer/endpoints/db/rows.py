"""Stampede events -> the columns of the Stampede table each fills (monitord's
renaming), and the checks that refuse a row the database would refuse."""

from __future__ import annotations

from typing import Any

from streamer.events import Event
from streamer.endpoints.db.schema import stampede as schema


class Rejected(ValueError):
    """An event the loader cannot turn into rows (the message says why)."""



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

JOBSTATES: dict[str, tuple[str, str]] = {  # event -> (state if status == -1, state if 0)
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
NOOP = {
    "stampede.static.start", "stampede.static.end", "stampede.static.meta.start",
    "stampede.static.meta.end", "stampede.job_inst.grid.submit.start",
    "stampede.job_inst.globus.submit.start", "stampede.job_inst.composite", "stampede.inv.start",
    "stampede.task.monitoring",
}

LINKING = frozenset({"stampede.wf.plan", "stampede.xwf.map.subwf_job"})
"""Events naming a workflow other than their own (root, parent, sub-workflow)."""

COLUMNS = {t.name: t.column_names for t in schema.TABLES}
_NOT_NULL = {t.name: tuple(c.name for c in t.columns if c.not_null and c.kind != "id") for t in schema.TABLES}
_INT32 = {t.name: tuple(c.name for c in t.columns if c.kind == "int") for t in schema.TABLES}
_MAX_LEN = {t.name: tuple((c.name, int(c.kind[4:])) for c in t.columns if c.kind.startswith("str:"))
            for t in schema.TABLES}
_ENUMS: dict[tuple[str, str], set[Any]] = {
    ("job", "type_desc"): set(schema.JOB_TYPES),
    ("integrity", "type"): {"check", "compute"},
    ("integrity", "file_type"): {"input", "output", None},
}


_TABLE_ENUMS: dict[str, tuple[tuple[str, set[Any]], ...]] = {}
for (_tbl, _col), _allowed in _ENUMS.items():
    _TABLE_ENUMS[_tbl] = _TABLE_ENUMS.get(_tbl, ()) + ((_col, _allowed),)


def validate(table: str, cols: dict[str, Any], *, strict_length: bool, partial: bool = False) -> None:
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


def undot(fields: dict[str, Any], table: str) -> dict[str, Any]:
    """Event fields -> the columns of `table` they fill (monitord's renaming)."""
    shape = (table, tuple(fields))
    pairs = _SHAPES.get(shape)
    if pairs is None:  # events come in few shapes: map each shape's fields once
        cols = COLUMNS[table]
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
        out["argv"] = sanitize_argv(argv)
    return out


def sanitize_argv(argv: Any) -> str:
    """monitord escapes backslashes and single quotes of argv before storing it."""
    return str(argv).replace("\\", "\\\\").replace("'", "\\'")


def need(event: Event, key: str) -> Any:
    value = event.fields.get(key)
    if value is None:
        raise Rejected(f"missing field {key}")
    return value




def describe(event: Event) -> str:
    """`rejected event NAME (id ID, FILE:LINE)`: the line where a file source read it, when one did."""
    origin = event.origin
    where = f", {origin[0]}:{origin[1]}" if origin is not None else ""
    return f"rejected event {event.name} (id {event.id[:16]}{where})"
