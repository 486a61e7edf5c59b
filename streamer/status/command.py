"""What `streamer status` does for each kind of source, once or live (--watch).

- a submit directory (or one of its `*.dagman.out`): the counts are read from
  the dagman.out progress tables exactly as pegasus-status reads them; the
  failures, held jobs and per-job rows come from the workflow monitor run over
  the same files in memory (nothing is written to the submit directory).
- an event file (`.bp` / `.jsonl`): the counts are computed from its events;
  with --watch the file is followed as it grows.
- an AMQP URL: the same from the events arriving on the exchange (or a named
  queue); without --watch the view is printed once the stream has been quiet
  for --idle seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from streamer.config.command import dest_url
from streamer.config.settings import ConfigError
from streamer.core.filters import EventFilter
from streamer.util.urls import EndpointURL, is_amqp, mask
from streamer.events.tally.counts import document
from streamer.status.progress import SubmitDirProgress
from streamer.status.text import DagRow, View, plain_report, tracker_jobs, tracker_rows
from streamer.events.tally.tracker import StatusTracker

log = logging.getLogger("streamer.status")
RESCAN_EVERY = 5
"""Polls between two walks of the submit directory for new sub-workflow dagman.out files."""


def submit_dir_of(path: Path) -> Path | None:
    """The submit directory `path` names (itself, or the directory of a dagman.out), else None."""
    if path.is_dir():
        if (path / "braindump.yml").exists() or (path / "braindump.txt").exists() or any(path.glob("*.dagman.out")):
            return path
        raise ConfigError(f"{path}: not a workflow submit directory (no braindump.yml and no *.dagman.out)")
    if path.name.endswith(".dagman.out"):
        return path.parent
    return None


class StatusSource:
    """A view of workflows that is refreshed from its source; subclasses per kind of source."""

    finished_when_idle = False

    def __init__(self, label: str, events: str | None, long: bool) -> None:
        self.label = label
        self.tracker = StatusTracker()
        self.filter = EventFilter(events) if events and events != "*" else None
        self.long = long
        self.warnings: list[str] = []
        self.error: BaseException | None = None
        self.report: Callable[[str], None] = self._keep_warning
        """Where a source's warnings go: the view's last five by default."""

    def feed(self, events: list[Any]) -> None:
        if self.filter is not None:
            events = [e for e in events if self.filter.match(e.name)]
        self.tracker.feed(events)

    def _keep_warning(self, message: str) -> None:
        self.warnings.append(message)
        del self.warnings[:-5]

    async def refresh(self) -> None:
        """Bring the view up to date (pull sources poll here)."""

    def rows(self) -> list[DagRow]:
        return tracker_rows(self.tracker)

    def document(self) -> dict[str, Any]:
        doc = document(self.tracker.dag_counts())
        doc["workflows"] = self.tracker.workflows_doc()
        return doc

    @property
    def finished(self) -> bool:
        return self.tracker.finished

    def notes(self) -> list[str]:
        """The source's warnings, then why the totals cannot be complete (events are all the view has)."""
        return list(self.warnings) + self.tracker.incomplete()

    def view(self) -> View:
        jobs = tracker_jobs(self.tracker)
        return View(self.label, self.rows(), list(self.tracker.failures), [j for j in jobs if j.state == "Held"],
                    jobs if self.long else [], self.finished, self.tracker.events, self.notes())

    async def pump(self, batches: AsyncIterator[Any], on_batch: Callable[[], None] | None = None) -> None:
        """Feed the tracker from a source's batches (a background task in --watch)."""
        async for batch in batches:
            self.feed(batch.events)
            if on_batch is not None:
                on_batch()


