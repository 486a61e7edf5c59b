"""Bounds every reader of untrusted text shares, and the line reader of whole files.

Logs and event files are written by other programs, and job output by user
code on remote hosts: no single line or file may make streamer hold
unbounded memory, recurse without end or stall.
"""

from __future__ import annotations

import logging
import os
from typing import Iterator

log = logging.getLogger("streamer.util.limits")

MAX_LINE = 16 * 1024 * 1024
"""Longest line any line reader takes (event files, dagman.out, static.bp,
jobstate.log); longer lines are reported as FILE:LINE and skipped without being
held in memory."""

MAX_FILE = 256 * 1024 * 1024
"""Most of one job output file (kickstart record, .err, .sub) read: beyond it the
rest is left out, with a warning naming the file."""

_READ = 1 << 20


def iter_lines(path: str | os.PathLike[str], *, max_line: int = MAX_LINE) -> Iterator[tuple[int, str]]:
    """(line number, text without newline) of a whole file, decoded as UTF-8 with replacements.

    A line longer than `max_line` bytes is skipped (its number is still counted)
    with a warning `FILE:LINE: line longer than ... bytes: skipped`; the file is
    read in bounded pieces, so such a line is never held whole.
    """
    number = 0
    pending = b""
    skipping = False
    with open(path, "rb") as handle:
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
    """The first `max_bytes` of a file (all of a normal one); warns when more was left out."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        log.warning("%s: larger than %d bytes: only its first %d bytes read", path, max_bytes, max_bytes)
        data = data[:max_bytes]
    return data
