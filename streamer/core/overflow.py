"""Per-endpoint overflow file: where the bus parks events a slow endpoint cannot take yet.

When an endpoint's memory buffer is full, the bus appends further batches here
instead of making the source wait, so the other endpoints keep their pace; the
endpoint's task reads them back in order once it has caught up. The file need
not survive a crash: the source's checkpoint never passes events an endpoint
has not acknowledged, so a restart re-reads them from the source. Records are
`seq<TAB>record` lines, the record in the injected codec's one-line form (an
empty record part marks a batch with no events for this endpoint).
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from pathlib import Path
from typing import Generic, Sequence, TypeVar

from streamer.core.record import Codec

R = TypeVar("R")


class OverflowFile(Generic[R]):
    """A FIFO of (seq, records) on disk, bounded by `max_bytes`, records written with `codec`."""

    def __init__(self, directory: str | Path | None, label: str, max_bytes: int, codec: Codec[R]) -> None:
        self.max_bytes = max_bytes
        self.codec = codec
        fd, name = tempfile.mkstemp(prefix=f"streamer-{label}-", suffix=".overflow", dir=directory)
        os.close(fd)
        self.path = Path(name)
        self._writer = open(self.path, "ab")
        self._reader = open(self.path, "rb")
        self.size = 0          # bytes written and not yet read back
        self.events = 0        # events parked
        self._batches: deque[int] = deque()  # event count per parked batch, in order

    def __len__(self) -> int:
        return len(self._batches)

    @property
    def full(self) -> bool:
        return self.size >= self.max_bytes

    def append(self, seq: int, events: Sequence[R]) -> None:
        prefix = str(seq).encode() + b"\t"
        if events:
            encode = self.codec.encode
            data = b"".join(prefix + encode(e) + b"\n" for e in events)
        else:
            data = prefix + b"\n"
        self._writer.write(data)
        self.size += len(data)
        self.events += len(events)
        self._batches.append(len(events))

    def pop(self) -> tuple[int, list[R]]:
        """The oldest parked batch."""
        self._writer.flush()
        count = self._batches.popleft()
        events: list[R] = []
        seq = 0
        for _ in range(max(count, 1)):
            line = self._reader.readline()
            self.size -= len(line)
            head, _, body = line.rstrip(b"\n").partition(b"\t")
            seq = int(head)
            if body:
                events.append(self.codec.decode(body))
        self.events -= len(events)
        if not self._batches:
            self._rewind()
        return seq, events

    def _rewind(self) -> None:
        self._writer.seek(0)
        self._writer.truncate()
        self._reader.seek(0)
        self.size = 0

    def close(self) -> None:
        self._writer.close()
        self._reader.close()
        self.path.unlink(missing_ok=True)
