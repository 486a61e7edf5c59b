"""The per-workflow state machine: dagman.out lines (+ braindump, static.bp,
.dag, .sub, kickstart, .err, .in files) -> Stampede events in monitord's order.

This follows pegasus-monitord's behaviour (numbering of job instances, job
states and invocations; which event each DAGMan state produces; the deferral
of `main.end` until the POST script has run; the composite event) so that
the events, the Stampede DB built from them and jobstate.log match the
reference. The engine is synchronous and does file I/O for job outputs: the
source runs it in a worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Callable, Generator

from ..events import Event, FieldError
from ..limits import read_bounded
from . import jobstate, kickstart, plaindag, staticbp, submitfile
from .dagman import LineParser, classify
from .job import REQUEST_KEYS, Job

log = logging.getLogger(__name__)

MAX_OUTPUT_LENGTH = 2**16 - 1
PRESCRIPT_ID = -1
POSTSCRIPT_ID = -2
UNKNOWN_FAILURE_CODE = 2
CONDOR_8_3_3 = 80303
UNSUBMITTED = ("UN_READY", "PRE_SCRIPT_STARTED", "PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE")
TERMINAL_WITH_POST = ("POST_SCRIPT_SUCCESS", "POST_SCRIPT_FAILURE")
RE_DAG_JOB = re.compile(r"JOB\s+(\S+)\s(\S+)(\s+DONE)?", re.IGNORECASE)
RE_DAG_TASK = re.compile(r"TASK\s+(\S*)\s(\S+)", re.IGNORECASE)
RE_DAG_SCRIPT = re.compile(r"SCRIPT (?:PRE|POST)\s+(\S+)\s(\S+)\s(.*)", re.IGNORECASE)
RE_DAG_SUBDAG = re.compile(r"SUBDAG EXTERNAL\s+(\S+)\s(\S+)\s?(?:DIR)?\s?(\S+)?", re.IGNORECASE)
RE_PRE_LOG = re.compile(r"\s*-Dpegasus.log.\*=(\S+)\s.*", re.IGNORECASE)
RE_LITE_EXIT = re.compile(r"^PegasusLite: exitcode (\d+).*$", re.MULTILINE)
RE_LITE_HOST = re.compile(r"^.*Executing on host\s*(\S+)(?:\s*IP=(\S+))*.*$", re.MULTILINE)

# job_info slots, as monitord's .dag table
SUB, PRE_EXEC, PRE_ARGS, POST_EXEC, POST_ARGS, IS_SUBDAG, SUBDAG_DAG, SUBDAG_DIR, PRE_LOG = range(9)


class WorkflowError(RuntimeError):
    """A workflow directory the monitor cannot follow (no braindump, no wf_uuid or dag)."""


class Workflow:
    """State of one (sub-)workflow; `feed(line)` advances it, events collect in `self.out`."""

    def __init__(self, run_dir: str | Path, dagman_out: str | Path, *, parser: LineParser,
                 root_id: str | None = None, parent_id: str | None = None,
                 parent_jobid: str | None = None, parent_jobseq: int | None = None,
                 write_jobstate: bool = True, first_run: bool = True,
                 jobstate_length: int | None = None, started_at: int | None = None,
                 on_warning: Callable[[str], None] | None = None, raw_events: bool = False) -> None:
        self.run_dir = str(run_dir)
        self.dagman_out = str(dagman_out)
        self.parser = parser
        self.raw_events = raw_events
        """Collect `(name, fields, dagman_out, line_no)` and leave typing to the consumer (`type_raw`):
        the child-process runner moves that work to the parent, which has cycles to spare."""
        self.out: list[Any] = []
        self.warn = on_warning or _log_warning
        params, self.plain = plaindag.load_params(self.run_dir, self.dagman_out)
        """A plain DAGMan workflow (no braindump): identity and jobs from the .dag file, no kickstart."""
        self.wf_uuid = params.get("wf_uuid")
        self.dag_file = params.get("dag")
        if not self.wf_uuid or not self.dag_file:
            raise WorkflowError(f"{self.run_dir}: braindump lacks wf_uuid or dag")
        self.root_id = root_id or self.wf_uuid
        self.parent_id = parent_id
        self.app = params.get("app")
        self.label = params.get("dax_label") or params.get("label")
        self.dax_index = params.get("dax_index")
        self.dax_version = params.get("dax_version")
        self.dax_file = params.get("dax")
        stamp = params.get("timestamp") or params.get("pegasus_wf_time")
        self.wf_ts = kickstart.epochdate(stamp) if stamp else None
        if self.wf_ts is None and self.plain:  # the DAG file's time: stable, so are the events' ids
            self.wf_ts = int(os.stat(os.path.join(self.run_dir, self.dag_file)).st_mtime)
        if self.wf_ts is None:
            self.wf_ts = started_at or 0
        if "submit_dir" in params and params["submit_dir"]:
            self.submit_dir = params["submit_dir"]
            self.original_submit_dir = os.path.normpath(params["submit_dir"])
        else:
            self.submit_dir = params.get("run")
            jsd = params.get("jsd")
            self.original_submit_dir = os.path.dirname(os.path.normpath(jsd)) if jsd else self.run_dir
        self.planner_version = params.get("planner_version") or params.get("pegasus_version")
        self.planner_arguments = params.get("planner_arguments")
        self.submit_hostname = params.get("submit_hostname")
        self.user = params.get("user")
        self.grid_dn = params.get("grid_dn")
        self.fixed: dict[str, Any] = {"xwf.id": self.wf_uuid, "root.xwf.id": self.root_id}
        for key, value in (("dax", self.dax_file), ("dag", self.dag_file), ("wf.ts", self.wf_ts),
                           ("submit.dir", self.submit_dir), ("pegasus.version", self.planner_version),
                           ("submit.hostname", self.submit_hostname), ("wf.user", self.user)):
            if value is not None or key in ("submit.dir", "pegasus.version"):
                self.fixed[key] = value
        # progress
        self.line_no = 0
        self.skipping_recovery = False
        self.current_ts = 0
        self.restart_count = 0
        self.condor_id: str | None = None
        self.dagman_version: int | None = None
        self.dagman_exit: int | None = None
        self.last_wf_state: str | None = None
        self.state_reason: str | None = None
        self.last_submitted: str | None = None
        self.last_known_job: tuple[str, int] | None = None
        self.finished = False
        self.seq = 1
        self.jobs: dict[str, Job] = {}        # "name\x00seq" -> live job
        self.jobs_map: dict[str, int] = {}    # name -> latest seq
        self.counters: dict[str, int] = {}    # name -> output file counter
        self.walltime: dict[str, Any] = {}
        self.job_site: dict[str, Any] = {}
        self.jobs_done = 0
        self.job_info: dict[str, list[Any]] = {}
        self.is_pmc = False
        self.subworkflows: dict[str, str] = {}  # dagman.out path -> wf_uuid once known
        self.started_at = started_at if started_at is not None else int(time.time())
        self.jobstate: jobstate.JobstateWriter | None = None
        self._static: Generator[tuple[str, dict[str, Any]], None, None] | None = None
        self._static_parent: tuple[str | None, int | None] = (parent_jobid, parent_jobseq)
        self._static_sent = 0  # static.bp records emitted: a checkpoint taken meanwhile resumes after them
        if write_jobstate:
            path = Path(self.run_dir) / "jobstate.log"
            self.jobstate = jobstate.JobstateWriter(path, truncate_at=jobstate_length, rotate=first_run)
        self._parse_dag()
        self.total_jobs = sum(1 for info in self.job_info.values() if info[SUB] or info[IS_SUBDAG])
        if first_run:
            self._write(jobstate.internal_line(self.started_at, "MONITORD_STARTED"))
            self._send_static(parent_jobid, parent_jobseq)

    # ------------------------------------------------------------ output helpers
    def emit(self, name: str, fields: dict[str, Any]) -> None:
        if name != "xwf.map.subwf_job":
            fields.update(self.fixed)
        if self.raw_events:
            self.out.append((name, fields, self.dagman_out, self.line_no))
            return
        event = _build(name, fields, self.dagman_out, self.line_no, self.warn)
        if event is not None:
            self.out.append(event)

    def _write(self, line: str) -> None:
        if self.jobstate is not None:
            self.jobstate.write(line)

    def take(self) -> list[Any]:
        out, self.out = self.out, []
        return out

    # ------------------------------------------------------------ workflow level
    def _send_static(self, parent_jobid: str | None, parent_jobseq: int | None) -> None:
        """wf.plan, the static.bp events between static.start/end, and the parent link."""
        plan: dict[str, Any] = {"ts": self.wf_ts, "xwf.id": self.wf_uuid}
        for key, value in (("dax.label", self.label), ("dax.version", self.dax_version),
                           ("dax.index", self.dax_index), ("dax.file", self.dax_file),
                           ("dag.file.name", self.dag_file), ("submit.hostname", self.submit_hostname),
                           ("submit.dir", self.submit_dir)):
            if value is not None:
                plan[key] = value
        if self.planner_arguments is not None:
            plan["argv"] = self.planner_arguments.strip('" \t\n\r')
        if self.user is not None:
            plan["user"] = self.user
        if self.grid_dn is not None and self.grid_dn != "null":
            plan["grid_dn"] = self.grid_dn
        if self.planner_version is not None:
            plan["planner.version"] = self.planner_version
        if self.parent_id is not None:
            plan["parent.xwf.id"] = self.parent_id
        plan["root.xwf.id"] = self.root_id
        self.emit("wf.plan", plan)
        # static.start/end carry wall-clock time in monitord; a fixed ts keeps ids stable
        self.emit("static.start", {"ts": self.wf_ts})
        self._static_parent = (parent_jobid, parent_jobseq)
        bp_path = Path(self.run_dir) / (os.path.splitext(self.dag_file)[0] + ".static.bp")
        if self.plain:  # the jobs and edges of the .dag file stand in for the planner's static.bp
            dag = plaindag.read_dag(Path(self.run_dir) / self.dag_file)
            self._static = iter(plaindag.static_events(dag, self.wf_ts))
        elif bp_path.is_file():
            self._static = staticbp.read(bp_path)  # drained by drain_static(), a slice per step
            self._static_sent = 0
        else:
            self.warn(f"{bp_path}: static.bp missing; no static events for {self.wf_uuid}")
            self._end_static()

    @property
    def static_pending(self) -> bool:
        """static.bp events not sent yet: the dagman.out waits until they are out."""
        return self._static is not None

    def drain_static(self, limit: int) -> None:
        """Emit up to `limit` static.bp events (a 20,000-job workflow has ~10 per job:
        sent in slices, they never sit in memory all at once)."""
        if self._static is None:
            return
        sent = 0
        for name, fields in self._static:
            fields.setdefault("ts", self.wf_ts)
            self.emit(name, fields)
            sent += 1
            self._static_sent += 1
            if sent >= limit:
                return
        self._static = None
        self._end_static()

    def _end_static(self) -> None:
        self.emit("static.end", {"ts": self.wf_ts})
        parent_jobid, parent_jobseq = self._static_parent
        if self.parent_id is not None and parent_jobid is not None and parent_jobseq is not None:
            self.send_subwf_link(self.wf_uuid, self.parent_id, parent_jobid, parent_jobseq, self.wf_ts)

    def send_subwf_link(self, wf_uuid: str, parent_id: str, jobid: str, jobseq: int, ts: Any) -> None:
        self.emit("xwf.map.subwf_job", {
            "ts": ts, "xwf.id": parent_id, "subwf.id": wf_uuid, "job.id": jobid, "job_inst.id": jobseq})

    def _parse_dag(self) -> None:
        """Submit files, PRE/POST scripts and SUBDAGs of the .dag (monitord's job_info table)."""
        path = os.path.join(self.run_dir, self.dag_file)
        try:
            handle = open(path, encoding="utf-8", errors="replace")
        except OSError as exc:
            self.warn(f"cannot read dag file {path}: {exc.strerror}")
            return
        with handle:
            for line in handle:
                self._dag_line(line)

    def _info(self, jobid: str) -> list[Any]:
        info = self.job_info.get(jobid)
        if info is None:
            info = self.job_info[jobid] = [None, None, None, None, None, False, None, None, None]
        return info

    def _dag_line(self, line: str) -> None:
        lower = line.lower().lstrip()
        if lower.startswith("job"):
            m = RE_DAG_JOB.search(line)
            if m and not m.group(3):
                self._info(m.group(1))[SUB] = os.path.join(self.run_dir, m.group(2))
        elif lower.startswith("task"):
            m = RE_DAG_TASK.search(line)
            if m:
                self._info(m.group(1))[SUB] = None
                self.is_pmc = True
        elif lower.startswith("script post"):
            m = RE_DAG_SCRIPT.search(line)
            if m:
                info = self._info(m.group(1))
                info[POST_EXEC], info[POST_ARGS] = m.group(2), m.group(3)
        elif lower.startswith("script pre"):
            m = RE_DAG_SCRIPT.search(line)
            if m:
                info = self._info(m.group(1))
                info[PRE_EXEC], info[PRE_ARGS] = m.group(2), m.group(3)
                pre_log = RE_PRE_LOG.search(m.group(3)) if m.group(3) else None
                info[PRE_LOG] = pre_log.group(1) if pre_log else None
        elif lower.startswith("subdag external"):
            m = RE_DAG_SUBDAG.search(line)
            if m:
                info = self._info(m.group(1))
                directory = m.group(3) or (os.path.dirname(m.group(2)) if m.group(2) else None)
                info[IS_SUBDAG], info[SUBDAG_DAG], info[SUBDAG_DIR] = True, m.group(2), directory

    def has_post(self, jobid: str) -> bool:
        info = self.job_info.get(jobid)
        return info is not None and info[POST_EXEC] is not None

    def change_state(self, state: str) -> None:
        """DAGMan started or ended: jobstate marker, xwf.start/xwf.end."""
        if self.last_wf_state == "start" and state == "start":
            previous_end = self.current_ts - 1
            self.warn(f"{self.dagman_out}:{self.line_no}: DAGMan started twice without ending;"
                      f" inserting xwf.end at {previous_end}")
            self.dagman_exit = UNKNOWN_FAILURE_CODE
            self._write(jobstate.internal_line(previous_end, f"DAGMAN_FINISHED {self.dagman_exit}"))
            self._send_wf_state("end", previous_end)
            self.dagman_exit = None
        if state == "start":
            self._write(jobstate.internal_line(self.current_ts, f"DAGMAN_STARTED {self.condor_id}"))
            self.restart_count += 1
        else:
            self._write(jobstate.internal_line(self.current_ts, f"DAGMAN_FINISHED {self.dagman_exit}"))
        self._send_wf_state(state, self.current_ts, self.state_reason)
        self.last_wf_state = state
        self.state_reason = None

    def _send_wf_state(self, state: str, ts: int, reason: str | None = None) -> None:
        fields: dict[str, Any] = {"ts": ts, "xwf.id": self.wf_uuid, "reason": reason,
                                  "restart_count": self.restart_count - 1}
        if state == "end":
            status = self.dagman_exit if self.dagman_exit is not None else 0
            fields["status"] = status
            if status != 0:
                fields["level"] = "Error"
        self.emit("xwf." + state, fields)

    def start_wf(self) -> None:
        """DAGMan (re)started: forget jobs that are done (monitord's start_wf)."""
        for key, job in list(self.jobs.items()):
            if job.state == "POST_SCRIPT_SUCCESS" or (job.state == "JOB_SUCCESS" and not self.has_post(job.name)):
                del self.jobs[key]
                self.jobs_map.pop(job.name, None)
                self.walltime.pop(job.name, None)
                self.job_site.pop(job.name, None)

    def finish(self, rc: int = 0, ts: int | None = None) -> None:
        """End of monitoring for this workflow: the MONITORD_FINISHED line."""
        if self.finished:
            return
        self.finished = True
        self._write(jobstate.internal_line(ts if ts is not None else self.current_ts, f"MONITORD_FINISHED {rc}"))

    # ------------------------------------------------------------ dagman.out lines
    def feed(self, raw: str) -> tuple[str, str, int] | None:
        """Process one dagman.out line; returns (dagman.out, job, job seq) of a sub-workflow to follow."""
        self.line_no += 1
        line = raw.rstrip()
        ts = self.parser.timestamp(line)
        if ts is None:
            return None
        self.current_ts = int(ts)
        if self.skipping_recovery:
            if "...done with RECOVERY mode" in line:
                self.skipping_recovery = False
            return None
        kind, args = classify(line)
        handler = _HANDLERS.get(kind)
        if handler is None:
            return None
        return handler(self, *args)

    def _on_event(self, state: str, jobid: str, sched_id: str) -> tuple[str, str, int] | None:
        seq = self.add(jobid, state, sched_id=sched_id)
        if state == "SUBMIT" and seq is not None:
            dagman_out = self.subworkflow_of(jobid)
            if dagman_out is not None:
                return dagman_out, jobid, seq
        return None

    def _on_dagman_submit(self, jobid: str) -> None:
        self.add(jobid, "DAGMAN_SUBMIT")

    def _on_submit_failed(self) -> None:
        if self.last_submitted is not None:
            self.add(self.last_submitted, "SUBMIT_FAILED")
        else:
            self.warn(f"{self.dagman_out}:{self.line_no}: submit error but no job was submitted")

    def _on_script_started(self, which: str, jobid: str) -> None:
        self.add(jobid, f"{which}_SCRIPT_STARTED")

    def _on_script_done(self, which: str, jobid: str, status: Any) -> None:
        if which == "PRE":
            self.add(jobid, "PRE_SCRIPT_TERMINATED")
        if status == "unknown":
            self.warn(f"{self.dagman_out}:{self.line_no}: {which} script of {jobid}: unknown outcome")
            return
        self.add(jobid, f"{which}_SCRIPT_{'SUCCESS' if status == 0 else 'FAILURE'}", status=status)

    def _on_job_failure(self, jobid: str, sched_id: str, status: int) -> None:
        self.add(jobid, "JOB_FAILURE", sched_id=sched_id, status=status)

    def _on_job_success(self, jobid: str, sched_id: str) -> None:
        self.add(jobid, "JOB_SUCCESS", sched_id=sched_id, status=0)

    def _on_finished(self, rc: int) -> None:
        self.dagman_exit = rc
        self.change_state("end")

    def _on_condor_id(self, condor_id: str) -> None:
        self.condor_id = condor_id
        self.start_wf()

    def _on_dag_start(self, dag: str) -> None:
        self.change_state("start")

    def _on_version(self, major: int, minor: int, patch: int) -> None:
        self.dagman_version = major * 10000 + minor * 100 + patch

    def _on_recovery_start(self) -> None:
        self.skipping_recovery = True

    def _on_aborted(self) -> None:
        self.state_reason = "DAGMan aborted as it received SIGUSR1 signal."

    def _on_held_reason(self, reason: str) -> None:
        if self.last_known_job is None:
            self.warn(f"{self.dagman_out}:{self.line_no}: hold reason but no job is known; ignored")
            return
        jobid, seq = self.last_known_job
        job = self.jobs.get(_key(jobid, seq))
        self.add(jobid, "JOB_HELD_REASON", sched_id=job.sched_id if job else None, reason=reason)

    # ------------------------------------------------------------ jobs
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
            self.warn(f"{self.dagman_out}:{self.line_no}: {state} for unknown job {jobid}; ignored")
            return None
        self.update_state(jobid, sched_id, seq, state, status, walltime, reason)
        return seq

    def _find_seq(self, jobid: str, sched_id: str | None) -> int | None:
        seq = self.jobs_map.get(jobid)
        if seq is None:
            return None
        job = self.jobs.get(_key(jobid, seq))
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
            job = self.jobs[_key(jobid, seq)]
            if sched_id is not None:
                job.sched_id = sched_id
            job.state = state
            job.state_ts = self.current_ts
        else:
            seq = self.seq
            submit_dir = self.run_dir
            info = self.job_info.get(jobid)
            if info is None:
                self.warn(f"{self.dagman_out}:{self.line_no}: job {jobid} is not in {self.dag_file};"
                          f" using {self.run_dir} for its files")
            elif info[SUB] is not None:
                submit_dir = os.path.dirname(info[SUB])
            job = Job(jobid, submit_dir, seq)
            job.state = state
            job.state_ts = self.current_ts
            job.sched_id = sched_id
            self.jobs[_key(jobid, seq)] = job
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
        job = self.jobs.get(_key(jobid, seq))
        info = self.job_info.get(jobid)
        if job is None or info is None:
            return None, None
        if info[SUB] is None:
            if info[IS_SUBDAG]:
                job.site = "local"
            else:
                job.input_file = None
                job.output_file = f"{jobid}.out"
                job.error_file = f"{jobid}.err"
            return None, None
        wants_env = jobid.startswith("pegasus-plan") or jobid.startswith("subdax_")
        sub = submitfile.read(info[SUB], want_environment=wants_env)
        if sub is None:
            self.warn(f"{self.dagman_out}:{self.line_no}: cannot read submit file {info[SUB]} of {jobid}")
            return None, None
        job.apply_submit_info(sub)
        prefix = self.original_submit_dir + os.sep
        for attr in ("input_file", "output_file", "error_file"):
            value = getattr(job, attr)
            if value is not None and value.find(self.original_submit_dir) >= 0:
                setattr(job, attr, os.path.normpath(value.replace(prefix, "", 1)))
        return sub.max_minutes, job.site

    def subworkflow_of(self, jobid: str) -> str | None:
        """The dagman.out of the sub-workflow a (pegasus-plan / subdax_) job runs, if any."""
        info = self.job_info.get(jobid)
        if info is None or info[IS_SUBDAG]:
            return None
        seq = self.jobs_map.get(jobid)
        job = self.jobs.get(_key(jobid, seq)) if seq is not None else None
        if job is None or job.dagman_out is None:
            if jobid.startswith("subdax_"):
                self.warn(f"{self.dagman_out}: cannot tell the dagman.out of sub-workflow job {jobid}")
            return None
        path = os.path.normpath(job.dagman_out)
        if path.find(self.original_submit_dir) >= 0:
            path = os.path.join(self.run_dir, os.path.normpath(path.replace(self.original_submit_dir + os.sep, "", 1)))
        directory, name = os.path.dirname(path), os.path.basename(path)
        retry_dir = f"{directory}.{self.counters.get(jobid) or 0:03d}"
        if not os.path.isdir(retry_dir):
            retry_dir = directory + ".000"
            if not os.path.isdir(retry_dir):
                self.warn(f"{self.dagman_out}: sub-workflow directory {retry_dir} missing; not followed")
                return None
        return os.path.join(retry_dir, name)

    def update_state(self, jobid: str, sched_id: str | None, seq: int, state: str, status: Any,
                     walltime: Any, reason: str | None = None) -> None:
        """Record a job state: jobstate.log line, then the events it implies (monitord's order)."""
        job = self.jobs.get(_key(jobid, seq))
        if job is None:
            self.warn(f"{self.dagman_out}:{self.line_no}: {state} for finished or unknown job {jobid}; ignored")
            return
        self.last_known_job = (jobid, seq)
        out_of_order = job.sched_id is None and sched_id is not None
        previous = job.state
        job.set_state(state, sched_id, self.current_ts, status)
        self._write(jobstate.state_line(self.current_ts, jobid, state, status, job.sched_id,
                                        job.site, walltime, seq))
        held_state = "JOB_HELD_REASON" if self.dagman_version is not None and self.dagman_version >= CONDOR_8_3_3 \
            else "JOB_HELD"
        parse_at_end = not self.has_post(jobid) or self.is_pmc
        if state in ("JOB_SUCCESS", "JOB_FAILURE") and parse_at_end:
            self.parse_job_output(job)
        if out_of_order:
            self._brief(job, "submit.start")
        if state in ("PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE"):
            self._task_start(job, "PRE_SCRIPT")
            self._task_end(job, "PRE_SCRIPT")
        elif state in TERMINAL_WITH_POST:
            if job.exitcode is None:
                job.exitcode = job.post_exitcode
            self.parse_job_output(job)
            if job.deferred_end is not None:
                self._flush_job_end(job, job.deferred_end)
            self._task_start(job, "POST_SCRIPT")
            self._task_end(job, "POST_SCRIPT")
        self._state_event(job, jobid, state, previous, held_state, parse_at_end, reason)
        if state in ("SUBMIT_FAILED", "GLOBUS_SUBMIT_FAILED", "GRID_SUBMIT_FAILED"):
            job.stderr_text = kickstart.quote(f"Job submission failed because of HTCondor event {state}")
            self._job_end(job, -1, True)
        if state in TERMINAL_WITH_POST or (state in ("JOB_SUCCESS", "JOB_FAILURE") and not self.has_post(jobid)):
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
                self._brief(job, name, status)
            return
        if state == "PRE_SCRIPT_FAILURE":
            job.exitcode = job.pre_exitcode
            job.output_counter = self._next_counter(jobid)
            pre_log = self.job_info.get(jobid, [None] * 9)[PRE_LOG]
            if pre_log is not None:
                job.output_file = f"{pre_log}.{job.output_counter:03d}"
                self._read_out_file(job, job.output_file)
            self._brief(job, "pre.end", -1)
            self._job_end(job, -1, True)
        elif state in ("SUBMIT_FAILED", "GLOBUS_SUBMIT_FAILED", "GRID_SUBMIT_FAILED"):
            job.exitcode = 1
            prefix = {"SUBMIT_FAILED": "", "GLOBUS_SUBMIT_FAILED": "globus.", "GRID_SUBMIT_FAILED": "grid."}[state]
            self._brief(job, prefix + "submit.start")
            self._brief(job, prefix + "submit.end", -1)
        elif state == "EXECUTE":
            self._job_start(job)
        elif state == "JOB_SUCCESS":
            self._job_end(job, 0, parse_at_end)
        elif state == "JOB_FAILURE":
            self._job_end(job, -1, parse_at_end)
        elif state == "JOB_ABORTED":
            job.exitcode = 1
            self._brief(job, "abort.info")
            flush = parse_at_end if previous in ("JOB_HELD", "JOB_HELD_REASON") else True
            self._job_end(job, -1, flush)
        elif state == held_state:
            self._brief(job, "held.start", reason=reason)

    # ------------------------------------------------------------ job events
    def _job_fields(self, job: Job) -> dict[str, Any]:
        return {"xwf.id": self.wf_uuid, "job.id": job.name, "job_inst.id": job.seq}

    def _brief(self, job: Job, event: str, status: int | None = None, reason: str | None = None) -> None:
        fields = self._job_fields(job)
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
        fields = self._job_fields(job)
        fields["ts"] = job.state_ts
        fields["js.id"] = job.state_seq
        for key, value in (("stdin.file", job.input_file), ("stdout.file", job.output_file),
                           ("stderr.file", job.error_file), ("sched.id", job.sched_id)):
            if value is not None:
                fields[key] = value
        self.emit("job_inst.main.start", fields)

    def _job_end(self, job: Job, status: int | None, flush: bool) -> None:
        fields = self._job_fields(job)
        fields["ts"] = job.state_ts
        fields["js.id"] = job.state_seq
        fields["site"] = job.site if job.site is not None else ""
        user = job.remote_user if job.remote_user is not None else self.user
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
        elif self.original_submit_dir is not None:
            fields["work_dir"] = self.original_submit_dir
        if job.cluster_start is not None:
            fields["cluster.start"] = job.cluster_start
        if job.cluster_dur is not None:
            fields["cluster.dur"] = job.cluster_dur
        rotated = job.kickstart_parsed or job.rotated
        fields["stdout.file"] = "" if job.output_file is None else (
            f"{job.output_file}.{job.output_counter:03d}" if rotated else job.output_file)
        fields["stderr.file"] = "" if job.error_file is None else (
            f"{job.error_file}.{job.output_counter:03d}" if rotated else job.error_file)
        if job.stdout_text is not None:
            fields["stdout.text"] = job.stdout_text[:MAX_OUTPUT_LENGTH]
        if job.stderr_text is not None:
            fields["stderr.text"] = job.stderr_text[:MAX_OUTPUT_LENGTH]
        composite_base = dict(fields)
        self.emit("job_inst.main.end", fields)
        composite_base.update(self.fixed)
        self.emit("job_inst.composite", self._composite(job, composite_base))
        job.deferred_end = None
        job.stdout_text = job.stderr_text = None

    def _composite(self, job: Job, fields: dict[str, Any]) -> dict[str, Any]:
        fields["int_error_count"] = sum(metric[4] for metric in job.integrity)
        if job.host_id:
            fields["hostname"] = job.host_id
        fields["jobtype"] = job.jobtype_desc()
        if job.cpu_attribs:
            fields.update(job.cpu_attribs)
        for key, value in job.classads.items():
            if key in REQUEST_KEYS:
                fields[REQUEST_KEYS[key]] = value
        for event in job.monitoring_events:
            if event.get("monitoring_event") == "metadata":
                for item in event.get("payload") or []:
                    if isinstance(item, dict) and "name" in item and "value" in item:
                        fields["metadata__" + str(item["name"])] = item["value"]
        for event in job.multipart_events:
            for key, value in event.items():
                if key == "multipart":
                    continue
                existing = fields.get(key)
                if existing is None:
                    fields[key] = value
                elif isinstance(existing, list) and isinstance(value, list):
                    existing.extend(value)
        fields["invocations"] = list(job.invocations)
        if self.app:
            fields["app"] = self.app
        if self.label:
            fields["wf"] = self.label
        return fields

    # ------------------------------------------------------------ invocations
    def _task_start(self, job: Job, kind: str, task_id: int | None = None,
                    record: dict[str, Any] | None = None) -> None:
        record = record or {}
        fields = self._job_fields(job)
        if kind == "PRE_SCRIPT":
            fields["inv.id"] = PRESCRIPT_ID
            fields["ts"] = job.pre_start
        elif kind == "POST_SCRIPT":
            fields["inv.id"] = POSTSCRIPT_ID
            fields["ts"] = job.post_start
        else:
            fields["inv.id"] = task_id
            start = kickstart.epochdate(record["start"]) if "start" in record else None
            if start is None:
                start = job.main_start if job.main_start is not None else job.main_done
            if start is not None:
                fields["ts"] = start
        if fields.get("ts") is None:
            fields["ts"] = self.current_ts  # monitord leaves it to the wall clock
        self.emit("inv.start", fields)

    def _task_end(self, job: Job, kind: str, task_id: int | None = None,
                  record: dict[str, Any] | None = None) -> None:
        record = record or {}
        fields = self._job_fields(job)
        info = self.job_info.get(job.name)
        if kind in ("PRE_SCRIPT", "POST_SCRIPT"):
            pre = kind == "PRE_SCRIPT"
            start, done = (job.pre_start, job.pre_done) if pre else (job.post_start, job.post_done)
            fields["inv.id"] = PRESCRIPT_ID if pre else POSTSCRIPT_ID
            fields["transformation"] = "dagman::pre" if pre else "dagman::post"
            fields["start_time"] = start if start is not None else done
            if start is not None and done is not None:
                fields["dur"] = done - start
                fields["remote_cpu_time"] = done - start
            else:
                fields["dur"] = 0
            fields["exitcode"] = str(job.pre_exitcode if pre else job.post_exitcode)
            if info is not None:
                executable, argv = (info[PRE_EXEC], info[PRE_ARGS]) if pre else (info[POST_EXEC], info[POST_ARGS])
                fields["executable"] = executable if executable is not None else ""
                if argv is not None:
                    fields["argv"] = argv
            else:
                fields["executable"] = ""
            fields["ts"] = done
        else:
            self._main_task_end(job, task_id, record, fields, info)
        exitcode = fields.get("exitcode")
        if exitcode != "0":  # monitord compares with the text "0": a kickstart int always reads as an error
            fields["level"] = "Error"
        if fields.get("ts") is None:
            fields["ts"] = self.current_ts
        self.emit("inv.end", fields)

    def _main_task_end(self, job: Job, task_id: int | None, record: dict[str, Any],
                       fields: dict[str, Any], info: list[Any] | None) -> None:
        is_subdag = info is not None and info[IS_SUBDAG]
        fields["inv.id"] = task_id
        if "transformation" in record:
            fields["transformation"] = record["transformation"]
        elif job.transformation is not None:
            fields["transformation"] = job.transformation
        elif is_subdag:
            fields["transformation"] = "condor::dagman"
        if "derivation" in record:
            if record["derivation"] != "null":
                fields["task.id"] = record["derivation"]
        elif job.derivation is not None:
            fields["task.id"] = job.derivation
        start = kickstart.epochdate(record["start"]) if "start" in record else None
        if start is None:
            start = job.main_start if job.main_start is not None else job.main_done
        if start is not None:
            fields["start_time"] = start
        if "duration" in record:
            fields["dur"] = record["duration"]
        elif job.main_start is not None and job.main_done is not None:
            fields["dur"] = int(job.main_done) - int(job.main_start)
        elif job.main_done is not None:
            fields["dur"] = 0
        if "utime" in record and "stime" in record:
            try:
                cpu = float(record["utime"]) + float(record["stime"])
                fields["remote_cpu_time"] = cpu
                duration = float(fields.get("dur", 0))
                if duration != 0.0:
                    fields["avg_cpu"] = cpu / duration
            except (TypeError, ValueError):
                pass
        if "maxrss" in record:
            fields["maxrss"] = record["maxrss"]
        if start is not None and "duration" in record:
            try:
                fields["ts"] = int(start + float(record["duration"]))
            except (TypeError, ValueError):
                fields["ts"] = job.main_done
        else:
            fields["ts"] = job.main_done
        if "raw" in record:
            fields["exitcode"] = record["raw"]
        elif job.exitcode is not None:
            fields["exitcode"] = str(job.exitcode)
        if "name" in record:
            fields["executable"] = record["name"]
        elif job.executable is not None:
            fields["executable"] = job.executable
        else:
            fields["executable"] = "condor_dagman" if is_subdag else ""
        if "argument-vector" in record:
            if record["argument-vector"]:
                fields["argv"] = record["argument-vector"]
        elif job.arguments:
            fields["argv"] = job.arguments

    def _host_info(self, job: Job, record: dict[str, Any]) -> None:
        fields = self._job_fields(job)
        fields["hostname"] = record.get("hostname", "unknown")
        fields["ip"] = record.get("hostaddr", "unknown")
        fields["site"] = record.get("resource", "unknown")
        if "total" in record:  # XML records: monitord's own key
            fields["total_memory"] = record["total"]
        elif "ram" in record:
            fields["total_memory"] = record["ram"]  # YAML: monitord looks up `total`, which its parser never sets
        if "system" in record and "release" in record and "machine" in record:
            fields["uname"] = f"{record['system']}-{record['release']}-{record['machine']}"
        fields["ts"] = self.current_ts
        self.emit("job_inst.host.info", fields)

    # ------------------------------------------------------------ job output files
    def parse_job_output(self, job: Job) -> None:
        """Kickstart record(s), .err file, registrations: inv.*, host.info, rc.*, int.metric events."""
        if self.plain:
            return  # a plain DAG's job output is the job's own: no kickstart record to read
        info = self.job_info.get(job.name)
        parse_kickstart = not (info is not None and info[IS_SUBDAG])
        records: list[dict[str, Any]] = []
        if parse_kickstart:
            path = os.path.join(job.submit_dir, job.name) + ".out"
            if self.has_post(job.name) or self.is_pmc:
                path += f".{job.output_counter:03d}"
                job.rotated = True
            text = _read_text(path)
            if text is None:
                if not job.name.startswith("noop_"):
                    self.warn(f"cannot read kickstart output {path} of job {job.name}")
            else:
                records = kickstart.parse(text, path)
        lite_exit = self._pegasuslite_exitcode(job)
        if lite_exit is not None:
            job.exitcode = lite_exit
        self._read_err_file(job)
        task_id = 1
        if records:
            found = self._extract_job_info(job, records)
            if found:
                for record in records:
                    if "invocation" not in record:
                        continue
                    self._task_start(job, "MAIN_JOB", task_id, record)
                    self._task_end(job, "MAIN_JOB", task_id, record)
                    if job.monitoring_events:
                        self._monitoring_events(job, task_id)
                    outputs = record.get("outputs")
                    if outputs is not None:
                        self._output_metadata(job, outputs)
                    task_id += 1
                    self._host_info(job, record)
            else:
                self._clustered_tasks(job, records)
        else:
            self._task_start(job, "MAIN_JOB", task_id)
            self._task_end(job, "MAIN_JOB", task_id)
            self._read_out_file(job)
            if job.name.startswith("subdax_") or not parse_kickstart:
                fqdn = socket.getfqdn()
                try:
                    address = socket.gethostbyname(fqdn)
                except OSError:
                    address = "unknown"
                self._host_info(job, {"hostname": fqdn, "hostaddr": address, "resource": job.site})
        self._integrity_events(job)
        self._register_files(job)

    def _output_metadata(self, job: Job, outputs: dict[str, dict[str, str]]) -> None:
        count, duration = 0, 0.0
        for meta in outputs.values():
            if "checksum.timing" in meta:
                count += 1
                duration += float(meta["checksum.timing"])
        if count > 0:
            job.add_integrity("compute", "output", count=count, duration=duration)
        for lfn, meta in outputs.items():
            for key, value in meta.items():
                self.emit("rc.meta", {"ts": self.current_ts, "xwf.id": self.wf_uuid,
                                      "lfn.id": lfn, "key": key, "value": value})

    def _monitoring_events(self, job: Job, task_id: int) -> None:
        for event in job.monitoring_events:
            base = self._job_fields(job)
            if job.sched_id is not None:
                base["sched.id"] = job.sched_id
            base["monitoring_event"] = event.get("monitoring_event", "monitoring.additional")
            base["ts"] = event.get("ts", self.current_ts)
            for item in event.get("payload") or []:
                fields = dict(base)
                if isinstance(item, dict):
                    fields.update(item)
                self.emit("task.monitoring", fields)

    def _integrity_events(self, job: Job) -> None:
        for kind, file_type, count, succeeded, failed, duration in job.integrity:
            fields = self._job_fields(job)
            fields.update({"type": kind, "file_type": file_type,
                           "count": count if count > 0 else succeeded + failed,
                           "duration": duration, "ts": self.current_ts})
            tag = dict(fields)
            self.emit("int.metric", fields)
            if failed > 0:
                for key in ("duration", "type", "file_type"):
                    tag.pop(key)
                tag["name"] = "int.error"
                tag["count"] = failed
                self.emit("job_inst.tag", tag)

    def _register_files(self, job: Job) -> None:
        """rc.pfn per line of a successful registration job's .in file."""
        if not job.name.startswith("register_") or job.exitcode != 0:
            return
        path = os.path.join(job.submit_dir, f"{job.name}.in")
        text = _read_text(path)
        if text is None:
            self.warn(f"cannot read registration input {path}")
            return
        for number, line in enumerate(text.splitlines(), 1):
            entry = line.split()
            if len(entry) < 2:
                if entry:
                    self.warn(f"{path}:{number}: not `lfn pfn site=...`; skipped")
                continue
            site = None
            for pair in entry[2:]:
                key, _, value = pair.partition("=")
                if key == "site":
                    site = value.strip('"')
                    break
            # monitord stamps these with the wall clock; the job's time keeps ids stable
            self.emit("rc.pfn", {"ts": self.current_ts, "xwf.id": self.wf_uuid,
                                 "lfn.id": entry[0], "pfn": entry[1], "site": site})

    def _pegasuslite_exitcode(self, job: Job) -> Any:
        if job.error_file is None:
            return None
        name = job.error_file + (f".{job.output_counter:03d}" if job.rotated else "")
        text = _read_text(os.path.join(self.run_dir, name))
        if text is None:
            return None
        m = RE_LITE_EXIT.search(text)
        return m.group(1) if m else None

    def _read_err_file(self, job: Job) -> None:
        if job.error_file is None:
            job.stderr_text = None
            return
        name = job.name + ".err" + (f".{job.output_counter:03d}" if job.rotated else "")
        text = _read_text(os.path.join(job.submit_dir, name))
        if text is None:
            job.stderr_text = None
            return
        split = kickstart.split_monitoring(text)
        job.stderr_text = kickstart.quote(split.text[:MAX_OUTPUT_LENGTH - 2000])
        job.add_monitoring_events(split.events)
        m = RE_LITE_HOST.search(split.text)
        if m:
            job.host_id, job.host_ip = m.group(1), m.group(2)

    def _read_out_file(self, job: Job, out_file: str | None = None) -> None:
        if out_file is None:
            name = job.name + ".out" + (f".{job.output_counter:03d}" if job.rotated else "")
            out_file = os.path.join(job.submit_dir, name)
        elif not os.path.isabs(out_file):
            out_file = os.path.join(self.run_dir, out_file)
        text = _read_text(out_file)
        if text is None:
            job.stdout_text = None
            return
        split = kickstart.split_monitoring(text)
        job.stdout_text = kickstart.quote("#@ 1 stdout\n" + split.text[:MAX_OUTPUT_LENGTH - 2000])
        job.add_monitoring_events(split.events)

    def _extract_job_info(self, job: Job, records: list[dict[str, Any]]) -> bool:
        """Fold the kickstart records into the job (site, user, cwd, texts, cpu, invocations)."""
        job.kickstart_parsed = True
        found = False
        number = 0
        parts: list[str] = []
        size = 0
        for record in records:
            if "multipart" in record:
                summary = record.get("integrity_summary")
                if isinstance(summary, dict):
                    job.add_integrity("check", "input", succeeded=summary.get("succeeded", 0),
                                      failed=summary.get("failed", 0), duration=summary.get("duration", 0.0))
                elif "integrity_summary" not in record:
                    job.multipart_events.append(record)
                continue
            if "invocation" not in record:
                continue
            number += 1
            if not found:
                if "resource" in record:
                    job.site = record["resource"]
                if "user" in record:
                    job.remote_user = record["user"]
                if "cwd" in record:
                    job.remote_dir = record["cwd"]
                found = True
            if "hostname" in record:
                if job.host_id is None:
                    job.host_id = record["hostname"]
                elif job.host_id != record["hostname"]:
                    if job.host_ip is not None:
                        record["hostaddr"] = job.host_ip
                    record["hostname"] = job.host_id
            signal = " "
            signalled = record.get("signalled")  # XML records only, as in monitord
            if isinstance(signalled, dict):
                signal = "Job was " + str(signalled.get("action", ""))
                if "signal" in signalled:
                    signal += f" with signal {signalled['signal']}"
            if "stdout" in record:
                out = kickstart.split_monitoring(str(record["stdout"] or ""))
                job.add_monitoring_events(out.events)
                snippet = _snippet(out.text, size)
                if snippet is not None:
                    parts.append(kickstart.quote(f"#@ {number:d} stdout\n") + kickstart.quote(snippet) + "%0A")
                    size += len(snippet) + 20
            if "stderr" in record:
                err = kickstart.split_monitoring(str(record["stderr"] or ""))
                job.add_monitoring_events(err.events)
                snippet = _snippet(signal + err.text, size)
                if snippet is not None:
                    parts.append(kickstart.quote(f"#@ {number:d} stderr\n") + kickstart.quote(snippet) + "%0A")
                    size += len(snippet) + 20
            if "cpu" in record:  # XML records carry their cpu attributes ready-made
                job.cpu_attribs = dict(record["cpu"])
            elif job.cpu_attribs is None:
                job.cpu_attribs = {key: record[key] for key in
                                   ("cpu_count", "cpu_speed", "cpu_vendor", "cpu_model",
                                    "ram", "system", "release", "machine") if key in record}
            job.invocations.append({key: record[key] for key in
                                    ("transformation", "exitcode", "duration", "user", "hostname",
                                     "hostaddr", "maxrss", "tot_ip_size_mb", "tot_op_size_mb") if key in record})
        job.stdout_text = "".join(parts) if parts else ""
        for record in records:
            if "clustered" in record:
                if "duration" in record:
                    job.cluster_dur = record["duration"]
                if "start" in record:
                    start = kickstart.epochdate(record["start"])
                    if start is not None:
                        job.cluster_start = start
                break
        return found

    def _clustered_tasks(self, job: Job, records: list[dict[str, Any]]) -> None:
        """Task records without kickstart: the .in file names their transformations."""
        tasks: dict[int, dict[str, Any]] = {}
        for record in records:
            if "task" in record and "id" in record:
                try:
                    tasks[int(record["id"])] = record
                except ValueError:
                    self.warn(f"job {job.name}: task id {record['id']!r} is not a number")
        if not tasks or not self._read_in_file(job, tasks):
            return
        task_id = 1
        for number in sorted(tasks):
            record = tasks[number]
            if "status" in record:
                record["exitcode"] = record["raw"] = record["status"]
            if not all(k in record for k in ("transformation", "derivation", "start", "duration",
                                              "name", "argument-vector")):
                continue
            self._task_start(job, "MAIN_JOB", task_id, record)
            self._task_end(job, "MAIN_JOB", task_id, record)
            task_id += 1

    def _read_in_file(self, job: Job, tasks: dict[int, dict[str, Any]]) -> bool:
        text = _read_text(os.path.join(job.submit_dir, job.name) + ".in")
        if text is None:
            return False
        found = 0
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("#@"):
                try:
                    ident, xform, derivation = line[2:].strip().split(None, 2)
                    task = tasks[int(ident)]
                except (ValueError, KeyError):
                    continue
                task["transformation"], task["derivation"] = xform, derivation
            elif line.startswith("#") or line.startswith("EDGE"):
                continue
            else:
                parts = line.split(None, 1)
                found += 1
                task = tasks.get(found)
                if task is None:
                    continue
                task["name"] = parts[0]
                task["argument-vector"] = parts[1] if len(parts) == 2 else None
        return True

    # ------------------------------------------------------------ checkpoints
    def flush(self, *, sync: bool = False) -> int | None:
        return self.jobstate.flush(sync=sync) if self.jobstate is not None else None

    def to_state(self) -> dict[str, Any]:
        """Everything needed to resume (JSON-serialisable); job_info is re-read from the .dag."""
        state = {key: getattr(self, key) for key in _STATE_KEYS}
        state["jobs"] = {key: job.to_state() for key, job in self.jobs.items()}
        state["jobstate_length"] = self.flush()  # written to the OS; made durable before the state is saved
        state["static_sent"] = self._static_sent if self._static is not None else None
        return state

    def restore(self, state: dict[str, Any]) -> None:
        for key in _STATE_KEYS:
            if key in state:
                setattr(self, key, state[key])
        if isinstance(self.last_known_job, list):
            self.last_known_job = tuple(self.last_known_job)  # type: ignore[assignment]
        self.jobs = {key: Job.from_state(value) for key, value in state.get("jobs", {}).items()}
        sent = state.get("static_sent")
        if isinstance(sent, int):  # checkpointed while the static.bp events were going out: go on after them
            self._static = staticbp.read(Path(self.run_dir) / (os.path.splitext(self.dag_file)[0] + ".static.bp"))
            for _ in zip(range(sent), self._static):
                pass
            self._static_sent = sent

    def close(self) -> None:
        if self._static is not None:
            self._static.close()
            self._static = None
        if self.jobstate is not None:
            self.jobstate.close()


_STATE_KEYS = ("line_no", "skipping_recovery", "current_ts", "restart_count", "condor_id", "dagman_version",
               "dagman_exit", "last_wf_state", "state_reason", "last_submitted", "last_known_job", "finished",
               "seq", "jobs_map", "counters", "walltime", "job_site", "jobs_done", "subworkflows", "started_at")

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

_HANDLERS: dict[str, Callable[..., Any]] = {
    "event": Workflow._on_event,
    "dagman_submit": Workflow._on_dagman_submit,
    "submit_failed": Workflow._on_submit_failed,
    "script_started": Workflow._on_script_started,
    "script_done": Workflow._on_script_done,
    "job_failure": Workflow._on_job_failure,
    "job_success": Workflow._on_job_success,
    "finished": Workflow._on_finished,
    "condor_id": Workflow._on_condor_id,
    "dag_start": Workflow._on_dag_start,
    "version": Workflow._on_version,
    "recovery_start": Workflow._on_recovery_start,
    "aborted": Workflow._on_aborted,
    "held_reason": Workflow._on_held_reason,
}


def _key(jobid: str, seq: int) -> str:
    return f"{jobid}\x00{seq}"


def _snippet(text: str, used: int) -> str | None:
    """What still fits of a task's output in the 64 KB stdout budget (monitord's arithmetic)."""
    remaining = MAX_OUTPUT_LENGTH - used - 20
    if len(text) <= remaining:
        return text
    return text[:remaining] if remaining > 0 else None


def _build(name: str, fields: dict[str, Any], dagman_out: str, line_no: int,
           warn: Callable[[str], None]) -> Event | None:
    """The typed event, or None (reported, naming the dagman.out line) when a field does not fit."""
    try:
        return Event.build(name, fields, owned=True)
    except FieldError as exc:
        warn(f"{dagman_out}:{line_no}: cannot build {name}: {exc}")
        return None


def _log_warning(text: str) -> None:
    log.warning("%s", text)


def type_raw(raw: list[tuple[str, dict[str, Any], str, int]]) -> list[Event]:
    """Events from `raw_events` tuples; one that does not fit its schema is reported and left out."""
    built = (_build(name, fields, where, line_no, _log_warning) for name, fields, where, line_no in raw)
    return [event for event in built if event is not None]


def _read_text(path: str) -> str | None:
    try:
        data = read_bounded(path)  # bytes then decode: no text-layer set-up per small file
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:  # universal newlines, as a text-mode read gives
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
