"""The monitor's parsing, wherever it runs: `MonitorCore` owns the tracker (dagman.out lines, .sub/.out/.err
files, the engine) and takes a checkpoint snapshot after every step (or at most once per `snapshot_interval`
seconds when one is given, and always at the end of its input), static.bp events included, so a crash repeats
at most the step in flight.

A snapshot holds only the jobs changed since the previous one (`snapshot.SnapshotDiff`); `step()` joins them
back into the full state at once (`snapshot.SnapshotJoin`), the child's `step_raw()` leaves that to the
`ProcessRunner` in the parent: the source always sees (and saves) whole states.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from streamer.monitor.snapshot import SnapshotDiff, SnapshotJoin
from streamer.monitor.tracker import Tracker
from streamer.monitor.engine.events import type_raw
from streamer.monitor.engineopts import DEFAULT, EngineOptions

SNAPSHOT_BUDGET = 4.0
"""A snapshot is taken once the time since the last is this many times what that one cost."""
SNAPSHOT_INTERVAL = 0.0
"""Seconds between checkpoint snapshots while the monitor is busy (0: after every step, so a crash
repeats at most one step's events; a snapshot of a step costs far less than the step)."""


@dataclass
class Step:
    """What one tracker step produced."""

    events: list[Any]
    position: dict[str, Any] | None
    done: int = 0
    total: int = 0
    warnings: list[str] = field(default_factory=list)
    at_eof: bool = False
    finished: bool = False
    dropped: dict[str, int] = field(default_factory=dict)
    """Inputs left out in this step, by reason (`Tracker.dropped`)."""


class MonitorCore:
    """The tracker plus the checkpoint-snapshot policy (runs in the thread or the child)."""

    def __init__(self, dagman_out: str, *, recursive: bool, tz: str | None, write_jobstate: bool,
                 state: dict[str, Any] | None, read_size: int, snapshot_interval: float = SNAPSHOT_INTERVAL,
                 engine: EngineOptions = DEFAULT) -> None:
        self.tracker = Tracker(dagman_out, recursive=recursive, tz=tz, write_jobstate=write_jobstate, state=state,
                               engine=engine)
        self.read_size = read_size
        self.snapshot_interval = snapshot_interval
        self.last_snapshot = float("-inf")  # the first step after a (re)start is checkpointed at once
        self.snapshot_cost = 0.0
        self.diff = SnapshotDiff()
        self.join = SnapshotJoin()
        """`step`/`finish` (in this process) join the diffs at once; `step_raw`/`finish_raw` (the child's)
        leave them to the receiving runner's own join."""

    def step(self, final: bool) -> Step:
        """One step, its events typed, its snapshot (if any) the full state."""
        step = typed(self.step_raw(final))
        step.position = self.join.apply(step.position)
        return step

    def finish(self) -> Step:
        step = typed(self.finish_raw())
        step.position = self.join.apply(step.position)
        return step

    def step_raw(self, final: bool) -> Step:
        """One step, its events as the engine's raw records (typed by whoever receives them)."""
        tracker = self.tracker
        events = tracker.step(final=final, max_bytes=self.read_size)
        at_eof, finished = tracker.all_at_eof(), tracker.dagman_finished()
        # After every step, unless snapshots grow costly (many live jobs): then at most ~20% of the time
        # goes to them, and a crash repeats the few steps since the last one.
        wait = max(self.snapshot_interval, SNAPSHOT_BUDGET * self.snapshot_cost)
        due = at_eof or finished or time.monotonic() - self.last_snapshot >= wait
        return self._result(events, self._snapshot() if due else None, at_eof=at_eof, finished=finished)

    def finish_raw(self) -> Step:
        events = self.tracker.finish(0)
        return self._result(events, self._snapshot(complete=True), at_eof=True, finished=True)

    def close(self) -> None:
        self.tracker.close()

    def _snapshot(self, complete: bool = False) -> dict[str, Any]:
        started = time.monotonic()
        state = self.tracker.to_state()
        state["complete"] = complete
        copy = self.diff.make(state, full=complete)  # a copy: the engine keeps changing
        self.last_snapshot = time.monotonic()
        self.snapshot_cost = self.last_snapshot - started
        return copy

    def _result(self, events: list[Any], position: dict[str, Any] | None, *, at_eof: bool,
                finished: bool) -> Step:
        done, total = self.tracker.progress()
        warnings, self.tracker.warnings = self.tracker.warnings, []
        dropped, self.tracker.dropped = self.tracker.dropped, {}
        return Step(events, position, done, total, warnings, at_eof, finished, dropped)


def typed(step: Step) -> Step:
    """The step with its raw records typed (`engine.events.type_raw`); what cannot be typed is a warning."""
    step.events = type_raw(step.events, step.warnings)
    return step
