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
Reads go through aiofiles (a thread), in bounded chunks, so the event loop is
never blocked by I/O and parsing work per chunk stays small.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable

import aiofiles

from streamer.util.limits import MAX_LINE, NotRegularFile, check_regular

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
        self.rotations = 0
        self.truncations = 0

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
        st = await self._wait_for_file()
        if st is None:
            return
        pos = self._resume_position(st)
        while True:
            try:
                handle = await aiofiles.open(self.path, "rb")
            except FileNotFoundError:  # removed between stat and open
                st = await self._wait_for_file()
                if st is None:
                    return
                continue
            except OSError as exc:
                raise FollowError(f"{self.path}: {exc.strerror or exc}") from None
            try:
                fd_stat = os.fstat(handle.fileno())
                if (fd_stat.st_dev, fd_stat.st_ino) != (pos.dev, pos.ino):
                    pos = FilePosition(str(self.path), fd_stat.st_dev, fd_stat.st_ino, 0, 0)
                await handle.seek(pos.offset)
                async for chunk in self._read_open_file(handle, pos):
                    yield chunk
                    pos = chunk.position
            finally:
                await handle.close()
            if not self.follow or self._stopping.is_set():
                return
            # rotated: the path names a new file (or none yet)
            self.rotations += 1
            st = await self._wait_for_file()
            if st is None:
                return
            pos = FilePosition(str(self.path), st.st_dev, st.st_ino, 0, 0)

    def _resume_position(self, st: os.stat_result) -> FilePosition:
        fresh = FilePosition(str(self.path), st.st_dev, st.st_ino, 0, 0)
        start = self.start
        if start is None:
            return fresh
        if (start.dev, start.ino) != (st.st_dev, st.st_ino):
            log.warning("%s: not the file of the checkpoint (rotated or replaced); reading from its start", self.path)
            return fresh
        if st.st_size < start.offset:
            log.warning("%s: shorter than the checkpoint offset (truncated); reading from its start", self.path)
            self.truncations += 1
            return fresh
        if self.on_resume is not None and start.offset:
            self.on_resume(start)
        return FilePosition(str(self.path), st.st_dev, st.st_ino, start.offset, start.line)

    async def _read_open_file(self, handle, pos: FilePosition) -> AsyncIterator[Chunk]:
        pending = b""          # bytes of an incomplete last line
        skipping = False       # inside an overlong line being discarded
        offset, line = pos.offset, pos.line
        while True:
            data = await handle.read(self.read_size)
            if data:
                chunk, pending, skipping, offset, line = self._split(data, pending, skipping, offset, line, pos)
                if chunk is not None:
                    yield chunk
                continue
            # end of file for now
            if not self.follow:
                if pending and not skipping:
                    offset += len(pending)
                    line += 1
                    yield Chunk([pending], line, FilePosition(pos.path, pos.dev, pos.ino, offset, line),
                                start=offset - len(pending))
                return
            if not await self._sleep():
                return
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                continue  # renamed away and nothing new yet: keep reading the open file
            fd_stat = os.fstat(handle.fileno())
            if (st.st_dev, st.st_ino) != (fd_stat.st_dev, fd_stat.st_ino):
                rest = await handle.read()  # rotated: finish the old file first
                if rest:
                    chunk, pending, skipping, offset, line = self._split(rest, pending, skipping, offset, line, pos)
                    if chunk is not None:
                        yield chunk
                if pending and not skipping:
                    log.warning("%s: rotated with an unterminated last line; taking it as complete", self.path)
                    offset += len(pending)
                    line += 1
                    yield Chunk([pending], line, FilePosition(pos.path, pos.dev, pos.ino, offset, line),
                                start=offset - len(pending))
                return
            if fd_stat.st_size < offset:
                log.warning("%s: truncated; reading again from its start", self.path)
                self.truncations += 1
                await handle.seek(0)
                pending, skipping, offset, line = b"", False, 0, 0

    def _split(self, data: bytes, pending: bytes, skipping: bool, offset: int, line: int,
               pos: FilePosition) -> tuple[Chunk | None, bytes, bool, int, int]:
        problems: list[tuple[int, str]] = []
        buf = pending + data if pending else data
        lines = buf.split(b"\n")
        tail = lines.pop()
        consumed = len(buf) - len(tail)  # the complete lines with their newlines
        first_line = line + 1
        if skipping:
            # the first piece ends the overlong line (if a newline came at all)
            if not lines:
                return None, b"", True, offset + len(data), line
            offset += len(lines[0]) + 1
            consumed -= len(lines[0]) + 1
            line += 1
            problems.append((line, f"line longer than {self.max_line} bytes: skipped"))
            lines = lines[1:]
            first_line = line + 1
            skipping = False
        start = offset
        offset += consumed
        line += len(lines)
        if len(tail) > self.max_line:
            offset += len(tail)
            tail, skipping = b"", True
        if not lines and not problems:
            return None, tail, skipping, offset, line
        chunk = Chunk(lines, first_line, FilePosition(pos.path, pos.dev, pos.ino, offset, line), problems, start)
        return chunk, tail, skipping, offset, line
