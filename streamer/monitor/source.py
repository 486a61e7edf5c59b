"""`WorkflowSource`: a Pegasus submit directory as a source of Stampede events.

Replay reads every dagman.out (the root's and, recursively, its
sub-workflows') to the end and stops; follow tails them until DAGMan exits
(or, with `keep_alive`, keeps waiting for a restart). Parsing runs in a
worker thread (`asyncio.to_thread`), a bounded slice of each file per step,
so the event loop stays responsive on large kickstart records.

Each batch carries the whole monitor state as its position (file offsets of
the lines consumed + engine state + jobstate.log length). `commit()` writes it
atomically to the state file; a new source finds it there and resumes with no
event lost or repeated, cutting jobstate.log back to the committed length.
"""

from __future__ import annotations

import asyncio
import glob
import json
import logging
import os
from pathlib import Path
from typing import Any, AsyncIterator

import orjson

from ..atomic import write_atomically
from ..sources.base import Batch, Source
from . import braindump
from .tracker import READ_SIZE, Tracker

log = logging.getLogger("streamer.monitor")

STATE_FILE = "streamer.state.json"
MAX_BATCH = 5000
"""Events per batch at most: a step can yield 100k static events; endpoints get them in slices."""
POLL_MIN = 0.05
POLL_MAX = 1.0


class WorkflowSource(Source):
    """Events of a workflow run (and its sub-workflows) from its submit directory."""

    read_size = READ_SIZE
    """Bytes read per dagman.out per step: bounds the work (and batch) of one step."""

    def __init__(self, path: str | Path, *, follow: bool = False, recursive: bool = True,
                 timezone: str | None = None, keep_alive: bool = False, write_jobstate: bool = True,
                 state_path: Path | None = None) -> None:
        self.follow = follow
        self.keep_alive = keep_alive
        self.recursive = recursive
        self.timezone = timezone
        self.write_jobstate = write_jobstate
        self.dagman_out, self.submit_dir = _locate(Path(path))
        params = braindump.load(self.submit_dir)
        self.root_xwf_id: str | None = params.get("wf_uuid")
        self.dag_file: str | None = params.get("dag")
        self.state_path = Path(state_path) if state_path else Path(self.submit_dir) / STATE_FILE
        self._stopped = False
        self.tracker: Tracker | None = None
        self.resumed = False

    # ------------------------------------------------------------ identity
    def default_db_url(self) -> str:
        """monitord's default Stampede DB: `sqlite:///<submit dir>/<dag basename>.stampede.db`."""
        dag = self.dag_file or os.path.basename(self.dagman_out).split(".dagman.out")[0]
        base = os.path.splitext(os.path.basename(dag))[0]
        return f"sqlite:///{os.path.join(os.path.abspath(self.submit_dir), base)}.stampede.db"

    # ------------------------------------------------------------ state
    def _load_state(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable state (%s); starting over", self.state_path, exc)
            return None
        if not isinstance(data, dict) or data.get("version") != 1:
            log.warning("%s: unknown state format; starting over", self.state_path)
            return None
        if data.get("complete") and not self.follow:
            return None  # a finished replay replays from the start, as monitord -r does
        return data

    def _open(self) -> Tracker:
        state = self._load_state()
        self.resumed = state is not None
        return Tracker(self.dagman_out, recursive=self.recursive, tz=self.timezone,
                       write_jobstate=self.write_jobstate, state=state)

    def _position(self, complete: bool = False) -> dict[str, Any]:
        assert self.tracker is not None
        state = self.tracker.to_state()
        state["complete"] = complete
        return orjson.loads(orjson.dumps(state))  # a snapshot: the engine keeps changing

    async def commit(self, position: Any) -> None:
        await asyncio.to_thread(self._save, position)

    def _save(self, position: dict[str, Any]) -> None:
        write_atomically(self.state_path, orjson.dumps(position))

    # ------------------------------------------------------------ batches
    def _batch(self, events: list, complete: bool = False) -> Batch:
        assert self.tracker is not None
        done, total = self.tracker.progress()
        warnings, self.tracker.warnings = self.tracker.warnings, []
        return Batch(events, self._position(complete), done=done, total=total, warnings=warnings)

    def _step(self, final: bool) -> tuple[list, bool, bool]:
        assert self.tracker is not None
        events = self.tracker.step(final=final, max_bytes=self.read_size)
        return events, self.tracker.all_at_eof(), self.tracker.dagman_finished()

    def _make_batch(self, final: bool) -> tuple[Batch, bool, bool]:
        events, at_eof, finished = self._step(final)
        return self._batch(events), at_eof, finished

    def _finish(self) -> Batch:
        assert self.tracker is not None
        events = self.tracker.finish(0)
        return self._batch(events, complete=True)

    async def batches(self) -> AsyncIterator[Batch]:
        self.tracker = await asyncio.to_thread(self._open)
        delay = POLL_MIN
        while not self._stopped:
            batch, at_eof, finished = await asyncio.to_thread(self._make_batch, not self.follow)
            if batch.events or batch.warnings:
                delay = POLL_MIN
                for part in _slices(batch):
                    yield part
                continue
            if not self.follow:
                if at_eof:
                    break
                continue
            if finished and not self.keep_alive:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX)
        for part in _slices(await asyncio.to_thread(self._finish)):
            yield part

    def stop(self) -> None:
        self._stopped = True

    async def close(self) -> None:
        if self.tracker is not None:
            await asyncio.to_thread(self.tracker.close)


def _slices(batch: Batch) -> list[Batch]:
    """Split a large batch; only the last slice carries the position (the state after all of them)."""
    if len(batch.events) <= MAX_BATCH:
        return [batch]
    events = batch.events
    parts = [Batch(events[i:i + MAX_BATCH], None, done=batch.done, total=batch.total)
             for i in range(0, len(events) - MAX_BATCH, MAX_BATCH)]
    rest = len(parts) * MAX_BATCH
    parts.append(Batch(events[rest:], batch.position, done=batch.done, total=batch.total,
                       warnings=batch.warnings))
    return parts


def _locate(path: Path) -> tuple[str, str]:
    """(dagman.out, submit dir) from a submit directory or a dagman.out path."""
    if path.is_dir():
        directory = path.resolve()
        try:
            dag = braindump.load(directory).get("dag")
        except braindump.BraindumpError:
            dag = None
        if dag:
            return str(directory / f"{dag}.dagman.out"), str(directory)
        found = sorted(glob.glob(str(directory / "*.dagman.out")))
        if not found:
            raise FileNotFoundError(f"{path}: no braindump and no *.dagman.out")
        return found[0], str(directory)
    path = path.resolve()
    return str(path), str(path.parent)
