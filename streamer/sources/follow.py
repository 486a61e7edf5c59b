"""Asynchronous line reader over one file: replay to the end, or follow like `tail -F`.

`FileFollower.chunks()` yields `Chunk`s of complete lines with the byte offset
after them, so a caller can checkpoint exactly. Following handles:

- a partial last line: held until its newline arrives (in replay, a final line
  without newline is taken as complete);
- truncation (size below our offset): start again from 0;
- rotation by rename (the path now names another inode): the old file is read
  to its end first, then the new one from 0;
- a file that does not exist yet: waited for;
- overlong lines: reported and skipped without holding them in memory.
The reading is `util/tail.py`'s (the one incremental reader, holding the file open
for rotations), in a thread and in bounded reads, so the event loop is never
blocked by I/O and parsing work per chunk stays small.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable

from streamer.util.limits import MAX_LINE, NotRegularFile, check_regular
from streamer.util.tail import Tail

log = logging.getLogger("streamer.follow")

READ_SIZE = 128 * 1024


class FollowError(OSError):
    """A file that cannot be read at all (missing in replay, a directory, no permission)."""


def check_readable(path: str | os.PathLike[str]) -> os.stat_result:
    """The stat of a regular file an event reader can open, seek and checkpoint.

    Raises FileNotFoundError when nothing is there (a follower waits for it)
    and FollowError, in words, for what can never be read as an event file: a
    symbolic link loop or a dangling link, a directory, a FIFO, socket or
    device (opening a FIFO with no writer would block for ever). The check is
    `limits.check_regular`'s, the one every reader of workflow files makes.
    """
    try:
        return check_regular(path)
    except FileNotFoundError:
        if os.path.islink(path):  # a follower waits for its target like for a missing file
            raise FileNotFoundError(f"{path}: dangling symbolic link (to {os.readlink(path)})") from None
        raise FileNotFoundError(f"{path}: no such file") from None
    except NotRegularFile as exc:
        if os.path.isdir(path):
            raise FollowError(f"{path}: is a directory, not an event file") from None
        advice = ("" if exc.errno == errno.ELOOP else ": streamer reads event files it can seek and checkpoint "
                  "(write the events to a file and load or follow that)")
        raise FollowError(f"{exc}{advice}") from None
    except OSError as exc:
        raise FollowError(f"{path}: {exc.strerror or exc}") from None


@dataclass
class FilePosition:
    """Where a reader stands in one file; JSON-serialisable via `as_dict`."""

    path: str
    dev: int = 0
    ino: int = 0
    offset: int = 0
    line: int = 0

    def as_dict(self) -> dict[str, int | str]:
        return {"path": self.path, "dev": self.dev, "ino": self.ino, "offset": self.offset, "line": self.line}

    @classmethod
    def from_dict(cls, data: dict) -> "FilePosition":
        return cls(str(data["path"]), int(data.get("dev", 0)), int(data.get("ino", 0)),
                   int(data.get("offset", 0)), int(data.get("line", 0)))


@dataclass
class Chunk:
    """Complete lines read together, numbered from `first_line`, ending at `position`."""

    lines: list[bytes]
    first_line: int
    position: FilePosition
    problems: list[tuple[int, str]] = field(default_factory=list)
    start: int = 0
    """Byte offset where `first_line` begins."""


class FileFollower:
    """Reads one file from a position; `follow=True` keeps tailing until `stop()`."""

    def __init__(self, path: str | Path, *, follow: bool = False, start: FilePosition | None = None,
                 poll_interval: float = 0.2, read_size: int = READ_SIZE, max_line: int = MAX_LINE,
                 on_resume: Callable[[FilePosition], None] | None = None) -> None:
        self.path = Path(path)
        self.on_resume = on_resume
        """Called with `start` when the file is read on from it (the same file, not shorter)."""
        self.follow = follow
        self.poll_interval = poll_interval
        self.read_size = read_size
        self.max_line = max_line
        self.start = start
        self._stopping = asyncio.Event()
        self._tail: Tail | None = None

    def stop(self) -> None:
        self._stopping.set()

    async def _sleep(self) -> bool:
        """Wait one poll interval; False once stop() was called."""
        try:
            await asyncio.wait_for(self._stopping.wait(), self.poll_interval)
        except asyncio.TimeoutError:
            return True
        return False

    def _check_openable(self) -> os.stat_result | None:
        try:
            return check_readable(self.path)
        except FileNotFoundError:
            if self.follow:
                return None
            raise FollowError(f"{self.path}: no such file") from None

    async def _wait_for_file(self) -> os.stat_result | None:
        announced = False
        while True:
            st = self._check_openable()
            if st is not None:
                return st
            if not announced:
                log.warning("%s: does not exist yet; waiting for it", self.path)
                announced = True
            if not await self._sleep():
                return None

    async def chunks(self) -> AsyncIterator[Chunk]:
        if await self._wait_for_file() is None:
            return
        start = self.start
        tail = Tail(self.path, offset=start.offset if start else 0, identity=(start.dev, start.ino) if start else None,
                    say=log.warning, max_line=self.max_line, hold=True)
        self._tail = tail
        line = start.line if start else 0
        first = True
        try:
            while True:
                try:
                    found = await asyncio.to_thread(tail.read, self.read_size, final=not self.follow)
                except FileNotFoundError:  # removed before it was opened
                    if await self._wait_for_file() is None:
                        return
                    continue
                except OSError as exc:
                    raise FollowError(f"{self.path}: {exc.strerror or exc}") from None
                if found.restarted:
                    line = 0
                elif first and start is not None and start.offset and self.on_resume is not None:
                    self.on_resume(start)
                first = False
                assert tail.identity is not None, "a tail that read has its file's identity"
                dev, ino = tail.identity
                if found.skipped:
                    line += 1
                    yield Chunk([], line + 1, FilePosition(str(self.path), dev, ino, found.end, line),
                                [(line, f"line longer than {self.max_line} bytes: skipped")], found.end)
                elif found.data:
                    lines = found.lines()
                    yield Chunk(lines, line + 1, FilePosition(str(self.path), dev, ino, found.end, line + len(lines)),
                                start=found.start)
                    line += len(lines)
                elif not self.follow or not await self._sleep():
                    return
        finally:
            tail.close()

    @property
    def rotations(self) -> int:
        """The file was replaced (renamed away and another in its place) since it was first read."""
        return self._tail.replacements if self._tail is not None else 0

    @property
    def truncations(self) -> int:
        """The file shrank below what was read (truncated in place) since it was first read."""
        return self._tail.truncations if self._tail is not None else 0
