"""Many streamer processes writing one MySQL / MariaDB Stampede database.

Every batch already runs under the server's named lock `streamer.stampede`
(`mysql.py`): batches of different writers never interleave, and the ids a
batch reads under it stay true until it commits. What remains is the case
`pgwriters.py` describes: one workflow loaded by two writers at once (two
`streamer follow` of one submit dir, a replay started while another runs),
whose cached ids go stale — and a replay that would delete the other's rows.

MySQL's named locks are exclusive: there is no shared lock whose holders one
could count. Presence is therefore one of `SLOTS` named locks per workflow
and database (`streamer.w.<database hash>.<workflow key>.<slot>`): a writer
takes the first free slot (`GET_LOCK(name, 0)`) on its connection for as long
as it runs (a session's named locks go with it), and under the batch lock it
asks whether any other slot of the workflow is held (`IS_USED_LOCK`). When
one is (or once was), the workflow's cached ids are dropped and read again
from the database, and a replay joins the other writer's load instead of
deleting it. Every slot taken means `SLOTS` other writers are there: shared
too. A hash collision only costs a little extra re-reading.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from streamer.endpoints.db.pgwriters import lock_key

SLOTS = 16
"""Presence slots per workflow: writers of one workflow at once that can tell each other apart."""


class WriterSlots:
    """This writer's presence slots (held by its connection) and what it learnt of the others."""

    def __init__(self, database: str) -> None:
        self.prefix = "streamer.w." + hashlib.blake2b(database.encode(), digest_size=4).hexdigest()
        self.present: dict[int, int] = {}
        """Workflow key -> the slot this writer holds (-1: every slot was taken by others)."""
        self.shared: set[int] = set()
        """Workflows another writer has loaded while we did: re-read at every batch from then on (sticky)."""

    def name(self, key: int, slot: int) -> str:
        return f"{self.prefix}.{key:08x}.{slot}"

    def reconnected(self) -> None:
        """A new connection holds none of the old one's slots: they are taken again at the next batch."""
        self.present.clear()

    async def announce(self, cur: Any, uuids: Iterable[str]) -> None:
        """Hold a presence slot of every workflow we are about to write."""
        for key in sorted({lock_key(u) for u in uuids} - set(self.present)):
            self.present[key] = -1
            for slot in range(SLOTS):
                await cur.execute("SELECT GET_LOCK(%s, 0)", (self.name(key, slot),))
                (got,) = await cur.fetchone()
                if got == 1:
                    self.present[key] = slot
                    break
            else:
                self.shared.add(key)

    async def shared_with_others(self, cur: Any, uuids: list[str]) -> list[str]:
        """The uuids another writer is loading too (asked under the batch lock); sticky."""
        keys = sorted({lock_key(u) for u in uuids} - self.shared)
        others = [(key, self.name(key, slot)) for key in keys for slot in range(SLOTS)
                  if slot != self.present.get(key)]
        if others:
            await cur.execute("SELECT " + ", ".join(["IS_USED_LOCK(%s)"] * len(others)),
                              tuple(name for _, name in others))
            row = await cur.fetchone()
            self.shared.update(key for (key, _), holder in zip(others, row) if holder is not None)
        return [u for u in uuids if lock_key(u) in self.shared]
