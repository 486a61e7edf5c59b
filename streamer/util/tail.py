"""The one incremental reader of a growing file: what was appended since the last read, in complete lines.

`Tail` keeps where it stands in one file — the byte offset after the last complete line it returned and the
file's device and inode — and on every `read` opens the path again (a regular file only: `limits.open_regular`),
so a file that appears late, is rotated or replaced is seen at once. Its rules, the strictest of the readers
it replaced (the dagman.out tracker, `streamer status`, monitord's pid watch):

- bounded reads: at most `max_bytes` per call (and `max_line` for one line, found with bounded reads);
- a partial last line is held back (not returned, the offset stays before it) until its newline comes, or
  the caller says this is the `final` read (a replay's last line without a newline);
- a line longer than `max_line` is skipped without being held in memory: returned as `Read.skipped`, its
  length, alone in its read;
- a file that shrank below the offset (truncated) or whose device and inode changed (replaced, rotated)
  is said once through `say`, then read again from its start (`RESTART`) or never read again (`STOP`).
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass
from typing import BinaryIO, Callable

from streamer.util.limits import MAX_LINE, open_regular

log = logging.getLogger("streamer.tail")

READ_SIZE = 1 << 18
SKIP_READ = 1 << 20


class OnChange(enum.Enum):
    """What a `Tail` does when its file shrank or was replaced."""

    RESTART = "reading it again from its start"
    STOP = "stopped following it"


@dataclass
class Read:
    """What one `Tail.read` found."""

    data: bytes = b""
    """Complete lines with their newlines (the last one without, on a final read at the end)."""
    start: int = 0
    """Byte offset of `data` in the file."""
    size: int = 0
    """The file's size when it was opened."""
    skipped: int = 0
    """Bytes of an overlong line skipped at `start` (`data` is then empty); 0: none."""
    restarted: bool = False
    """The file shrank or was replaced: read again from its start."""
    seen_to_end: bool = False
    """Every byte up to `size` was looked at (a partial last line held back included)."""

    @property
    def end(self) -> int:
        return self.start + (self.skipped or len(self.data))

    @property
    def at_end(self) -> bool:
        """Read up to the file's size as it was when opened."""
        return self.end >= self.size

    def lines(self) -> list[bytes]:
        """`data` cut into lines, without their newlines."""
        lines = self.data.split(b"\n")
        if self.data.endswith(b"\n"):
            lines.pop()
        return lines if self.data else []


