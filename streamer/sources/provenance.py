"""Source over Chimbuko provenance record files (replay or follow), with checkpoints.

The provenance DB's export tools write one file per collection, named after
it (`anomalies.jsonl`, `normalexecs.json`, `func_stats.json`, ...), as JSON
lines, one JSON array, or JSON documents one after another (indented). A
record's collection comes from its `collection` field, else from the file's
name, else from its content (`chimbuko.classify`).

How a file is read is decided by its first non-blank line, once:

- `[`: a JSON array; each object inside it is a record;
- exactly `{`: indented documents one after another;
- anything else: JSON lines, one record per line (the fast path).

Arrays and documents are cut into records by a scanner that follows
brackets and strings, so a record may span lines and a line may hold
several records. A record still incomplete at the end of what is written
waits for the rest when following; in a replay it is reported as truncated.
The checkpoint (per file: device, inode, byte offset, line, and the reading
state) points just after the last record delivered to every endpoint, so a
restart neither loses nor repeats one. A malformed record (invalid JSON,
wrong types, missing fields) is reported as `FILE:LINE: reason`, where LINE
is the line it starts on, and skipped.

Files that are not provenance files are read as event files, so one
`streamer load` takes both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import orjson

from streamer.events import Event, FieldError, chimbuko, constraints, jsonenc
from streamer.sources.base import Batch
from streamer.sources.eventfile import EventFileSource, InputError
from streamer.sources.follow import FileFollower, FilePosition

LINES, DOCUMENTS, ARRAY, IN_ARRAY = "lines", "documents", "array", "in-array"
"""Reading states: JSON lines; documents at top level; before an array's `[`; inside an array."""

SNIFF_BYTES = 64 * 1024


@dataclass
class RecordPosition(FilePosition):
    """A FilePosition that also knows how the file is being read (None: not decided yet)."""

    state: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = super().as_dict()
        if self.state is not None:
            out["state"] = self.state
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "RecordPosition":
        base = FilePosition.from_dict(data)
        state = data.get("state")
        return cls(base.path, base.dev, base.ino, base.offset, base.line,
                   state if state in (LINES, DOCUMENTS, ARRAY, IN_ARRAY) else None)


