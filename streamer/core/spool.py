"""A small bounded on-disk FIFO of byte records that survives crashes and restarts.

Why: an endpoint whose server is away (the AMQP broker restarting, a network
cut) must not stall the run, and must not lose what it accepted. It appends
what it cannot deliver here, durably, and drains it in order once the server
is back; a restart of streamer finds the records still here and delivers
them first.

Layout of a spool directory:

- `NNNNNNNNNNNNNNNN.seg`: segment files of records, each record
  `length (4 bytes, big-endian) | crc32 (4 bytes) | payload`. A new segment
  starts once the current one exceeds `segment_bytes`.
- `head`: `segment offset` of the oldest record not yet consumed, replaced
  atomically (write, fsync, rename). Segments before it are deleted.
- `lock`: held with `flock` while a process uses the spool (one user at a time).

Appends are fsync'd per call (one call per batch). A crash can leave a torn
record at the tail; opening truncates the tail at the first incomplete or
corrupt record, so only records whose append returned are guaranteed.
Consumption is at-least-once: records read but not committed are read again
after a crash.
"""

from __future__ import annotations

import fcntl
import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO, Sequence

__all__ = ["Spool", "SpoolError", "SpoolFull"]

_HEADER = struct.Struct(">II")
SEGMENT_BYTES = 64 << 20
SUFFIX = ".seg"


class SpoolError(RuntimeError):
    """The spool cannot be used (locked by another process, unreadable)."""