class Tail:
    """Where one file is read up to; `read()` gives what was appended since. Raises what `open_regular` raises
    (FileNotFoundError while the file is not there, `NotRegularFile`, OSError): the caller decides."""

    def __init__(self, path: str | os.PathLike[str], *, offset: int = 0, identity: tuple[int, int] | None = None,
                 on_change: OnChange = OnChange.RESTART, say: Callable[[str], None] | None = None,
                 max_line: int = MAX_LINE, hold: bool = False) -> None:
        self.path = os.fspath(path)
        self.offset = offset
        """After the last complete line returned (a checkpoint resumes exactly here)."""
        self.identity = identity
        """(device, inode) of the file read; None until the first read (an offset given alone trusts the path)."""
        self.hold = hold
        """Keep the file open between reads: when the path is renamed away (rotated), what was appended to the
        old file is read to its end before the new one (`tail -F`); else the path is opened again each read."""
        self._handle: BinaryIO | None = None
        self._restarting = False
        self.truncations = 0
        self.replacements = 0
        self.on_change = on_change
        self.say = say or (lambda text: log.warning("%s", text))
        self.max_line = max_line
        self.stopped = False
        """`STOP`: the file shrank or was replaced; it is not read again."""
        self.skip_to: int | None = None
        """Inside a line longer than `max_line`: read on from here to its end (a restart finds it again)."""

    def read(self, max_bytes: int = READ_SIZE, *, final: bool = False) -> Read:
        """Complete lines appended since the last read, at most `max_bytes` of them (more only for one line
        longer than that, up to `max_line`). `final`: a last line without newline at the end counts too."""
        if self.stopped:
            return self._nothing()
        if self._handle is not None:
            held = self._read_held(max_bytes, final)
            if held is not None:
                return held
        handle = open_regular(self.path)
        try:
            found = self._read_open(handle, max_bytes, final)
        finally:
            if self.hold and not self.stopped:
                self._handle = handle
            else:
                handle.close()
        return found

    def close(self) -> None:
        """Let go of the file held open (`hold`)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _nothing(self) -> Read:
        return Read(start=self.offset, size=self.offset)

    def _read_open(self, handle: BinaryIO, max_bytes: int, final: bool) -> Read:
        st = os.fstat(handle.fileno())
        restarted = self._changed((st.st_dev, st.st_ino), st.st_size) or self._restarting
        self._restarting = False
        if self.stopped:
            return self._nothing()
        if self.skip_to is not None:
            found = self._skip(handle, st.st_size, final)
        else:
            found = self._read(handle, st.st_size, max_bytes, final)
        found.restarted = restarted
        return found

    def _read_held(self, max_bytes: int, final: bool) -> Read | None:
        """From the file held open; None once it was read to its end and the path names another file."""
        assert self._handle is not None, "only a tail holding its file reads it"
        try:
            named = os.stat(self.path)
            moved = (named.st_dev, named.st_ino) != self.identity
        except OSError:
            moved = False  # renamed away and nothing new yet: read on in the open file
        if not moved:
            return self._read_open(self._handle, max_bytes, final)
        found = self._read_open(self._handle, max_bytes, True)  # its last line is complete: nothing comes after
        if found.data or found.skipped or self.stopped:
            return found
        self.close()
        self.replacements += 1
        self.say(f"{self.path}: rotated (renamed away, another file in its place); {self.on_change.value}")
        if self.on_change is OnChange.STOP:
            self.stopped = True
            return self._nothing()
        self.identity, self.offset, self.skip_to, self._restarting = None, 0, None, True
        return None

    def _changed(self, identity: tuple[int, int], size: int) -> bool:
        """Say once that the file shrank or was replaced, and restart or stop; False when it did neither."""
        if self.identity is not None and identity != self.identity:
            what = "replaced by another file (its device and inode changed)"
            self.replacements += 1
        elif size < self.offset:
            what = f"file shrank below offset {self.offset} (truncated or replaced)"
            self.truncations += 1
        else:
            self.identity = identity
            return False
        self.say(f"{self.path}: {what}; {self.on_change.value}")
        if self.on_change is OnChange.STOP:
            self.stopped = True
            return False
        self.identity, self.offset, self.skip_to = identity, 0, None
        return True

    def _read(self, handle: BinaryIO, size: int, max_bytes: int, final: bool) -> Read:
        handle.seek(self.offset)
        # what the file holds past the offset, at most max_bytes (a read of n bytes allocates n first)
        data = handle.read(min(max_bytes, max(size - self.offset, 1))) if max_bytes > 0 else b""
        if data and b"\n" not in data and len(data) == max_bytes:
            data = self._long_line(handle, data)
            if self.skip_to is not None:
                return self._skip(handle, size, final)
        cut = data.rfind(b"\n") + 1
        seen_to_end = self.offset + len(data) >= size
        if final and seen_to_end and cut < len(data):
            cut = len(data)
        found = Read(data[:cut], self.offset, size, seen_to_end=seen_to_end)
        self.offset += cut
        return found

    def _long_line(self, handle: BinaryIO, data: bytes) -> bytes:
        """The first line when it is longer than one read but at most `max_line` bytes; when it is longer, the
        bytes read so far are dropped and the next reads skip it (`skip_to`)."""
        parts = [data]
        length = len(data)
        while length <= self.max_line:
            more = handle.read(READ_SIZE)
            if not more:
                break
            parts.append(more)
            length += len(more)
            if b"\n" in more:
                break
        data = b"".join(parts)
        newline = data.find(b"\n")
        if newline == -1 and length > self.max_line:
            self.skip_to = self.offset + length
            return b""
        if newline > self.max_line:  # ends in what was read: the lines after it are not skipped with it
            self.skip_to = self.offset + newline
            return b""
        return data

    def _skip(self, handle: BinaryIO, size: int, final: bool) -> Read:
        """Read on past an overlong line until its newline (or, on a final read, the end of the file)."""
        assert self.skip_to is not None, "only a tail inside an overlong line skips"
        handle.seek(self.skip_to)
        while True:
            data = handle.read(SKIP_READ)
            newline = data.find(b"\n")
            if newline != -1:
                end = self.skip_to + newline + 1
                break
            self.skip_to += len(data)
            if not data or self.skip_to >= size:
                if not final:  # the rest of the line is not written yet
                    return Read(start=self.offset, size=size, seen_to_end=True)
                end = self.skip_to
                break
        found = Read(start=self.offset, size=size, skipped=end - self.offset)
        self.offset, self.skip_to = end, None
        return found
