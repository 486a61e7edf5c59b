"""Is this file an event file at all? A look at its first lines before `streamer load` or `tail` reads it.

A dagman.out, a .dag, a Stampede .db or a kickstart record given to `load` or
`tail` would otherwise give one error per line and exit 0; this stops at once
with what the file looks like and the command that reads it (for `tail`: the
commands that show a workflow live).
"""

from __future__ import annotations

import re
from pathlib import Path

from streamer.sources.decode import decode_line
from streamer.util.limits import open_regular

SAMPLE = 5
"""Non-blank lines looked at: if none of them is an event, the file is refused."""

_DAGMAN_TIME = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d ")
_DAG_WORDS = ("JOB ", "PARENT ", "SCRIPT ", "RETRY ", "VARS ", "SUBDAG ", "SPLICE ", "DOT ", "PRIORITY ",
              "CATEGORY ", "MAXJOBS ", "CONFIG ", "NODE_STATUS_FILE ", "JOBSTATE_LOG ", "FINAL ")


class NotEventFile(ValueError):
    """The file's first lines are no events; the message names it and says what to use instead."""


def _reader(directory: Path, command: str) -> str:
    """The command that reads a submit directory instead: `replay` for `load`, the live views for `tail`."""
    if command == "tail":
        return f"streamer follow {directory} --dest - (its events as they come) or streamer status {directory} --watch"
    return f"streamer replay {directory}"


def _hint(path: Path, head: bytes, lines: list[str], command: str) -> str:
    if head.startswith(b"SQLite format 3\x00"):
        return "this is an SQLite database (a Stampede DB?): read it with pegasus-statistics or pegasus-analyzer"
    name = path.name
    directory = path.parent
    if name.endswith(".dagman.out") or any(_DAGMAN_TIME.match(line) for line in lines):
        return f"this looks like a DAGMan log: use {_reader(directory, command)}"
    if name.endswith(".dag") or any(line.startswith(_DAG_WORDS) for line in lines):
        return f"this looks like a DAG file: use {_reader(directory, command)} (its submit directory)"
    if name.startswith("braindump") or any(line.startswith("- invocation:") for line in lines):
        return f"this is part of a submit directory: use {_reader(directory, command)}"
    return f"streamer {command} reads .bp / .jsonl event files (one event per line)"


def check_event_file(path: Path, command: str = "load") -> None:
    """Raise NotEventFile when none of the first SAMPLE non-blank lines of `path` is an event; its hint names
    what reads the file instead, for `command` (load, tail)."""
    try:
        with open_regular(path) as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return  # the reader reports it
    if head.startswith(b"SQLite format 3\x00"):
        raise NotEventFile(f"{path}: not an event file; {_hint(path, head, [], command)}")
    stripped = head.lstrip()
    if not stripped or stripped[:1] in (b"[", b"{"):
        return  # JSON: event lines or a Chimbuko export, which the provenance reader recognises
    raw_lines = head.split(b"\n")  # as the reader splits: only \n ends a line
    if len(head) == 64 * 1024:
        raw_lines.pop()  # cut mid-line
    lines = [raw.decode("utf-8", "replace").strip() for raw in raw_lines]
    sample: list[tuple[int, bytes]] = []
    for number, (raw, line) in enumerate(zip(raw_lines, lines), 1):
        if line and not line.startswith("#"):
            sample.append((number, raw))
        if len(sample) == SAMPLE:
            break
    if len(sample) < SAMPLE:
        return  # a short file: the reader reports its malformed lines one by one
    reason = ""
    for number, raw in sample:
        try:
            if decode_line(raw) is not None:
                return
        except ValueError as exc:
            reason = reason or f"line {number}: {exc}"
    raise NotEventFile(f"{path}: not an event file (none of its first {len(sample)} lines is an event; {reason}); "
                       f"{_hint(path, head, lines, command)}")