class SpoolFull(SpoolError):
    """An append would exceed the spool's size limit; nothing was written."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    """Bounded FIFO of byte records in directory `path` (created if missing)."""

    def __init__(self, path: str | Path, max_bytes: int, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.segment_bytes = max(1, segment_bytes)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path / "lock", "a+b")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise SpoolError(f"spool {self.path} is in use by another process") from None
        self.records = 0
        """Records appended and not yet consumed."""
        self.size = 0
        """Bytes of those records (headers included): what `max_bytes` bounds."""
        self._segments: list[int] = []
        self._head = (0, 0)
        self._writer: BinaryIO | None = None
        self._recover()

    # ------------------------------------------------------------ recovery

    def _segment_path(self, number: int) -> Path:
        return self.path / f"{number:016d}{SUFFIX}"

    def _recover(self) -> None:
        """Load the head, drop consumed segments, count what is left, cut a torn tail."""
        self._segments = sorted(int(p.stem) for p in self.path.glob(f"*{SUFFIX}") if p.stem.isdigit())
        head_file = self.path / "head"
        if head_file.exists():
            seg, off = head_file.read_text().split()
            self._head = (int(seg), int(off))
        elif self._segments:
            self._head = (self._segments[0], 0)
        for number in [s for s in self._segments if s < self._head[0]]:
            self._segment_path(number).unlink(missing_ok=True)
        self._segments = [s for s in self._segments if s >= self._head[0]]
        for number in self._segments:
            start = self._head[1] if number == self._head[0] else 0
            count, end = self._scan(number, start)
            self.records += count
            self.size += end - start

    def _scan(self, number: int, start: int) -> tuple[int, int]:
        """(records, end offset of the last whole record) of a segment; truncates a torn tail."""
        path = self._segment_path(number)
        count, offset = 0, start
        with open(path, "r+b") as f:
            total = os.fstat(f.fileno()).st_size
            f.seek(start)
            while offset + _HEADER.size <= total:
                length, crc = _HEADER.unpack(f.read(_HEADER.size))
                payload = f.read(length)
                if len(payload) < length or zlib.crc32(payload) != crc:
                    break
                offset += _HEADER.size + length
                count += 1
            if offset < total:  # torn or corrupt tail: what follows was never acknowledged
                f.truncate(offset)
                f.flush()
                os.fsync(f.fileno())
        return count, offset

    # ------------------------------------------------------------ appending

    def __len__(self) -> int:
        return self.records

    @property
    def full(self) -> bool:
        return self.size >= self.max_bytes

    def append(self, records: Sequence[bytes]) -> None:
        """Append records durably (fsync) or, if they do not fit, raise SpoolFull and write nothing."""
        if not records:
            return
        data = b"".join(_HEADER.pack(len(r), zlib.crc32(r)) + r for r in records)
        if self.size + len(data) > self.max_bytes:
            raise SpoolFull(
                f"spool {self.path} is full ({self.size:,} of {self.max_bytes:,} bytes, "
                f"{self.records:,} records); {len(records):,} more do not fit"
            )
        writer = self._tail_writer()
        writer.write(data)
        writer.flush()
        os.fsync(writer.fileno())
        self.records += len(records)
        self.size += len(data)

    def _tail_writer(self) -> BinaryIO:
        """The open tail segment, starting a new one when it is too big."""
        if self._writer is not None and self._writer.tell() < self.segment_bytes:
            return self._writer
        if self._writer is not None:
            self._writer.close()
        if self._segments and self._segment_path(self._segments[-1]).stat().st_size < self.segment_bytes:
            number = self._segments[-1]
        else:
            number = self._segments[-1] + 1 if self._segments else self._head[0] + 1
            self._segments.append(number)
            if len(self._segments) == 1:
                self._head = (number, 0)
        self._writer = open(self._segment_path(number), "ab")
        _fsync_dir(self.path)
        return self._writer

    # ------------------------------------------------------------ consuming

    def peek(self, max_records: int) -> tuple[list[bytes], tuple[int, int]]:
        """Up to `max_records` oldest records and the head position after them (for `commit`)."""
        out: list[bytes] = []
        seg, off = self._head
        for number in [s for s in self._segments if s >= seg]:
            start = off if number == seg else 0
            with open(self._segment_path(number), "rb") as f:
                f.seek(start)
                position = start
                while len(out) < max_records:
                    header = f.read(_HEADER.size)
                    if len(header) < _HEADER.size:
                        break
                    length, _ = _HEADER.unpack(header)
                    out.append(f.read(length))
                    position += _HEADER.size + length
            seg, off = number, position
            if len(out) >= max_records:
                break
        return out, (seg, off)

    def commit(self, position: tuple[int, int], count: int) -> None:
        """Consume the `count` records up to `position` (as returned by `peek`)."""
        if count <= 0:
            return
        consumed = self._bytes_between(self._head, position)
        self._head = position
        self.records -= count
        self.size -= consumed
        if self.records == 0:
            self._reset()
            return
        tmp = self.path / "head.tmp"
        with open(tmp, "w") as f:
            f.write(f"{position[0]} {position[1]}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / "head")
        _fsync_dir(self.path)
        for number in [s for s in self._segments if s < position[0]]:
            self._segment_path(number).unlink(missing_ok=True)
        self._segments = [s for s in self._segments if s >= position[0]]

    def _bytes_between(self, start: tuple[int, int], end: tuple[int, int]) -> int:
        if start[0] == end[0]:
            return end[1] - start[1]
        total = self._segment_path(start[0]).stat().st_size - start[1]
        for number in self._segments:
            if start[0] < number < end[0]:
                total += self._segment_path(number).stat().st_size
        return total + end[1]

    def _reset(self) -> None:
        """Everything consumed: remove the segments and the head, start afresh."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        last = self._segments[-1] if self._segments else self._head[0]
        for number in self._segments:
            self._segment_path(number).unlink(missing_ok=True)
        (self.path / "head").unlink(missing_ok=True)
        self._segments = []
        self._head = (last, 0)
        self.records = 0
        self.size = 0

    def pending(self) -> list[bytes]:
        """Every pending record, oldest first, without consuming (inspection, tests)."""
        return self.peek(self.records)[0]

    def close(self, *, remove_if_empty: bool = False) -> None:
        """Release the lock; with `remove_if_empty`, delete the directory when nothing is pending."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if remove_if_empty and self.records == 0:
            for name in ("head", "head.tmp"):
                (self.path / name).unlink(missing_ok=True)
            for number in self._segments:
                self._segment_path(number).unlink(missing_ok=True)
            (self.path / "lock").unlink(missing_ok=True)
            try:
                self.path.rmdir()
            except OSError:
                pass
        fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
        self._lock.close()