def first_line(path: Path) -> bytes | None:
    """The first non-blank line of a file (within SNIFF_BYTES), stripped; None if none or unreadable."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return None
    for line in head.split(b"\n"):
        if line.strip():
            return line.strip()
    return None


def is_provenance_file(path: str | Path) -> bool:
    """Is `path` a provenance export: named after a collection, a JSON array, indented documents,
    or JSON lines whose first record is a provenance record?"""
    path = Path(path)
    if chimbuko.collection_for_path(path.name):
        return True
    line = first_line(path)
    if not line:
        return False
    if line.startswith(b"[") or line == b"{":
        return True
    if not line.startswith(b"{"):
        return False
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return chimbuko.looks_like_record(record)


def state_of_first_line(line: bytes) -> str:
    if line.startswith(b"["):
        return ARRAY
    if line == b"{":
        return DOCUMENTS
    return LINES


_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|"')
_BLANK = re.compile(rb"\s*")
_BLANK_COMMAS = re.compile(rb"[\s,]*")
_NEXT_START = re.compile(rb"[{\[\]]")


class _Scanner:
    """Cuts array / document text into records, tracking byte offsets and line numbers."""

    def __init__(self, state: str, offset: int, line: int) -> None:
        self.state = state
        self.buf = b""
        self.offset = offset        # absolute offset of buf[0]
        self.line = line            # newlines before buf[0] (buf[0] is on line `line + 1`)

    def feed(self, data: bytes) -> list[tuple[int, bytes | str]]:
        """Add bytes; return (line, record bytes) of complete records and (line, reason) of junk."""
        self.buf += data
        buf = self.buf
        out: list[tuple[int, bytes | str]] = []
        pos = 0
        newlines_at, newlines = 0, self.line  # newlines counted up to buf[newlines_at]

        def line_at(index: int) -> int:
            nonlocal newlines_at, newlines
            newlines += buf.count(b"\n", newlines_at, index)
            newlines_at = index
            return newlines + 1

        size = len(buf)
        while True:
            blank = (_BLANK_COMMAS if self.state == IN_ARRAY else _BLANK).match(buf, pos)
            assert blank is not None, "a pattern of `*` matches everywhere"
            pos = blank.end()
            if pos >= size:
                break
            byte = buf[pos:pos + 1]
            if self.state == ARRAY:
                if byte == b"[":
                    self.state = IN_ARRAY
                    pos += 1
                    continue
            elif self.state == IN_ARRAY and byte == b"]":
                self.state = ARRAY  # the array ended; another may follow
                pos += 1
                continue
            elif byte == b"{":
                end = _record_end(buf, pos)
                if end is None:
                    break  # incomplete: wait for more
                out.append((line_at(pos), buf[pos:end]))
                pos = end
                continue
            # anything else is out of place: report it, go on at the next bracket
            found = _NEXT_START.search(buf, pos + 1)
            stop = found.start() if found else size
            out.append((line_at(pos), f"unexpected text {buf[pos:min(stop, pos + 40)].decode('utf-8', 'replace')!r}"
                                      " between records: skipped"))
            pos = stop
        line_at(pos)
        self.buf = buf[pos:]
        self.offset += pos
        self.line = newlines
        return out

    @property
    def pending(self) -> bool:
        return bool(self.buf.strip())


def _record_end(buf: bytes, start: int) -> int | None:
    """Offset just after the object starting at `start`, or None when it is not complete yet."""
    depth = 0
    for match in _TOKEN.finditer(buf, start):
        token = match.group()
        first = token[:1]
        if first == b'"':
            if len(token) == 1:
                return None  # a string not closed yet
            continue
        if first in (b"{", b"["):
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return match.end()
    return None


class ProvenanceSource(EventFileSource):
    """Provenance records (and, for other files, Stampede events) from files, replayed or followed."""

    position_type = RecordPosition  # positions carry the record cutter's reading state

    def __init__(self, paths: Sequence[str | Path], **options: Any) -> None:
        super().__init__(paths, **options)
        self.kinds = {self.key(p): is_provenance_file(p) for p in self.paths}

    def _file_batches(self, path: Path) -> AsyncIterator[Batch]:
        if not self.kinds.get(self.key(path)) and not is_provenance_file(path):
            return super()._file_batches(path)
        return self._record_batches(path)

    async def _record_batches(self, path: Path) -> AsyncIterator[Batch]:
        key = self.key(path)
        collection = chimbuko.collection_for_path(path.name)
        start = self.positions.get(key)
        state = start.state if isinstance(start, RecordPosition) and start.offset else None
        follower = FileFollower(path, follow=self.follow, start=start, poll_interval=self.poll_interval)
        self._followers.append(follower)
        scanner: _Scanner | None = None
        expected: tuple[int, int, int] | None = None  # (dev, ino, offset) the next chunk should start at
        async for chunk in follower.chunks():
            events: list[Event] = []
            base = chunk.position
            try:
                if expected is not None and expected != (base.dev, base.ino, chunk.start):
                    # the follower moved: a new file (rotation), a truncation, or an overlong line skipped
                    if scanner is not None:
                        if scanner.pending:
                            self._bad(path, scanner.line + 1 + _leading_newlines(scanner.buf),
                                      "record cut off (file rotated or truncated, or a line too long): skipped")
                        state = scanner.state
                        scanner = None
                    if chunk.start == 0:
                        state = None  # a file read from its start: its layout is decided again
                expected = (base.dev, base.ino, base.offset)
                for line_no, reason in chunk.problems:
                    self._bad(path, line_no, reason)
                if state is None:  # decided by the first non-blank line
                    state = next((state_of_first_line(raw.strip()) for raw in chunk.lines if raw.strip()), None)
                if state is None:
                    at = RecordPosition(base.path, base.dev, base.ino, base.offset, base.line)
                elif state == LINES:
                    number = chunk.first_line
                    for raw in chunk.lines:
                        text = raw.strip()
                        if text and text[:1] != b"#":
                            self._decode(path, number, text, collection, events)
                        number += 1
                    at = RecordPosition(base.path, base.dev, base.ino, base.offset, base.line, state)
                else:
                    if scanner is None:
                        scanner = _Scanner(state, chunk.start, chunk.first_line - 1)
                    data = b"\n".join(chunk.lines) + b"\n"
                    if chunk.start + len(data) > base.offset:  # a last line without newline (end of a replay)
                        data = data[:-1]
                    for line_no, item in scanner.feed(data):
                        self._decode(path, line_no, item, collection, events)
                    at = RecordPosition(base.path, base.dev, base.ino, scanner.offset, scanner.line, scanner.state)
                    if not self.follow and scanner.pending and _at_end(path, base.offset):
                        self._bad(path, scanner.line + 1 + _leading_newlines(scanner.buf),
                                  "truncated JSON record (the file ends inside it): skipped")
            except InputError:  # --strict: deliver the records before the bad one, then stop
                yield Batch(events, dict(self._reading), done=base.offset, total=self._total_bytes or None)
                raise
            self.stats.lines += len(chunk.lines)
            self.stats.events += len(events)
            self._reading[key] = at.as_dict()
            yield Batch(events, dict(self._reading), done=base.offset, total=self._total_bytes or None)

    def _decode(self, path: Path, line: int, raw: bytes | str, collection: str | None,
                events: list[Event]) -> None:
        """One record (or a reason it is not one) -> an event appended, or a report."""
        if isinstance(raw, str):
            self._bad(path, line, raw)
            return
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._bad(path, line, f"invalid JSON: {exc}")
            return
        if not isinstance(obj, dict):
            self._bad(path, line, "not a JSON object")
            return
        try:
            if "event" in obj and "collection" not in obj:
                event = jsonenc.from_dict(obj)  # a Stampede or chimbuko event in streamer's JSON form
                constraints.check(event)
            else:
                event = chimbuko.event_from_record(obj, collection=collection)
        except (chimbuko.RecordError, jsonenc.JSONError, FieldError) as exc:
            self._bad(path, line, str(exc))
            return
        events.append(event)


def _at_end(path: Path, offset: int) -> bool:
    try:
        return offset >= path.stat().st_size
    except OSError:
        return True


def _leading_newlines(buf: bytes) -> int:
    stripped = buf.lstrip()
    return buf[: len(buf) - len(stripped)].count(b"\n")


def open_source(paths: Sequence[str | Path], **options: Any) -> EventFileSource:
    """The source `streamer load` / `tail` use: provenance-aware when any file is a provenance export."""
    if any(is_provenance_file(p) for p in paths):
        return ProvenanceSource(paths, **options)
    return EventFileSource(paths, **options)


def end_position(path: Path, lines: int) -> RecordPosition | None:
    """Where `tail` starts in a provenance file (its end), with the state to read what comes next."""
    try:
        st = path.stat()
    except OSError:
        return None
    line = first_line(path)
    state = state_of_first_line(line) if line else None
    if state == ARRAY:
        with open(path, "rb") as handle:
            handle.seek(max(0, st.st_size - 4096))
            closed = handle.read().rstrip().endswith(b"]")
        state = ARRAY if closed else IN_ARRAY
    return RecordPosition(str(path), st.st_dev, st.st_ino, st.st_size, lines, state)
