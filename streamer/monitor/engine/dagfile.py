"""The `.dag` file as the engine needs it (monitord's job_info table): each node's
submit file, PRE/POST scripts and SUBDAG, typed as a `DagJob`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from streamer.monitor.engine.context import Warn
from streamer.util.limits import read_bounded

RE_DAG_JOB = re.compile(r"JOB\s+(\S+)\s(\S+)(\s+DONE)?", re.IGNORECASE)
RE_DAG_TASK = re.compile(r"TASK\s+(\S*)\s(\S+)", re.IGNORECASE)
RE_DAG_SCRIPT = re.compile(r"SCRIPT (?:PRE|POST)\s+(\S+)\s(\S+)\s(.*)", re.IGNORECASE)
RE_DAG_SUBDAG = re.compile(r"SUBDAG EXTERNAL\s+(\S+)\s(\S+)\s?(?:DIR)?\s?(\S+)?", re.IGNORECASE)
RE_PRE_LOG = re.compile(r"-Dpegasus.log.\*=(\S+)\s", re.IGNORECASE)  # searched: no leading \s*, linear


@dataclass(slots=True)
class DagJob:
    """One node of the `.dag` file."""

    submit_file: str | None = None
    """Absolute path of the node's .sub file (None for a PMC task or a SUBDAG)."""
    pre_exec: str | None = None
    pre_args: str | None = None
    post_exec: str | None = None
    post_args: str | None = None
    is_subdag: bool = False
    subdag_dag: str | None = None
    subdag_dir: str | None = None
    pre_log: str | None = None
    """The PRE script's log (pegasus-plan's -Dpegasus.log.*=), read when the PRE script fails."""


@dataclass
class DagFile:
    """The nodes of a `.dag` file, and whether it is a PMC (TASK) workflow."""

    jobs: dict[str, DagJob] = field(default_factory=dict)
    is_pmc: bool = False

    def has_post(self, jobid: str) -> bool:
        job = self.jobs.get(jobid)
        return job is not None and job.post_exec is not None

    def total_jobs(self) -> int:
        return sum(1 for job in self.jobs.values() if job.submit_file or job.is_subdag)

    def _job(self, jobid: str) -> DagJob:
        job = self.jobs.get(jobid)
        if job is None:
            job = self.jobs[jobid] = DagJob()
        return job

    def add_line(self, line: str, run_dir: str) -> None:
        lower = line.lower().lstrip()
        if lower.startswith("job"):
            m = RE_DAG_JOB.search(line)
            if m and not m.group(3):
                self._job(m.group(1)).submit_file = os.path.join(run_dir, m.group(2))
        elif lower.startswith("task"):
            m = RE_DAG_TASK.search(line)
            if m:
                self._job(m.group(1)).submit_file = None
                self.is_pmc = True
        elif lower.startswith("script post"):
            m = RE_DAG_SCRIPT.search(line)
            if m:
                job = self._job(m.group(1))
                job.post_exec, job.post_args = m.group(2), m.group(3)
        elif lower.startswith("script pre"):
            m = RE_DAG_SCRIPT.search(line)
            if m:
                job = self._job(m.group(1))
                job.pre_exec, job.pre_args = m.group(2), m.group(3)
                pre_log = RE_PRE_LOG.search(m.group(3)) if m.group(3) else None
                job.pre_log = pre_log.group(1) if pre_log else None
        elif lower.startswith("subdag external"):
            m = RE_DAG_SUBDAG.search(line)
            if m:
                job = self._job(m.group(1))
                directory = m.group(3) or (os.path.dirname(m.group(2)) if m.group(2) else None)
                job.is_subdag, job.subdag_dag, job.subdag_dir = True, m.group(2), directory


def read(run_dir: str, dag_file: str, warn: Warn) -> DagFile:
    """The `.dag` file's nodes; an unreadable file is reported and reads as empty."""
    dag = DagFile()
    path = os.path.join(run_dir, dag_file)
    try:
        text = read_bounded(path).decode("utf-8", errors="replace")
    except OSError as exc:
        warn(f"cannot read dag file {path}: {exc.strerror or exc}", reason="unreadable_file")
        return dag
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):  # as a text-mode read splits
        dag.add_line(line, run_dir)
    return dag
