"""The engine's checkpoint: one versioned snapshot dataclass per workflow.

A snapshot is what `Workflow.to_state()` writes into the monitor's state file
(as JSON); `job_info` is not in it (re-read from the `.dag` file). Version 1 is
the layout streamer has always written (state files without a `version` read
as 1). A field added later takes its default when an older file is read; a
file of another version, or with fields this version does not know, is
refused with a `StateError` naming what is wrong, never half-read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

STATE_VERSION = 1


class StateError(ValueError):
    """A checkpoint the engine cannot resume from (another version's, or damaged)."""


@dataclass
class WorkflowState:
    """Everything needed to resume one workflow's engine where a checkpoint left it."""

    line_no: int = 0
    skipping_recovery: bool = False
    current_ts: int = 0
    restart_count: int = 0
    condor_id: str | None = None
    dagman_version: int | None = None
    dagman_exit: int | None = None
    last_wf_state: str | None = None
    state_reason: str | None = None
    last_submitted: str | None = None
    last_known_job: tuple[str, int] | None = None
    finished: bool = False
    seq: int = 1
    jobs_map: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    walltime: dict[str, Any] = field(default_factory=dict)
    job_site: dict[str, Any] = field(default_factory=dict)
    jobs_done: int = 0
    subworkflows: dict[str, str] = field(default_factory=dict)
    started_at: int | None = None
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Live job instances by key, each as `Job.to_state()`."""
    jobstate_length: int | None = None
    """jobstate.log's length at the checkpoint: a resume truncates it there."""
    static_sent: int | None = None
    """static.bp records sent when the checkpoint was taken mid-way (None: all, or none pending)."""
    version: int = STATE_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "monitor state") -> "WorkflowState":
        if not isinstance(data, dict):
            raise StateError(f"{where}: a workflow's state is not a JSON object")
        version = data.get("version", 1)
        if version != STATE_VERSION:
            raise StateError(f"{where}: workflow state version {version!r} is not one this streamer reads"
                             f" ({STATE_VERSION}); resume with the streamer that wrote it, or remove the state"
                             " file to start over")
        unknown = sorted(set(data) - _FIELD_SET)
        if unknown:
            raise StateError(f"{where}: unknown workflow state field(s) {', '.join(unknown)}")
        known = data.get("last_known_job")
        if isinstance(known, list):  # JSON has no tuples: made one before the field (typed) takes it
            jobid, seq = known
            data = {**data, "last_known_job": (jobid, seq)}
        return cls(**data)


_FIELDS = tuple(f.name for f in fields(WorkflowState))
_FIELD_SET = frozenset(_FIELDS)
