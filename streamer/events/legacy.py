"""Pegasus 3.x event names and fields (seed 000) -> the 4.x/5.x schema.

| 3.x event                                | 4.x event                   |
|------------------------------------------|-----------------------------|
| stampede.workflow.plan                   | stampede.wf.plan            |
| stampede.workflow.start                  | stampede.xwf.start          |
| stampede.workflow.end                    | stampede.xwf.end            |
| stampede.task                            | stampede.task.info          |
| stampede.task.map                        | stampede.wf.map.task_job    |
| stampede.job                             | stampede.job.info           |
| stampede.jobinstance.prescript.start     | stampede.job_inst.pre.start |
| stampede.jobinstance.prescript.end/.finish | stampede.job_inst.pre.end |
| stampede.jobinstance.mainjob.start       | stampede.job_inst.main.start|
| stampede.jobinstance.mainjob.end         | stampede.job_inst.main.end  |
| stampede.jobinstance.postscript.start    | stampede.job_inst.post.start|
| stampede.jobinstance.postscript.end      | stampede.job_inst.post.end  |
| stampede.invocation.prescript/mainjob/postscript | stampede.inv.end    |
| stampede.host                            | stampede.job_inst.host.info |

`stampede.task.edge`, `stampede.job.edge` keep their names; only their
fields change. `stampede.jobinstance.state` has no 4.x counterpart (4.x
emits one event per state): its fields are translated and the name is kept.

Field renames common to all 3.x events: `wf.id`->`xwf.id`,
`parent.wf.id`->`parent.xwf.id`, `root.wf.id`->`root.xwf.id`; in job-instance,
invocation and host events 3.x `job.id` (the instance counter) becomes
`job_inst.id` and `exec_job.id` becomes `job.id`.
"""

from __future__ import annotations

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
    "stampede.jobinstance.mainjob.start": ("stampede.job_inst.main.start", {**_INSTANCE, **_STD}, {}),
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
    "stampede.jobinstance.state": ("stampede.jobinstance.state", _INSTANCE, {}),
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


def is_legacy(name: str) -> bool:
    return name in LEGACY


def translate(name: str, fields: dict[str, object]) -> tuple[str, dict[str, object]]:
    """A 3.x event as its 4.x name and fields; other names come back unchanged."""
    entry = LEGACY.get(name)
    if entry is None:
        return name, fields
    new_name, renames, fixed = entry
    out = {renames.get(key, key): value for key, value in fields.items()}
    for key, value in fixed.items():
        out.setdefault(key, value)
    if new_name == "stampede.job.info" and out.get("clustered") in _BOOLEANS:
        out["clustered"] = _BOOLEANS[str(out["clustered"])]
    return new_name, out