class SubmitDirStatus(StatusSource):
    """Counts from the dagman.out files (as pegasus-status), details from the monitor in memory."""

    def __init__(self, path: Path, *, events: str | None, long: bool, timezone: str | None) -> None:
        super().__init__(str(path), events, long)
        self.progress = SubmitDirProgress(path)
        self.path = path
        self.timezone = timezone
        self.polls = 0

    async def refresh(self) -> None:
        await asyncio.to_thread(self.progress.poll, self.polls % RESCAN_EVERY == 0)
        self.polls += 1

    def monitor(self, follow: bool) -> Any:
        from streamer.monitor.source import WorkflowSource

        scratch = Path(tempfile.mkdtemp(prefix="streamer-status-"))  # DAGMan's times read by the one zone rule
        return WorkflowSource(self.path, follow=follow, timezone=self.timezone, write_jobstate=False,
                              state_path=scratch / "state.json", parser="thread"), scratch

    def rows(self) -> list[DagRow]:
        counts = self.progress.counts()
        by_key = {p.key: p for p in self.progress.dags.values()}
        dirs = [os.path.dirname(f) for f in self.progress.files]
        rows = []
        for key, dag in counts.items():
            progress = by_key.get(key)
            here = os.path.dirname(progress.path) if progress else self.progress.submit_dir
            depth = sum(1 for d in dirs if d != here and here.startswith(d + os.sep))
            rows.append(DagRow(depth, dag.dagname or key, dag))
        return rows

    def document(self) -> dict[str, Any]:
        return document(self.progress.counts())

    def notes(self) -> list[str]:
        return list(self.warnings)  # the counts come from the dagman.out files, complete

    @property
    def finished(self) -> bool:
        return self.progress.finished


class EventFileStatus(StatusSource):
    finished_when_idle = True

    def __init__(self, path: Path, *, events: str | None, long: bool) -> None:
        super().__init__(str(path), events, long)
        self.path = path

    def source(self, follow: bool) -> Any:
        from streamer.sources.eventfile import EventFileSource

        return EventFileSource([self.path], follow=follow, report=self.report)


class AMQPStatus(StatusSource):
    finished_when_idle = True

    def __init__(self, url: EndpointURL, *, events: str | None, long: bool, queue: str | None) -> None:
        super().__init__(url.masked, events, long)
        self.url = url
        self.queue = queue
        self.events = events

    def source(self) -> Any:
        try:
            from streamer.sources.amqp.tail import AMQPSource
        except ImportError as exc:  # pragma: no cover - aio-pika is a dependency
            raise ConfigError(f"AMQP is not available: {exc}") from None
        return AMQPSource(self.url, events=None if self.events in (None, "*") else self.events, queue=self.queue)


def open_status(args: Any) -> StatusSource:
    source = args.source
    if is_amqp(source):
        return AMQPStatus(dest_url(source), events=args.events, long=args.long, queue=args.queue)
    path = Path(source)
    if not path.exists():
        raise ConfigError(f"{source}: no such submit directory or event file (or give an amqp:// URL)")
    directory = submit_dir_of(path)
    if directory is not None:
        return SubmitDirStatus(directory, events=args.events, long=args.long, timezone=args.timezone)
    if not path.is_file():
        raise ConfigError(f"{source}: not a regular file")
    return EventFileStatus(path, events=args.events, long=args.long)


# ---------------------------------------------------------------- once

async def read_once(status: StatusSource, idle: float) -> None:
    """Bring `status` to the end of its source: end of files, or a quiet AMQP stream."""
    if isinstance(status, SubmitDirStatus):
        await status.refresh()
        if status.long:
            monitor, scratch = status.monitor(follow=False)
            try:
                await status.pump(monitor.batches())
            finally:
                await monitor.close()
                _remove(scratch)
        return
    if isinstance(status, EventFileStatus):
        def to_stderr(message: str) -> None:
            sys.stderr.write(f"streamer: {message}\n")

        status.report = to_stderr
        source = status.source(follow=False)
        source.report = status.report
        try:
            await status.pump(source.batches())
        finally:
            await source.close()
        return
    assert isinstance(status, AMQPStatus)
    source = status.source()
    batches = source.batches().__aiter__()
    try:
        first = True
        while True:
            try:
                # the first message may take a while (the publisher may not have started): say so after --idle
                batch = await asyncio.wait_for(asyncio.shield(pending := asyncio.ensure_future(batches.__anext__())),
                                               idle)
            except asyncio.TimeoutError:
                if not first:
                    pending.cancel()
                    break
                sys.stderr.write(f"streamer: waiting for events on {status.label} (nothing arrived in {idle:g} s; "
                                 "the view is printed once the stream has been quiet for --idle seconds; "
                                 "Ctrl-C to stop)\n")
                sys.stderr.flush()
                try:
                    batch = await pending
                except StopAsyncIteration:
                    break
            except StopAsyncIteration:
                break
            first = False
            status.feed(batch.events)
    finally:
        with contextlib.suppress(Exception):
            await batches.aclose()
        await source.close()


