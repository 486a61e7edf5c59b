"""Dead letters: events an endpoint refuses for good go to its own file, and the run goes on.

`--dest 'postgresql://…/db?dead_letter=/var/lib/streamer/pg.dead.jsonl'` wraps the
endpoint in `DeadLetters`. When a write fails with `resilience.Rejected` (the
endpoint refused the *content*: a value its column cannot hold, a constraint it
cannot satisfy), the batch is split in halves and each half written again, down
to the single events that are refused; each of those is appended to the file
as one JSON line — the event in streamer's JSON form (`event_id` included) plus
a `dead_letter` object with the reason, the endpoint (password masked) and the
time — and counted (`dead_lettered`, in `streamer_endpoint_errors_total`). The
events around it are written as usual. The database endpoints also refuse
single events while writing the rest of their batch (a text longer than its
column, a job of a workflow never planned): those go to the file too, with the
endpoint's reason. Any other error (a server that stays
away, a bad schema) is the endpoint's failure as before: dead letters are for
what retrying cannot fix.

After a fix (a wider column, a missing parent row), `streamer load FILE --dest
URL` re-delivers them: the reader ignores the `dead_letter` key. The file is
appended to, fsync'd before the batch is acknowledged (so a crash cannot lose
a refused event the source will not send again), and never truncated by streamer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any, Sequence

import orjson

from streamer.events import Event, jsonenc
from streamer.util.urls import mask
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.endpoints.layers.base import Layer
from streamer.endpoints.layers.resilience import Rejected

log = logging.getLogger("streamer.deadletter")


class DeadLetters(Layer):
    """A layer around `inner`: what it refuses for good goes to `path`."""

    def __init__(self, inner: Endpoint, path: str | os.PathLike[str]) -> None:
        super().__init__(inner)
        self.path = Path(path).expanduser()
        self.dead_lettered = 0

    async def open(self) -> None:
        if not self.path.parent.is_dir():
            raise EndpointError(f"{self.name}: dead_letter {self.path}: directory {self.path.parent} does not exist")
        stats = getattr(self.inner, "stats", None)
        if stats is not None and hasattr(stats, "refused"):  # database endpoints refuse single events too
            stats.refused = []
        if hasattr(self.inner, "returned"):  # the AMQP endpoint: messages the broker returned as unroutable
            self.inner.returned = []
        await self.inner.open()

    async def write(self, batch: Sequence[Event]) -> None:
        await self._write(batch)
        stats = getattr(self.inner, "stats", None)
        refused = getattr(stats, "refused", None)
        if refused:  # events the endpoint left out of a batch it wrote (a value its column cannot hold, ...)
            taken = list(refused)
            refused.clear()  # the endpoint's own list: it keeps appending to it
            for event, reason in taken:
                await self._dead_letter(event, reason)
        await self._returned()

    async def _returned(self) -> None:
        """Messages the broker returned (unroutable with `mandatory`): their bodies are the events' JSON."""
        returned = getattr(self.inner, "returned", None)
        if returned:
            taken = list(returned)
            returned.clear()  # the endpoint's own list: it keeps appending to it
            for body, reason in taken:
                await self._dead_letter_json(orjson.loads(body), reason)

    async def _write(self, batch: Sequence[Event]) -> None:
        try:
            await self.inner.write(batch)
        except Rejected as exc:
            if len(batch) == 1:
                await self._dead_letter(batch[0], str(exc))
                return
            middle = len(batch) // 2
            await self._write(batch[:middle])
            await self._write(batch[middle:])

    async def flush(self) -> None:
        await self.inner.flush()
        await self._returned()

    async def close(self) -> None:
        await self.inner.close()
        await self._returned()  # a spool drained at close may have had some returned
        if self.dead_lettered:
            log.warning("%s: %d event(s) refused and written to %s (streamer load %s --dest ... re-delivers "
                        "them after a fix)", self.name, self.dead_lettered, self.path, self.path)

    def undelivered(self) -> list[tuple[int, str]]:
        own = [(self.dead_lettered, f"dead-lettered to {self.path}")] if self.dead_lettered else []
        return self.inner.undelivered() + own

    async def _dead_letter(self, event: Event, reason: str) -> None:
        origin = getattr(event, "origin", None)
        where = f", {origin[0]}:{origin[1]}" if origin else ""
        await self._dead_letter_json(orjson.loads(jsonenc.dumps(event)), reason, where)

    async def _dead_letter_json(self, obj: dict[str, Any], reason: str, where: str = "") -> None:
        """Append the event and say so: the one report of a dead-lettered event (the endpoint that refused it
        leaves the telling to this layer)."""
        reason = mask(reason)  # a server's or library's message may hold the raw URL
        obj[jsonenc.DEAD_LETTER_KEY] = {"reason": reason, "endpoint": self.name,
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        line = orjson.dumps(obj) + b"\n"
        await asyncio.to_thread(_append, self.path, line)
        self.dead_lettered += 1
        log.warning("%s: event %s (id %s%s) refused, written to %s: %s", self.name, obj.get("event"),
                    str(obj.get("event_id", ""))[:16], where, self.path, reason)


def _append(path: Path, line: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def with_dead_letters(endpoint: Endpoint) -> Endpoint:
    """`endpoint` wrapped in `DeadLetters` when it has a `dead_letter=PATH` option, else itself."""
    path = endpoint.option("dead_letter")
    return DeadLetters(endpoint, str(path)) if path else endpoint
