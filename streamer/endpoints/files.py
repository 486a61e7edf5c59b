"""`file://` endpoint: JSON lines or BP, appended, one write per batch (on the loop when small).

Encoding comes from `?encoding=json|bp|bson`, else from the suffix (`.jsonl`,
`.json`, `.ndjson` -> JSON; anything else -> BP, monitord's default).
`?fsync=true` makes every checkpoint fsync the file. `?mode=append` adds to
the file, `?mode=truncate` starts it afresh; without `mode` a file is appended
to, except in a replay (`streamer replay`, the `replay` option), which
overwrites it as `pegasus-monitord -r --dest file.bp` does.

Exactly once: the file's length after each source batch is its *mark*, saved
with the source's checkpoint in the same atomic write (`Endpoint.mark`). A
run resuming from that checkpoint first cuts the file back to the recorded
length (`resume`), removing whatever was written after it (events the source
sends again, a line cut short by a full disk or a kill), so after any crash
the file holds every event once.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path
from typing import Any, BinaryIO, Sequence
from urllib.parse import unquote

from streamer.events import Event, bp, bsonenc, jsonenc
from streamer.events.event import ensure_ids
from streamer.util.urls import EndpointURL
from streamer.endpoints import options as option_specs
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.endpoints.layers.resilience import Unavailable

RETRIABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.ESTALE})
"""Write errors a spool waits out (a full or failing disk, a stale NFS handle); the file endpoint's one
classification of retriable errors. Without a spool they fail the endpoint, naming the file."""


log = logging.getLogger("streamer.endpoints.file")

INLINE_WRITE = 64 << 10
"""Bytes up to which a batch is written on the event loop itself (a few µs into the page cache): two
trips through a worker thread per batch cost more, and under load queue behind other work. Larger
batches (a replay, serve catching up with 100 workflows) go to a thread: at 256 KiB, serve's loop
was caught in such writes in 3 of its 8 stalls over 40 ms while catching up (`bench_fleet.py --trace`)."""
TAIL = 32
"""Bytes before a mark saved with it (a file is recognised by its device, inode and these bytes)."""


def file_path(url: EndpointURL) -> Path:
    """`file:///abs/x.bp` -> /abs/x.bp; `file://rel/x.bp` and `file:rel/x.bp` -> rel/x.bp."""
    path = unquote(url.netloc + url.path) if url.netloc not in ("", "localhost") else unquote(url.path)
    if not path:
        raise EndpointError(f"{url.masked}: no file path")
    return Path(path)


def encoding_for(path: Path, requested: str | None) -> str:
    if requested:
        value = requested.lower()
        if value not in ("json", "bp", "bson"):
            raise EndpointError(f"unknown encoding {requested!r} (use json, bp or bson)")
        return value
    return "json" if path.suffix.lower() in jsonenc.JSON_SUFFIXES else "bp"


def encode_batch(events: Sequence[Event], encoding: str) -> bytes:
    """One newline-terminated record per event (BSON: documents back to back, as monitord writes them)."""
    if encoding == "json":
        return jsonenc.join(events)
    if encoding == "bson":
        return bsonenc.join(events)
    return bp.join(list(events))


class FileEndpoint(Endpoint):
    """Appends JSON lines, BP lines or BSON documents to a file; the suffix decides unless `?encoding=`."""
    declared_options = option_specs.FILE
    schemes = ("file",)

    def __init__(self, url: EndpointURL, options: dict | None = None) -> None:
        super().__init__(url, options)
        self.path = file_path(url)
        if not self.path.parent.is_dir():  # a typo must not create /nonexistent/dir
            raise EndpointError(f"{self.url.masked}: directory {self.path.parent} does not exist (create it first)")
        self.encoding = encoding_for(self.path, self.option("encoding"))
        self.fsync = self.flag("fsync")
        self.truncate = self._truncates()
        self.state_key = f"file:{self.path.absolute()}"
        self._file: BinaryIO | None = None
        self._dirty = False
        self._resume: dict[str, Any] | None = None
        self._identity: tuple[int, int] = (0, 0)
        self._length = 0
        self._tail = b""
        self._spooled = False
        self.cut_back = 0
        """Bytes removed at open: what had been written after the checkpoint resumed from."""

    def _truncates(self) -> bool:
        requested = self.option("mode")
        if requested is None:
            return self.flag("replay")
        value = str(requested).lower()
        if value not in ("append", "truncate"):
            raise EndpointError(f"{self.url.masked}: unknown mode {requested!r} (use append or truncate)")
        return value == "truncate"

    def _encode(self, events: Sequence[Event]) -> bytes:
        return self.encode_each(events, lambda part: encode_batch(part, self.encoding), b"".join)

    def resume(self, mark: Any) -> None:
        if isinstance(mark, dict) and isinstance(mark.get("length"), int):
            if self.truncate and self.option("mode") is not None:
                # the source resumes after the checkpoint: truncating would lose every event before it
                raise EndpointError(f"{self.url.masked}: ?mode=truncate cannot resume from a checkpoint (the "
                                    "events before it would be lost): drop ?mode=truncate to resume, or remove "
                                    "the checkpoint to start over")
            self._resume = mark

    def mark(self) -> dict[str, Any]:
        return self._mark(self._length, self._tail)

    def _mark(self, length: int, tail: bytes) -> dict[str, Any]:
        # the last bytes before the mark tell this file from another that took its inode number
        return {"length": length, "dev": self._identity[0], "ino": self._identity[1], "tail": tail.hex()}

    async def open(self) -> None:
        await self._open()

    async def _open(self) -> BinaryIO:
        """Open the file (resuming or truncating it as asked) and return it."""
        if self.path.is_dir():
            raise EndpointError(f"{self.path}: is a directory")
        try:
            if self._resume is not None and not self.truncate:
                self._cut_back(self._resume)
            self._file = file = open(self.path, "wb" if self.truncate else "ab", buffering=0)  # noqa: SIM115
            st = os.fstat(file.fileno())
        except OSError as exc:
            raise EndpointError(f"{self.path}: cannot open for writing: {exc.strerror or exc}") from None
        self._identity = (st.st_dev, st.st_ino)
        self._length = st.st_size
        self._tail = b""
        if st.st_size and not self.truncate:
            with open(self.path, "rb") as fh:
                fh.seek(max(0, st.st_size - TAIL))
                self._tail = fh.read(TAIL)
        return file

    def _same_tail(self, mark: dict[str, Any]) -> bool:
        tail = bytes.fromhex(str(mark.get("tail", "")))
        length = mark["length"]
        with open(self.path, "rb") as fh:
            fh.seek(max(0, length - len(tail)))
            return fh.read(len(tail)) == tail

    def _cut_back(self, mark: dict[str, Any]) -> None:
        """Remove what was written after the checkpoint (the source sends those events again)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            log.warning("%s: missing; the checkpoint recorded %d bytes (events before it are not rewritten)",
                        self.path, mark["length"])
            return
        if (st.st_dev, st.st_ino) != (mark.get("dev"), mark.get("ino")) or not self._same_tail(mark):
            log.warning("%s: not the file the checkpoint recorded (replaced or rotated); appending to it",
                        self.path)
        elif st.st_size < mark["length"]:
            log.warning("%s: %d bytes, shorter than the %d the checkpoint recorded (truncated by someone?); "
                        "appending", self.path, st.st_size, mark["length"])
        elif st.st_size > mark["length"]:
            self.cut_back = st.st_size - mark["length"]
            os.truncate(self.path, mark["length"])
            log.info("%s: cut back by %d bytes written after the last checkpoint (those events follow again)",
                     self.path, self.cut_back)

    def prepare(self, events: Sequence[Event]) -> None:
        if self.encoding == "json":
            jsonenc.prepare(list(events))  # cached on the events, with their ids
        else:
            ensure_ids(list(events))  # the BP text is the line read, or written at `write`

    async def write(self, batch: Sequence[Event]) -> None:
        await self.write_marked(batch, ())

    async def write_marked(self, batch: Sequence[Event], ends: Sequence[int]) -> list[Any]:
        file = self._file if self._file is not None else await self._open()
        marks: list[dict[str, Any]] = []
        tail = self._tail
        if len(ends) <= 1:
            data = self._encode(batch)
            tail = (tail + data[-TAIL:])[-TAIL:]
            if ends:
                marks.append(self._mark(self._length + len(data), tail))
        else:
            parts, start, total = [], 0, self._length
            for end in ends:
                part = self._encode(batch[start:end]) if end > start else b""
                parts.append(part)
                total += len(part)
                tail = (tail + part[-TAIL:])[-TAIL:]
                marks.append(self._mark(total, tail))
                start = end
            data = b"".join(parts)
        try:
            if len(data) <= INLINE_WRITE:
                _write_all(file, data)
            else:
                await asyncio.to_thread(_write_all, file, data)
        except OSError as exc:
            if self._spooled and exc.errno in RETRIABLE_ERRNOS:
                await self._undo_partial(file)
                raise Unavailable("write failed", f"{self.path}: write failed: {exc.strerror or exc}") from None
            raise EndpointError(f"{self.path}: write failed: {exc.strerror or exc}") from None
        self._length += len(data)
        self._tail = tail
        self._dirty = True
        return marks

    def give_up_after(self, seconds: float) -> None:
        """Under the spooling layer: a full or failing disk makes the batch wait in the spool (not an error)."""
        self._spooled = True

    async def _undo_partial(self, file: BinaryIO) -> None:
        """Cut off what a failed write left of its batch; the next write reopens the file to append."""
        self._file = None
        try:
            file.close()
        except OSError:  # unbuffered: nothing is left to write; a failing close changes nothing here
            pass
        try:
            os.truncate(self.path, self._length)
        except OSError as exc:
            raise EndpointError(f"{self.path}: write failed and cannot be undone: {exc.strerror or exc}") from None
        self.truncate = False  # reopened to append to what it holds

    async def flush(self) -> None:
        if self._file is not None and self.fsync and self._dirty:
            await asyncio.to_thread(os.fsync, self._file.fileno())  # off the loop: with many sources
            self._dirty = False                                      # (serve) a slow disk stalls none

    async def close(self) -> None:
        if self._file is not None:
            await self.flush()
            self._file.close()
            self._file = None


def _write_all(file: BinaryIO, data: bytes) -> None:
    """Write every byte (an unbuffered file may take part of a write, e.g. when interrupted)."""
    view = memoryview(data)
    while view:
        view = view[file.write(view):]
