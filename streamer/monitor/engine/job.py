"""One job instance as the monitor tracks it (monitord's `Job`), serialisable for checkpoints."""

from __future__ import annotations

from typing import Any

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


class Job:
    """State of one job instance between its submit (or PRE script) and its end."""

    def __init__(self, name: str, submit_dir: str, seq: int) -> None:
        self.name = name
        self.seq = seq
        self.submit_dir = submit_dir
        self.sched_id: str | None = None
        self.site: str | None = None
        self.host_id: str | None = None
        self.host_ip: str | None = None
        self.remote_user: str | None = None
        self.remote_dir: str | None = None
        self.cluster_start: int | None = None
        self.cluster_dur: Any = None
        self.job_type: str | None = None
        self.state: str | None = None
        self.state_seq = 0
        self.state_ts: int | None = None
        self.output_counter = 0
        self.pre_start: int | None = None
        self.pre_done: int | None = None
        self.pre_exitcode: Any = None
        self.main_start: int | None = None
        self.main_done: int | None = None
        self.transformation: str | None = None
        self.derivation: str | None = None
        self.executable: str | None = None
        self.arguments: str | None = None
        self.exitcode: Any = None
        self.multiplier: int | None = None
        self.post_start: int | None = None
        self.post_done: int | None = None
        self.post_exitcode: Any = None
        self.input_file: str | None = None
        self.output_file: str | None = None
        self.error_file: str | None = None
        self.stdout_text: str | None = None
        self.stderr_text: str | None = None
        self.monitoring_events: list[dict[str, Any]] = []
        self.multipart_events: list[dict[str, Any]] = []
        self.invocations: list[dict[str, Any]] = []
        self.cpu_attribs: dict[str, Any] | None = None
        self.dagman_out: str | None = None
        self.kickstart_parsed = False
        self.rotated = False
        self.deferred_end: dict[str, Any] | None = None
        self.integrity: list[list[Any]] = []  # [type, file_type, count, succeeded, failed, duration]
        self.classads: dict[str, str] = {}

    # ------------------------------------------------------------ checkpoints
    def to_state(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Job":
        job = cls.__new__(cls)
        job.__dict__.update(state)
        return job

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

    def add_integrity(self, kind: str, file_type: str, count: int = 0, succeeded: int = 0,
                      failed: int = 0, duration: float = 0.0) -> None:
        """Merge an integrity metric into the one with the same (type, file_type)."""
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
