"""`Run(source, endpoints, RunOptions)`: what the run gives its source and reads of it, typed (no probing)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator

from streamer.config.settings import EndpointSpec
from streamer.core.bus import Bus
from streamer.monitor.source import WorkflowSource
from streamer.run.pipeline import Run, RunOptions
from streamer.run.runmetrics import RunMetrics
from streamer.run.wiring import build_endpoints
from streamer.sources.base import Batch, Source
from streamer.synth import generate
from streamer.util.urls import EndpointURL


class Asking(Source):
    """A source that asks its downstream whether events are held back, after each batch."""

    def __init__(self) -> None:
        self.answers: list[bool] = []

    async def batches(self) -> AsyncIterator[Batch]:
        yield Batch(events=[], position=None)
        self.answers.append(self.held_downstream())


def test_the_run_gives_the_source_its_bus_as_downstream(tmp_path: Path) -> None:
    source = Asking()
    assert source.downstream is None and source.held_downstream() is False
    endpoints = build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{tmp_path / 'a.jsonl'}"))])
    result = asyncio.run(Run(source, endpoints, RunOptions(progress=False, signals=False)).run())
    assert result.exit_code == 0
    assert isinstance(source.downstream, Bus) and source.answers == [False]


def test_workflows_active_is_what_the_source_declares(tmp_path: Path) -> None:
    """A workflow's source counts one workflow while it runs, any other none (the run used to guess it from
    `hasattr(source, "submit_dir")`)."""
    run_dir = generate(tmp_path / "wf", jobs=2, seed=0)

    async def active(source: Source) -> int:
        bus: Any = Bus([], on_error="stop", commit=source.commit)
        counted = await RunMetrics.start(bus, source, address="127.0.0.1:0", shared=None)
        try:
            assert counted.own is not None
            return counted.own.workflows()
        finally:
            await counted.close()

    assert asyncio.run(active(WorkflowSource(run_dir))) == 1
    assert asyncio.run(active(Asking())) == 0
