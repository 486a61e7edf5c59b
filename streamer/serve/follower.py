"""One served workflow: a `WorkflowSource` woken by inotify, and its pipeline run until DAGMan exits."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from streamer.monitor import markers
from streamer.monitor.source import WorkflowSource
from streamer.run.pipeline import run_pipeline
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


async def follow(wf: Followed, config: ServeConfig, shared: list[Any], on_start: Any, on_end: Any,
                 exporter: Any = None) -> bool:
    """Follow `wf` until DAGMan exits (True) or it is detached (False); retry after endpoint failures."""
    found = wf.found
    delay = 1.0
    while not wf.leaving:
        source = ServeSource(found.submit_dir, follow=True, recursive=config.recursive, timezone=config.timezone,
                             write_jobstate=config.jobstate, parser=config.parser, wakeable=wf.wakeable)
        wf.source = source
        await asyncio.to_thread(source.will_resume)  # reads the state: resuming from where, or why not
        for note in source.notes:
            log.info("%s: %s", found.submit_dir, note)
        specs = config.workflow_specs(found.submit_dir, found.dag, found.wf_uuid, source.default_db_url())
        started = time.time()
        if not source.plain:
            await asyncio.to_thread(markers.write_started, Path(found.submit_dir), started)
        on_start(found.submit_dir, source)
        try:
            result = await run_pipeline(source, specs, on_error=config.on_error, defaults={"replay": False},
                                        progress=False, extra=[s.proxy() for s in shared], signals=False,
                                        exporter=exporter)
            code = result.exit_code
        except Exception as exc:  # a bad URL in a template, an endpoint that cannot be created, ...
            log.error("%s: %s", found.submit_dir, exc)
            code = 1
        if wf.leaving:
            on_end(found.submit_dir, "detached")
            return False
        if code == 0:
            if not source.plain:
                await asyncio.to_thread(markers.write_done, Path(found.submit_dir), started, time.time())
            on_end(found.submit_dir, "finished")
            log.info("finished following %s: DAGMan exited, %d events this run", found.submit_dir, source.events_in)
            return True
        on_end(found.submit_dir, "failed")
        log.error("%s: pipeline failed; resuming from its checkpoint in %.0f s", found.submit_dir, delay)
        try:
            await asyncio.wait_for(wf.stopped.wait(), delay)
        except TimeoutError:
            pass
        delay = min(delay * 2, RETRY_MAX)
    return False
