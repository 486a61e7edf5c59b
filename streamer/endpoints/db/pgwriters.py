"""Many streamer processes writing one PostgreSQL Stampede database.

Different workflows touch different rows, except the replica catalog
(`rc_lfn` and its `rc_pfn` / `rc_meta` rows are shared by every workflow that
names the same file): the loader writes those in sorted order and locks each
lfn row first (`ON CONFLICT ... DO UPDATE`), so two writers wait for each other
instead of deadlocking or inserting the same replica twice. Ids come from the
tables' sequences, which never hand out a value twice.

The same workflow loaded by two processes at once (two `streamer follow` of
one submit dir, a replay started while another runs) needs more, because the
loader caches the ids of a workflow's rows between batches. Two advisory
locks per workflow (keyed by a 31-bit hash of its uuid) handle it:

- **presence** (session level, shared): every writer holds it for each
  workflow it has written, on a connection of its own, for as long as it runs;
- **batch** (transaction level, exclusive): taken, in key order, for every
  workflow a batch mentions before the batch reads or writes anything.

Under its batch locks a writer counts the holders of the presence lock: when
another writer is (or once was) there, the workflow's cached ids are dropped
and read again from the database, which is exact while the batch lock is
held. A replay then also joins the other writer's load instead of deleting
it. A hash collision only costs a little extra locking and re-reading.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

PRESENCE = 0x53540001
"""Advisory lock class of "a writer is loading this workflow" (shared, session)."""
BATCH = 0x53540002
"""Advisory lock class of "a batch of this workflow is being written" (exclusive, transaction)."""


def lock_key(uuid: str) -> int:
    return int.from_bytes(hashlib.blake2b(uuid.encode(), digest_size=4).digest(), "big") & 0x7FFFFFFF


class WriterLocks:
    """This writer's presence locks (held on `conn`) and the per-batch serialisation."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.present: set[int] = set()
        self.shared: set[int] = set()
        """Workflows another writer has loaded while we did: re-read at every batch from then on."""
        self.waits = 0
        """Batch locks another writer held when asked (partitioned collectors own disjoint workflows: 0)."""

    async def announce(self, uuids: Iterable[str]) -> None:
        """Hold the presence lock of every workflow we are about to write."""
        for key in sorted({lock_key(u) for u in uuids} - self.present):
            await self.conn.execute("SELECT pg_advisory_lock_shared($1::int, $2::int)", PRESENCE, key)
            self.present.add(key)

    async def serialize(self, conn: Any, uuids: list[str]) -> list[str]:
        """Take the batch locks (in key order); return the uuids another writer shares with us."""
        keys = sorted({lock_key(u) for u in uuids})
        for key in keys:
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1::int, $2::int)", BATCH, key):
                self.waits += 1  # another writer's batch has this workflow: wait for it
                await conn.execute("SELECT pg_advisory_xact_lock($1::int, $2::int)", BATCH, key)
        if keys:
            rows = await conn.fetch(
                "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid = $1::bigint::oid AND objsubid = 2 AND objid::bigint = ANY($2::bigint[]) "
                "GROUP BY objid HAVING count(*) > 1", PRESENCE, keys)
            self.shared.update(int(r[0]) for r in rows)
        return [u for u in uuids if lock_key(u) in self.shared]

    async def close(self) -> None:
        try:
            await self.conn.close()  # the session's presence locks go with it
        except Exception:  # noqa: BLE001 - a connection already lost has nothing to release
            self.conn.terminate()
