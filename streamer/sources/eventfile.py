"""Source over `.bp` and `.jsonl` event files (replay or follow), with checkpoints.

Each line is decoded by its first character: `{` is a JSON event (monitord's
AMQP form or streamer's JSONL), anything else a BP line. A malformed line —
or an event against the schema's constraints (`events/constraints.py`: a
mandatory field missing, `clustered=2`, ...) — is reported as `FILE:LINE:
reason`, counted and skipped (or, with `strict`, stops the run). The
checkpoint file records, per input file, the device, inode, byte offset and
line number reached once every endpoint acknowledged the events before it; it
is written atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence


from streamer.util import checkpoint as checkpoints
from streamer.events import Event
from streamer.sources.base import Batch, Source, SourceError
from streamer.events.jsonenc import JSON_SUFFIXES
from streamer.sources.decode import decode_lines
from streamer.sources.follow import Chunk, FileFollower, FilePosition

log = logging.getLogger("streamer.source")

CHECKPOINT_VERSION = 1


class InputError(SourceError, ValueError):
    """A bad line under `--strict`: carries FILE:LINE: reason, and how many lines of its chunk came before."""

    good_lines: int = 0
    events: list = []


@dataclass
class InputStats:
    lines: int = 0
    events: int = 0
    bad: int = 0
    bad_by_file: dict[str, int] = field(default_factory=dict)


class CheckpointStore:
    """The checkpoint file (`util/checkpoint.py`): {"version": 1, "files": {path: position}, "endpoints": {marks}}.

    `refuse`: a damaged one is an error rather than kept aside (the run writes a file endpoint)."""

    def __init__(self, path: str | Path, position_type: type[FilePosition] = FilePosition, *,
                 refuse: bool = False) -> None:
        self.path = Path(path)
        self.position_type = position_type
        self.refuse = refuse

    def load(self) -> dict[str, FilePosition]:
        data = self._read()
        if data is None:
            return {}
        return {key: self.position_type.from_dict(value) for key, value in data.get("files", {}).items()}

    def load_endpoints(self) -> dict[str, Any]:
        data = self._read()
        marks = data.get("endpoints") if data else None
        return marks if isinstance(marks, dict) else {}

    def exists(self) -> bool:
        return self.path.exists()

    def _read(self) -> dict[str, Any] | None:
        return checkpoints.read(self.path, what=f"checkpoint (version {CHECKPOINT_VERSION})", refuse=self.refuse,
                               accept=lambda data: data.get("version") == CHECKPOINT_VERSION)

    def save(self, files: dict[str, FilePosition], endpoints: dict[str, Any] | None = None) -> None:
        payload: dict[str, Any] = {"version": CHECKPOINT_VERSION, "files": {k: v.as_dict() for k, v in files.items()}}
        if endpoints:
            payload["endpoints"] = endpoints
        checkpoints.write(self.path, payload)


class EventFileSource(Source):
    """Events from one or more event files, in file order (replay) or as they grow (follow)."""

    position_type: type[FilePosition] = FilePosition
    """What a file's checkpointed position holds (a subclass may carry its reading state too)."""

    def __init__(self, paths: Sequence[str | Path], *, follow: bool = False, checkpoint: str | Path | None = None,
                 strict: bool = False, poll_interval: float = 0.2,
                 report: Callable[[str], None] | None = None, destinations: list[str] | None = None) -> None:
        self.paths = [Path(p) for p in paths]
        self.follow = follow
        self.strict = strict
        self.poll_interval = poll_interval
        self.store = (CheckpointStore(checkpoint, self.position_type, refuse=checkpoints.writes_files(destinations))
                      if checkpoint else None)
        """`destinations`: the run's endpoint URLs; a damaged checkpoint is refused when one is a file."""
        self.positions: dict[str, FilePosition] = self.store.load() if self.store else {}
        self.stats = InputStats()
        self.report = report or (lambda message: log.warning("%s", message))
        self._followers: list[FileFollower] = []
        # every file's position as of the last batch read: each batch carries a
        # snapshot, so committing the newest acknowledged one covers all files
        self._reading: dict[str, dict] = {k: v.as_dict() for k, v in self.positions.items()}
        self._total_bytes = sum(p.stat().st_size for p in self.paths if p.is_file())

    @staticmethod
    def key(path: Path) -> str:
        return str(path.resolve())

    def start_at(self, path: Path, position: FilePosition) -> None:
        """Read `path` from `position` on (e.g. the last lines of a file, for `streamer tail`)."""
        self.positions[self.key(path)] = position

    def stop(self) -> None:
        for follower in self._followers:
            follower.stop()

    async def commit(self, position: Any, endpoints: dict[str, Any] | None = None) -> None:
        """`position` is {file key: FilePosition dict} of files advanced by acknowledged batches."""
        for key, value in position.items():
            self.positions[key] = self.position_type.from_dict(value)
        if self.store is not None:
            await asyncio.to_thread(self.store.save, dict(self.positions), endpoints)

    def endpoint_marks(self) -> dict[str, Any]:
        return self.store.load_endpoints() if self.store is not None else {}

    async def commit_start(self, endpoints: dict[str, Any]) -> None:
        if self.store is not None and endpoints and not self.store.exists():
            await asyncio.to_thread(self.store.save, {}, endpoints)

    def _resuming(self, path: Path) -> Callable[[FilePosition], None] | None:
        """Says where `path` is read on from its checkpoint, as every resume is said."""
        store = self.store
        if store is None:
            return None
        return lambda start: self.report(f"resuming {path} from line {start.line} (checkpoint {store.path})")

    def _decode_chunk(self, path: Path, chunk: Chunk) -> list[Event]:
        events: list[Event] = []
        for line_no, reason in chunk.problems:
            self._bad(path, line_no, reason)

        def bad(number: int, reason: str) -> None:
            try:
                self._bad(path, number, reason)
            except InputError as stop:
                stop.good_lines, stop.events = number - chunk.first_line, events
                raise

        decode_lines(chunk.lines, chunk.first_line, str(path), path.suffix.lower() in JSON_SUFFIXES, events, bad)
        self.stats.lines += len(chunk.lines)
        self.stats.events += len(events)
        return events

    def _bad(self, path: Path, line_no: int, reason: str) -> None:
        message = f"{path}:{line_no}: {reason}"
        self.stats.bad += 1
        self.stats.bad_by_file[str(path)] = self.stats.bad_by_file.get(str(path), 0) + 1
        if self.strict:
            raise InputError(message)
        self.report(message)

    async def _file_batches(self, path: Path) -> AsyncIterator[Batch]:
        key = self.key(path)
        follower = FileFollower(path, follow=self.follow, start=self.positions.get(key),
                                poll_interval=self.poll_interval, on_resume=self._resuming(path))
        self._followers.append(follower)
        async for chunk in follower.chunks():
            bad = self.stats.bad
            try:
                events = self._decode_chunk(path, chunk)
            except InputError as stop:  # deliver the lines before the bad one, then stop
                good = chunk.lines[:stop.good_lines]
                end = chunk.start + sum(len(x) + 1 for x in good)
                at = FilePosition(chunk.position.path, chunk.position.dev, chunk.position.ino, end,
                                  chunk.first_line - 1 + len(good))
                self._reading[key] = at.as_dict()
                yield Batch(stop.events, dict(self._reading), done=end, total=self._total_bytes or None)
                raise
            self._reading[key] = chunk.position.as_dict()
            skipped = self.stats.bad - bad  # malformed lines: said by line, counted in the metrics too
            yield Batch(events, dict(self._reading), done=chunk.position.offset,
                        total=self._total_bytes or None, dropped={"bad_line": skipped} if skipped else {})

    async def batches(self) -> AsyncIterator[Batch]:
        if not self.follow or len(self.paths) == 1:
            done_before = 0
            for path in self.paths:
                last = 0
                async for batch in self._file_batches(path):
                    last = batch.done
                    batch.done += done_before
                    yield batch
                done_before += last
            return
        async for batch in self._merged():
            yield batch

    async def _merged(self) -> AsyncIterator[Batch]:
        """Follow several files at once: batches interleave, each file stays in order."""
        queue: asyncio.Queue[Batch | BaseException | None] = asyncio.Queue(maxsize=64)

        async def pump(path: Path) -> None:
            try:
                async for batch in self._file_batches(path):
                    await queue.put(batch)
            except BaseException as exc:  # hand errors to the consumer
                await queue.put(exc)
            finally:
                await queue.put(None)

        tasks = [asyncio.create_task(pump(p)) for p in self.paths]
        running = len(tasks)
        try:
            while running:
                item = await queue.get()
                if item is None:
                    running -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
