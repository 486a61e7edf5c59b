"""The planner's view of a workflow: wf.plan, then the static.bp events (or, for
a plain DAG, the jobs and edges of its `.dag` file) between static.start and
static.end, then the link to the parent workflow's job."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

from streamer.monitor.parsers import plaindag, staticbp
from streamer.monitor.engine.context import Context, Emit

SubwfLink = Callable[[str, str, str, int, Any], None]


class StaticEvents:
    """Sends the static events in slices (`drain`): a 20,000-job workflow has ~10 per job."""

    def __init__(self, ctx: Context, emit: Emit, link: SubwfLink,
                 parent_job: tuple[str | None, int | None]) -> None:
        self.ctx = ctx
        self.emit = emit
        self.link = link
        self.parent_job = parent_job
        self.records: Iterator[tuple[str, dict[str, Any]]] | None = None
        self.sent = 0
        """static.bp records emitted: a checkpoint taken meanwhile resumes after them."""

    @property
    def path(self) -> Path:
        return Path(self.ctx.run_dir) / (os.path.splitext(self.ctx.identity.dag_file)[0] + ".static.bp")

    @property
    def pending(self) -> bool:
        """Static events not sent yet: the dagman.out waits until they are out."""
        return self.records is not None

    def start(self) -> None:
        """wf.plan and static.start; the static records follow through `drain`."""
        ident = self.ctx.identity
        plan: dict[str, Any] = {"ts": ident.wf_ts, "xwf.id": ident.wf_uuid}
        for key, value in (("dax.label", ident.label), ("dax.version", ident.dax_version),
                           ("dax.index", ident.dax_index), ("dax.file", ident.dax_file),
                           ("dag.file.name", ident.dag_file), ("submit.hostname", ident.submit_hostname),
                           ("submit.dir", ident.submit_dir)):
            if value is not None:
                plan[key] = value
        if ident.planner_arguments is not None:
            plan["argv"] = ident.planner_arguments.strip('" \t\n\r')
        if ident.user is not None:
            plan["user"] = ident.user
        if ident.grid_dn is not None and ident.grid_dn != "null":
            plan["grid_dn"] = ident.grid_dn
        if ident.planner_version is not None:
            plan["planner.version"] = ident.planner_version
        if ident.parent_id is not None:
            plan["parent.xwf.id"] = ident.parent_id
        plan["root.xwf.id"] = ident.root_id
        self.emit("wf.plan", plan)
        # static.start/end carry wall-clock time in monitord; a fixed ts keeps ids stable
        self.emit("static.start", {"ts": ident.wf_ts})
        path = self.path
        if ident.plain:  # the jobs and edges of the .dag file stand in for the planner's static.bp
            dag = plaindag.read_dag(Path(self.ctx.run_dir) / ident.dag_file)
            self.records = iter(plaindag.static_events(dag, ident.wf_ts))
        elif path.is_file():
            self.records = staticbp.read(path)
            self.sent = 0
        else:
            self.ctx.warn(f"{path}: static.bp missing; no static events for {ident.wf_uuid}")
            self._end()

    def drain(self, limit: int) -> None:
        """Emit up to `limit` static records."""
        if self.records is None:
            return
        sent = 0
        wf_ts = self.ctx.identity.wf_ts
        for name, fields in self.records:
            fields.setdefault("ts", wf_ts)
            self.emit(name, fields)
            sent += 1
            self.sent += 1
            if sent >= limit:
                return
        self.records = None
        self._end()

    def _end(self) -> None:
        ident = self.ctx.identity
        self.emit("static.end", {"ts": ident.wf_ts})
        parent_jobid, parent_jobseq = self.parent_job
        if ident.parent_id is not None and parent_jobid is not None and parent_jobseq is not None:
            self.link(ident.wf_uuid, ident.parent_id, parent_jobid, parent_jobseq, ident.wf_ts)

    def resume(self, sent: int) -> None:
        """Checkpointed while the static.bp records were going out: go on after the first `sent`."""
        self.records = staticbp.read(self.path)
        for _ in zip(range(sent), self.records):
            pass
        self.sent = sent

    def close(self) -> None:
        records, self.records = self.records, None
        close = getattr(records, "close", None)
        if close is not None:
            close()
