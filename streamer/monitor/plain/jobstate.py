"""`JobstateSource`: DAGMan's jobstate.log as a source (replay, or follow like `tail -F`).

Lines are read by `FileFollower` (partial last line held, truncation,
rotation, late creation) and converted by `dagmanlog.DagmanJobstate`. Each
batch carries the file position *and* the converter's state after it; once
every endpoint acknowledged a batch, `commit` writes both atomically to the
state file, so a restart after `kill -9` resumes exactly there: no event lost,
none repeated. A replay whose state says it reached the end starts over (like
`monitord -r`); a follow resumes. As for a submit dir (`monitor/source.py`), the
state is tied to the endpoints it was delivered to (`destinations`), a replay
resumes only when asked (`resume`), and `notes` say what was decided.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from streamer.util import checkpoint
from streamer.monitor.submitdir import sqlite_url
from streamer.config.statedir import resume_refusal
from streamer.sources.base import Batch, Source, SourceError
from streamer.monitor.plain.dagmanlog import (DagmanJobstate, DagmanLogError, RepeatedLine, converter_for,
                                              default_db_path)
from streamer.sources.follow import FileFollower, FilePosition

log = logging.getLogger("streamer.jobstate")

STATE_VERSION = 1
STATE_KIND = "dagman-jobstate"
REPEATS_SHOWN = 10
"""Repeated lines named one by one at most; the others are counted (said at the end)."""


def default_state_path(path: Path) -> Path:
    """`streamer replay|follow` keep a jobstate.log's state next to it: `<name>.streamer.json`."""
    return path.with_name(path.name + ".streamer.json")


