"""The job-instance state machine: DAGMan's job states -> job_inst.* events and
jobstate.log lines, in monitord's order (numbering of instances and states, the
deferral of main.end until the POST script has run, the forgetting of finished
instances). A finished job's files are read by `outputs`."""

from __future__ import annotations

import os
from typing import Any

from streamer.monitor.parsers import kickstart, submitfile
from streamer.monitor.parsers.jobstate import state_line
from streamer.monitor.engine.context import Context, Emit
from streamer.monitor.engine.dagfile import DagFile, DagJob
from streamer.monitor.engine.job import MAX_OUTPUT_LENGTH, Job, job_fields
from streamer.monitor.engine.outputs import Outputs

CONDOR_8_3_3 = 80303
UNSUBMITTED = ("UN_READY", "PRE_SCRIPT_STARTED", "PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE")
TERMINAL_WITH_POST = ("POST_SCRIPT_SUCCESS", "POST_SCRIPT_FAILURE")


class Jobs:
    """The live job instances of one workflow and the tables monitord keeps about them."""

    def __init__(self, ctx: Context, dag: DagFile, emit: Emit) -> None:
        self.ctx = ctx
        self.dag = dag
        self.emit = emit
        self.wf_uuid = ctx.identity.wf_uuid
        self.outputs = Outputs(ctx, dag, emit)
        self.seq = 1
        self.jobs: dict[str, Job] = {}        # "name\x00seq" -> live job
        self._states: dict[str, tuple[Job, dict[str, Any]]] = {}  # key -> (job, its to_state()) while unchanged
        self._touched: set[str] = set()       # keys of jobs looked up (so maybe changed) since `states()`
        self.jobs_map: dict[str, int] = {}    # name -> latest seq
        self.counters: dict[str, int] = {}    # name -> output file counter
        self.walltime: dict[str, Any] = {}
        self.job_site: dict[str, Any] = {}
        self.jobs_done = 0
        self.last_submitted: str | None = None
        self.last_known_job: tuple[str, int] | None = None
        self.dagman_version: int | None = None

    def get(self, jobid: str, seq: int) -> Job | None:
        return self._job(_key(jobid, seq))

    def _job(self, key: str) -> Job | None:
        """The live job of `key`; looked up means maybe changed: its checkpoint state is made afresh."""
        self._touched.add(key)
        return self.jobs.get(key)

    def states(self) -> dict[str, dict[str, Any]]:
        """Every live job's `to_state()`, in the jobs' order. A job's dict is the same object from one call to
        the next while the job is not looked up, so a checkpoint sends only the changed ones
        (`monitor/snapshot.py`). The dicts are the engine's: copy them before the engine goes on."""
        cached, touched = self._states, self._touched
        states: dict[str, dict[str, Any]] = {}
        kept: dict[str, tuple[Job, dict[str, Any]]] = {}
        for key, job in self.jobs.items():
            entry = cached.get(key)
            if entry is None or entry[0] is not job or key in touched:
                entry = (job, job.to_state())
            kept[key] = entry
            states[key] = entry[1]
        self._states = kept
        touched.clear()
        return states

    def start_wf(self) -> None:
        """DAGMan (re)started: forget jobs that are done (monitord's start_wf)."""
        for key, job in list(self.jobs.items()):
            if job.state == "POST_SCRIPT_SUCCESS" or (job.state == "JOB_SUCCESS" and not self.dag.has_post(job.name)):
                del self.jobs[key]
                self.jobs_map.pop(job.name, None)
                self.walltime.pop(job.name, None)
                self.job_site.pop(job.name, None)

    def add(self, jobid: str, state: str, sched_id: str | None = None, status: Any = None,
            reason: str | None = None) -> int | None:
        """A job changed state: create/find its instance, then record the state (monitord's `add`)."""
        if state in UNSUBMITTED:
            self.job_site.pop(jobid, None)
            self.walltime.pop(jobid, None)
        walltime = self.walltime.get(jobid)
        seq: int | None = None
        if state == "PRE_SCRIPT_STARTED":
            seq = self.add_job(jobid, state)
            site = self._read_submit_file(jobid, seq)[1]
            if site is not None and site != "!!SITE!!":
                self.job_site[jobid] = site
        if state == "DAGMAN_SUBMIT":
            self.last_submitted = jobid
            seq = self.add_job(jobid, state)
            minutes, site = self._read_submit_file(jobid, seq)
            if minutes is not None:
                self.walltime[jobid] = minutes * 60
            if site is not None and site != "!!SITE!!":
                self.job_site[jobid] = site
            return seq
        if state in ("SUBMIT", "SUBMIT_FAILED"):
            seq = self.add_job(jobid, state, sched_id)
        if seq is None:
            seq = self.jobs_map.get(jobid)
        if seq is None:
            self.ctx.warn(f"{self.ctx.where()}: {state} for unknown job {jobid}; ignored")
            return None
        self.update_state(jobid, sched_id, seq, state, status, walltime, reason)
        return seq

    def _find_seq(self, jobid: str, sched_id: str | None) -> int | None:
        seq = self.jobs_map.get(jobid)
        if seq is None:
            return None
        job = self._job(_key(jobid, seq))
        if job is None:
            return None
        if job.state in ("PRE_SCRIPT_SUCCESS", "DAGMAN_SUBMIT"):
            return seq
        if sched_id is not None and job.sched_id == sched_id:
            return seq
        return None

    def add_job(self, jobid: str, state: str, sched_id: str | None = None) -> int:
        seq = self._find_seq(jobid, sched_id)
        if seq is not None:
            job = self._job(_key(jobid, seq))
            assert job is not None  # _find_seq found it
            if sched_id is not None:
                job.sched_id = sched_id
            job.state = state
            job.state_ts = self.ctx.current_ts
        else:
            seq = self.seq
            submit_dir = self.ctx.run_dir
            info = self.dag.jobs.get(jobid)
            if info is None:
                self.ctx.warn(f"{self.ctx.where()}: job {jobid} is not in {self.ctx.identity.dag_file};"
                          f" using {self.ctx.run_dir} for its files")
            elif info.submit_file is not None:
                submit_dir = os.path.dirname(info.submit_file)
            job = Job(jobid, submit_dir, seq)
            job.state = state
            job.state_ts = self.ctx.current_ts
            job.sched_id = sched_id
            key = _key(jobid, seq)
            self.jobs[key] = job
            self._touched.add(key)
            self.jobs_map[jobid] = seq
            self.seq += 1
        if state == "SUBMIT":
            job.output_counter = self._next_counter(jobid)
        return seq

    def _next_counter(self, jobid: str) -> int:
        value = self.counters.get(jobid)
        value = 0 if value is None else value + 1
        self.counters[jobid] = value
        return value

    def _read_submit_file(self, jobid: str, seq: int) -> tuple[int | None, str | None]:
        """Read the job's .sub file into the job; (walltime minutes, site)."""
        job = self._job(_key(jobid, seq))
        info = self.dag.jobs.get(jobid)
        if job is None or info is None:
            return None, None
        if info.submit_file is None:
            if info.is_subdag:
                job.site = "local"
            else:
                job.input_file = None
                job.output_file = f"{jobid}.out"
                job.error_file = f"{jobid}.err"
            return None, None
        wants_env = jobid.startswith("pegasus-plan") or jobid.startswith("subdax_")
        sub = submitfile.read(info.submit_file, want_environment=wants_env)
        if sub is None:
            self.ctx.warn(f"{self.ctx.where()}: cannot read submit file {info.submit_file} of {jobid}")
            return None, None
        job.apply_submit_info(sub)
        prefix = self.ctx.identity.original_submit_dir + os.sep
        for attr in ("input_file", "output_file", "error_file"):
            value = getattr(job, attr)
            if value is not None and value.find(self.ctx.identity.original_submit_dir) >= 0:
                setattr(job, attr, os.path.normpath(value.replace(prefix, "", 1)))
        return sub.max_minutes, job.site

    def subworkflow_of(self, jobid: str) -> str | None:
        """The dagman.out of the sub-workflow a (pegasus-plan / subdax_) job runs, if any."""
        info = self.dag.jobs.get(jobid)
        if info is None or info.is_subdag:
            return None
        seq = self.jobs_map.get(jobid)
        job = self._job(_key(jobid, seq)) if seq is not None else None
        if job is None or job.dagman_out is None:
            if jobid.startswith("subdax_"):
                self.ctx.warn(f"{self.ctx.dagman_out}: cannot tell the dagman.out of sub-workflow job {jobid}")
            return None
        path = os.path.normpath(job.dagman_out)
        if path.find(self.ctx.identity.original_submit_dir) >= 0:
            relative = path.replace(self.ctx.identity.original_submit_dir + os.sep, "", 1)
            path = os.path.join(self.ctx.run_dir, os.path.normpath(relative))
        directory, name = os.path.dirname(path), os.path.basename(path)
        retry_dir = f"{directory}.{self.counters.get(jobid) or 0:03d}"
        if not os.path.isdir(retry_dir):
            retry_dir = directory + ".000"
            if not os.path.isdir(retry_dir):
                self.ctx.warn(f"{self.ctx.dagman_out}: sub-workflow directory {retry_dir} missing; not followed")
                return None
        return os.path.join(retry_dir, name)

    def update_state(self, jobid: str, sched_id: str | None, seq: int, state: str, status: Any,
                     walltime: Any, reason: str | None = None) -> None:
        """Record a job state: jobstate.log line, then the events it implies (monitord's order)."""
        job = self._job(_key(jobid, seq))
        if job is None:
            self.ctx.warn(f"{self.ctx.where()}: {state} for finished or unknown job {jobid}; ignored")
            return
        self.last_known_job = (jobid, seq)
        out_of_order = job.sched_id is None and sched_id is not None
        previous = job.state
        job.set_state(state, sched_id, self.ctx.current_ts, status)
        self.ctx.write(state_line(self.ctx.current_ts, jobid, state, status, job.sched_id,
                                        job.site, walltime, seq))
        held_state = "JOB_HELD_REASON" if self.dagman_version is not None and self.dagman_version >= CONDOR_8_3_3 \
            else "JOB_HELD"
        parse_at_end = not self.dag.has_post(jobid) or self.dag.is_pmc
        if state in ("JOB_SUCCESS", "JOB_FAILURE") and parse_at_end:
            self.outputs.parse_job_output(job)
        if out_of_order:
            self.brief(job, "submit.start")
        if state in ("PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE"):
            self.outputs.inv.task_start(job, "PRE_SCRIPT")
            self.outputs.inv.task_end(job, "PRE_SCRIPT")
        elif state in TERMINAL_WITH_POST:
            if job.exitcode is None:
                job.exitcode = job.post_exitcode
            self.outputs.parse_job_output(job)
            if job.deferred_end is not None:
                self._flush_job_end(job, job.deferred_end)
            self.outputs.inv.task_start(job, "POST_SCRIPT")
            self.outputs.inv.task_end(job, "POST_SCRIPT")
        self._state_event(job, jobid, state, previous, held_state, parse_at_end, reason)
        if state in ("SUBMIT_FAILED", "GLOBUS_SUBMIT_FAILED", "GRID_SUBMIT_FAILED"):
            job.stderr_text = kickstart.quote(f"Job submission failed because of HTCondor event {state}")
            self._job_end(job, -1, True)
        if state in TERMINAL_WITH_POST or (state in ("JOB_SUCCESS", "JOB_FAILURE") and not self.dag.has_post(jobid)):
            self.jobs_done += 1
            self._forget(job)

    def _forget(self, job: Job) -> None:
        """Drop a finished instance: memory grows with active jobs, not with history.

        A failed job keeps its name -> seq entry and output counter (DAGMan may
        retry it: the next .out.NNN); a successful one is never run again.
        """
        self.jobs.pop(_key(job.name, job.seq), None)
        if job.state in ("POST_SCRIPT_SUCCESS", "JOB_SUCCESS") and self.jobs_map.get(job.name) == job.seq:
            del self.jobs_map[job.name]
            self.counters.pop(job.name, None)
            self.walltime.pop(job.name, None)
            self.job_site.pop(job.name, None)

    def _state_event(self, job: Job, jobid: str, state: str, previous: str | None, held_state: str,
                     parse_at_end: bool, reason: str | None) -> None:
        simple = _BRIEF_EVENTS.get(state)
        if simple is not None:
            for name, status in simple:
                self.brief(job, name, status)
            return
        if state == "PRE_SCRIPT_FAILURE":
            job.exitcode = job.pre_exitcode
            job.output_counter = self._next_counter(jobid)
            pre_log = (self.dag.jobs.get(jobid) or DagJob()).pre_log
            if pre_log is not None:
                job.output_file = f"{pre_log}.{job.output_counter:03d}"
                self.outputs.read_out_file(job, job.output_file)
            self.brief(job, "pre.end", -1)
            self._job_end(job, -1, True)
        elif state in ("SUBMIT_FAILED", "GLOBUS_SUBMIT_FAILED", "GRID_SUBMIT_FAILED"):
            job.exitcode = 1
            prefix = {"SUBMIT_FAILED": "", "GLOBUS_SUBMIT_FAILED": "globus.", "GRID_SUBMIT_FAILED": "grid."}[state]
            self.brief(job, prefix + "submit.start")
            self.brief(job, prefix + "submit.end", -1)
        elif state == "EXECUTE":
            self._job_start(job)
        elif state == "JOB_SUCCESS":
            self._job_end(job, 0, parse_at_end)
        elif state == "JOB_FAILURE":
            self._job_end(job, -1, parse_at_end)
        elif state == "JOB_ABORTED":
            job.exitcode = 1
            self.brief(job, "abort.info")
            flush = parse_at_end if previous in ("JOB_HELD", "JOB_HELD_REASON") else True
            self._job_end(job, -1, flush)
        elif state == held_state:
            self.brief(job, "held.start", reason=reason)

    # ------------------------------------------------------------ job events
    def brief(self, job: Job, event: str, status: int | None = None, reason: str | None = None) -> None:
        fields = job_fields(self.wf_uuid, job)
        fields["ts"] = job.state_ts
        fields["js.id"] = job.state_seq
        fields["reason"] = reason
        if job.sched_id is not None:
            fields["sched.id"] = job.sched_id
        if status is not None:
            fields["status"] = status
            if status != 0:
                fields["level"] = "Error"
        if event == "post.end":
            fields["exitcode"] = str(job.post_exitcode)
        elif event == "pre.end":
            fields["exitcode"] = str(job.pre_exitcode)
        elif event == "submit.start" and job.site is not None:
            fields["site"] = job.site
        self.emit("job_inst." + event, fields)

    def _job_start(self, job: Job) -> None:
        fields = job_fields(self.wf_uuid, job)
        fields["ts"] = job.state_ts
        fields["js.id"] = job.state_seq
        for key, value in (("stdin.file", job.input_file), ("stdout.file", job.output_file),
                           ("stderr.file", job.error_file), ("sched.id", job.sched_id)):
            if value is not None:
                fields[key] = value
        self.emit("job_inst.main.start", fields)

    def _job_end(self, job: Job, status: int | None, flush: bool) -> None:
        fields = job_fields(self.wf_uuid, job)
        fields["ts"] = job.state_ts
        fields["js.id"] = job.state_seq
        fields["site"] = job.site if job.site is not None else ""
        user = job.remote_user if job.remote_user is not None else self.ctx.identity.user
        if user is not None:
            fields["user"] = user
        if job.main_start is not None and job.main_done is not None:
            fields["local.dur"] = int(job.main_done) - int(job.main_start)
        if job.input_file is not None:
            fields["stdin_file"] = job.input_file
        if job.multiplier is not None:
            fields["multiplier_factor"] = str(job.multiplier)
        fields["exitcode"] = str(job.exitcode)
        if job.sched_id is not None:
            fields["sched.id"] = job.sched_id
        fields["status"] = status if status is not None else -1
        if fields["status"] != 0:
            fields["level"] = "Error"
        if flush:
            self._flush_job_end(job, fields)
        else:
            job.deferred_end = fields

    def _flush_job_end(self, job: Job, fields: dict[str, Any]) -> None:
        """main.end (with what the job's outputs told) and the composite event."""
        if job.remote_dir is not None:
            fields["work_dir"] = job.remote_dir
        elif self.ctx.identity.original_submit_dir is not None:
            fields["work_dir"] = self.ctx.identity.original_submit_dir
        if job.cluster_start is not None:
            fields["cluster.start"] = job.cluster_start
        if job.cluster_dur is not None:
            fields["cluster.dur"] = job.cluster_dur
        rotated = job.kickstart_parsed or job.rotated
        fields["stdout.file"] = "" if job.output_file is None else (
            f"{job.output_file}.{job.output_counter:03d}" if rotated else job.output_file)
        fields["stderr.file"] = "" if job.error_file is None else (
            f"{job.error_file}.{job.output_counter:03d}" if rotated else job.error_file)
        if job.stdout_text is not None and self.ctx.options.store_stdout:
            fields["stdout.text"] = job.stdout_text[:MAX_OUTPUT_LENGTH]
        if job.stderr_text is not None and self.ctx.options.store_stdout:
            fields["stderr.text"] = job.stderr_text[:MAX_OUTPUT_LENGTH]
        composite_base = dict(fields)
        self.emit("job_inst.main.end", fields)
        composite_base.update(self.ctx.fixed)
        self.emit("job_inst.composite", self.outputs.composite(job, composite_base))
        job.deferred_end = None
        job.stdout_text = job.stderr_text = None


_BRIEF_EVENTS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "PRE_SCRIPT_STARTED": (("pre.start", None),),
    "PRE_SCRIPT_TERMINATED": (("pre.term", None),),
    "PRE_SCRIPT_SUCCESS": (("pre.end", 0),),
    "SUBMIT": (("submit.start", None), ("submit.end", 0)),
    "GRID_SUBMIT": (("grid.submit.start", None), ("grid.submit.end", 0)),
    "GLOBUS_SUBMIT": (("globus.submit.start", None), ("globus.submit.end", 0)),
    "REMOTE_ERROR": (("remote_error", None),),
    "IMAGE_SIZE": (("image.info", None),),
    "JOB_TERMINATED": (("main.term", 0),),
    "JOB_EVICTED": (("main.term", -1),),
    "JOB_RELEASED": (("held.end", 0),),
    "POST_SCRIPT_STARTED": (("post.start", None),),
    "POST_SCRIPT_TERMINATED": (("post.term", None),),
    "POST_SCRIPT_SUCCESS": (("post.end", 0),),
    "POST_SCRIPT_FAILURE": (("post.end", -1),),
}


def _key(jobid: str, seq: int) -> str:
    return f"{jobid}\x00{seq}"
