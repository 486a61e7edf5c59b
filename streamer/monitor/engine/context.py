"""What every engine module shares about one workflow: its identity (from the
braindump, or the `.dag` file of a plain DAG), the cursor in its dagman.out
(line number, DAGMan time) and where warnings and jobstate.log lines go.

The engine modules (`jobs`, `outputs`, `static`, `workflow`) each take this
context and an `emit(name, fields)` callable; none holds the others' state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from streamer.monitor.parsers import kickstart, plaindag
from streamer.monitor.engineopts import DEFAULT as DEFAULT_OPTIONS, EngineOptions
from streamer.monitor.errors import WorkflowError

Emit = Callable[[str, dict[str, Any]], None]


class Warn(Protocol):
    """Where a workflow's warnings go. `reason` (a short word: `kickstart_record`, `special_file`, ...)
    marks an input that gave fewer events than it should: the run counts those by reason."""

    def __call__(self, text: str, reason: str | None = None) -> None: ...


@dataclass
class Identity:
    """Who the workflow is: what wf.plan and every event's fixed fields tell."""

    wf_uuid: str
    root_id: str
    parent_id: str | None
    dag_file: str
    plain: bool
    """A plain DAGMan workflow (no braindump): identity and jobs from the .dag file, no kickstart."""
    wf_ts: int
    submit_dir: str | None
    original_submit_dir: str
    app: str | None = None
    label: str | None = None
    dax_index: Any = None
    dax_version: Any = None
    dax_file: str | None = None
    planner_version: str | None = None
    planner_arguments: str | None = None
    submit_hostname: str | None = None
    user: str | None = None
    grid_dn: str | None = None

    @classmethod
    def load(cls, run_dir: str, dagman_out: str, *, root_id: str | None, parent_id: str | None,
             started_at: int | None) -> "Identity":
        params, plain = plaindag.load_params(run_dir, dagman_out)
        wf_uuid, dag_file = params.get("wf_uuid"), params.get("dag")
        if not wf_uuid or not dag_file:
            raise WorkflowError(f"{run_dir}: braindump lacks wf_uuid or dag")
        stamp = params.get("timestamp") or params.get("pegasus_wf_time")
        wf_ts = kickstart.epochdate(stamp) if stamp else None
        if wf_ts is None and plain:  # the DAG file's time: stable, so are the events' ids
            wf_ts = int(os.stat(os.path.join(run_dir, dag_file)).st_mtime)
        if wf_ts is None:
            wf_ts = started_at or 0
        if params.get("submit_dir"):
            submit_dir = params["submit_dir"]
            original = os.path.normpath(params["submit_dir"])
        else:
            submit_dir = params.get("run")
            jsd = params.get("jsd")
            original = os.path.dirname(os.path.normpath(jsd)) if jsd else run_dir
        return cls(wf_uuid=wf_uuid, root_id=root_id or wf_uuid, parent_id=parent_id, dag_file=dag_file,
                   plain=plain, wf_ts=wf_ts, submit_dir=submit_dir, original_submit_dir=original,
                   app=params.get("app"), label=params.get("dax_label") or params.get("label"),
                   dax_index=params.get("dax_index"), dax_version=params.get("dax_version"),
                   dax_file=params.get("dax"),
                   planner_version=params.get("planner_version") or params.get("pegasus_version"),
                   planner_arguments=params.get("planner_arguments"),
                   submit_hostname=params.get("submit_hostname"), user=params.get("user"),
                   grid_dn=params.get("grid_dn"))

    def fixed_fields(self) -> dict[str, Any]:
        """The fields every event of this workflow carries (but xwf.map.subwf_job)."""
        fixed: dict[str, Any] = {"xwf.id": self.wf_uuid, "root.xwf.id": self.root_id}
        for key, value in (("dax", self.dax_file), ("dag", self.dag_file), ("wf.ts", self.wf_ts),
                           ("submit.dir", self.submit_dir), ("pegasus.version", self.planner_version),
                           ("submit.hostname", self.submit_hostname), ("wf.user", self.user)):
            if value is not None or key in ("submit.dir", "pegasus.version"):
                fixed[key] = value
        return fixed


@dataclass
class Context:
    """The identity, the cursor in the dagman.out, and the sinks for warnings and jobstate.log."""

    run_dir: str
    dagman_out: str
    identity: Identity
    warn: Warn
    write: Callable[[str], None]
    """A jobstate.log line (a no-op when jobstate.log is not written)."""
    options: EngineOptions = DEFAULT_OPTIONS
    """What monitord's -a/-j/-o/--skip-stdout/--keep-state/-S change (`engineopts.py`)."""
    line_no: int = 0
    current_ts: int = 0
    fixed: dict[str, Any] = field(default_factory=dict)

    def where(self) -> str:
        """`dagman.out:line` of the line being processed, for warnings."""
        return f"{self.dagman_out}:{self.line_no}"
