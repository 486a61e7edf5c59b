"""The Stampede event schema as data.

One table lists every event name monitord knows (the YANG schema of seed 002
plus the names the YANG file omits but monitord emits: `job_inst.composite`,
`rc.pfn`, `job_inst.abort.info`, `job_inst.tag`, `int.metric`,
`task.monitoring`, grid/globus submit events). Each field has a kind and a
"mandatory" flag. `models.py` turns the table into pydantic models and
`event.py` compiles it into fast per-field converters, so there is a single
source of truth for types.

Kinds:
  str   - text, kept verbatim
  int   - integer (schema int16/int32/uint*)
  num   - decimal (schema decimal64/float): int when written without a point
  ts    - NetLogger timestamp: ISO-8601 or epoch seconds, held as epoch
  uuid  - 36-char UUID text
  list  - a list (composite `invocations`), written in BP as a Python literal
"""

from __future__ import annotations

from typing import Final

STAMPEDE: Final = "stampede."
PROVENANCE: Final = "chimbuko."
"""Prefix of the provenance records' names (`chimbuko/`); here so that the codecs tell them apart
without loading their pydantic models (~0.1 s of start-up in each process)."""

# Enumerations of the schema.
LEVELS: Final = ("Info", "Error")
TASK_TYPES: Final = (
    "unknown", "compute", "stage-in-tx", "stage-out-tx", "registration",
    "inter-site-tx", "create-dir", "staged-compute", "cleanup", "chmod", "dax", "dag",
)
JOB_STATES: Final = (
    "PRE_SCRIPT_STARTED", "PRE_SCRIPT_TERMINATED", "PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILED",
    "SUBMIT", "GRID_SUBMIT", "GLOBUS_SUBMIT", "SUBMIT_FAILED", "EXECUTE", "REMOTE_ERROR",
    "IMAGE_SIZE", "JOB_TERMINATED", "JOB_SUCCESS", "JOB_FAILURE", "JOB_HELD", "JOB_EVICTED",
    "JOB_RELEASED", "POST_SCRIPT_STARTED", "POST_SCRIPT_TERMINATED", "POST_SCRIPT_SUCCESS",
    "POST_SCRIPT_FAILED",
)
WORKFLOW_STATES: Final = ("WORKFLOW_STARTED", "WORKFLOW_TERMINATED")

UUID_PATTERN: Final = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
NL_TS_PATTERN: Final = (
    r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[\+\-]\d{2}:\d{2}))|(\d{1,10}(\.\d+)?)$"
)

# A field spec is (kind, mandatory).
FieldSpec = tuple[str, bool]

BASE_EVENT: Final[dict[str, FieldSpec]] = {
    "ts": ("ts", True),
    "level": ("str", False),
    "xwf.id": ("uuid", False),
}

# Fields monitord adds to every event of a workflow although the schema does not
# list them; typed here so they round-trip with the right JSON type.
MONITORD_COMMON: Final[dict[str, FieldSpec]] = {
    "root.xwf.id": ("str", False),
    "dax": ("str", False),
    "dag": ("str", False),
    "wf.ts": ("int", False),
    "submit.dir": ("str", False),
    "submit.hostname": ("str", False),
    "pegasus.version": ("str", False),
    "wf.user": ("str", False),
    "reason": ("str", False),
}

BASE_JOB_INST: Final[dict[str, FieldSpec]] = {
    "job_inst.id": ("int", True),
    "js.id": ("int", False),
    "job.id": ("str", True),
}
SCHED_JOB_INST: Final[dict[str, FieldSpec]] = {**BASE_JOB_INST, "sched.id": ("str", True)}
BASE_METADATA: Final[dict[str, FieldSpec]] = {"key": ("str", True), "value": ("str", False)}

_STATUS = {"status": ("int", True)}
_STATUS_EXIT = {"status": ("int", True), "exitcode": ("int", True)}

# Fields of job_inst.main.end, shared with job_inst.composite.
_MAIN_END: Final[dict[str, FieldSpec]] = {
    **SCHED_JOB_INST,
    "stdin.file": ("str", False),
    "stdin_file": ("str", False),
    "stdout.file": ("str", True),
    "stdout.text": ("str", False),
    "stderr.file": ("str", True),
    "stderr.text": ("str", False),
    "user": ("str", False),
    "site": ("str", True),
    "work_dir": ("str", False),
    "local.dur": ("num", False),
    "local_duration": ("num", False),
    "status": ("int", True),
    "exitcode": ("int", True),
    "multiplier_factor": ("int", True),
    "cluster.start": ("num", False),
    "cluster.dur": ("num", False),
    "subwf.id": ("str", False),
}

