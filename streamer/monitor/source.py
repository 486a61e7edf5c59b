"""`WorkflowSource`: a Pegasus submit directory as a source of Stampede events.

Replay reads every dagman.out (the root's and, recursively, its
sub-workflows') to the end and stops; follow tails them until DAGMan exits
(or, with `keep_alive`, keeps waiting for a restart). Parsing runs off the
event loop (`runner/`: a worker thread, or a child process for large
workflows), a bounded slice of each file per step, so the loop stays
responsive on large kickstart records.

A batch carries the whole monitor state as its position (file offsets of the
lines consumed, static.bp records sent, engine state, jobstate.log length)
after every step by default (at most once per `snapshot_interval` otherwise,
and whenever the monitor reaches the end of its input). The lengths of
exactly-once endpoints (files) are saved with it, in the same atomic write. `commit()` writes a position atomically to
the state file; a new source finds it there and resumes with no event lost or
repeated after it, cutting jobstate.log back to the committed length.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

from streamer.util import checkpoint
from streamer.monitor.submitdir import workflow_db_url
from streamer.sources.base import Batch, Source, SourceError
from streamer.config.statedir import resume_refusal
from streamer.monitor import zones
from streamer.monitor.parsers import braindump, plaindag
from streamer.monitor.engineopts import DEFAULT, EngineOptions
from streamer.monitor.engine.job import Job
from streamer.monitor.engine.state import WorkflowState
from streamer.monitor.runner import make_runner
from streamer.monitor.runner.core import SNAPSHOT_INTERVAL, MonitorCore, Step
from streamer.monitor.runner.process import ProcessRunner
from streamer.monitor.runner.thread import ThreadRunner
from streamer.util.limits import open_regular
from streamer.util.tail import READ_SIZE

log = logging.getLogger("streamer.monitor")

STATE_FILE = "streamer.state.json"
MAX_BATCH = 5000
"""Events per batch at most: a step can yield 100k static events; endpoints get them in slices."""
POLL_MIN = 0.05
POLL_MAX = 1.0
HEAD = 4096
"""Bytes at the start of the root dagman.out whose digest a state records: DAGMan's first lines (times, its
Condor id) tell one run from another run at the same path."""


class WorkflowSource(Source):
    """Events of a workflow run (and its sub-workflows) from its submit directory."""

    workflows = 1

    read_size = READ_SIZE
    """Bytes read per dagman.out per step: bounds the work (and batch) of one step."""
    poll_max = POLL_MAX
    """Longest wait between two looks at idle logs (following)."""
    wait_at_eof = False
    """Following: after a step that reached the end of every log, wait (`idle`) before the next step."""

    def __init__(self, path: str | Path, *, follow: bool = False, recursive: bool = True,
                 timezone: str | None = None, keep_alive: bool = False, write_jobstate: bool = True,
                 state_path: Path | None = None, parser: str = "auto",
                 snapshot_interval: float = SNAPSHOT_INTERVAL, engine: EngineOptions = DEFAULT,
                 resume: bool = True, destinations: list[str] | None = None) -> None:
        self.follow = follow
        self.engine = engine
        self.keep_alive = keep_alive
        self.recursive = recursive
        self.write_jobstate = write_jobstate
        self.dagman_out, self.submit_dir = _locate(Path(path))
        self.zone = zones.for_workflow(self.submit_dir, timezone)
        """The zone DAGMan's times are read in (`zones.for_workflow`: the same rule for every command)."""
        self.timezone = self.zone.name
        params, self.plain = plaindag.load_params(self.submit_dir, self.dagman_out)
        if self.plain:  # DAGMan may write a jobstate.log of its own there (JOBSTATE_LOG): leave it alone
            self.write_jobstate = False
        self.root_xwf_id: str | None = params.get("wf_uuid")
        self.dag_file: str | None = params.get("dag")
        self.state_path = Path(state_path) if state_path else Path(self.submit_dir) / STATE_FILE
        self.parser = parser
        self.snapshot_interval = snapshot_interval
        self._stopped = False
        self._detached = False
        self.runner: ThreadRunner | ProcessRunner | None = None
        self.resumed = False
        self._loaded: dict[str, Any] | None | bool = False  # False: not read yet
        self._marks: dict[str, Any] = {}
        self._head: dict[str, Any] | None = None  # the root dagman.out's identity, once HEAD bytes long
        self.resume = resume
        """False: start from the beginning whatever state an earlier run left (`streamer replay` without --resume)."""
        self.destinations = destinations
        """The endpoints this run delivers to (masked URLs and filters): a state saved for another set is not
        resumed from, since those endpoints never got the events before it. None: not checked."""
        self.notes: list[str] = []
        """What the user must be told about the state: resuming from where, or why not."""

    # ------------------------------------------------------------ identity
    def default_db_url(self) -> str:
        """monitord's default Stampede DB: `sqlite:///<submit dir>/<dag basename>.stampede.db`."""
        return workflow_db_url(os.path.abspath(self.submit_dir), self.dagman_out, self.dag_file)

    # ------------------------------------------------------------ state
    def _load_state(self) -> dict[str, Any] | None:
        """The state to resume from (None: start afresh); its endpoint marks go to `self._marks`."""
        if self._loaded is not False:
            return self._loaded  # type: ignore[return-value]
        self._loaded = data = self._read_state()
        if data is not None:
            marks = data.pop("endpoints", None)
            bound = data.pop("destinations", None)
            self._marks = marks if isinstance(marks, dict) else {}
            resume, note = resume_refusal(self.state_path, bound, resume=self.resume, destinations=self.destinations,
                                          started=not data.get("initial"))
            other = _other_run(data.pop("origin", None), self.dagman_out) if resume else None
            if other:
                resume, note = False, (f"{self.state_path}: saved for another run of {self.dagman_out} ({other}); "
                                       "starting from the beginning")
            if note:
                self.notes.append(note)
            if not resume:
                self._loaded = None
                self._marks = {}
            elif data.get("initial"):  # a crash before the first checkpoint: from the start, files cut back
                self._loaded = None
            else:
                self.notes.append(f"resuming {self.dagman_out} from line {_line_of(data, self.dagman_out)} "
                                  f"(state {self.state_path})")
        return self._loaded

    def _read_state(self) -> dict[str, Any] | None:
        try:
            data = checkpoint.read(self.state_path, what="state (version 1)", refuse=checkpoint.writes_files(
                self.destinations), accept=_resumable)
        except checkpoint.CheckpointError as exc:
            raise SourceError(str(exc)) from None
        if data is not None and data.get("complete") and not self.follow:
            return None  # a finished replay replays from the start, as monitord -r does
        return data

    def resume_for(self, destinations: list[str] | None) -> bool:
        """Decide, for this endpoint set (masked URLs and filters; None: not checked), whether to resume: True
        when a state file is resumed from (so a replay must not start its outputs afresh); `notes` say why
        (blocking: it reads the state)."""
        self.destinations = destinations
        return self._load_state() is not None

    def history(self) -> Iterator[list[Any]]:
        """Resuming: the events of the workflow before the resumed position, read again and written nowhere
        (blocking: run it in a thread). The progress line and the end summary describe the whole workflow
        with them, not only this process's share of it."""
        state = self._load_state()
        if state is None:
            return
        limits = {str(item["dagman_out"]): int(item.get("offset") or 0) for item in state.get("workflows", ())
                  if isinstance(item, dict) and item.get("dagman_out")}
        core = MonitorCore(self.dagman_out, recursive=self.recursive, tz=self.timezone, write_jobstate=False,
                           state=None, read_size=self.read_size, snapshot_interval=float("inf"), engine=self.engine)
        core.tracker.limits, core.tracker.quiet = limits, True
        try:
            reached = -1
            while True:
                step = core.step(False)
                if step.events:
                    yield step.events
                now = sum(entry.offset for entry in core.tracker.tracked)
                if step.at_eof or (not step.events and now == reached):
                    return
                reached = now
        finally:
            core.close()

    def endpoint_marks(self) -> dict[str, Any]:
        self._load_state()
        return dict(self._marks)

    async def commit_start(self, endpoints: dict[str, Any]) -> None:
        if endpoints and await asyncio.to_thread(self._load_state) is None:
            await asyncio.to_thread(self._save, {"version": 1, "initial": True}, endpoints)

    def _runner(self) -> ThreadRunner | ProcessRunner:
        state = self._load_state()
        self.resumed = state is not None
        return make_runner(self.parser, dagman_out=self.dagman_out, recursive=self.recursive, tz=self.timezone,
                           write_jobstate=self.write_jobstate, state=state, read_size=self.read_size,
                           snapshot_interval=self.snapshot_interval, engine=self.engine)

    async def commit(self, position: Any, endpoints: dict[str, Any] | None = None) -> None:
        await asyncio.to_thread(self._save, position, endpoints)

    def _save(self, position: dict[str, Any], endpoints: dict[str, Any] | None = None) -> None:
        if self.write_jobstate:  # the jobstate.log lengths the state records must survive a power cut too
            for item in position.get("workflows", ()):
                _fsync(Path(item.get("jobstate") or Path(item["dagman_out"]).parent / "jobstate.log"))
        if endpoints:  # the file endpoints' lengths, in the same atomic write as the monitor state
            position = {**position, "endpoints": endpoints}
        if self.destinations is not None:
            position = {**position, "destinations": self.destinations}
        head = self._head if self._head is not None else _head_of(self.dagman_out)
        if head is not None:
            position = {**position, "origin": head}
            if head["length"] >= HEAD:
                self._head = head
        checkpoint.write(self.state_path, position)

    # ------------------------------------------------------------ batches
    async def batches(self) -> AsyncIterator[Batch]:
        self.runner = await asyncio.to_thread(self._runner)
        log.debug("%s: parsing in a %s", self.dagman_out, self.runner.kind)
        await self.runner.open()
        final = not self.follow
        delay = POLL_MIN
        unsaved = False  # a batch went out without a position: the next snapshot must follow it
        ahead: asyncio.Task[Step] | None = None  # the next step, parsing while this one is delivered
        try:
            while True:
                if ahead is not None:
                    step, ahead = await ahead, None
                elif self._stopped:
                    break
                else:
                    step = await self.runner.step(final)
                if step.events or step.warnings or step.dropped:
                    # caught up with a live log: wait for it to grow (serve is woken by inotify) rather than
                    # step again at once
                    caught_up = self.follow and self.wait_at_eof and step.at_eof and step.position is not None
                    if not self._stopped and not caught_up:
                        ahead = asyncio.create_task(self.runner.step(final))
                    delay = POLL_MIN
                    unsaved = step.position is None
                    for part in _slices(_batch(step)):
                        yield part
                    if not caught_up:
                        continue
                if unsaved and step.position is not None:  # nothing new, but the state after the last batch
                    unsaved = False
                    yield _batch(step)
                if not self.follow:
                    if step.at_eof:
                        break
                    continue
                if step.finished and not self.keep_alive:
                    break
                await self.idle(delay)
                delay = min(delay * 2, self.poll_max)
        finally:
            if ahead is not None:  # the consumer stopped early: let the step in flight end cleanly
                await asyncio.gather(ahead, return_exceptions=True)
        if self._detached:  # let go without finishing: the state stays resumable (`streamer serve`)
            return
        for part in _slices(_batch(await self.runner.finish())):
            yield part

    async def idle(self, delay: float) -> None:
        """Wait before looking at idle logs again (`streamer serve` wakes it on inotify instead)."""
        await asyncio.sleep(delay)

    def stop(self) -> None:
        self._stopped = True

    def detach(self) -> None:
        """Stop after the step in flight without finishing (no MONITORD_FINISHED, state not complete):
        a later source on the same directory resumes as after a crash, with nothing lost or repeated."""
        self._detached = True
        self._stopped = True

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.close()


