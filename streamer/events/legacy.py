"""Pegasus 3.x events (seed 000) -> the 4.x/5.x schema: names, fields and values.

A 3.x stream loads into a Stampede database exactly as the 4.x stream of the
same run would (`tests/events/test_legacy3x.py` checks it row for row):

| 3.x event                                        | 4.x event                     |
|--------------------------------------------------|-------------------------------|
| stampede.workflow.plan                           | stampede.wf.plan              |
| stampede.workflow.start / .end                   | stampede.xwf.start / .end     |
| stampede.task                                    | stampede.task.info            |
| stampede.task.map                                | stampede.wf.map.task_job      |
| stampede.job                                     | stampede.job.info             |
| stampede.task.edge, stampede.job.edge            | (same names, fields renamed)  |
| stampede.jobinstance.prescript.start             | stampede.job_inst.pre.start   |
| stampede.jobinstance.prescript.end / .finish     | stampede.job_inst.pre.end     |
| stampede.jobinstance.mainjob.start               | stampede.job_inst.submit.start (*) |
| stampede.jobinstance.mainjob.end                 | stampede.job_inst.main.end    |
| stampede.jobinstance.postscript.start / .end     | stampede.job_inst.post.start / .end |
| stampede.jobinstance.state `state=S`             | the 4.x event of state S, with its `js.id` (table `STATE_EVENTS`) |
| stampede.invocation.prescript/mainjob/postscript | stampede.inv.end              |
| stampede.host                                    | stampede.job_inst.host.info   |

(*) In 3.x `mainjob.start` means "the job is found in dagman.out": it creates the instance.

In 3.x the job states (the `jobstate` rows) come only from
`jobinstance.state`; the lifecycle events (`mainjob.start`, `prescript.end`,
...) carry no `js.id` and only fill the job instance. Translated, they keep
having no `js.id`, and the loaders write no jobstate row for an event without
one, so every state is stored once.

Fields renamed in all 3.x events: `wf.id`->`xwf.id`, `parent.wf.id`->`parent.xwf.id`,
`root.wf.id`->`root.xwf.id`; in job-instance, invocation and host events 3.x `job.id`
(the instance counter) becomes `job_inst.id` and `exec_job.id` becomes `job.id`;
the rest per event below (`job_stdout`->`stdout.file`, `site_name`->`site`, ...).

Values: 3.x job types (`jobtype`) become 4.x `type_desc` with their `type`
number (`JOB_TYPES`: `create dir`->`create-dir`, `stage-in`->`stage-in-tx`,
`replica-reg`->`registration`, `unassigned`->`unknown`, ...); task type `job`
is `compute` (`dax`, `dag` stay); `clustered=False|True` becomes 0|1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

_COMMON: Final = {"wf.id": "xwf.id", "parent.wf.id": "parent.xwf.id", "root.wf.id": "root.xwf.id"}
_INSTANCE: Final = {**_COMMON, "job.id": "job_inst.id", "exec_job.id": "job.id"}
_STD: Final = {"job_stdin": "stdin.file", "job_stdout": "stdout.file", "job_stderr": "stderr.file"}
_INVOCATION: Final = {
    **_INSTANCE,
    "task.id": "inv.id",
    "abs_task.id": "task.id",
    "remote_duration": "dur",
    "arguments": "argv",
}

# 3.x name -> (4.x name, field renames, fixed fields added when missing)
LEGACY: Final[dict[str, tuple[str, dict[str, str], dict[str, object]]]] = {
    "stampede.workflow.plan": (
        "stampede.wf.plan",
        {
            **_COMMON,
            "submit_hostname": "submit.hostname",
            "dax_label": "dax.label",
            "dax_index": "dax.index",
            "dax_version": "dax.version",
            "dax_file": "dax.file",
            "planner_version": "planner.version",
            "submit_dir": "submit.dir",
            "planner_arguments": "argv",
        },
        {},
    ),
    "stampede.workflow.start": ("stampede.xwf.start", _COMMON, {}),
    "stampede.workflow.end": ("stampede.xwf.end", _COMMON, {}),
    "stampede.task": (
        "stampede.task.info",
        {**_COMMON, "abs_task.id": "task.id", "arguments": "argv", "type": "type_desc"},
        {},
    ),
    "stampede.task.map": (
        "stampede.wf.map.task_job",
        {**_COMMON, "abs_task.id": "task.id", "exec_job.id": "job.id"},
        {},
    ),
    "stampede.job": (
        "stampede.job.info",
        {**_COMMON, "exec_job.id": "job.id", "jobtype": "type_desc", "arguments": "argv"},
        {},
    ),
    "stampede.task.edge": (
        "stampede.task.edge",
        {**_COMMON, "parent_abs_task.id": "parent.task.id", "child_abs_task.id": "child.task.id"},
        {},
    ),
    "stampede.job.edge": (
        "stampede.job.edge",
        {**_COMMON, "parent_exec_job.id": "parent.job.id", "child_exec_job.id": "child.job.id"},
        {},
    ),
    "stampede.jobinstance.prescript.start": ("stampede.job_inst.pre.start", _INSTANCE, {}),
    "stampede.jobinstance.prescript.end": ("stampede.job_inst.pre.end", _INSTANCE, {}),
    "stampede.jobinstance.prescript.finish": ("stampede.job_inst.pre.end", _INSTANCE, {}),
    "stampede.jobinstance.mainjob.start": ("stampede.job_inst.submit.start", {**_INSTANCE, **_STD}, {}),
    "stampede.jobinstance.mainjob.end": (
        "stampede.job_inst.main.end",
        {
            **_INSTANCE,
            **_STD,
            "remote_user": "user",
            "site_name": "site",
            "remote_working_dir": "work_dir",
            "cluster_start_time": "cluster.start",
            "cluster_duration": "cluster.dur",
            "local_duration": "local.dur",
        },
        {},
    ),
    "stampede.jobinstance.postscript.start": ("stampede.job_inst.post.start", _INSTANCE, {}),
    "stampede.jobinstance.postscript.end": ("stampede.job_inst.post.end", _INSTANCE, {}),
    # the 4.x name depends on the `state` field (STATE_EVENTS); this one stands for "translated"
    "stampede.jobinstance.state": ("stampede.job_inst.state", _INSTANCE, {}),
    "stampede.invocation.prescript": ("stampede.inv.end", _INVOCATION, {}),
    "stampede.invocation.mainjob": ("stampede.inv.end", _INVOCATION, {}),
    "stampede.invocation.postscript": ("stampede.inv.end", _INVOCATION, {}),
    "stampede.host": (
        "stampede.job_inst.host.info",
        {**_INSTANCE, "site_name": "site", "total_ram": "total_memory", "ip_address": "ip"},
        {},
    ),
}

_BOOLEANS: Final = {"False": "0", "True": "1", "false": "0", "true": "1"}

TYPE_NUMBERS: Final = {name: number for number, name in enumerate((
    "unknown", "compute", "stage-in-tx", "stage-out-tx", "registration", "inter-site-tx",
    "create-dir", "staged-compute", "cleanup", "chmod", "dax", "dag"))}
"""4.x `type_desc` -> its `type` number (the schema's peg_inttype)."""

JOB_TYPES: Final = {
    "unassigned": "unknown", "unknown": "unknown", "compute": "compute",
    "stage-in": "stage-in-tx", "stage-out": "stage-out-tx", "replica-reg": "registration",
    "inter-site": "inter-site-tx", "create dir": "create-dir", "create-dir": "create-dir",
    "staged compute": "staged-compute", "staged-compute": "staged-compute", "cleanup": "cleanup",
    "chmod": "chmod", "dax": "dax", "dag": "dag",
    "stage-in-tx": "stage-in-tx", "stage-out-tx": "stage-out-tx", "registration": "registration",
    "inter-site-tx": "inter-site-tx",
}
"""3.x job types (Pegasus 3's job classes, as `stampede.job` wrote them) -> 4.x `type_desc`."""

TASK_TYPES: Final = {"job": "compute", "dax": "dax", "dag": "dag", "compute": "compute"}
"""3.x task types (DAX job|dax|dag) -> 4.x `type_desc`."""

STATE_EVENTS: Final[dict[str, tuple[str, int | None]]] = {
    "PRE_SCRIPT_STARTED": ("stampede.job_inst.pre.start", None),
    "PRE_SCRIPT_TERMINATED": ("stampede.job_inst.pre.term", None),
    "PRE_SCRIPT_SUCCESS": ("stampede.job_inst.pre.end", 0),
    "PRE_SCRIPT_FAILED": ("stampede.job_inst.pre.end", -1),
    "PRE_SCRIPT_FAILURE": ("stampede.job_inst.pre.end", -1),
    "SUBMIT": ("stampede.job_inst.submit.end", 0),
    "SUBMIT_FAILED": ("stampede.job_inst.submit.end", -1),
    "GRID_SUBMIT": ("stampede.job_inst.grid.submit.end", 0),
    "GRID_SUBMIT_FAILED": ("stampede.job_inst.grid.submit.end", -1),
    "GLOBUS_SUBMIT": ("stampede.job_inst.globus.submit.end", 0),
    "GLOBUS_SUBMIT_FAILED": ("stampede.job_inst.globus.submit.end", -1),
    "EXECUTE": ("stampede.job_inst.main.start", None),
    "REMOTE_ERROR": ("stampede.job_inst.remote_error", None),
    "IMAGE_SIZE": ("stampede.job_inst.image.info", None),
    "JOB_TERMINATED": ("stampede.job_inst.main.term", 0),
    "JOB_EVICTED": ("stampede.job_inst.main.term", -1),
    "JOB_SUCCESS": ("stampede.job_inst.main.end", 0),
    "JOB_FAILURE": ("stampede.job_inst.main.end", -1),
    "JOB_HELD": ("stampede.job_inst.held.start", None),
    "JOB_RELEASED": ("stampede.job_inst.held.end", 0),
    "JOB_ABORTED": ("stampede.job_inst.abort.info", None),
    "POST_SCRIPT_STARTED": ("stampede.job_inst.post.start", None),
    "POST_SCRIPT_TERMINATED": ("stampede.job_inst.post.term", None),
    "POST_SCRIPT_SUCCESS": ("stampede.job_inst.post.end", 0),
    "POST_SCRIPT_FAILED": ("stampede.job_inst.post.end", -1),
    "POST_SCRIPT_FAILURE": ("stampede.job_inst.post.end", -1),
}
"""`stampede.jobinstance.state state=S` -> (4.x event, status) whose jobstate row is S."""


def is_legacy(name: str) -> bool:
    return name in LEGACY


def translate(name: str, fields: Mapping[str, object]) -> tuple[str, dict[str, object]]:
    """A 3.x event as its 4.x name and fields; other names come back unchanged."""
    entry = LEGACY.get(name)
    if entry is None:
        return name, dict(fields)
    new_name, renames, fixed = entry
    out = {renames.get(key, key): value for key, value in fields.items()}
    for key, value in fixed.items():
        out.setdefault(key, value)
    if new_name == "stampede.job.info":
        if out.get("clustered") in _BOOLEANS:
            out["clustered"] = _BOOLEANS[str(out["clustered"])]
        kind = JOB_TYPES.get(str(out.get("type_desc")))
        if kind is not None:
            out["type_desc"] = kind
            out.setdefault("type", TYPE_NUMBERS[kind])
    elif new_name == "stampede.task.info":
        kind = TASK_TYPES.get(str(out.get("type_desc")))
        if kind is not None:
            out["type_desc"] = kind
            out.setdefault("type", TYPE_NUMBERS[kind])
    elif name == "stampede.jobinstance.state":
        target = STATE_EVENTS.get(str(out.get("state")))
        if target is None:
            return name, out  # a state 4.x has no event for: passed through under its 3.x name
        new_name, status = target
        del out["state"]
        if status is not None:
            out.setdefault("status", status)
    return new_name, out
