"""Simulate a DAGMan run and render its dagman.out in HTCondor 10.x's format.

Each node is a generator that yields, once per DAGMan cycle (5 s apart, as with
DAGMAN_USER_LOG_SCAN_INTERVAL=5), the log lines it produces in that cycle. The
scheduler interleaves nodes exactly as DAGMan does: events first, then up to 100
submissions per cycle, then the status table. What actually ran (condor ids,
execution windows, exit codes, .out/.err suffixes) is recorded as `Attempt`s so
the file writers can produce matching kickstart records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from streamer.synth.spec import (EVICTED, FAIL, HELD, HELD_ABORT, OK, POST_FAIL, PRE_FAIL, SUBMIT_FAIL, Job,
                   Plan)

CYCLE = 5
MAX_SUBMITS_PER_CYCLE = 100
CONDOR_VERSION = "10.2.5 2023-02-27 BuildID: 631644 PackageID: 10.2.5-1"
HOLD_REASON = ("Transfer output files failure at execution point slot1@synth.example.org while "
               "sending files to access point synth. Details: reading from file output.dat: "
               "(errno 2) No such file or directory")


def stamp(ts: float) -> str:
    """DAGMan's timestamp: local time, two-digit year, no zone."""
    return time.strftime("%m/%d/%y %H:%M:%S", time.gmtime(ts))


@dataclass
class Attempt:
    """One execution of a node's job, as the files on disk must describe it."""

    job: str
    suffix: int          # the NNN of .out.NNN / .err.NNN
    condor_id: str       # "12.0"
    start: float         # execution start (epoch)
    end: float
    exitcode: int
    kind: str


@dataclass
class Run:
    """Outcome of one DAGMan run (the original or a rescue restart)."""

    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    end: float = 0.0
    exit_status: int = 0