# Event name (without the "stampede." prefix) -> extra fields beyond BASE_EVENT.
EVENT_FIELDS: Final[dict[str, dict[str, FieldSpec]]] = {
    "wf.plan": {
        "submit.hostname": ("str", True),
        "dax.label": ("str", False),
        "dax.index": ("str", False),
        "dax.version": ("str", True),
        "dax.file": ("str", True),
        "dag.file.name": ("str", True),
        "planner.version": ("str", True),
        "grid_dn": ("str", False),
        "user": ("str", False),
        "submit.dir": ("str", True),
        "argv": ("str", False),
        "parent.xwf.id": ("uuid", False),
        "root.xwf.id": ("str", True),
    },
    "static.start": {},
    "static.end": {},
    "xwf.start": {"restart_count": ("int", True)},
    "xwf.end": {"restart_count": ("int", True), "status": ("int", True)},
    "task.info": {
        "transformation": ("str", True),
        "argv": ("str", False),
        "type": ("int", True),
        "type_desc": ("str", True),
        "task.id": ("str", True),
    },
    "task.edge": {"parent.task.id": ("str", True), "child.task.id": ("str", True)},
    "wf.map.task_job": {"task.id": ("str", True), "job.id": ("str", True)},
    "xwf.map.subwf_job": {
        "subwf.id": ("str", True),
        "job.id": ("str", True),
        "job_inst.id": ("int", True),
    },
    "job.info": {
        "job.id": ("str", True),
        "submit_file": ("str", True),
        "type": ("int", True),
        "type_desc": ("str", True),
        "clustered": ("int", True),
        "max_retries": ("int", True),
        "task_count": ("int", True),
        "executable": ("str", True),
        "argv": ("str", False),
    },
    "job.edge": {"parent.job.id": ("str", True), "child.job.id": ("str", True)},
    "job_inst.pre.start": dict(BASE_JOB_INST),
    "job_inst.pre.term": dict(BASE_JOB_INST),
    "job_inst.pre.end": {**BASE_JOB_INST, **_STATUS_EXIT},
    "job_inst.submit.start": {**SCHED_JOB_INST, "site": ("str", False)},
    "job_inst.submit.end": {**SCHED_JOB_INST, **_STATUS},
    "job_inst.grid.submit.start": {**SCHED_JOB_INST, "site": ("str", False)},
    "job_inst.grid.submit.end": {**SCHED_JOB_INST, **_STATUS},
    "job_inst.globus.submit.start": {**SCHED_JOB_INST, "site": ("str", False)},
    "job_inst.globus.submit.end": {**SCHED_JOB_INST, **_STATUS},
    "job_inst.held.start": dict(SCHED_JOB_INST),
    "job_inst.held.end": {**SCHED_JOB_INST, **_STATUS},
    "job_inst.main.start": {
        **SCHED_JOB_INST,
        "stdin.file": ("str", False),
        "stdout.file": ("str", True),
        "stderr.file": ("str", True),
    },
    "job_inst.main.term": {**SCHED_JOB_INST, **_STATUS},
    "job_inst.main.end": dict(_MAIN_END),
    "job_inst.post.start": dict(SCHED_JOB_INST),
    "job_inst.post.term": dict(SCHED_JOB_INST),
    "job_inst.post.end": {**SCHED_JOB_INST, **_STATUS_EXIT},
    "job_inst.host.info": {
        **BASE_JOB_INST,
        "site": ("str", True),
        "hostname": ("str", True),
        "ip": ("str", True),
        "total_memory": ("int", False),
        "uname": ("str", False),
        "exec_job.id": ("str", False),  # Pegasus 4.0 streams
    },
    "job_inst.image.info": {**BASE_JOB_INST, "size": ("int", False), "sched.id": ("str", True)},
    "job_inst.abort.info": {**SCHED_JOB_INST},
    "job_inst.remote_error": {**SCHED_JOB_INST},
    "job_inst.tag": {**BASE_JOB_INST, "name": ("str", False), "count": ("int", True)},
    "job_inst.composite": {
        **_MAIN_END,
        "int_error_count": ("int", False),
        "hostname": ("str", False),
        "jobtype": ("str", False),
        "cpu_count": ("int", False),
        "cpu_speed": ("int", False),
        "cpu_vendor": ("str", False),
        "cpu_model": ("str", False),
        "ram": ("int", False),
        "system": ("str", False),
        "release": ("str", False),
        "machine": ("str", False),
        "req_cpus": ("int", False),
        "req_gpus": ("int", False),
        "req_memory_mb": ("int", False),
        "req_diskspace_mb": ("int", False),
        "invocations": ("list", False),
        "wf": ("str", False),
        "app": ("str", False),
    },
    "inv.start": {"job_inst.id": ("int", True), "job.id": ("str", True), "inv.id": ("int", True)},
    "inv.end": {
        "job_inst.id": ("int", True),
        "inv.id": ("int", True),
        "job.id": ("str", True),
        "start_time": ("num", False),
        "dur": ("num", False),
        "remote_cpu_time": ("num", False),
        "avg_cpu": ("num", False),
        "maxrss": ("int", False),
        "exitcode": ("int", False),
        "transformation": ("str", True),
        "executable": ("str", True),
        "argv": ("str", False),
        "task.id": ("str", False),
    },
    "int.metric": {
        "job_inst.id": ("int", True),
        "job.id": ("str", True),
        "type": ("str", False),
        "file_type": ("str", False),
        "count": ("int", False),
        "duration": ("num", False),
    },
    "static.meta.start": {},
    "static.meta.end": {},
    "xwf.meta": dict(BASE_METADATA),
    "task.meta": {**BASE_METADATA, "task.id": ("str", False)},
    "task.monitoring": {
        "job_inst.id": ("int", True),
        "job.id": ("str", True),
        "monitoring_event": ("str", False),
        "key": ("str", False),
    },
    "rc.meta": {**BASE_METADATA, "lfn.id": ("str", False)},
    "rc.pfn": {"lfn.id": ("str", True), "pfn": ("str", True), "site": ("str", False)},
    "wf.map.file": {"lfn.id": ("str", False), "task.id": ("str", False)},
}