def _line_of(state: dict[str, Any], dagman_out: str) -> int:
    """The line of `dagman_out` a saved state goes on after (0 when it does not say)."""
    for item in state.get("workflows", ()):
        if isinstance(item, dict) and item.get("dagman_out") == dagman_out and isinstance(item.get("engine"), dict):
            line = item["engine"].get("line_no")
            return line if isinstance(line, int) else 0
    return 0


def _resumable(data: dict[str, Any]) -> bool:
    """A monitor state this streamer resumes from: version 1, and every workflow's engine state one it reads
    (else the one policy for a damaged state applies, rather than an error once the engines start)."""
    if data.get("version") != 1:
        return False
    try:
        for item in data.get("workflows", ()):
            if item.get("engine") is not None:
                state = WorkflowState.from_dict(item["engine"])
                for job in state.jobs.values():
                    Job.from_state(job, "monitor state")
    except (ValueError, TypeError, KeyError, AttributeError):  # StateError is a ValueError
        return False
    return True


def _head_of(dagman_out: str, length: int = HEAD) -> dict[str, Any] | None:
    """{"length": n, "sha256": digest of the first n <= `length` bytes} of the file, None when it is not there."""
    import hashlib

    try:
        with open_regular(dagman_out) as handle:  # a FIFO would block the open for ever
            head = handle.read(length)
    except OSError:
        return None
    return {"length": len(head), "sha256": hashlib.sha256(head).hexdigest()}