class Simulator:
    """Drives node generators cycle by cycle and collects the dagman.out lines."""

    def __init__(self, plan: Plan, now: float, next_cluster: int,
                 spawn_subwf: Callable[[Job, float, int], float] | None = None) -> None:
        self.plan = plan
        self.now = now
        self.cluster = next_cluster
        self.attempts: list[Attempt] = []
        self.counters: dict[str, int] = {}
        self.spawn_subwf = spawn_subwf
        self.state: dict[str, str] = {}
        self.children: dict[str, list[str]] = {j.name: [] for j in plan.jobs}
        for j in plan.jobs:
            for p in j.parents:
                self.children[p].append(j.name)

    # -- helpers -----------------------------------------------------------------------
    def _new_cluster(self) -> int:
        self.cluster += 1
        return self.cluster

    def _bump(self, job: Job) -> int:
        """Per-node file counter, as pegasus-exitcode numbers .out/.err (submit and PRE fail)."""
        self.counters[job.name] = self.counters.get(job.name, -1) + 1
        return self.counters[job.name]

    def _ev(self, ulog: str, job: Job, cid: int, ts: float) -> str:
        return f"Event: ULOG_{ulog} for HTCondor Node {job.name} ({cid}.0.0) {{{stamp(ts)}}}"

    # -- one node ----------------------------------------------------------------------
    def node(self, job: Job, kinds: list[str]) -> Iterator[list[str]]:
        """Yield the lines of one DAG node, cycle by cycle, through all its tries."""
        n = job.name
        carry: list[str] = []
        for a, kind in enumerate(kinds):
            more = a < len(kinds) - 1
            if job.pre:
                self.state[n] = "pre"
                yield carry + [f"Running PRE script of Node {n}..."]
                carry = []
                if kind == PRE_FAIL:
                    self._bump(job)
                    lines = [f"PRE Script of node {n} failed with status 1"]
                    if more:
                        yield lines + [f"Retrying node {n} (retry #{a + 1} of {job.retry})..."]
                        continue
                    self.state[n] = "failed"
                    yield lines
                    return
                yield [f"PRE Script of node {n} completed successfully."]
            self.state[n] = "queued"
            sub = [f"Submitting HTCondor Node {n} job(s)...",
                   f"Submitting node {n} from file {job.sub} using direct job submission"]
            if kind == SUBMIT_FAIL:
                yield carry + sub + ["ERROR: submit attempt failed",
                                     "Job submit try 1/6 failed, will try again in >= 1 second."]
                carry = []
                continue
            cid = self._new_cluster()
            yield carry + sub + [f"\tassigned HTCondor ID ({cid}.0.0)"]
            carry = []
            submitted = self.now - CYCLE
            suffix = self._bump(job)
            start = self.now - 1
            lines = [f"Reassigning the id of job {n} from ({cid}.0.0) to ({cid}.0.0)",
                     self._ev("SUBMIT", job, cid, submitted), "Number of idle job procs: 1",
                     self._ev("EXECUTE", job, cid, start), "Number of idle job procs: 0"]
            if kind in (HELD, HELD_ABORT):
                yield lines + [self._ev("JOB_HELD", job, cid, self.now), f"  Hold reason: {HOLD_REASON}"]
                if kind == HELD_ABORT:
                    yield [self._ev("JOB_ABORTED", job, cid, self.now - 1), f"Node {n} job completed",
                           f"Running POST script of Node {n}..."]
                    self.attempts.append(Attempt(n, suffix, f"{cid}.0", start, self.now, 1, kind))
                    yield from self._post(job, cid, fail=True, more=False, attempt=a)
                    return
                yield [self._ev("JOB_RELEASED", job, cid, self.now - 2)]
                start = self.now - 1
                yield [self._ev("EXECUTE", job, cid, start), "Number of idle job procs: 0"]
            elif kind == EVICTED:
                yield lines + [self._ev("JOB_EVICTED", job, cid, self.now)]
                start = self.now - 1
                yield [self._ev("EXECUTE", job, cid, start), "Number of idle job procs: 0"]
            else:
                yield lines
            if job.subwf and self.spawn_subwf:
                sub_end = self.spawn_subwf(job, start, cid)
                while self.now < sub_end + 2:
                    yield []
            rc = 1 if kind == FAIL else 0
            end = self.now - 1
            self.attempts.append(Attempt(n, suffix, f"{cid}.0", start, end, rc, kind))
            verdict = "completed successfully." if rc == 0 else f"failed with status {rc}."
            lines = [self._ev("JOB_TERMINATED", job, cid, end), "Number of idle job procs: 0",
                     f"Node {n} job proc ({cid}.0.0) {verdict}", f"Node {n} job completed"]
            if not job.post:
                self.state[n] = "done" if rc == 0 else "failed"
                yield lines
                return
            self.state[n] = "post"
            yield lines + [f"Running POST script of Node {n}...",
                           "Warning: mysin has length 0 (ignore if produced by DAGMan; see gittrac #4987, #5031)"]
            fail = kind in (FAIL, POST_FAIL)
            tail = yield from self._post(job, cid, fail=fail, more=more, attempt=a)
            if not fail or not more:
                return
            carry = tail

    def _post(self, job: Job, cid: int, *, fail: bool, more: bool,
              attempt: int) -> Generator[list[str], None, list[str]]:
        """POST script end; returns lines to prepend to the retry's submission."""
        n = job.name
        lines = [self._ev("POST_SCRIPT_TERMINATED", job, cid, self.now - 4)]
        if not fail:
            self.state[n] = "done"
            yield lines + [f"POST Script of node {n} completed successfully."]
            return []
        lines += [f"POST Script of node {n} failed with status 1", f"POST for Node {n} returned 1"]
        if more:
            yield lines + [f"Retrying node {n} (retry #{attempt + 1} of {job.retry})..."]
            return [f"Reassigning the id of job {n} from ({cid}.0.0) to (-1.-1.-1)"]
        self.state[n] = "failed"
        yield lines
        return []

    # -- the whole run -----------------------------------------------------------------
    def run(self, kinds: dict[str, list[str]], precompleted: set[str], rescue_of: str | None,
            dagman_cluster: int, pid: int) -> Run:
        """Render one DAGMan execution from STARTING UP to EXITING WITH STATUS."""
        out = Run()
        emit = out.lines.append
        for name in precompleted:
            self.state[name] = "done"
        for line in self._banner(dagman_cluster, pid, rescue_of, len(precompleted)):
            emit(f"{stamp(self.now)} {line}")
        self._status(emit)
        emit(f"{stamp(self.now)} Registering condor_event_timer...")
        self.now += 1
        running: dict[str, Iterator[list[str]]] = {}
        order = [j.name for j in self.plan.jobs]
        waiting = [n for n in order if n not in precompleted]
        while True:
            lines: list[str] = []
            # children become ready in the cycle after their parents finish, as in DAGMan
            done_before = {n for n, st in self.state.items() if st == "done"}
            for name in list(running):
                try:
                    lines += next(running[name])
                except StopIteration:
                    del running[name]
            submitted = 0
            still: list[str] = []
            for name in waiting:
                job = self.plan.job(name)
                if submitted < MAX_SUBMITS_PER_CYCLE and all(p in done_before for p in job.parents):
                    running[name] = self.node(job, kinds.get(name, [OK]))
                    lines += next(running[name])
                    submitted += 1
                else:
                    still.append(name)
            waiting = still
            if not running and not lines:
                break
            ts = stamp(self.now)
            if lines:
                if submitted:
                    lines.append(f"Just submitted {submitted} job{'s' if submitted > 1 else ''} this cycle...")
                emit(f"{ts} Currently monitoring 1 HTCondor log file(s)")
                out.lines.extend(f"{ts} {line}" for line in lines)
                self._status(emit)
            self.now += CYCLE
        out.done = [n for n in order if self.state.get(n) == "done"]
        out.failed = [n for n in order if self.state.get(n) == "failed"]
        out.exit_status = 1 if out.failed or len(out.done) < len(order) else 0
        for line in self._finale(out, dagman_cluster, pid):
            emit(f"{stamp(self.now)} {line}")
        out.end = self.now
        return out

    def _status(self, emit: Callable[[str], None]) -> None:
        """DAGMan's node-count table, printed after every busy cycle."""
        counts = {k: 0 for k in ("done", "pre", "queued", "post", "ready", "unready", "failed")}
        for j in self.plan.jobs:
            st = self.state.get(j.name)
            if st is None:
                ready = all(self.state.get(p) == "done" for p in j.parents)
                st = "ready" if ready else "unready"
            counts[st] += 1
        ts = stamp(self.now)
        total = len(self.plan.jobs)
        for line in ("DAG status: 0 (DAG_STATUS_OK)", f"Of {total} nodes total:",
                     " Done     Pre   Queued    Post   Ready   Un-Ready   Failed   Futile",
                     "  ===     ===      ===     ===     ===        ===      ===      ===",
                     f"{counts['done']:>5}{counts['pre']:>8}{counts['queued']:>9}{counts['post']:>8}"
                     f"{counts['ready']:>8}{counts['unready']:>11}{counts['failed']:>9}{0:>9}",
                     "0 job proc(s) currently held"):
            emit(f"{ts} {line}")

    def _banner(self, cluster: int, pid: int, rescue_of: str | None, precompleted: int) -> list[str]:
        dag = self.plan.dag
        lines = ["******************************************************",
                 f"** condor_scheduniv_exec.{cluster}.0 (CONDOR_DAGMAN) STARTING UP",
                 "** /usr/bin/condor_dagman",
                 "** SubsystemInfo: name=DAGMAN type=DAGMAN(9) class=CLIENT(2)",
                 "** Configuration: subsystem:DAGMAN local:<NONE> class:CLIENT",
                 f"** $CondorVersion: {CONDOR_VERSION} $", "** $CondorPlatform: x86_64_AlmaLinux8 $",
                 f"** PID = {pid}", "** Log last touched time unavailable (No such file or directory)",
                 "******************************************************",
                 "Using config source: /etc/condor/condor_config",
                 "DAGMAN_USE_STRICT setting: 1", "DAGMAN_VERBOSITY setting: 3",
                 "DAGMAN_MAX_SUBMITS_PER_INTERVAL setting: 100",
                 "DAGMAN_USER_LOG_SCAN_INTERVAL setting: 5", "DAGMAN_MAX_JOBS_IDLE setting: 1000",
                 "DAGMAN_AUTO_RESCUE setting: True", "DAGMAN_MAX_RESCUE_NUM setting: 100",
                 "DAGMAN will adjust edges after parsing",
                 f'argv[0] == "condor_scheduniv_exec.{cluster}.0"', 'argv[1] == "-Lockfile"',
                 f'argv[2] == "{dag}.lock"', 'argv[3] == "-AutoRescue"', 'argv[4] == "1"',
                 'argv[5] == "-DoRescueFrom"', 'argv[6] == "0"', 'argv[7] == "-Dag"', f'argv[8] == "{dag}"',
                 f"Workflow batch-id: <{cluster}.0>", f"Workflow batch-name: <{dag}+{cluster}>",
                 f"Default node log file is: <{self.plan.submit_dir}/./{dag}.nodes.log>",
                 f"DAG Lockfile will be written to {dag}.lock", f"DAG Input file is {dag}",
                 "Parsing 1 dagfiles", f"Parsing {dag} ...", "Adjusting edges"]
        if rescue_of:
            lines += [f"Found rescue DAG number 1; running {rescue_of} in combination with normal DAG file",
                      "~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~",
                      f"USING RESCUE DAG {rescue_of}"]
        lines += [f"Dag contains {len(self.plan.jobs)} total jobs", "Bootstrapping...",
                  f"Number of pre-completed nodes: {precompleted}",
                  f"MultiLogFiles: truncating log file {self.plan.submit_dir}/./{dag}.nodes.log"]
        return lines

    def _finale(self, out: Run, cluster: int, pid: int) -> list[str]:
        dag = self.plan.dag
        lines: list[str] = []
        if out.exit_status == 0:
            lines.append("All jobs Completed!")
        else:
            lines.append("ERROR: the following job(s) failed:")
            for name in out.failed:
                job = self.plan.job(name)
                lines += ["---------------------- Job ----------------------",
                          f"      Node Name: {name}", "           Noop: false",
                          "    Node Status: STATUS_ERROR", "Node return val: 1",
                          f"Job Submit File: {job.sub}",
                          "---------------------------------------\t<END>"]
            lines += ["Aborting DAG...", f"Writing Rescue DAG to {dag}.rescue001...",
                      "Removing submitted jobs...", "Removing any/all submitted HTCondor jobs..."]
        lines += ["Note: 0 total job deferrals because of -MaxJobs limit (0)",
                  "Note: 0 total job deferrals because of -MaxIdle limit (1000)",
                  f"Wrote metrics file {dag}.metrics.",
                  f"**** condor_scheduniv_exec.{cluster}.0 (condor_DAGMAN) pid {pid} "
                  f"EXITING WITH STATUS {out.exit_status}"]
        return lines
