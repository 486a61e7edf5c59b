"""Finding new workflows under the roots, and noticing writes to the logs being followed.

With inotify (`asyncinotify`, Linux) every directory under a root that can
still hold a live run is watched for entries created or moved in and for
writes: a new directory is walked once (only it: never the whole root again),
a `braindump.yml` or `*.dag.dagman.out` created, closed after writing or renamed
into place is a candidate workflow, a write to
a `*.dagman.out` wakes the workflow following it at once (p99 latency is the
parsing, not a poll interval). Directories of finished workflows (they carry
`monitord.done`) are neither entered nor watched, and a workflow that finishes
while served has its watches removed, so watches grow with the live runs and
the directories above them, not with history.

Without inotify the same walk is repeated every `poll` seconds (finished
workflows skipped) and the followers fall back to their own polling.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from asyncinotify import Inotify, Watch

log = logging.getLogger("streamer.serve")

BRAINDUMP = ("braindump.yml", "braindump.txt")
DONE_MARK = "monitord.done"


def is_candidate_name(name: str) -> bool:
    return name in BRAINDUMP or name.endswith(".dag.dagman.out")


def finished_dir(path: str) -> bool:
    """A submit dir whose run ended and was processed (by monitord or by streamer): history."""
    return os.path.exists(os.path.join(path, DONE_MARK))


class TreeWatcher:
    """Calls `on_candidate(dir)` for directories that may hold a new workflow, `on_write(path)` for dagman.out
    writes."""

    def __init__(self, roots: list[Path], on_candidate: Callable[[str], None], on_write: Callable[[str], None],
                 *, poll: float = 5.0) -> None:
        self.roots = [str(r) for r in roots]
        self.on_candidate = on_candidate
        self.on_write = on_write
        self.poll = poll
        self._inotify: Inotify | None = None
        self._watches: dict[str, Watch] = {}  # directory -> Watch
        self.inotify = False

    def start(self) -> None:
        try:
            from asyncinotify import Inotify
            self._inotify = Inotify()
            self.inotify = True
        except (ImportError, OSError) as exc:  # not Linux, or no inotify instances left
            log.warning("no inotify (%s): looking for new workflows every %.0f s", exc, self.poll)
        for root in self.roots:
            self._walk(root)

    @property
    def watched(self) -> int:
        return len(self._watches)

    def _watch(self, directory: str) -> None:
        if self._inotify is None or directory in self._watches:
            return
        from asyncinotify import Mask
        try:
            self._watches[directory] = self._inotify.add_watch(
                directory, Mask.CREATE | Mask.MOVED_TO | Mask.MODIFY | Mask.CLOSE_WRITE | Mask.ONLYDIR
                | Mask.DONT_FOLLOW)
        except OSError as exc:  # gone already, or the watch limit (fs.inotify.max_user_watches)
            log.warning("%s: cannot watch (%s)", directory, exc)

    def _walk(self, top: str) -> None:
        """Watch `top` and the directories below it that can hold a live run; report candidates.

        Each directory is watched *before* it is listed (os.walk lists first), so an entry created or
        moved in meanwhile is either in the listing or reported by inotify: never missed."""
        stack = [top]
        while stack:
            directory = stack.pop()
            if finished_dir(directory):
                continue
            self._watch(directory)
            try:
                entries = list(os.scandir(directory))
            except OSError:  # gone, or not readable
                continue
            candidate = False
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif is_candidate_name(entry.name):
                        candidate = True
                except OSError:
                    continue
            if candidate:
                self.on_candidate(directory)

    def forget(self, submit_dir: str) -> None:
        """Stop watching a workflow's directories (it finished)."""
        prefix = submit_dir.rstrip("/") + "/"
        for directory in [d for d in self._watches if d == submit_dir or d.startswith(prefix)]:
            watch = self._watches.pop(directory)
            if self._inotify is None:  # closed: its watches went with it
                continue
            try:
                self._inotify.rm_watch(watch)
            except (OSError, ValueError):
                pass

    async def run(self) -> None:
        if self._inotify is None:
            while True:
                await asyncio.sleep(self.poll)
                for root in self.roots:
                    await asyncio.to_thread(self._walk, root)
        from asyncinotify import Mask
        async for event in self._inotify:
            mask = event.mask
            if mask & Mask.Q_OVERFLOW:
                log.warning("inotify queue overflowed: walking the roots again")
                for root in self.roots:
                    self._walk(root)
                continue
            if mask & Mask.IGNORED:
                if event.watch is not None:
                    self._watches.pop(str(event.watch.path), None)
                continue
            if event.path is None or event.name is None:
                continue
            name = str(event.name)
            path = str(event.path)
            if mask & Mask.ISDIR:
                if mask & (Mask.CREATE | Mask.MOVED_TO):
                    self._walk(path)
            elif mask & Mask.MODIFY:
                if name.endswith(".dagman.out"):
                    self.on_write(path)
            elif is_candidate_name(name):  # created, renamed into place, or closed after a write (complete)
                self.on_candidate(str(event.path.parent))

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
