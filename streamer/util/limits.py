"""Bounds every reader of untrusted text shares, and the one place workflow input files are opened.

Logs and event files are written by other programs, and job output by user
code on remote hosts: no single line or file may make streamer hold
unbounded memory, recurse without end or stall.

`open_regular` is how every reader of a workflow's files opens one (`read_bounded`,
`iter_lines`, the dagman.out tracker, the event-file follower): only a regular
file is read. A FIFO would block the open (no writer) or the read for ever, a
device such as `/dev/zero` never ends, a socket cannot be opened: each is
refused with `NotRegularFile`, whose message names the path and what it is.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from typing import BinaryIO, Iterator

log = logging.getLogger("streamer.util.limits")

MAX_LINE = 16 * 1024 * 1024
"""Longest line any line reader takes (event files, dagman.out, static.bp,
jobstate.log); longer lines are reported as FILE:LINE and skipped without being
held in memory."""

MAX_FILE = 256 * 1024 * 1024
"""Most of one job output file (kickstart record, .err, .sub) read: beyond it the
rest is left out, with a warning naming the file."""

_READ = 1 << 20


class NotRegularFile(OSError):
    """A path that names no regular file streamer can read: a FIFO, socket or device, a directory,
    a symbolic link loop. The message says which, with the path."""

    def __str__(self) -> str:
        return str(self.strerror)


def kind_of(mode: int) -> str:
    """What a file of `mode` is, in words (for messages)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _named(path: str | os.PathLike[str], exc: OSError) -> OSError:
    """`exc` of opening or stat-ing `path`, as NotRegularFile where it says what the path is."""
    what = {errno.ELOOP: "symbolic link loop (too many levels of symbolic links)",
            errno.EISDIR: "is a directory, not a regular file",
            errno.ENXIO: "is a socket or device, not a regular file"}.get(exc.errno or 0)
    return exc if what is None else NotRegularFile(exc.errno, f"{os.fspath(path)}: {what}")


def _refuse(path: str | os.PathLike[str], mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise NotRegularFile(errno.EINVAL, f"{os.fspath(path)}: is {kind_of(mode)}, not a regular file")


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for binary reading when it is a regular file (symbolic links followed).

    Opened without blocking (a FIFO with no writer would block `open` for ever)
    and checked on the open descriptor, so what is read is what was checked.
    Raises FileNotFoundError when nothing is there, NotRegularFile for a FIFO,
    socket, device, directory or symbolic link loop, OSError otherwise.
    """
    fd = _open_fd(path)
    try:
        _refuse(path, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_fd(path: str | os.PathLike[str]) -> int:
    """`path` opened read-only without blocking (a FIFO with no writer would block `open` for ever)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _named(path, exc) from None


def check_regular(path: str | os.PathLike[str]) -> os.stat_result:
    """The stat of `path` when it is a regular file (without opening it); the errors of `open_regular`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _named(path, exc) from None
    _refuse(path, st.st_mode)
    return st


def iter_lines(path: str | os.PathLike[str], *, max_line: int = MAX_LINE) -> Iterator[tuple[int, str]]:
    """(line number, text without newline) of a whole file, decoded as UTF-8 with replacements.

    A line longer than `max_line` bytes is skipped (its number is still counted)
    with a warning `FILE:LINE: line longer than ... bytes: skipped`; the file is
    read in bounded pieces, so such a line is never held whole.
    """
    number = 0
    pending = b""
    skipping = False
    with open_regular(path) as handle:
        while True:
            data = handle.read(_READ)
            if not data:
                break
            parts = (pending + data).split(b"\n")
            pending = parts.pop()
            for part in parts:
                number += 1
                if skipping:
                    skipping = False
                    log.warning("%s:%d: line longer than %d bytes: skipped", path, number, max_line)
                    continue
                if len(part) > max_line:
                    log.warning("%s:%d: line longer than %d bytes: skipped", path, number, max_line)
                    continue
                yield number, part.decode("utf-8", errors="replace")
            if len(pending) > max_line:
                pending, skipping = b"", True
    if pending or skipping:
        number += 1
        if skipping:
            log.warning("%s:%d: line longer than %d bytes: skipped", path, number, max_line)
        else:
            yield number, pending.decode("utf-8", errors="replace")


def read_bounded(path: str | os.PathLike[str], max_bytes: int = MAX_FILE) -> bytes:
    """The first `max_bytes` of a regular file (all of a normal one); warns when more was left out.

    Reads what the file holds (its size when opened, never a buffer sized by the
    limit), so ten thousand small kickstart records cost ten thousand small reads:
    on the descriptor itself, no file object (open, fstat, read, fstat, close per file).
    Raises NotRegularFile (a FIFO, device, socket, directory, link loop) and OSError as `open_regular`.
    """
    fd = _open_fd(path)
    try:
        _refuse(path, (st := os.fstat(fd)).st_mode)  # regular: O_NONBLOCK changes nothing for its reads
        size = st.st_size
        parts = [os.read(fd, min(size, max_bytes))]
        total = len(parts[0])
        while total < max_bytes:
            if total >= size:  # read what it held when opened: more only if it grew since (a job writing)
                size = os.fstat(fd).st_size
                if size <= total:
                    break
            more = os.read(fd, min(size - total, _READ, max_bytes - total))
            if not more:
                break
            parts.append(more)
            total += len(more)
        cut = total >= max_bytes and bool(os.read(fd, 1))
    finally:
        os.close(fd)
    if cut:
        log.warning("%s: larger than %d bytes: only its first %d bytes read", path, max_bytes, max_bytes)
    return parts[0] if len(parts) == 1 else b"".join(parts)
