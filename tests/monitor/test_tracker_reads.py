"""The tracker's reads are sized by what the file holds, never by the step's limit (issue 28 item 2)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from streamer.monitor import tracker as tracker_module
from streamer.monitor.runner import MonitorCore
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


def _all_events(directory: Path, read_size: int) -> tuple[list[Any], list[int]]:
    core = MonitorCore(str(next(directory.glob("*.dag.dagman.out"))), recursive=True, tz="UTC",
                       write_jobstate=False, state=None, read_size=read_size)
    events: list[Any] = []
    sizes = []
    while True:
        step = core.step_raw(True)
        events.extend((name, fields) for name, fields, _, _ in step.events)
        sizes.append(len(step.events))
        if step.at_eof and step.finished:
            break
    events.extend((name, fields) for name, fields, _, _ in core.finish_raw().events)
    core.close()
    return events, sizes


def test_a_step_stops_after_the_line_that_brings_its_events_to_the_slice(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One read of the log can end thousands of jobs (registration jobs emit an rc.pfn per file): a step's
    events are bounded by the slice (plus one line's), not by what a read holds; the events are the same."""
    directory = generate(tmp_path / "w", jobs=60, seed=8)
    whole, _ = _all_events(directory, 1 << 24)
    monkeypatch.setattr(tracker_module, "EVENT_SLICE", 40)
    monkeypatch.setattr(tracker_module, "STATIC_SLICE", 40)
    sliced, sizes = _all_events(directory, 1 << 24)
    assert sliced == whole
    assert max(sizes) <= 40 + 30, sizes
    assert len(sizes) > len(whole) // 70