def _other_run(origin: Any, dagman_out: str) -> str | None:
    """Why a state whose root dagman.out began as `origin` is not of this file's run; None when it is (or when
    a state of an older streamer does not say)."""
    if not isinstance(origin, dict) or not isinstance(origin.get("length"), int):
        return None
    now = _head_of(dagman_out, origin["length"])
    if now is None:
        return "the dagman.out it read is gone"
    if now["length"] < origin["length"]:
        return "the dagman.out is shorter than what was read of it: replaced or truncated"
    return None if now == origin else "the dagman.out begins with other lines: replaced by a new run"


def _fsync(path: Path) -> None:
    """fsync a file by name (done here, in the commit thread, rather than in the parsing step)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _batch(step: Step) -> Batch:
    return Batch(step.events, step.position, done=step.done, total=step.total, warnings=step.warnings,
                 dropped=step.dropped)


def _slices(batch: Batch) -> list[Batch]:
    """Split a large batch; only the last slice carries the position (the state after all of them)."""
    if len(batch.events) <= MAX_BATCH:
        return [batch]
    events = batch.events
    parts = [Batch(events[i:i + MAX_BATCH], None, done=batch.done, total=batch.total)
             for i in range(0, len(events) - MAX_BATCH, MAX_BATCH)]
    rest = len(parts) * MAX_BATCH
    parts.append(Batch(events[rest:], batch.position, done=batch.done, total=batch.total,
                       warnings=batch.warnings, dropped=batch.dropped))
    return parts


def _locate(path: Path) -> tuple[str, str]:
    """(dagman.out, submit dir) from a submit directory or a dagman.out path."""
    if path.is_dir():
        directory = path.resolve()
        why = "no braindump"
        try:
            dag = braindump.load(directory).get("dag")
        except braindump.BraindumpError as exc:
            dag, why = None, str(exc)
        if dag:
            return str(directory / f"{dag}.dagman.out"), str(directory)
        found = sorted(glob.glob(str(directory / "*.dagman.out")))
        if not found:
            raise FileNotFoundError(f"{path}: no *.dagman.out, and {why}" if why != "no braindump" else
                                    f"{path}: no braindump and no *.dagman.out")
        return found[0], str(directory)
    path = path.resolve()
    return str(path), str(path.parent)
