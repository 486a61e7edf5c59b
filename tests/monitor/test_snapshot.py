"""Checkpoint snapshots hold only what changed since the last one (`monitor/snapshot.py`).

The engine's live jobs are the bulk of its state; a step touches a few of them. Each
snapshot that leaves the parsing core carries the jobs changed since the previous one
and the keys of those gone; the runner's side joins them into the full state, which
must equal what the engine would have written in full, at every step.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from streamer.monitor.runner import core as runner_core
from streamer.monitor.runner.core import MonitorCore
from streamer.monitor.runner.process import ProcessRunner
from streamer.monitor.runner.thread import ThreadRunner
from streamer.monitor.snapshot import JOBS_GONE, SnapshotJoin
from streamer.synth import generate


def _options(directory: Path) -> dict[str, Any]:
    return dict(dagman_out=str(next(directory.glob("*.dag.dagman.out"))), recursive=True, tz="UTC",
                write_jobstate=False, state=None, read_size=4096)


def _jobs(position: dict[str, Any]) -> dict[str, Any]:
    engine = position["workflows"][0]["engine"]
    return engine["jobs"] if engine is not None else {}


def test_each_snapshot_carries_only_the_jobs_changed_since_the_last_and_joins_to_the_full_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_core, "SNAPSHOT_BUDGET", 0)  # a snapshot after every step
    directory = generate(tmp_path / "w", jobs=40, seed=5)
    core = MonitorCore(**_options(directory))
    join = SnapshotJoin()
    previous_full: dict[str, Any] = {}
    sent = live = steps = 0
    while True:
        step = core.step_raw(True)
        assert step.position is not None
        in_transit = _jobs(step.position)
        gone = step.position["workflows"][0]["engine"].get(JOBS_GONE, []) if steps else []
        full = join.apply(step.position)
        expected = orjson.loads(orjson.dumps(core.tracker.to_state()))
        expected["complete"] = False
        assert full == expected, f"step {steps}: the joined snapshot differs from the engine's full state"
        # what travelled: exactly the jobs whose state differs from the previous snapshot's
        changed = {key for key, value in _jobs(full).items() if previous_full.get(key) != value}
        assert changed <= set(in_transit), f"step {steps}: a changed job was not sent"
        assert sorted(gone) == sorted(set(previous_full) - set(_jobs(full)))
        sent += len(in_transit)
        live += len(_jobs(full))
        previous_full = _jobs(full)
        steps += 1
        if step.at_eof and step.finished:
            break
    assert steps > 10 and live > 0
    assert sent < live / 2, f"snapshots carried {sent} job states, the live jobs summed over steps are {live}"
    last = core.finish_raw().position
    assert last is not None and JOBS_GONE not in last["workflows"][0]["engine"]  # the last one is full
    assert join.apply(last)["complete"] is True


def _replay_positions(runner: ThreadRunner | ProcessRunner) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        positions = []
        await runner.open()
        try:
            while True:
                step = await runner.step(True)
                if step.position is not None:
                    positions.append(orjson.loads(orjson.dumps(step.position)))
                if step.at_eof and step.finished:
                    break
            positions.append((await runner.finish()).position)
        finally:
            await runner.close()
        return positions
    return asyncio.run(run())


def test_both_runners_hand_the_source_full_states_equal_to_the_engine_s(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=25, seed=6)
    options = _options(directory)
    core = MonitorCore(**options)
    expected = []
    while True:
        step = core.step_raw(True)
        state = orjson.loads(orjson.dumps(core.tracker.to_state()))
        state["complete"] = False
        expected.append(state)
        if step.at_eof and step.finished:
            break
    core.finish_raw()
    final = orjson.loads(orjson.dumps(core.tracker.to_state()))
    final["complete"] = True
    expected.append(final)
    for runner in (ThreadRunner(**options), ProcessRunner(**options)):
        positions = _replay_positions(runner)
        assert all(JOBS_GONE not in p["workflows"][0]["engine"] for p in positions if p["workflows"][0]["engine"])
        for position in [*positions, *expected]:
            position["workflows"][0]["engine"].pop("started_at", None)  # the wall clock when the engine started
        # each runner's positions are some of the engine's states (snapshots may be throttled), in order,
        # the last one complete
        assert positions[-1] == expected[-1], runner.kind
        found = iter(expected)
        assert all(any(position == state for state in found) for position in positions), runner.kind
        assert len(positions) > 3