def _remove(scratch: Path) -> None:
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------- watch

async def watch(status: StatusSource, *, interval: float, idle: float, show: Callable[[View], None]) -> bool:
    """Refresh and `show` the view every `interval` s until the workflows end (True) or Ctrl-C (False)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    last_event = [loop.time()]

    def touched() -> None:
        last_event[0] = loop.time()

    feeder, closer = _start_feeder(status, touched)
    ended = reported = False
    waiting, started = "", loop.time()
    try:
        while not stop.is_set():
            await status.refresh()
            if isinstance(status, AMQPStatus) and not waiting and loop.time() - started >= idle:
                if not status.tracker.events:  # a quiet exchange: say what the empty view is waiting for
                    waiting = f"waiting for events on {status.label} (none arrived in {idle:g} s)"
                    status.report(waiting)
            if waiting and status.tracker.events and waiting in status.warnings:
                status.warnings.remove(waiting)
            error = feeder.exception() if feeder.done() and not feeder.cancelled() else None
            if error is not None and not reported:
                if not isinstance(status, SubmitDirStatus):
                    raise error  # the events were the view's only source: say why it ended
                reported = True  # the counts still come from the dagman.out files
                status.report(f"details stopped: {mask(str(error) or type(error).__name__)}")
            show(status.view())
            if status.finished and (not status.finished_when_idle or loop.time() - last_event[0] >= idle):
                ended = True
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signum)
        await closer()
    if ended and isinstance(status, SubmitDirStatus):
        await status.refresh()
    return ended


def _start_feeder(status: StatusSource, touched: Callable[[], None]) -> tuple[asyncio.Task, Callable]:
    """The background task feeding the tracker, and how to stop it."""
    scratch: Path | None = None
    if isinstance(status, SubmitDirStatus):
        source, scratch = status.monitor(follow=True)
    elif isinstance(status, EventFileStatus):
        source = status.source(follow=True)
    else:
        assert isinstance(status, AMQPStatus)
        source = status.source()
    task = asyncio.create_task(status.pump(source.batches(), touched))

    async def close() -> None:
        source.stop()
        try:
            await asyncio.wait_for(asyncio.shield(task), 2)
        except BaseException:  # noqa: BLE001 - the view is ending: whatever the feeder had is shown
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await source.close()
        if scratch is not None:
            _remove(scratch)

    return task, close


# ---------------------------------------------------------------- entry point

async def run_status(args: Any) -> int:
    if args.watch and args.json:
        raise ConfigError("--json prints the status once: leave out --watch")
    if args.interval <= 0:
        raise ConfigError("--interval must be positive")
    if not args.verbose:
        logging.getLogger("streamer.monitor").setLevel(logging.ERROR)
    status = open_status(args)
    if not args.watch:
        await read_once(status, args.idle)
        for warning in status.notes():
            sys.stderr.write(f"streamer: {warning}\n")
        if args.json:
            sys.stdout.write(json.dumps(status.document(), indent=2) + "\n")
        else:
            sys.stdout.write(plain_report(status.view(), long=args.long))
        return 0
    from streamer.status.live import make_display

    display = make_display(sys.stdout, long=args.long, interval=args.interval)
    with display:
        await watch(status, interval=args.interval, idle=args.idle, show=display.show)
    display.final(status.view())
    for warning in status.notes():
        sys.stderr.write(f"streamer: {warning}\n")
    return 0
