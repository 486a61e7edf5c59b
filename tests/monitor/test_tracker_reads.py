"""The tracker's reads are sized by what the file holds, never by the step's limit (issue 28 item 2)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from streamer.monitor import tracker as tracker_module
from streamer.monitor.runner.core import MonitorCore
from streamer.synth import generate


def test_a_step_over_a_few_new_bytes_allocates_for_those_bytes_not_for_the_read_limit(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=3, seed=7)
    dagman_out = next(directory.glob("*.dag.dagman.out"))
    limit = 32 << 20
    core = MonitorCore(str(dagman_out), recursive=False, tz="UTC", write_jobstate=False, state=None,
                       read_size=limit)
    try:
        for _ in range(100):  # follow mode: catch up with the log
            if core.step_raw(False).at_eof:
                break
        with dagman_out.open("a") as handle:  # a live DAGMan appends a line
            handle.write("11/27/26 09:00:00 Note: nothing to do\n")
        tracemalloc.start()
        try:
            step = core.step_raw(False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert step.at_eof
        assert peak < 4 << 20, f"a step over 38 new bytes allocated {peak:,} bytes (read limit {limit:,})"
    finally:
        core.close()


def _run(directory: Path, state: dict | None = None, stop_after: int | None = None
         ) -> tuple[list[tuple[str, dict]], list[int], dict | None]:
    """Events (name, fields) and step sizes of a replay; with `stop_after`, also the position of that step."""
    dagman_out = next(directory.glob("*.dag.dagman.out"))
    core = MonitorCore(str(dagman_out), recursive=False, tz="UTC", write_jobstate=False, state=state,
                       read_size=1 << 18)
    events: list[tuple[str, dict]] = []
    sizes: list[int] = []
    try:
        while True:
            step = core.step(True)
            assert step.warnings == []
            events += [(e.name, e.fields) for e in step.events]
            sizes.append(len(step.events))
            if stop_after is not None and len(sizes) == stop_after:
                assert step.position is not None
                return events, sizes, step.position
            if not step.events and step.at_eof:
                break
        events += [(e.name, e.fields) for e in core.finish().events]
    finally:
        core.close()
    return events, sizes, None


def test_a_read_that_ends_many_jobs_is_fed_over_several_steps_with_the_same_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 28 item 3: a step stops after the line that brings its events to EVENT_SLICE; the next one goes on
    from the line after it, so memory holds a slice of a big read's events, never all of them."""
    from streamer.monitor.runner import core as runner_module
    monkeypatch.setattr(runner_module, "SNAPSHOT_BUDGET", 0)  # a position after every step
    directory = generate(tmp_path / "w", jobs=120, seed=5)
    whole, whole_sizes, _ = _run(directory)
    assert max(whole_sizes) > 300  # one read of the log makes hundreds of events: the case sliced
    monkeypatch.setattr(tracker_module, "EVENT_SLICE", 40)
    sliced, sizes, _ = _run(directory)
    assert sliced == whole
    # after the first step (wf.plan .. static.end, fewer than STATIC_SLICE), a step holds 40 events and those
    # of the line that reached 40: a job's end (main.end, composite, inv.*, ...), under 20, plus one rc.pfn
    # per file a registration job registered (120 here: one job's own, not the workflow's)
    start = sizes[0]
    for size in sizes[1:]:
        names = [name for name, _ in sliced[start:start + size]]
        start += size
        assert size - names.count("stampede.rc.pfn") < 40 + 20, sizes
    assert len(sizes) > 3 * len(whole_sizes)
    # a checkpoint taken after a sliced step resumes at the line after the last one fed
    before, _, position = _run(directory, stop_after=len(sizes) // 2)
    rest, _, _ = _run(directory, state=position)
    assert before + rest == whole
