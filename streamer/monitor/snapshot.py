"""Checkpoint snapshots that hold only what changed since the last one.

The monitor's state (`Tracker.to_state()`) is mostly its live job instances: a
20,000-job workflow can have thousands in flight, and a step changes a few. A
full snapshot after every step copied them all (and, with the parsing child,
pickled them across the pipe): the cost grew with the workflow, not with the
step. Now the engine keeps each job's state dict until the job changes
(`Jobs.states`), `SnapshotDiff` sends only the jobs whose dict is not the one
sent last time, plus the keys of the jobs gone (`JOBS_GONE`), and `SnapshotJoin`
on the receiving side rebuilds the full state: what the source saves is always
the whole state, the same bytes as before.

A snapshot is diffed against the previous one that was *sent*, so every one
sent must be joined, in order; the first of a core and the last (`complete`)
are full. Everything but the jobs travels in full (small, and copied).
"""

from __future__ import annotations

from typing import Any

import orjson

JOBS_GONE = "jobs_gone"
"""Engine-state key, in transit only: keys of the jobs dropped since the previous snapshot."""


class SnapshotDiff:
    """The sending side (in the parsing core): each snapshot against the previous one sent."""

    def __init__(self) -> None:
        self._sent: dict[str, dict[str, Any]] | None = None
        """dagman.out -> {job key: the state dict sent for it} (identities: the engine's dicts never change)."""

    def reset(self) -> None:
        """The next snapshot goes out in full."""
        self._sent = None

    def make(self, state: dict[str, Any], *, full: bool = False) -> dict[str, Any]:
        """A copy of `state` holding only the jobs changed since the previous call (all when `full`)."""
        previous = None if full else self._sent
        sent: dict[str, dict[str, Any]] = {}
        workflows = []
        for item in state["workflows"]:
            engine = item.get("engine")
            if engine is None:
                workflows.append(item)
                continue
            jobs: dict[str, Any] = engine["jobs"]
            sent[item["dagman_out"]] = dict(jobs)
            before = None if previous is None else previous.get(item["dagman_out"])
            if before is None:
                workflows.append(item)
                continue
            changed = {key: value for key, value in jobs.items() if before.get(key) is not value}
            new = sum(1 for key in changed if key not in before)
            gone = [key for key in before if key not in jobs] if len(before) + new > len(jobs) else []
            workflows.append({**item, "engine": {**engine, "jobs": changed, JOBS_GONE: gone}})
        self._sent = sent
        # a copy: the engine goes on changing what is not in a state dict of its own
        copy: dict[str, Any] = orjson.loads(orjson.dumps({**state, "workflows": workflows}))
        return copy


class SnapshotJoin:
    """The receiving side (the runner, in the parent): diffs back into full states, in the order sent."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}

    def apply(self, position: dict[str, Any] | None) -> dict[str, Any] | None:
        """The full state `position` (as sent by `SnapshotDiff.make`) stands for; None stays None."""
        if position is None:
            return None
        known: dict[str, dict[str, Any]] = {}
        for item in position.get("workflows", ()):
            engine = item.get("engine")
            if engine is None:
                continue
            gone = engine.pop(JOBS_GONE, None)
            if gone is not None:  # a diff: the jobs sent last time, these changed, those gone
                jobs = dict(self._jobs.get(item["dagman_out"], {}))
                for key in gone:
                    jobs.pop(key, None)
                jobs.update(engine["jobs"])
                engine["jobs"] = jobs  # a new dict each time: an earlier position the source holds stays as it was
            known[item["dagman_out"]] = engine["jobs"]
        self._jobs = known
        return position
