"""A Pegasus 3.x event stream (seed 000's vocabulary) for a run we have as 4.x events.

`to_3x(events)` writes what a 3.x monitord would have said about the same run:
3.x names and fields, 3.x values (job types such as `create dir`, task type
`job`, `clustered=False`), the lifecycle events of each instance without
`js.id` (`mainjob.start` when DAGMan finds the job, `prescript.end`, ...) and
one `stampede.jobinstance.state` with its `js.id` for every job state. Events
that 3.x never had (metadata, integrity, sub-workflow maps, composite, ...)
are kept as they are, so a load of the result can be compared with a load of
the 4.x stream table by table. Used by tests; the inverse of
`streamer.events.legacy`.
"""

from __future__ import annotations

from typing import Any, Iterable

from streamer.events import Event, bp
from streamer.events.legacy import JOB_TYPES, STATE_EVENTS

_JOB_TYPES_3X = {"unknown": "unassigned", "stage-in-tx": "stage-in", "stage-out-tx": "stage-out",
                 "registration": "replica-reg", "inter-site-tx": "inter-site", "create-dir": "create dir",
                 "staged-compute": "staged compute"}
_TASK_TYPES_3X: dict[object, str] = {"compute": "job"}
"""Looked up by the raw field value (absent: None, kept as it is)."""
_INV_KINDS_3X: dict[object, str] = {-1: "prescript", -2: "postscript"}
"""3.x invocation kind by `inv.id`; any other value: mainjob."""
_COMMON = {"xwf.id": "wf.id", "parent.xwf.id": "parent.wf.id", "root.xwf.id": "root.wf.id"}
_INSTANCE = {**_COMMON, "job_inst.id": "job.id", "job.id": "exec_job.id"}
_STD = {"stdin.file": "job_stdin", "stdout.file": "job_stdout", "stderr.file": "job_stderr"}
_MAIN_END = {**_INSTANCE, **_STD, "user": "remote_user", "site": "site_name", "work_dir": "remote_working_dir",
             "cluster.start": "cluster_start_time", "cluster.dur": "cluster_duration",
             "local.dur": "local_duration"}
_PLAN = {**_COMMON, "submit.hostname": "submit_hostname", "dax.label": "dax_label", "dax.index": "dax_index",
         "dax.version": "dax_version", "dax.file": "dax_file", "planner.version": "planner_version",
         "submit.dir": "submit_dir", "argv": "planner_arguments"}

# 4.x event -> (3.x lifecycle event or None, field renames)
_LIFECYCLE: dict[str, tuple[str, dict[str, str]]] = {
    "stampede.job_inst.submit.start": ("stampede.jobinstance.mainjob.start", {**_INSTANCE, **_STD}),
    "stampede.job_inst.pre.start": ("stampede.jobinstance.prescript.start", _INSTANCE),
    "stampede.job_inst.pre.end": ("stampede.jobinstance.prescript.end", _INSTANCE),
    "stampede.job_inst.main.end": ("stampede.jobinstance.mainjob.end", _MAIN_END),
    "stampede.job_inst.post.start": ("stampede.jobinstance.postscript.start", _INSTANCE),
    "stampede.job_inst.post.end": ("stampede.jobinstance.postscript.end", _INSTANCE),
}
_STATE_OF = {(event, status): state for state, (event, status) in STATE_EVENTS.items()
             if state not in ("PRE_SCRIPT_FAILURE", "POST_SCRIPT_FAILURE")}


def _renamed(fields: dict[str, Any], renames: dict[str, str], drop: Iterable[str] = ()) -> dict[str, Any]:
    skip = set(drop)
    return {renames.get(k, k): v for k, v in fields.items() if k not in skip}


def _state_of(event: Event) -> str | None:
    status = event.fields.get("status")
    key = (event.name, status if (event.name, status) in _STATE_OF else None)
    return _STATE_OF.get(key)


def to_3x_events(events: Iterable[Event]) -> list[tuple[str, dict[str, Any]]]:
    """(3.x name, 3.x fields) for each 4.x event, in order."""
    out: list[tuple[str, dict[str, Any]]] = []
    for event in events:
        name, f = event.name, dict(event.fields)
        if name == "stampede.wf.plan":
            out.append(("stampede.workflow.plan", _renamed(f, _PLAN)))
        elif name in ("stampede.xwf.start", "stampede.xwf.end"):
            out.append((name.replace(".xwf.", ".workflow."), _renamed(f, _COMMON)))
        elif name == "stampede.task.info":
            f["type_desc"] = _TASK_TYPES_3X.get(f.get("type_desc"), f.get("type_desc"))
            out.append(("stampede.task", _renamed(f, {**_COMMON, "task.id": "abs_task.id", "argv": "arguments",
                                                      "type_desc": "type"}, drop=("type",))))
        elif name == "stampede.wf.map.task_job":
            out.append(("stampede.task.map", _renamed(f, {**_COMMON, "task.id": "abs_task.id",
                                                          "job.id": "exec_job.id"})))
        elif name == "stampede.job.info":
            assert JOB_TYPES[_JOB_TYPES_3X.get(f["type_desc"], f["type_desc"])] == f["type_desc"]
            f["type_desc"] = _JOB_TYPES_3X.get(f["type_desc"], f["type_desc"])
            f["clustered"] = "True" if f.get("clustered") else "False"
            out.append(("stampede.job", _renamed(f, {**_COMMON, "job.id": "exec_job.id", "type_desc": "jobtype",
                                                     "argv": "arguments"}, drop=("type",))))
        elif name == "stampede.task.edge":
            out.append((name, _renamed(f, {**_COMMON, "parent.task.id": "parent_abs_task.id",
                                           "child.task.id": "child_abs_task.id"})))
        elif name == "stampede.job.edge":
            out.append((name, _renamed(f, {**_COMMON, "parent.job.id": "parent_exec_job.id",
                                           "child.job.id": "child_exec_job.id"})))
        elif name == "stampede.inv.end":
            kind = _INV_KINDS_3X.get(f.get("inv.id"), "mainjob")
            out.append((f"stampede.invocation.{kind}", _renamed(f, {
                **_INSTANCE, "inv.id": "task.id", "task.id": "abs_task.id", "dur": "remote_duration",
                "argv": "arguments"})))
        elif name == "stampede.job_inst.host.info":
            out.append(("stampede.host", _renamed(f, {**_INSTANCE, "site": "site_name", "total_memory": "total_ram",
                                                      "ip": "ip_address"})))
        elif name.startswith("stampede.job_inst.") and (name in _LIFECYCLE or _state_of(event)):
            lifecycle = _LIFECYCLE.get(name)
            if lifecycle is not None:
                out.append((lifecycle[0], _renamed(f, lifecycle[1], drop=("js.id",))))
            state = _state_of(event)
            if state is not None and "js.id" in f:
                keep: dict[str, Any] = {k: f[k] for k in ("ts", "level", "xwf.id", "job.id", "job_inst.id", "js.id",
                                                          "sched.id", "reason") if k in f}
                keep["state"] = state
                out.append(("stampede.jobinstance.state", _renamed(keep, _INSTANCE)))
        else:
            out.append((name, f))  # no 3.x counterpart: kept as it is
    return out


def to_3x(events: Iterable[Event]) -> str:
    """The 3.x stream as BP text."""
    lines = []
    for name, fields in to_3x_events(events):
        lines.append(bp.format_event(Event(name, fields), with_id=False))
    return "\n".join(lines) + "\n"
