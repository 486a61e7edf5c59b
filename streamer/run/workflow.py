"""Running one workflow, the one way every command does it: `streamer replay|follow` (a submit dir, a dagman.out
or a plain DAG's jobstate.log), `streamer load` of a jobstate.log, each workflow `streamer serve` follows and
`streamer monitord`.

A `WorkflowRun` first decides whether its source resumes (`decide`: the state it saved, bound to the endpoints it
was delivered to; the source's `notes` say why or why not), then runs it (`run`): a replay that does not resume
starts its outputs afresh (`replay=True` for every endpoint), and a Pegasus workflow's submit dir gets
monitord's markers when the run writes there — `monitord.started` before it, `monitord.done` once the run ended
well (exit 0, no signal, and whatever else the caller's `ended` says)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

from streamer.config.settings import EndpointSpec
from streamer.monitor import markers
from streamer.monitor.plain.jobstate import JobstateSource
from streamer.monitor.source import WorkflowSource
from streamer.run.pipeline import Run, RunOptions, RunResult
from streamer.run.wiring import Routed, build_endpoints

Workflow = WorkflowSource | JobstateSource
"""A workflow's source: its submit dir's logs, or a plain DAG's jobstate.log."""


class WorkflowRun:
    """One run of `source`.

    `replay`: the run starts its outputs afresh unless it resumes (`streamer replay` without `--append`,
    `monitord -r`); `here`: the run writes in the workflow's submit dir (its default database or jobstate.log),
    so monitord's markers go there too."""

    def __init__(self, source: Workflow, *, replay: bool, here: bool = True) -> None:
        self.source = source
        self.replay = replay
        self.here = here
        self.resuming = False

    async def decide(self, destinations: list[str] | None) -> bool:
        """Whether the run resumes from the source's saved state, for these endpoints (`statedir.destinations_of`;
        None: not checked); the source's `notes` say what was decided."""
        self.resuming = await asyncio.to_thread(self.source.resume_for, destinations)
        return self.resuming

    @property
    def markers(self) -> bool:
        """monitord.started/done are written (Pegasus's tools read them; a plain DAG's directory is left as DAGMan
        made it)."""
        return self.here and not self.source.plain

    async def run(self, specs: list[EndpointSpec], options: RunOptions, *, extra: list[Routed] | None = None,
                  ended: Callable[[], bool] = lambda: True) -> RunResult:
        """The run into the endpoints of `specs` (and `extra`, built by the caller); `ended()`: the workflow's run
        ended as it should (monitord: DAGMan did not vanish, no signal cut it short), asked before monitord.done
        is written."""
        started = time.time()
        directory = Path(self.source.submit_dir)
        if self.markers:
            await asyncio.to_thread(markers.write_started, directory, started)
        endpoints = build_endpoints(specs, {"replay": self.replay and not self.resuming}) + (extra or [])
        result = await Run(self.source, endpoints, options).run()
        if self.markers and result.exit_code == 0 and result.interrupted is None and ended():
            await asyncio.to_thread(markers.write_done, directory, started, time.time())
        return result