# Fields whose values must come from an enumeration, checked by the models.
ENUMS: Final[dict[str, tuple[str, ...]]] = {"level": LEVELS, "type_desc": TASK_TYPES}
# Integer ranges of the schema (peg_inttype, intbool).
INT_RANGES: Final[dict[tuple[str, str], tuple[int, int]]] = {
    ("task.info", "type"): (0, 11),
    ("job.info", "type"): (0, 11),
    ("job.info", "clustered"): (0, 1),
}

# Mandatory fields real streams leave out, accepted absent on input (`constraints.py`): monitord's own
# tolerances, which its loader and tools live with. Everything else the schema marks mandatory is required.
_NO_CONDOR_ID = ("sched.id",)  # a job never given a condor id (submit failure, PRE script failure): monitord omits it
_NO_SUBMIT_FILE = ("stdout.file", "stderr.file")  # a DAG node without a Pegasus submit file (plain DAGMan)
ABSENT_TOLERATED: Final[dict[str, tuple[str, ...]]] = {
    # monitord's JSON (AMQP) form carries no ts on these
    "static.start": ("ts",), "static.end": ("ts",), "rc.pfn": ("ts",),
    # a plain DAGMan workflow has no planner: no dax, planner version or submit host
    "wf.plan": ("submit.hostname", "dax.version", "dax.file", "planner.version"),
    **{name: _NO_CONDOR_ID for name in ("job_inst.submit.start", "job_inst.submit.end", "job_inst.grid.submit.start",
                                        "job_inst.grid.submit.end", "job_inst.globus.submit.start",
                                        "job_inst.globus.submit.end", "job_inst.held.start", "job_inst.held.end",
                                        "job_inst.main.term", "job_inst.post.start", "job_inst.post.term",
                                        "job_inst.image.info", "job_inst.abort.info", "job_inst.remote_error")},
    "job_inst.main.start": (*_NO_CONDOR_ID, *_NO_SUBMIT_FILE),
    # Pegasus 3.1/4.0 streams (no exitcode, multiplier_factor yet), plain DAGMan (no submit file, no kickstart)
    "job_inst.main.end": (*_NO_CONDOR_ID, *_NO_SUBMIT_FILE, "exitcode", "multiplier_factor"),
    "job_inst.composite": (*_NO_CONDOR_ID, *_NO_SUBMIT_FILE, "exitcode", "multiplier_factor"),
    "job_inst.pre.end": ("exitcode",),
    "job_inst.post.end": (*_NO_CONDOR_ID, "exitcode"),
}
ALTERNATIVE_NAMES: Final[dict[tuple[str, str], str]] = {
    ("job_inst.host.info", "job.id"): "exec_job.id",  # Pegasus 3.1/4.0 streams name the job exec_job.id
}
"""(event, mandatory field) -> another name that satisfies it."""

# Kinds of fields seen outside any one event's table (e.g. legacy streams,
# `maxrss` on events that do not list it): used when an event carries a field
# its own table does not name.
GLOBAL_KINDS: Final[dict[str, str]] = {
    name: spec[0]
    for table in (BASE_EVENT, MONITORD_COMMON, *EVENT_FIELDS.values())
    for name, spec in table.items()
    if name not in ("type", "count", "key", "value", "size", "name", "status")
}


def full_name(name: str) -> str:
    """`job_inst.main.end` -> `stampede.job_inst.main.end` (planner files omit the prefix)."""
    return name if name.startswith(STAMPEDE) else STAMPEDE + name


def fields_of(name: str) -> dict[str, FieldSpec] | None:
    """Every field spec of the event `name` (prefixed), or None if unknown."""
    short = name[len(STAMPEDE):] if name.startswith(STAMPEDE) else None
    extra = EVENT_FIELDS.get(short) if short is not None else None
    if extra is None:
        return None
    return {**BASE_EVENT, **MONITORD_COMMON, **extra}


KNOWN_EVENTS: Final[tuple[str, ...]] = tuple(STAMPEDE + n for n in EVENT_FIELDS)
