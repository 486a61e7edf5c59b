"""One served workflow: a `WorkflowSource` woken by inotify, and its pipeline run until DAGMan exits."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from streamer.core.retry import Backoff
from streamer.monitor.source import WorkflowSource
from streamer.run.metrics import Metrics
from streamer.run.pipeline import RunOptions
from streamer.run.workflow import WorkflowRun
from streamer.serve.shared import SharedEndpoint
from streamer.sources.base import Batch
from streamer.serve.config import ServeConfig
from streamer.serve.discovery import Found

log = logging.getLogger("streamer.serve")

IDLE_MAX = 5.0
"""Seconds between looks at a workflow's logs when inotify wakes it on every write (a safety net)."""
RETRY_MAX = 60.0
"""Longest wait before a workflow whose pipeline failed (an endpoint down for good) is tried again."""


class ServeSource(WorkflowSource):
    """A followed workflow that sleeps until its dagman.out is written.

    `wakeable` (its directory is watched with inotify): up to `IDLE_MAX` seconds between looks, a
    safety net only; else the monitor's own polling (up to 1 s)."""

    wait_at_eof = True

    def __init__(self, path: str, *, wakeable: bool = False, **options: Any) -> None:
        super().__init__(path, **options)
        self.wake = asyncio.Event()
        self.wakeable = wakeable
        self.events_in = 0

    async def idle(self, delay: float) -> None:
        if not self.wake.is_set():
            try:
                await asyncio.wait_for(self.wake.wait(), IDLE_MAX if self.wakeable else delay)
            except TimeoutError:
                pass
        self.wake.clear()

    async def batches(self) -> AsyncIterator[Batch]:
        async for batch in super().batches():
            self.events_in += len(batch.events)
            yield batch


@dataclass
class Followed:
    """A workflow being followed: its task and the source of its current run."""

    found: Found
    wakeable: bool = False
    """Its directory is under a root watched with inotify (writes wake it)."""
    task: asyncio.Task[None] | None = None
    source: ServeSource | None = None
    leaving: bool = False
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    def detach(self) -> None:
        """Let go now (stop, restart, SIGHUP): the checkpoint stays resumable."""
        self.leaving = True
        self.stopped.set()
        if self.source is not None:
            self.source.detach()
            self.source.wake.set()


async def follow(wf: Followed, config: ServeConfig, shared: list[SharedEndpoint],
                 on_start: Callable[[str, ServeSource], None], on_end: Callable[[str, str], None],
                 exporter: Metrics | None = None) -> bool:
    """Follow `wf` until DAGMan exits (True) or it is detached (False); retry after endpoint failures."""
    found = wf.found
    waits = Backoff(first=1.0, cap=RETRY_MAX).waits(stop=wf.stopped)
    while not wf.leaving:
        source = ServeSource(found.submit_dir, follow=True, recursive=config.recursive, timezone=config.timezone,
                             write_jobstate=config.jobstate, parser=config.parser, wakeable=wf.wakeable)
        wf.source = source
        workflow = WorkflowRun(source, replay=False)
        await workflow.decide(None)  # reads the state: resuming from where, or why not
        for note in source.notes:
            log.info("%s: %s", found.submit_dir, note)
        specs = config.workflow_specs(found.submit_dir, found.dag, found.wf_uuid, source.default_db_url())
        on_start(found.submit_dir, source)
        try:
            options = RunOptions(on_error=config.on_error, progress=False, signals=False, exporter=exporter)
            result = await workflow.run(specs, options, extra=[s.proxy() for s in shared],
                                        ended=lambda: not wf.leaving)
            code = result.exit_code
        except Exception as exc:  # a bad URL in a template, an endpoint that cannot be created, ...
            log.error("%s: %s", found.submit_dir, exc)
            code = 1
        if wf.leaving:
            on_end(found.submit_dir, "detached")
            return False
        if code == 0:
            on_end(found.submit_dir, "finished")
            log.info("finished following %s: DAGMan exited, %d events this run", found.submit_dir, source.events_in)
            return True
        on_end(found.submit_dir, "failed")
        await waits.wait(log.error, "%s: pipeline failed; resuming from its checkpoint in %.0f s", found.submit_dir)
    return False
