"""One job instance as the monitor tracks it (monitord's `Job`), serialisable for checkpoints,
and the small helpers every engine module uses on it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from streamer.util.limits import NotRegularFile, read_bounded
from streamer.monitor.engine.state import StateError

MAX_OUTPUT_LENGTH = 2**16 - 1

JOBTYPE_DESC = {
    "0": "unassigned", "1": "compute", "2": "stage-in-tx", "3": "stage-out-tx",
    "4": "registration", "5": "inter-site-tx", "6": "create-dir", "7": "stage_worker_tx",
    "8": "cleanup", "9": "chmod", "10": "dax", "11": "dag",
}
REQUEST_KEYS = {
    "pegasus_cores": "req_cpus", "pegasus_gpus": "req_gpus",
    "pegasus_memory_mb": "req_memory_mb", "pegasus_diskspace_mb": "req_diskspace_mb",
}


def regular_to_raw(status: Any) -> Any:
    """Exit status -> wait() status, as monitord records it (-128 -> -1)."""
    if not isinstance(status, int):
        return status
    return -1 if status == -128 else status << 8


@dataclass(slots=True, eq=False)
class Job:
    """State of one job instance between its submit (or PRE script) and its end.

    Its fields are its checkpoint (`to_state`/`from_state`): a field added later
    takes its default when an older state file is resumed."""

    name: str
    submit_dir: str
    seq: int
    sched_id: str | None = None
    site: str | None = None
    host_id: str | None = None
    host_ip: str | None = None
    remote_user: str | None = None
    remote_dir: str | None = None
    cluster_start: int | None = None
    cluster_dur: Any = None
    job_type: str | None = None
    state: str | None = None
    state_seq: int = 0
    state_ts: int | None = None
    output_counter: int = 0
    pre_start: int | None = None
    pre_done: int | None = None
    pre_exitcode: Any = None
    main_start: int | None = None
    main_done: int | None = None
    transformation: str | None = None
    derivation: str | None = None
    executable: str | None = None
    arguments: str | None = None
    exitcode: Any = None
    multiplier: int | None = None
    post_start: int | None = None
    post_done: int | None = None
    post_exitcode: Any = None
    input_file: str | None = None
    output_file: str | None = None
    error_file: str | None = None
    stdout_text: str | None = None
    stderr_text: str | None = None
    monitoring_events: list[dict[str, Any]] = field(default_factory=list)
    multipart_events: list[dict[str, Any]] = field(default_factory=list)
    invocations: list[dict[str, Any]] = field(default_factory=list)
    cpu_attribs: dict[str, Any] | None = None
    dagman_out: str | None = None
    kickstart_parsed: bool = False
    rotated: bool = False
    deferred_end: dict[str, Any] | None = None
    integrity: list[list[Any]] = field(default_factory=list)  # [type, file_type, count, succeeded, failed, duration]
    classads: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------ checkpoints
    def to_state(self) -> dict[str, Any]:
        """The job's fields by name (JSON-serialisable)."""
        return {name: getattr(self, name) for name in JOB_FIELDS}

    @classmethod
    def from_state(cls, state: dict[str, Any], where: str = "state") -> "Job":
        """The job a `to_state` dict describes; missing fields take their defaults, unknown ones are refused."""
        unknown = sorted(set(state) - JOB_FIELD_SET)
        if unknown:
            raise StateError(f"{where}: unknown job field(s) {', '.join(unknown)}: "
                             "this state file was not written by this version of streamer")
        missing = [name for name in ("name", "submit_dir", "seq") if name not in state]
        if missing:
            raise StateError(f"{where}: job lacks {', '.join(missing)}")
        return cls(**state)

    # ------------------------------------------------------------ state
    def set_state(self, state: str, sched_id: str | None, ts: int, status: Any) -> None:
        """Record a state and the script/main-job times and exit codes it implies."""
        self.state = state
        self.state_ts = ts
        self.state_seq += 1
        if self.sched_id is None:
            self.sched_id = sched_id
        if state == "PRE_SCRIPT_STARTED":
            self.pre_start = ts
        elif state in ("PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE"):
            self.pre_done = ts
            self.pre_exitcode = regular_to_raw(status)
        elif state == "POST_SCRIPT_STARTED":
            self.post_start = ts
        elif state == "POST_SCRIPT_TERMINATED":
            self.post_done = ts
        elif state == "EXECUTE":
            self.main_start = ts
        elif state == "JOB_TERMINATED":
            self.main_done = ts
        elif state in ("JOB_ABORTED", "SUBMIT_FAILED", "GLOBUS_SUBMIT_FAILED", "GRID_SUBMIT_FAILED"):
            self.main_done = ts
        elif state in ("JOB_SUCCESS", "JOB_FAILURE"):
            self.exitcode = regular_to_raw(status)
        elif state in ("POST_SCRIPT_SUCCESS", "POST_SCRIPT_FAILURE"):
            self.post_exitcode = regular_to_raw(status)
            if self.main_done is None:
                self.main_done = ts

    def apply_submit_info(self, info: Any) -> None:
        """Take what the .sub file says (classads override nothing the kickstart record says later)."""
        self.classads = dict(info.classads)
        if info.executable is not None:
            self.executable = info.executable
        if info.arguments is not None:
            self.arguments = info.arguments
        if info.input is not None:
            self.input_file = info.input
        if info.output is not None:
            self.output_file = info.output
        if info.error is not None:
            self.error_file = info.error
        if info.dagman_out is not None:
            self.dagman_out = info.dagman_out
        if info.transformation is not None:
            self.transformation = info.transformation
        if "pegasus_wf_dax_job_id" in info.classads:
            self.derivation = info.derivation
        if "pegasus_cores" in info.classads:
            self.multiplier = info.cores
        if info.job_class is not None:
            self.job_type = info.job_class
        if info.site is not None:
            self.site = info.site

    def add_integrity(self, kind: Any, file_type: Any, count: Any = 0, succeeded: Any = 0,
                      failed: Any = 0, duration: Any = 0.0) -> None:
        """Merge an integrity metric into the one with the same (type, file_type).

        The values are what the kickstart record holds (a number, or a string, or None for a missing
        key): `Any`, the truth, since compiled code checks annotations (an `int` here dropped records)."""
        for metric in self.integrity:
            if metric[0] == kind and metric[1] == file_type:
                metric[2] += count
                metric[3] += succeeded
                metric[4] += failed
                metric[5] += duration
                return
        self.integrity.append([kind, file_type, count, succeeded, failed, duration])

    def add_monitoring_events(self, events: list[dict[str, Any]]) -> None:
        """Keep payload events; `int.metric` payloads become integrity metrics instead."""
        for event in events:
            if event.get("monitoring_event") == "int.metric":
                for m in event.get("payload") or []:
                    self.add_integrity(m.get("event"), m.get("file_type"), m.get("count", 0),
                                       m.get("succeeded", 0), m.get("failed", 0), m.get("duration", 0.0))
            else:
                self.monitoring_events.append(event)

    def jobtype_desc(self) -> str:
        if self.job_type is None:
            return "unknown"
        return JOBTYPE_DESC.get(self.job_type, "unknown")


JOB_FIELDS = tuple(f.name for f in fields(Job))
JOB_FIELD_SET = frozenset(JOB_FIELDS)


def job_fields(wf_uuid: str, job: Job) -> dict[str, Any]:
    """The fields naming a job instance in its events."""
    return {"xwf.id": wf_uuid, "job.id": job.name, "job_inst.id": job.seq}


def read_text(path: str, problems: list[str] | None = None) -> str | None:
    """A job's output file as text (universal newlines), None when it cannot be read.

    A path that is there but no regular file (a FIFO, device, link loop) is said in `problems`.
    """
    try:
        data = read_bounded(path)  # bytes then decode: no text-layer set-up per small file
    except NotRegularFile as exc:
        if problems is not None:
            problems.append(f"{exc}: skipped")
        return None
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:  # universal newlines, as a text-mode read gives
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
