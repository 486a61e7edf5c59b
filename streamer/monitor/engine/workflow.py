"""One (sub-)workflow's engine: dagman.out lines -> Stampede events in monitord's order.

This module reads DAGMan's own lines (start, restarts, end, recovery, the
version, held reasons) and the workflow events they imply (xwf.start/end,
jobstate.log markers, sub-workflow links); each job state goes to `jobs`, a
finished job's files to `outputs`, the planner's view to `static`, the `.dag`
file to `dagfile`, checkpoints to `state`. It follows pegasus-monitord's
behaviour so that the events, the Stampede DB built from them and jobstate.log
match the reference. The engine is synchronous and does file I/O: the source
runs it in a worker thread (or a child process), never on the event loop.
Events leave as raw records (`events.RawEvent`), typed by `events.type_raw`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, assert_never

from streamer.util import safenames
from streamer.monitor.parsers import jobstate
from streamer.monitor.parsers.dagman import (
    Aborted, CondorId, DagmanSubmit, DagStart, Event, Finished, HeldReason, JobFailure, JobSuccess, LineParser, Other,
    Pid, RECOVERY_END_TEXT, RecoveryEnd, RecoveryStart, ScriptDone, ScriptStarted, SubmitFailed, Version, classify)
from streamer.monitor.engineopts import DEFAULT as DEFAULT_OPTIONS, EngineOptions
from streamer.monitor.engine import dagfile
from streamer.monitor.engine.context import Context, Identity, Warn, WorkflowError
from streamer.monitor.engine.events import RawEvent
from streamer.monitor.engine.job import Job
from streamer.monitor.engine.jobs import Jobs
from streamer.monitor.engine.state import WorkflowState
from streamer.monitor.engine.static import StaticEvents

__all__ = ["Workflow", "WorkflowError"]

log = logging.getLogger(__name__)

UNKNOWN_FAILURE_CODE = 2


class Workflow:
    """State of one (sub-)workflow; `feed(line)` advances it, raw events collect in `self.out`."""

    def __init__(self, run_dir: str | Path, dagman_out: str | Path, *, parser: LineParser,
                 root_id: str | None = None, parent_id: str | None = None,
                 parent_jobid: str | None = None, parent_jobseq: int | None = None,
                 write_jobstate: bool = True, first_run: bool = True,
                 jobstate_length: int | None = None, started_at: int | None = None,
                 on_warning: Warn | None = None, options: EngineOptions = DEFAULT_OPTIONS) -> None:
        run_dir, dagman_out = str(run_dir), str(dagman_out)
        self.parser = parser
        self.out: list[RawEvent] = []
        identity = Identity.load(run_dir, dagman_out, root_id=root_id, parent_id=parent_id, started_at=started_at)
        self.identity = identity
        self.jobstate: jobstate.JobstateWriter | None = None
        if write_jobstate:
            try:
                path = Path(options.jobstate_path(run_dir, identity.wf_uuid))
            except safenames.UnsafeName as exc:  # a braindump's wf_uuid never picks where we write
                (on_warning or _log_warning)(f"{run_dir}: no jobstate.log written for this workflow: {exc}")
            else:
                self.jobstate = jobstate.JobstateWriter(path, truncate_at=jobstate_length, rotate=first_run)
        self.ctx = Context(run_dir, dagman_out, identity, on_warning or _log_warning, self._write,
                           options=options, fixed=identity.fixed_fields())
        self.skipping_recovery = False
        self.restart_count = 0
        self.condor_id: str | None = None
        self.dagman_exit: int | None = None
        self.last_wf_state: str | None = None
        self.state_reason: str | None = None
        self.finished = False
        self.subworkflows: dict[str, str] = {}  # dagman.out path -> wf_uuid once known
        self.started_at = started_at if started_at is not None else int(time.time())
        self.dag = dagfile.read(run_dir, identity.dag_file, self.ctx.warn)
        self.jobs = Jobs(self.ctx, self.dag, self.emit)
        self.static = StaticEvents(self.ctx, self.emit, self.send_subwf_link, (parent_jobid, parent_jobseq))
        self.total_jobs = self.dag.total_jobs()
        if first_run:
            self._write(jobstate.internal_line(self.started_at, "MONITORD_STARTED"))
            self.static.start()

    # ------------------------------------------------------------ identity and progress
    @property
    def wf_uuid(self) -> str:
        return self.identity.wf_uuid

    @property
    def root_id(self) -> str:
        return self.identity.root_id

    @property
    def wf_ts(self) -> int:
        return self.identity.wf_ts

    @property
    def line_no(self) -> int:
        return self.ctx.line_no

    @property
    def jobs_done(self) -> int:
        return self.jobs.jobs_done

    # ------------------------------------------------------------ output
    def emit(self, name: str, fields: dict[str, Any]) -> None:
        if name != "xwf.map.subwf_job":
            fields.update(self.ctx.fixed)
        ctx = self.ctx
        self.out.append((name, fields, ctx.dagman_out, ctx.line_no))

    def _write(self, line: str) -> None:
        if self.jobstate is not None:
            self.jobstate.write(line)

    def take(self) -> list[RawEvent]:
        out, self.out = self.out, []
        return out

    # ------------------------------------------------------------ static events
    @property
    def static_pending(self) -> bool:
        """static.bp events not sent yet: the dagman.out waits until they are out."""
        return self.static.pending

    def drain_static(self, limit: int) -> None:
        self.static.drain(limit)

    def send_subwf_link(self, wf_uuid: str, parent_id: str, jobid: str, jobseq: int, ts: Any) -> None:
        self.emit("xwf.map.subwf_job", {
            "ts": ts, "xwf.id": parent_id, "subwf.id": wf_uuid, "job.id": jobid, "job_inst.id": jobseq})

    # ------------------------------------------------------------ workflow level
    def change_state(self, state: str) -> None:
        """DAGMan started or ended: jobstate marker, xwf.start/xwf.end."""
        ts = self.ctx.current_ts
        if self.last_wf_state == "start" and state == "start":
            previous_end = ts - 1
            self.ctx.warn(f"{self.ctx.where()}: DAGMan started twice without ending;"
                          f" inserting xwf.end at {previous_end}")
            self.dagman_exit = UNKNOWN_FAILURE_CODE
            self._write(jobstate.internal_line(previous_end, f"DAGMAN_FINISHED {self.dagman_exit}"))
            self._send_wf_state("end", previous_end)
            self.dagman_exit = None
        if state == "start":
            self._write(jobstate.internal_line(ts, f"DAGMAN_STARTED {self.condor_id}"))
            self.restart_count += 1
        else:
            self._write(jobstate.internal_line(ts, f"DAGMAN_FINISHED {self.dagman_exit}"))
        self._send_wf_state(state, ts, self.state_reason)
        self.last_wf_state = state
        self.state_reason = None

    def _send_wf_state(self, state: str, ts: int, reason: str | None = None) -> None:
        fields: dict[str, Any] = {"ts": ts, "xwf.id": self.identity.wf_uuid, "reason": reason,
                                  "restart_count": self.restart_count - 1}
        if state == "end":
            status = self.dagman_exit if self.dagman_exit is not None else 0
            fields["status"] = status
            if status != 0:
                fields["level"] = "Error"
        self.emit("xwf." + state, fields)

    def finish(self, rc: int = 0, ts: int | None = None) -> None:
        """End of monitoring for this workflow: the MONITORD_FINISHED line."""
        if self.finished:
            return
        self.finished = True
        self._write(jobstate.internal_line(ts if ts is not None else self.ctx.current_ts, f"MONITORD_FINISHED {rc}"))

    # ------------------------------------------------------------ dagman.out lines
    def feed(self, raw: str) -> tuple[str, str, int] | None:
        """Process one dagman.out line; returns (dagman.out, job, job seq) of a sub-workflow to follow."""
        ctx = self.ctx
        ctx.line_no += 1
        line = raw.rstrip()
        ts = self.parser.timestamp(line)
        if ts is None:
            return None
        ctx.current_ts = int(ts)
        if self.skipping_recovery:
            if RECOVERY_END_TEXT in line:
                self.skipping_recovery = False
            return None
        kind = classify(line)
        match kind:  # the commonest kinds first
            case Event(state, jobid, sched_id):
                return self._on_event(state, jobid, sched_id)
            case Other():
                pass
            case DagmanSubmit(jobid):
                self.jobs.add(jobid, "DAGMAN_SUBMIT")
            case SubmitFailed():
                self._on_submit_failed()
            case ScriptStarted(which, jobid):
                self.jobs.add(jobid, f"{which}_SCRIPT_STARTED")
            case ScriptDone(which, jobid, status):
                self._on_script_done(which, jobid, status)
            case JobFailure(jobid, sched_id, status):
                self.jobs.add(jobid, "JOB_FAILURE", sched_id=sched_id, status=status)
            case JobSuccess(jobid, sched_id):
                self.jobs.add(jobid, "JOB_SUCCESS", sched_id=sched_id, status=0)
            case Finished(rc):
                self.dagman_exit = rc
                self.change_state("end")
            case CondorId(condor_id):
                self.condor_id = condor_id
                if not self.ctx.options.keep_state:  # --keep-state: monitord skips its start_wf() then
                    self.jobs.start_wf()
            case DagStart():
                self.change_state("start")
            case Version(major, minor, patch):
                self.jobs.dagman_version = major * 10000 + minor * 100 + patch
            case RecoveryStart():
                self.skipping_recovery = True
            case Aborted():
                self.state_reason = "DAGMan aborted as it received SIGUSR1 signal."
            case HeldReason(reason):
                self._on_held_reason(reason)
            case Pid() | RecoveryEnd():
                pass
            case _:
                assert_never(kind)
        return None

    def _on_event(self, state: str, jobid: str, sched_id: str) -> tuple[str, str, int] | None:
        seq = self.jobs.add(jobid, state, sched_id=sched_id)
        if state == "SUBMIT" and seq is not None:
            dagman_out = self.jobs.subworkflow_of(jobid)
            if dagman_out is not None:
                return dagman_out, jobid, seq
        return None

    def _on_submit_failed(self) -> None:
        if self.jobs.last_submitted is not None:
            self.jobs.add(self.jobs.last_submitted, "SUBMIT_FAILED")
        else:
            self.ctx.warn(f"{self.ctx.where()}: submit error but no job was submitted")

    def _on_script_done(self, which: str, jobid: str, status: int | None) -> None:
        if which == "PRE":
            self.jobs.add(jobid, "PRE_SCRIPT_TERMINATED")
        if status is None:
            self.ctx.warn(f"{self.ctx.where()}: {which} script of {jobid}: unknown outcome")
            return
        self.jobs.add(jobid, f"{which}_SCRIPT_{'SUCCESS' if status == 0 else 'FAILURE'}", status=status)

    def _on_held_reason(self, reason: str) -> None:
        if self.jobs.last_known_job is None:
            self.ctx.warn(f"{self.ctx.where()}: hold reason but no job is known; ignored")
            return
        jobid, seq = self.jobs.last_known_job
        job = self.jobs.get(jobid, seq)
        self.jobs.add(jobid, "JOB_HELD_REASON", sched_id=job.sched_id if job else None, reason=reason)

    # ------------------------------------------------------------ checkpoints
    def flush(self, *, sync: bool = False) -> int | None:
        return self.jobstate.flush(sync=sync) if self.jobstate is not None else None

    def to_state(self) -> dict[str, Any]:
        """Everything needed to resume (JSON-serialisable); the .dag file is re-read."""
        jobs = self.jobs
        state = WorkflowState(
            line_no=self.ctx.line_no, skipping_recovery=self.skipping_recovery, current_ts=self.ctx.current_ts,
            restart_count=self.restart_count, condor_id=self.condor_id, dagman_version=jobs.dagman_version,
            dagman_exit=self.dagman_exit, last_wf_state=self.last_wf_state, state_reason=self.state_reason,
            last_submitted=jobs.last_submitted, last_known_job=jobs.last_known_job, finished=self.finished,
            seq=jobs.seq, jobs_map=jobs.jobs_map, counters=jobs.counters, walltime=jobs.walltime,
            job_site=jobs.job_site, jobs_done=jobs.jobs_done, subworkflows=self.subworkflows,
            started_at=self.started_at, jobs=jobs.states(),
            jobstate_length=self.flush(),  # written to the OS; made durable before the state is saved
            static_sent=self.static.sent if self.static.pending else None)
        return state.to_dict()

    def restore(self, data: dict[str, Any]) -> None:
        """Resume from a `to_state()` dict (a `StateError` when it is not one this version reads)."""
        where = f"monitor state of {self.ctx.dagman_out}"
        state = WorkflowState.from_dict(data, where)
        jobs = self.jobs
        self.ctx.line_no, self.ctx.current_ts = state.line_no, state.current_ts
        self.skipping_recovery, self.restart_count = state.skipping_recovery, state.restart_count
        self.condor_id, self.dagman_exit = state.condor_id, state.dagman_exit
        self.last_wf_state, self.state_reason = state.last_wf_state, state.state_reason
        self.finished, self.subworkflows = state.finished, state.subworkflows
        if state.started_at is not None:
            self.started_at = state.started_at
        jobs.dagman_version, jobs.last_submitted = state.dagman_version, state.last_submitted
        jobs.last_known_job, jobs.seq, jobs.jobs_done = state.last_known_job, state.seq, state.jobs_done
        jobs.jobs_map, jobs.counters = state.jobs_map, state.counters
        jobs.walltime, jobs.job_site = state.walltime, state.job_site
        jobs.jobs = {key: Job.from_state(value, where) for key, value in state.jobs.items()}
        if isinstance(state.static_sent, int):  # checkpointed while the static.bp events were going out
            self.static.resume(state.static_sent)

    def close(self) -> None:
        self.static.close()
        if self.jobstate is not None:
            self.jobstate.close()


def _log_warning(text: str, reason: str | None = None) -> None:
    log.warning("%s", text)
