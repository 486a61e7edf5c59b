"""Where a collector reading a RabbitMQ stream starts, and the offset it keeps to resume exactly.

A stream (`x-queue-type: stream`) is a log: reading takes nothing out of it, and
a consumer says where to start (`x-stream-offset`). The collector keeps the
offset after the last message every endpoint acknowledged in a state file of its
own — `$STREAMER_STATE_DIR/amqp-stream/QUEUE-DIGEST.json`, the digest taken over
the brokers' vhost, the stream and the destinations, so the same collector
(same stream, same `--dest`) resumes where it stopped, even after SIGKILL, and a
collector loading into a new database starts afresh. `?offset_state=PATH` names
the file instead.

Where a collector with no stored offset starts (`?offset=`): `first` (the
default: the whole history the stream keeps), `last` (the last chunk), `next`
(only what comes from now on), a number (that offset), or a time
(`2026-11-27T08:00:00Z`: messages from then on, to the chunk).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from streamer.util import checkpoint

NAMED = ("first", "last", "next")


def parse_offset(text: Any) -> Any:
    """The `x-stream-offset` value `?offset=` asks for: a name, a number, or a time (aware datetime)."""
    value = str(text if text not in (None, "") else "first").strip()
    if value.lower() in NAMED:
        return value.lower()
    if value.isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"offset {value!r}: expected first, last, next, an offset (a number) or a time "
                         "(e.g. 2026-11-27T08:00:00Z)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def default_state_path(state_dir: Path, display: str, destinations: Iterable[str]) -> Path:
    """The offset file of this stream (`display`: the masked broker URL with the stream) and these destinations,
    under the user's state directory (`config.statedir.user_state_dir`, given by the command)."""
    ident = "\n".join([display.partition("@")[2].partition("/")[2], *sorted(destinations)])
    digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
    queue = display.rsplit("/", 1)[-1]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in queue)[:40] or "stream"
    return state_dir / "amqp-stream" / f"{safe}-{digest}.json"


class StreamOffset:
    """The offset to resume from, kept in a small JSON file written atomically after every commit
    (`util/checkpoint.py`: a damaged one is refused when a destination is a file, else kept aside)."""

    def __init__(self, path: Path, *, refuse: bool = False) -> None:
        self.path = path
        self.next: int | None = None
        """The offset of the first message not yet acknowledged by every endpoint (None: none stored)."""
        stored = checkpoint.read(path, what="stream offset file", refuse=refuse, clean="starting from ?offset=",
                                 accept=lambda data: isinstance(data.get("next"), int))
        if stored is not None:
            self.next = int(stored["next"])

    def start(self, asked: Any) -> Any:
        """Where to start consuming: the stored offset, else what `?offset=` asked."""
        return self.next if self.next is not None else asked

    def save(self, offset: int) -> None:
        """Every message up to `offset` is acknowledged by every endpoint."""
        if self.next is not None and offset + 1 <= self.next:
            return
        self.next = offset + 1
        checkpoint.write(self.path, {"next": self.next})


def message_offset(headers: dict[str, Any] | None) -> int | None:
    """The stream offset RabbitMQ set on a delivered message (its `x-stream-offset` header), from its headers."""
    value = (headers or {}).get("x-stream-offset")
    return int(value) if isinstance(value, int) else None
