"""`run/workflow.py`, the one way to run a workflow: resume decided once, outputs afresh for a replay that does not
resume, monitord's markers where the run writes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from streamer.config.settings import EndpointSpec
from streamer.monitor.source import WorkflowSource
from streamer.run.pipeline import RunOptions
from streamer.run.workflow import WorkflowRun
from streamer.synth import generate
from streamer.util.urls import EndpointURL

QUIET = RunOptions(progress=False, signals=False)


def test_markers_only_where_the_run_writes_and_done_only_when_it_ended(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=2, seed=0)
    started, done = run_dir / "monitord.started", run_dir / "monitord.done"
    out = [EndpointSpec(url=EndpointURL.parse(f"file://{tmp_path / 'events.jsonl'}"))]
    elsewhere = WorkflowRun(WorkflowSource(run_dir), replay=True, here=False)
    assert asyncio.run(elsewhere.run(out, QUIET)).exit_code == 0
    assert not started.exists() and not done.exists()
    cut_short = WorkflowRun(WorkflowSource(run_dir), replay=True)  # monitord: DAGMan vanished, or a signal
    assert asyncio.run(cut_short.run(out, QUIET, ended=lambda: False)).exit_code == 0
    assert started.read_text().startswith("pid ") and not done.exists()
    whole = WorkflowRun(WorkflowSource(run_dir), replay=True)
    assert asyncio.run(whole.run(out, QUIET)).exit_code == 0
    assert done.exists()


def test_a_replay_starts_its_outputs_afresh_unless_it_resumes(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=4, seed=0)
    out = tmp_path / "events.jsonl"
    specs = [EndpointSpec(url=EndpointURL.parse(f"file://{out}"))]
    first = WorkflowRun(WorkflowSource(run_dir), replay=True)
    assert asyncio.run(first.decide(None)) is False
    assert asyncio.run(first.run(specs, QUIET)).exit_code == 0
    lines = out.read_text()
    again = WorkflowRun(WorkflowSource(run_dir), replay=True)  # a finished replay replays from the start
    assert asyncio.run(again.decide(None)) is False
    asyncio.run(again.run(specs, QUIET))
    assert out.read_text() == lines  # afresh: not appended
    source = WorkflowSource(run_dir, follow=False)
    (run_dir / "streamer.state.json").unlink()
    source.read_size = 2048
    interrupted = WorkflowRun(source, replay=True)
    options = RunOptions(progress=False, signals=False,
                         watch=lambda batch: source.detach() if batch.position is not None else None)
    asyncio.run(interrupted.run(specs, options))
    part = out.read_text()
    assert 0 < len(part) < len(lines)
    resumed = WorkflowRun(WorkflowSource(run_dir), replay=True)
    assert asyncio.run(resumed.decide(None)) is True
    assert asyncio.run(resumed.run(specs, QUIET)).exit_code == 0
    assert out.read_text() == lines  # what the interrupted run delivered kept, the rest after it
