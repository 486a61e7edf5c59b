"""The planner's static.bp events are checkpointed like any other: a crash while they go out resumes
after the last acknowledged slice (it used to restart the workflow from the beginning)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from streamer.monitor import tracker
from streamer.monitor.runner import core
from streamer.monitor.source import WorkflowSource
from streamer.synth import generate
from tests.monitor.test_monitor_source import _run


@pytest.mark.parametrize("stop_after", [1, 2, 4])
def test_crash_while_static_events_go_out_repeats_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          stop_after: int) -> None:
    monkeypatch.setattr(tracker, "STATIC_SLICE", 100)  # many slices of static events, each checkpointed
    monkeypatch.setattr(core, "SNAPSHOT_BUDGET", 0.0)  # every step, however fast the snapshot
    reference_dir = generate(tmp_path / "ref", jobs=100, seed=7)
    reference = [e.id for e in asyncio.run(_run(WorkflowSource(reference_dir, timezone="UTC")))]
    directory = generate(tmp_path / "run", jobs=100, seed=7)
    first = WorkflowSource(directory, timezone="UTC")
    before = asyncio.run(_run(first, stop_after=stop_after))
    names = [e.name for e in before]
    assert "stampede.static.start" in names and "stampede.static.end" not in names  # crashed mid-static
    second = WorkflowSource(directory, timezone="UTC")
    after = asyncio.run(_run(second))
    assert second.resumed
    assert [e.id for e in before] + [e.id for e in after] == reference