class JobstateSource(Source):
    """Events of one DAGMan jobstate.log."""

    workflows = 1
    plain = True
    """DAGMan's own log: its directory is left as DAGMan made it (no monitord markers)."""

    def __init__(self, path: str | Path, *, follow: bool = False, state_path: str | Path | None = None,
                 strict: bool = False, poll_interval: float = 0.2, until_finished: bool = False,
                 report: Callable[[str], None] | None = None, resume: bool = True,
                 destinations: list[str] | None = None) -> None:
        self.path = Path(path)
        self.follow = follow
        self.until_finished = until_finished
        """Following: end once DAGMan has finished (DAGMAN_FINISHED read to the end of the file)."""
        self.strict = strict
        self.poll_interval = poll_interval
        self.state_path = Path(state_path) if state_path else None
        """Where positions are saved (None: nowhere, a run that cannot resume)."""
        self.report = report or (lambda message: log.warning("%s", message))
        self.converter: DagmanJobstate = converter_for(self.path)
        self.bad = 0
        self.repeats = 0
        """Exact repeats of lines already read (`DagmanJobstate.feed`): ignored, counted."""
        self.lines = 0
        self._follower: FileFollower | None = None
        self.start: FilePosition | None = None
        self.resumed = False
        self.resume = resume
        """False: start from the beginning whatever state an earlier run left (`streamer replay` without --resume)."""
        self.notes: list[str] = []
        """What the user must be told about the state: resuming from where, or why not."""
        self._saved: dict[str, Any] | None = None
        self._read = False
        self._marks: dict[str, Any] = {}
        self.destinations = destinations
        if destinations is not None:
            self.resume_for(destinations)

    def _bound(self) -> None:
        """The saved state read and the resume decided (without checking the endpoints when nobody bound any)."""
        if not self._read:
            self.resume_for(self.destinations)

    def resume_for(self, destinations: list[str] | None) -> bool:
        """Decide, for this endpoint set (masked URLs and filters; None: not checked), whether to resume (True:
        from the saved state); `notes` say why."""
        self.destinations = destinations
        self.notes = []
        if not self._read:  # read once, knowing the endpoints: a damaged state is refused when one is a file
            self._saved, self._read = self._load(destinations), True
        saved, state_path = self._saved, self.state_path
        self.start, self.resumed, self._marks = None, False, {}
        if saved is None or state_path is None:  # nothing saved (a state is only read from a state_path)
            return False
        self.converter = converter_for(self.path)  # fresh, unless the saved one is resumed below
        started = "position" in saved  # else only the marks of a run that never checkpointed
        resume, note = resume_refusal(state_path, saved.get("destinations"), resume=self.resume,
                                      destinations=destinations, started=started)
        if note:
            self.notes.append(note)
        if not resume:
            return False
        self._marks = saved.get("endpoints") or {}
        if started:
            self.start = FilePosition.from_dict(saved["position"])
            self.converter.restore(saved["converter"])
            self.resumed = True
            self.notes.append(f"resuming {self.path} from line {self.start.line} (state {self.state_path})")
        return self.resumed

    # ------------------------------------------------------------ identity
    @property
    def submit_dir(self) -> str:
        return str(self.path.resolve().parent)

    def default_db_url(self) -> str:
        dag = Path(self.converter.dag.path) if self.converter.dag is not None else None
        return sqlite_url(default_db_path(self.path, dag))

    # ------------------------------------------------------------ state
    def _load(self, destinations: list[str] | None) -> dict[str, Any] | None:
        if self.state_path is None:
            return None
        try:
            data = checkpoint.read(self.state_path, what=f"jobstate.log state (version {STATE_VERSION})",
                                   refuse=checkpoint.writes_files(destinations),
                                   accept=lambda data: data.get("kind") == STATE_KIND
                                   and data.get("version") == STATE_VERSION)
        except checkpoint.CheckpointError as exc:
            raise SourceError(str(exc)) from None
        if data is not None and data.get("complete") and not self.follow:
            return None  # a finished replay replays from the start, as monitord -r does
        return data

    async def commit(self, position: Any, endpoints: dict[str, Any] | None = None) -> None:
        if position is None or self.state_path is None:
            return
        await self._save({**position, "endpoints": endpoints or {}})

    def endpoint_marks(self) -> dict[str, Any]:
        self._bound()
        return dict(self._marks)

    async def commit_start(self, endpoints: dict[str, Any]) -> None:
        """A fresh run records its file endpoints' marks first: a crash before the first checkpoint is undone."""
        self._bound()
        if endpoints and self.state_path is not None and not self.resumed:
            await self._save({"endpoints": endpoints})

    async def _save(self, state: dict[str, Any]) -> None:
        assert self.state_path is not None
        if self.destinations is not None:
            state = {**state, "destinations": self.destinations}
        await asyncio.to_thread(checkpoint.write, self.state_path,
                                {"version": STATE_VERSION, "kind": STATE_KIND, **state})

    # ------------------------------------------------------------ batches
    def stop(self) -> None:
        if self._follower is not None:
            self._follower.stop()

    async def batches(self) -> AsyncIterator[Batch]:
        self._bound()
        follower = FileFollower(self.path, follow=self.follow, start=self.start, poll_interval=self.poll_interval)
        self._follower = follower
        if self.follow and self.until_finished and self.converter.starts and not self.converter.running:
            follower.stop()  # resumed after DAGMan had finished: read what came since, then end
        total = self.path.stat().st_size if self.path.is_file() else None
        last: FilePosition | None = self.start
        repeats = 0
        async for chunk in follower.chunks():
            for line_no, reason in chunk.problems:
                self._bad(line_no, reason)
            events = []
            number = chunk.first_line
            for raw in chunk.lines:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    self._bad(number, f"not UTF-8 text (byte {exc.start})")
                    number += 1
                    continue
                try:
                    events.extend(self.converter.feed(text))
                except DagmanLogError as exc:
                    self._bad(number, str(exc))
                except RepeatedLine:
                    repeats += 1
                    self._repeat(number)
                number += 1
            self.lines += len(chunk.lines)
            last = chunk.position
            position = {"position": chunk.position.as_dict(), "converter": self.converter.to_state(),
                        "complete": False}
            yield Batch(events, position, done=chunk.position.offset, total=total,
                        dropped={"repeated_line": repeats} if repeats else {})
            repeats = 0
            if self.follow and self.until_finished and self.converter.starts and not self.converter.running:
                follower.stop()  # reads what is already there, then ends
        if self.repeats > REPEATS_SHOWN:
            self.report(f"{self.path}: {self.repeats - REPEATS_SHOWN:,} more exact repeats of earlier lines ignored "
                        f"({self.repeats:,} in all)")
        if last is not None and not self.follow:
            # the end of a replay: mark the state complete so the next replay starts over
            position = {"position": last.as_dict(), "converter": self.converter.to_state(), "complete": True}
            yield Batch([], position, done=last.offset, total=total)

    def _repeat(self, line_no: int) -> None:
        self.repeats += 1
        if self.repeats <= REPEATS_SHOWN:
            self.report(f"{self.path}:{line_no}: exact repeat of an earlier line (same time, node, state, condor id, "
                        "sequence): ignored" + (" (more are counted, not shown)" if self.repeats == REPEATS_SHOWN
                                                else ""))

    def _bad(self, line_no: int, reason: str) -> None:
        self.bad += 1
        message = f"{self.path}:{line_no}: {reason}"
        if self.strict:
            raise SourceError(message)
        self.report(message)
