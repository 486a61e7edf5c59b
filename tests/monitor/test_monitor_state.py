"""The engine's checkpoint (monitor/engine/state.py): versioned, explicit fields; an older
state file resumes exactly, another version's is refused naming what is wrong."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from streamer.monitor.runner import core as runner_core
from streamer.monitor.engine.job import Job
from streamer.monitor.engine.state import StateError, WorkflowState
from streamer.monitor.runner.core import MonitorCore
from streamer.synth import generate


def _core(directory: Path, state: dict[str, Any] | None) -> MonitorCore:
    dagman_out = str(next(directory.glob("*.dag.dagman.out")))
    return MonitorCore(dagman_out, recursive=True, tz="UTC", write_jobstate=False, state=state, read_size=4096)


def _drain(core: MonitorCore) -> list[str]:
    ids: list[str] = []
    while True:
        step = core.step(True)
        assert step.warnings == []
        ids.extend(e.id for e in step.events)
        if not step.events and step.at_eof:
            break
    ids.extend(e.id for e in core.finish().events)
    return ids


@pytest.fixture(autouse=True)
def _a_snapshot_after_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not throttled by their measured cost: on a loaded machine the steps with live jobs could all go without."""
    monkeypatch.setattr(runner_core, "SNAPSHOT_BUDGET", 0)


def _snapshot_with_live_jobs(core: MonitorCore) -> dict[str, Any]:
    while True:
        step = core.step(True)
        assert not (step.at_eof and step.finished), "no snapshot with live jobs"
        engine = (step.position or {}).get("workflows", [{}])[0].get("engine")
        if engine and len(engine["jobs"]) >= 3:
            assert step.position is not None
            return step.position


def test_a_state_file_of_before_versions_and_without_later_job_fields_resumes_exactly(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=40, seed=3)
    core = _core(directory, None)
    position = _snapshot_with_live_jobs(core)
    rest = _drain(core)
    core.close()
    old = copy.deepcopy(position)
    engine = old["workflows"][0]["engine"]
    del engine["version"]  # as every state file written before the engine was split
    for job in engine["jobs"].values():
        del job["cluster_start"]  # as if `cluster_start` had been added to Job after the file was written
    resumed = _core(directory, old)
    assert _drain(resumed) == rest
    resumed.close()


def test_another_versions_workflow_state_is_refused_naming_the_workflow(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=10, seed=4)
    core = _core(directory, None)
    position = _snapshot_with_live_jobs(core)
    core.close()
    position["workflows"][0]["engine"]["version"] = 2
    dagman_out = next(directory.glob("*.dag.dagman.out"))
    with pytest.raises(StateError, match=f"monitor state of {dagman_out}: workflow state version 2 is not one"):
        _core(directory, position)


def test_unknown_fields_are_refused_not_half_read() -> None:
    with pytest.raises(StateError, match="unknown workflow state field.s. frobs"):
        WorkflowState.from_dict({"line_no": 3, "frobs": 1}, "x")
    state = Job("a", "/d", 1).to_state()
    state["colour"] = "red"
    with pytest.raises(StateError, match="x: unknown job field.s. colour"):
        Job.from_state(state, "x")
    assert Job.from_state({"name": "a", "submit_dir": "/d", "seq": 2}).integrity == []


def test_events_are_typed_in_one_place_and_a_misfit_is_a_warning_naming_its_line() -> None:
    """Thread or child process alike, raw records become events in `engine.events.type_raw` (via the
    runner's `typed`); one that does not fit its schema is left out and reported in the step's warnings."""
    from streamer.monitor.runner.core import Step, typed

    step = typed(Step([("xwf.start", {"ts": 1, "xwf.id": "a", "restart_count": "many"}, "x.dagman.out", 3),
                       ("xwf.start", {"ts": 1, "xwf.id": "a", "restart_count": 0}, "x.dagman.out", 4)], None))
    assert [(e.name, e.get("restart_count")) for e in step.events] == [("stampede.xwf.start", 0)]
    assert step.warnings == ["x.dagman.out:3: cannot build xwf.start: field restart_count: not a number: 'many'"]
