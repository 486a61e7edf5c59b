"""Files pegasus-monitord keeps in the submit dir that Pegasus's tools and people read.

- `monitord.pid` (`pid N` / `timestamp ISO`): pegasus-run refuses to resubmit
  while it exists; a second monitor exits 43 while its pid is alive; removed
  when the monitor exits.
- `monitord.started` / `monitord.done`: see `streamer.monitor.markers`; a stale
  `monitord.done` is removed at start (pegasus-statistics reads it as
  "loading complete").
- `monitord.log`: rotated to `monitord.log.NNN` as Pegasus rotates it.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

from streamer.util.exitcodes import Exit

log = logging.getLogger("streamer.monitord")

PID_FILE = "monitord.pid"
LOG_FILE = "monitord.log"
DONE_FILE = "monitord.done"
MAX_ROTATIONS = 1000
PID_IN_USE = Exit.PID_IN_USE
"""monitord's exit code when another instance holds the pid file."""


def isodate(moment: float) -> str:
    """Pegasus's `utils.isodate`: local time with a `+HHMM` offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(moment))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def pid_in_file(path: Path) -> int | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "pid":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def claim_pid_file(directory: Path, *, force: bool) -> bool:
    """Write `monitord.pid`; False if a live monitor (not this process) holds it and not `force`."""
    path = directory / PID_FILE
    other = pid_in_file(path)
    if other is not None and other != os.getpid() and pid_alive(other) and not force:
        return False
    path.write_text(f"pid {os.getpid()}\ntimestamp {isodate(time.time())}\n")
    return True


def release_pid_file(directory: Path) -> None:
    path = directory / PID_FILE
    if pid_in_file(path) == os.getpid():
        path.unlink(missing_ok=True)


def remove_stale_done(directory: Path) -> None:
    (directory / DONE_FILE).unlink(missing_ok=True)


def rotate(path: Path) -> Path | None:
    """Rename `path` to the first free `path.NNN` (as Pegasus's `rotate_log_file`); None if absent."""
    if not path.exists():
        return None
    for number in range(MAX_ROTATIONS):
        target = path.with_name(f"{path.name}.{number:03d}")
        if not target.exists():
            os.rename(path, target)
            return target
    log.warning("%s: %d rotations exist; appending to it", path, MAX_ROTATIONS)
    return None


def stderr_is(path: Path) -> bool:
    """Whether our stderr already goes to `path` (pegasus-dagman redirects monitord's output to monitord.log)."""
    try:
        mine, theirs = os.fstat(2), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
