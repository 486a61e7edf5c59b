"""Many streamer processes writing one SQLite Stampede file.

SQLite serialises writers itself: a batch is a `BEGIN IMMEDIATE` transaction,
so batches of different processes never interleave (a writer that finds the
file locked for longer than the busy timeout gets `database is locked`,
which `resilience.retrying_sync` retries). Ids are `MAX(id) + 1`, re-read under
that lock at every batch. What remains is the case `pgwriters.py` describes:
one workflow loaded by two writers at once, whose cached ids go stale.

Presence is a POSIX byte-range lock, one byte per workflow (at offset = a
31-bit hash of its uuid), in a lock file named after the database's device
and inode in the system's temporary directory (SQLite files are local: the
writers are on one host). A writer holds a shared lock on the byte of every
workflow it writes; under the transaction it asks whether anyone else holds
one too (trying for an exclusive lock without waiting, then going back to
shared). Writers in the same process (POSIX locks are per process) count each
other through a table in memory.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from collections import Counter
from typing import Iterable

from streamer.endpoints.db.pgwriters import lock_key

_local_lock = threading.Lock()
_local: Counter[tuple[str, int]] = Counter()  # (lock file, key) -> writers in this process


class FileWriterLocks:
    def __init__(self, db_path: str) -> None:
        st = os.stat(db_path)
        self.path = os.path.join(tempfile.gettempdir(), f"streamer-sqlite-writers-{st.st_dev}-{st.st_ino}.lock")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        self.present: set[int] = set()
        self.shared: set[int] = set()

    def announce(self, uuids: Iterable[str]) -> None:
        for key in sorted({lock_key(u) for u in uuids} - self.present):
            fcntl.lockf(self.fd, fcntl.LOCK_SH, 1, key)
            with _local_lock:
                _local[(self.path, key)] += 1
            self.present.add(key)

    def shared_with_others(self, uuids: list[str]) -> list[str]:
        """Uuids another writer (process, or endpoint of this process) is loading too; sticky."""
        for key in {lock_key(u) for u in uuids} - self.shared:
            with _local_lock:
                if _local[(self.path, key)] > 1:
                    self.shared.add(key)
                    continue
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, key)
            except OSError:
                self.shared.add(key)
            else:
                fcntl.lockf(self.fd, fcntl.LOCK_SH, 1, key)
        return [u for u in uuids if lock_key(u) in self.shared]

    def close(self) -> None:
        with _local_lock:
            for key in self.present:
                _local[(self.path, key)] -= 1
                if _local[(self.path, key)] <= 0:
                    del _local[(self.path, key)]
        os.close(self.fd)  # releases this process's locks on the file
