"""Plain-text forms of the status: pegasus-status's tables and per-job rows (--long)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamer.util.localtime import now, shown
from streamer.events.tally.counts import DagCounts, summary, totals
from streamer.events.tally.tracker import LABELS, Failure, StatusTracker


@dataclass
class DagRow:
    """One DAG (workflow) of the view: tree depth, name, counts and what identifies it."""

    depth: int
    name: str
    counts: DagCounts
    xwf_id: str | None = None
    label: str | None = None
    submit_host: str | None = None
    submit_dir: str | None = None


@dataclass
class JobRow:
    workflow: str
    job: str
    state: str
    retries: int
    site: str | None
    host: str | None
    duration: float | None
    exitcode: int | None = None
    hold_reason: str | None = None


@dataclass
class View:
    """What every renderer shows: DAG rows, failures, held jobs, per-job rows."""

    source: str
    dags: list[DagRow] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    held: list[JobRow] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    finished: bool = False
    events: int | None = None
    warnings: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        return totals(row.counts for row in self.dags)


def tracker_rows(tracker: StatusTracker) -> list[DagRow]:
    return [DagRow(depth, wf.dag or wf.xwf_id, wf.counts(), wf.xwf_id, wf.label, wf.submit_host, wf.submit_dir)
            for depth, wf in tracker.tree() if wf.jobs or wf.dag]


def tracker_jobs(tracker: StatusTracker) -> list[JobRow]:
    rows = []
    for _depth, wf in tracker.tree():
        for job in wf.jobs.values():
            rows.append(JobRow(wf.label or wf.key, job.name, LABELS[wf.node_state(job)], job.retries, job.site,
                               job.host, job.duration, job.exitcode, job.hold_reason))
    return rows


def _tree_name(row: DagRow, last: bool = True) -> str:
    if row.depth == 0:
        return row.name
    return "  " * (row.depth - 1) + ("└─" if last else "├─") + row.name


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def progress_table(view: View, *, long: bool = False) -> str:
    """pegasus-status's progress table: totals only, or (long) one row per DAG and TOTALS."""
    lines = []
    if not long:
        t = view.totals()
        lines.append(f"{'UNREADY':^8}{'READY':^8}{'PRE':^6}{'QUEUED':^8}{'POST':^8}{'SUCCESS':^9}{'FAILURE':^9}"
                     f"{'%DONE':^8}")
        lines.append(f"{t['unready']:^8}{t['ready']:^8}{t['pre']:^6}{t['queued']:^8}{t['post']:^8}"
                     f"{t['succeeded']:^9}{t['failed']:^9}{t['percent_done']:^8}")
    else:
        lines.append(f"{'UNRDY':^7}{'READY':^7}{'PRE':^5}{'IN_Q':^6}{'POST':^6}{'DONE':^6}{'FAIL':^6}{'%DONE':^6}"
                     f"{'STATE':^8}{'DAGNAME':25}")
        for row in view.dags:
            c = row.counts
            lines.append(f"{c.unready:^7}{c.ready:^7}{c.pre:^5}{c.queued:^6}{c.post:^6}{c.succeeded:^6}"
                         f"{c.failed:^6}{c.percent_done:^6}{c.state:^8}{_tree_name(row)}")
        if len(view.dags) > 1:
            t = view.totals()
            lines.append(f"{t['unready']:^7}{t['ready']:^7}{t['pre']:^5}{t['queued']:^6}{t['post']:^6}"
                         f"{t['succeeded']:^6}{t['failed']:^6}{t['percent_done']:^6}{'':^8}"
                         f"TOTALS ({t['total']} jobs)")
    lines.append(summary(row.counts for row in view.dags))
    return "\n".join(line.rstrip() for line in lines)


def workflow_lines(view: View) -> str:
    """One line per workflow of an event stream: id, label, submit host and directory."""
    out = []
    for row in view.dags:
        if row.xwf_id is None:
            continue
        where = f"{row.submit_host or '?'}:{row.submit_dir or '?'}"
        out.append(f"{'  ' * row.depth}{row.xwf_id}  {row.label or '-'}  {row.name}  {where}")
    return "\n".join(out)


def job_table(view: View) -> str:
    """--long: per-job rows like pegasus-status -l's job list (job, state, retries, site, host, duration)."""
    if not view.jobs:
        return "(no job details: none known yet)"
    width = max(3, *(len(r.job) for r in view.jobs))
    wf_width = max(8, *(len(r.workflow) for r in view.jobs))
    lines = [f"{'WORKFLOW':<{wf_width}}  {'JOB':<{width}}  {'STATE':<8} {'RETRY':>5}  {'SITE':<12} "
             f"{'HOST':<28} {'DURATION':>8}"]
    for r in view.jobs:
        lines.append(f"{r.workflow:<{wf_width}}  {r.job:<{width}}  {r.state:<8} {r.retries:>5}  "
                     f"{(r.site or '-'):<12} {(r.host or '-'):<28} {_duration(r.duration):>8}".rstrip())
    return "\n".join(lines)


def failure_lines(view: View) -> str:
    out = []
    for f in view.failures:
        when = shown(f.ts, date=False)
        code = "-" if f.exitcode is None else str(f.exitcode)
        detail = f.stderr or f.reason or ""
        step = "" if f.step == "job" else f" ({f.step})"
        out.append(f"{when} {f.workflow} {f.job}{step} exit={code} host={f.host or '-'} {detail}".rstrip())
    return "\n".join(out)


def plain_report(view: View, *, long: bool = False) -> str:
    """The whole non-interactive report: workflows, progress table, failures, (long) jobs."""
    parts = []
    if any(row.xwf_id for row in view.dags):
        parts.append(workflow_lines(view))
    parts.append(progress_table(view, long=long))
    if view.failures:
        parts.append("Last failures:\n" + failure_lines(view))
    if long:
        parts.append(job_table(view))
    return "\n\n".join(parts) + "\n"


def status_line(view: View) -> str:
    """One line for non-terminal --watch output: time, totals, %DONE and the DAGs' states."""
    t = view.totals()
    states = " ".join(f"{row.name}={row.counts.state}" for row in view.dags)
    return (f"{now()} unready={t['unready']} ready={t['ready']} pre={t['pre']} "
            f"queued={t['queued']} post={t['post']} success={t['succeeded']} failure={t['failed']} "
            f"done={t['percent_done']}% {states}")
