"""pegasus-status's counts computed from Stampede events, per workflow.

A source of events (an event file, an AMQP stream, the workflow monitor) is
fed to `StatusTracker.feed`; it keeps, per workflow (`xwf.id`), its label,
submit host and directory, parent, state and, per DAG node (`job.id`), the
state of its latest job instance. A node counts as DAGMan counts it:

- no instance yet, or a failed attempt with retries left: READY when every
  parent (`job.edge`) succeeded, else UNREADY;
- `pre.start` .. `pre.end`: PRE;  `submit.start` .. the end of the job: QUEUED
  (held and running included);  `post.start` .. `post.end`: POST;
- `post.end` (or `main.end` of a job without a POST script) with status 0:
  SUCCESS; a failed attempt beyond the node's `max_retries` (`job.info`):
  FAILURE. A DAGMan restart (`xwf.start` with `restart_count` > 0, a rescue
  DAG) returns failed and unfinished nodes to READY/UNREADY, as DAGMan does.

The total is the number of nodes the planner declared (`job.info`), plus any
node seen only in job-instance events (a stream joined late, or monitord's
default AMQP selection, whose `job_inst.composite` stands in for `main.end`).
For the whole table a stream needs `STATUS_EVENTS`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Callable, Iterable

from streamer.events import Event
from streamer.events.tally.excerpt import stderr_excerpt
from streamer.events.tally.counts import FAILURE, RUNNING, SUCCESS, DagCounts

MAX_FAILURES = 10
STATUS_EVENTS = ("stampede.wf.plan,stampede.xwf.*,stampede.job.info,stampede.job.edge,stampede.job_inst.*")
"""The events the status is computed from (for an AMQP endpoint's `?events=`)."""

# Per-node phases; the count each falls into.
PRE, QUEUED, HELD, RUNNING_JOB, POST, DONE, FAILED, RETRY = (
    "pre", "queued", "held", "running", "post", "success", "failure", "retry")
_COUNT_OF = {PRE: "pre", QUEUED: "queued", HELD: "queued", RUNNING_JOB: "queued", POST: "post",
             DONE: "succeeded", FAILED: "failed"}
LABELS = {"": "Unready", "ready": "Ready", PRE: "Pre", QUEUED: "Queued", HELD: "Held",
          RUNNING_JOB: "Running", POST: "Post", DONE: "Success", FAILED: "Failure", RETRY: "Retry"}


def exit_code(raw: Any) -> int | None:
    """DAGMan's raw wait status (256) -> the exit code (1); other values as they are."""
    if not isinstance(raw, int):
        return None
    return raw >> 8 if raw >= 256 and raw % 256 == 0 else raw


@dataclass
class Failure:
    """One failed attempt of a job, for the view's `last failures`."""

    ts: float | None
    workflow: str
    job: str
    instance: int
    exitcode: int | None
    host: str | None
    stderr: str | None
    reason: str | None = None
    step: str = "job"
    """what failed: the job, or its PRE or POST script"""


@dataclass
class JobState:
    """One DAG node and its latest instance."""

    name: str
    max_retries: int | None = None
    phase: str = ""
    instance: int = 0
    instances: int = 0
    failed_attempts: int = 0
    has_post: bool = False
    ended: bool = False
    site: str | None = None
    host: str | None = None
    start: float | None = None
    end: float | None = None
    exitcode: int | None = None
    stderr: str | None = None
    hold_reason: str | None = None
    transformation: str | None = None

    @property
    def retries(self) -> int:
        return max(self.instances - 1, 0)

    @property
    def duration(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return max(self.end - self.start, 0.0)


@dataclass
class WorkflowState:
    """One workflow (root or sub-workflow) as its events describe it."""

    xwf_id: str
    root_id: str | None = None
    parent_id: str | None = None
    label: str | None = None
    dag: str | None = None
    submit_host: str | None = None
    submit_dir: str | None = None
    state: str = RUNNING
    restart_count: int = 0
    started: float | None = None
    ended: float | None = None
    jobs: dict[str, JobState] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    subwf_jobs: dict[str, str] = field(default_factory=dict)
    """sub-workflow xwf.id -> the node of this workflow that runs it"""

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    @property
    def key(self) -> str:
        """pegasus-status's key: `root`, or the DAG's base name for a sub-workflow."""
        if self.is_root:
            return "root"
        return PurePosixPath(self.dag).name.removesuffix(".dag") if self.dag else self.xwf_id

    def job(self, name: str) -> JobState:
        state = self.jobs.get(name)
        if state is None:
            state = self.jobs[name] = JobState(name)
        return state

    def node_state(self, job: JobState) -> str:
        """The phase for display and counting (READY / UNREADY resolved from the parents)."""
        if job.phase in ("", RETRY):
            parents = self.parents.get(job.name, ())
            if all(self.jobs[p].phase == DONE if p in self.jobs else False for p in parents):
                return "ready"
            return ""
        return job.phase

    def counts(self) -> DagCounts:
        out = DagCounts(total=len(self.jobs), dagname=self.dag, state=self.state)
        for job in self.jobs.values():
            phase = self.node_state(job)
            name = _COUNT_OF.get(phase, "ready" if phase == "ready" else "unready")
            setattr(out, name, getattr(out, name) + 1)
        return out


class StatusTracker:
    """Workflows and their nodes, kept up to date from events in stream order."""

    def __init__(self, max_failures: int = MAX_FAILURES) -> None:
        self.workflows: dict[str, WorkflowState] = {}
        self.failures: deque[Failure] = deque(maxlen=max_failures)
        self.events = 0
        self.last_ts: float | None = None
        self.names: set[str] = set()
        """The event names seen: `incomplete` says what the totals lack."""
        self.began: set[str] = set()
        """Workflows whose wf.plan or xwf.start was seen (the others began before the stream was read)."""

    # ------------------------------------------------------------ reading
    def feed(self, events: Iterable[Event]) -> None:
        names = self.names
        for event in events:
            self.events += 1
            names.add(event.name)
            fields = event.fields
            xwf = fields.get("xwf.id")
            if not xwf:
                continue
            ts = fields.get("ts")
            if isinstance(ts, (int, float)):
                self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
            wf = self._workflow(str(xwf), fields)
            if event.name in _BEGINNINGS:
                self.began.add(wf.xwf_id)
            handler = _HANDLERS.get(event.name)
            if handler is not None:
                handler(self, wf, fields)

    def _workflow(self, xwf: str, fields: dict[str, Any]) -> WorkflowState:
        wf = self.workflows.get(xwf)
        if wf is None:
            wf = self.workflows[xwf] = WorkflowState(xwf)
            root = fields.get("root.xwf.id")
            wf.root_id = str(root) if root else None
            if root and str(root) != xwf:
                wf.parent_id = str(root)  # until wf.plan names the real parent
                self._link(wf)
        if wf.dag is None or wf.submit_dir is None or wf.submit_host is None:  # known early: most events skip this
            if wf.dag is None and fields.get("dag"):
                wf.dag = str(fields["dag"])
            if wf.submit_dir is None and fields.get("submit.dir"):
                wf.submit_dir = str(fields["submit.dir"])
            if wf.submit_host is None and fields.get("submit.hostname"):
                wf.submit_host = str(fields["submit.hostname"])
        return wf

    def _link(self, wf: WorkflowState) -> None:
        for other in self.workflows.values():
            if wf.xwf_id in other.children and other.xwf_id != wf.parent_id:
                other.children.remove(wf.xwf_id)
        if wf.parent_id:
            parent = self.workflows.get(wf.parent_id)
            if parent is None:
                parent = self.workflows[wf.parent_id] = WorkflowState(wf.parent_id)
            if wf.xwf_id not in parent.children:
                parent.children.append(wf.xwf_id)

    def _plan(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        wf.label = f.get("dax.label") or wf.label
        wf.dag = f.get("dag.file.name") or wf.dag
        wf.submit_host = f.get("submit.hostname") or wf.submit_host
        wf.submit_dir = f.get("submit.dir") or wf.submit_dir
        parent = f.get("parent.xwf.id")
        wf.parent_id = str(parent) if parent and str(parent) != wf.xwf_id else None
        self._link(wf)

    def _start(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        restart = f.get("restart_count") or 0
        if restart or wf.ended is not None:
            for job in wf.jobs.values():  # a rescue DAG: what did not succeed runs again
                if job.phase != DONE:
                    job.phase, job.failed_attempts = "", 0
        wf.state, wf.ended = RUNNING, None
        if wf.started is None:
            wf.started = f.get("ts")
        wf.restart_count = restart

    def _end(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        wf.state = SUCCESS if f.get("status") == 0 else FAILURE
        wf.ended = f.get("ts")

    def _job_info(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        job = wf.job(str(f.get("job.id")))
        retries = f.get("max_retries")
        job.max_retries = retries if isinstance(retries, int) else job.max_retries

    def _edge(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        parent, child = f.get("parent.job.id"), f.get("child.job.id")
        if parent and child:
            wf.job(str(parent))
            wf.job(str(child))
            parents = wf.parents.setdefault(str(child), [])
            if parent not in parents:
                parents.append(str(parent))

    def _instance(self, wf: WorkflowState, f: dict[str, Any]) -> JobState | None:
        """The node of a job_inst event, moved to a new instance when the id is new; None if stale."""
        name = f.get("job.id")
        inst = f.get("job_inst.id")
        if not name or not isinstance(inst, int):
            return None
        job = wf.job(str(name))
        if inst < job.instance:
            return None  # an earlier instance's late event
        if inst > job.instance:
            job.instance, job.instances = inst, job.instances + 1
            job.has_post, job.ended, job.start, job.end, job.exitcode = False, False, None, None, None
            job.stderr, job.hold_reason, job.host = None, None, None
        return job

    def _held_end(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        job = self._instance(wf, f)
        if job is not None and job.phase == HELD:
            job.phase = RUNNING_JOB if job.start is not None else QUEUED

    def _host(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        job = self._instance(wf, f)
        if job is not None and f.get("hostname"):
            job.host = str(f["hostname"])

    def _main_end(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        job = self._instance(wf, f)
        if job is None:
            return
        job.ended, job.end = True, f.get("ts")
        job.exitcode = exit_code(f.get("exitcode"))
        job.stderr = stderr_excerpt(f.get("stderr.text")) or job.stderr
        if f.get("site"):
            job.site = str(f["site"])
        if job.start is None and isinstance(f.get("local.dur"), (int, float)) and isinstance(job.end, (int, float)):
            job.start = job.end - f["local.dur"]
        if not job.has_post:
            self._outcome(wf, job, f, f.get("status"))

    def _composite(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        """job_inst.composite (monitord's default AMQP events carry no main.end): the same, once."""
        job = self._instance(wf, f)
        if job is None or job.ended:
            return
        if f.get("hostname"):
            job.host = str(f["hostname"])
        self._main_end(wf, f)

    def _pre_end(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        """A failed PRE script ends the attempt; a successful one leads to the submission."""
        job = self._instance(wf, f)
        if job is not None and f.get("status") not in (0, None):
            self._outcome(wf, job, f, f.get("status"), step="PRE script", code=exit_code(f.get("exitcode")))

    def _post_end(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        """The POST script's status is the node's outcome (pegasus-exitcode judged the job)."""
        job = self._instance(wf, f)
        if job is None:
            return
        code = exit_code(f.get("exitcode"))
        if job.exitcode is None:
            job.exitcode = code
        if job.exitcode == 0 and f.get("status") not in (0, None):  # the job succeeded, its POST script did not
            self._outcome(wf, job, f, f.get("status"), step="POST script", code=code)
        else:
            self._outcome(wf, job, f, f.get("status"))

    def _outcome(self, wf: WorkflowState, job: JobState, f: dict[str, Any], status: Any, *, step: str = "job",
                 code: int | None = None) -> None:
        if status == 0:
            job.phase = DONE
            return
        job.failed_attempts += 1
        if job.max_retries is not None and job.failed_attempts > job.max_retries:
            job.phase = FAILED
        else:
            job.phase = RETRY
        self.failures.append(Failure(f.get("ts"), wf.label or wf.key, job.name, job.instance,
                                     job.exitcode if step == "job" else code, job.host,
                                     job.stderr if step == "job" else None, job.hold_reason, step))

    def _subwf(self, wf: WorkflowState, f: dict[str, Any]) -> None:
        sub, job = f.get("subwf.id"), f.get("job.id")
        if sub and job:
            wf.subwf_jobs[str(sub)] = str(job)
            child = self.workflows.get(str(sub)) or self._workflow(str(sub), {"root.xwf.id": wf.root_id})
            child.parent_id = wf.xwf_id
            self._link(child)

    # ------------------------------------------------------------ results
    def roots(self) -> list[WorkflowState]:
        return [wf for wf in self.workflows.values() if wf.is_root]

    def tree(self) -> list[tuple[int, WorkflowState]]:
        """(depth, workflow) in display order: each root followed by its sub-workflows."""
        out: list[tuple[int, WorkflowState]] = []
        seen: set[str] = set()

        def walk(wf: WorkflowState, depth: int) -> None:
            if wf.xwf_id in seen:
                return
            seen.add(wf.xwf_id)
            out.append((depth, wf))
            for child in wf.children:
                if child in self.workflows:
                    walk(self.workflows[child], depth + 1)

        for root in self.roots():
            walk(root, 0)
        for wf in self.workflows.values():  # orphans (a parent never seen)
            walk(wf, 0)
        return out

    def dag_counts(self) -> dict[str, DagCounts]:
        """pegasus-status's `dags` from the events: the first root as `root`, others by DAG name."""
        out: dict[str, DagCounts] = {}
        for _depth, wf in self.tree():
            if not wf.jobs and wf.dag is None:
                continue
            key = wf.key if wf.key not in out else wf.xwf_id
            out[key] = wf.counts()
        return out

    def workflows_doc(self) -> dict[str, Any]:
        """Per-workflow details for --json: id, label, submit host and dir, parent, counts."""
        out: dict[str, Any] = {}
        for depth, wf in self.tree():
            out[wf.xwf_id] = {"label": wf.label, "dag": wf.dag, "submit_hostname": wf.submit_host,
                              "submit_dir": wf.submit_dir, "parent_xwf_id": wf.parent_id,
                              "root_xwf_id": wf.root_id or wf.xwf_id, "depth": depth,
                              "restart_count": wf.restart_count, **wf.counts().as_dict()}
        return out

    def incomplete(self) -> list[str]:
        """Why the totals cannot be complete (empty: nothing known to be missing). A stream published with a
        filter (deploy/README's bandwidth saver has no `stampede.job.info`: a failed job beyond its retries
        then counts as retrying, not as FAILURE), or joined after its workflows began (their earlier events
        were never read)."""
        if not any(name.startswith("stampede.job_inst.") for name in self.names):
            return []
        out = []
        if "stampede.job.info" not in self.names:
            out.append("the totals cannot be complete: the stream carries no stampede.job.info events (published "
                       "with a filter?): the jobs' retry limits are unknown, so a job that failed for good counts "
                       f"as retrying, not as FAILURE; publish at least {STATUS_EVENTS}")
        late = [wf.label or wf.xwf_id for wf in self.workflows.values() if wf.xwf_id not in self.began]
        if late:
            shown = ", ".join(late[:3]) + (f" and {len(late) - 3} more" if len(late) > 3 else "")
            out.append(f"the totals cannot be complete: {shown} began before this stream was read (no wf.plan, "
                       f"no xwf.start): only the events since count (read the submit directory, or a queue that "
                       f"kept every event)")
        return out

    @property
    def finished(self) -> bool:
        """Every root workflow seen has ended (and at least one was seen)."""
        roots = self.roots()
        return bool(roots) and all(wf.state != RUNNING for wf in roots)


_BEGINNINGS = frozenset({"stampede.wf.plan", "stampede.xwf.start"})


def _phase(phase: str) -> Callable[[StatusTracker, WorkflowState, dict[str, Any]], None]:
    """Handler of an event that moves the node's latest instance into `phase`."""
    def handler(self: StatusTracker, wf: WorkflowState, f: dict[str, Any]) -> None:
        job = self._instance(wf, f)
        if job is None:
            return
        if phase == POST:
            job.has_post = True
        if phase == RUNNING_JOB:
            job.start = f.get("ts")
        if phase == HELD:
            job.hold_reason = (f.get("reason") or "").strip() or None
        if job.phase not in (DONE, FAILED):
            job.phase = phase
        if f.get("site"):
            job.site = str(f["site"])
    return handler


_HANDLERS = {
    "stampede.wf.plan": StatusTracker._plan,
    "stampede.xwf.start": StatusTracker._start,
    "stampede.xwf.end": StatusTracker._end,
    "stampede.job.info": StatusTracker._job_info,
    "stampede.job.edge": StatusTracker._edge,
    "stampede.job_inst.pre.start": _phase(PRE),
    "stampede.job_inst.submit.start": _phase(QUEUED),
    "stampede.job_inst.main.start": _phase(RUNNING_JOB),
    "stampede.job_inst.held.start": _phase(HELD),
    "stampede.job_inst.post.start": _phase(POST),
    "stampede.job_inst.held.end": StatusTracker._held_end,
    "stampede.job_inst.host.info": StatusTracker._host,
    "stampede.job_inst.main.end": StatusTracker._main_end,
    "stampede.job_inst.composite": StatusTracker._composite,
    "stampede.job_inst.pre.end": StatusTracker._pre_end,
    "stampede.job_inst.post.end": StatusTracker._post_end,
    "stampede.xwf.map.subwf_job": StatusTracker._subwf,
}
