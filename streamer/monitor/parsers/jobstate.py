"""`jobstate.log`: monitord's one-line-per-state job log, written and read.

Line forms: `<ts> <job> <STATE> <status|sched_id|-> <site|-> <walltime|-> <job_submit_seq|->`
and `<ts> INTERNAL *** MONITORD_STARTED|DAGMAN_STARTED <id>|DAGMAN_FINISHED <rc>|MONITORD_FINISHED <rc> ***`.
Pegasus tools (pegasus-status, pegasus-analyzer) read it, so the writer keeps
monitord's exact spacing. The writer buffers in memory and the source flushes
at each checkpoint, recording the file length so a resume can cut off lines
written after the last checkpoint (no duplicated lines).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from streamer.util.limits import iter_lines


def state_line(ts: float, job: str, state: str, status: object, sched_id: object,
               site: object, walltime: object, seq: object) -> str:
    """A job state line, monitord's `status or sched_id or '-'` logic included."""
    third = (str(status) if status is not None else None) or sched_id or "-"
    return f"{ts:.0f} {job} {state} {third} {site or '-'} {walltime or '-'} {seq or '-'}\n"


def internal_line(ts: float, what: str) -> str:
    """`<ts> INTERNAL *** WHAT ***` marker line."""
    return f"{ts:.0f} INTERNAL *** {what} ***\n"


class JobstateWriter:
    """Appends lines to a jobstate.log; `flush()` makes them durable, `length` is the durable size."""

    def __init__(self, path: str | Path, *, truncate_at: int | None = None, rotate: bool = False) -> None:
        self.path = Path(path)
        if rotate and truncate_at is None and self.path.exists():
            _rotate(self.path)
        mode = "r+b" if truncate_at is not None and self.path.exists() else "wb"
        if truncate_at is None and not rotate and self.path.exists():
            mode = "ab"
        self._file = open(self.path, mode)
        if truncate_at is not None and mode == "r+b":
            self._file.truncate(truncate_at)
            self._file.seek(truncate_at)
        self._pending: list[str] = []
        self.length = self._file.tell()

    def write(self, line: str) -> None:
        self._pending.append(line)

    def flush(self, *, sync: bool = False) -> int:
        """Write buffered lines; return the file length (what a checkpoint records)."""
        if self._pending:
            data = "".join(self._pending).encode("utf-8")
            self._pending.clear()
            self._file.write(data)
            self._file.flush()
            self.length += len(data)
        if sync:
            os.fsync(self._file.fileno())
        return self.length

    def close(self) -> None:
        self.flush()
        self._file.close()


def _rotate(path: Path) -> None:
    """Keep the previous log as `jobstate.log.NNN` (monitord's rotation on replay)."""
    for number in range(1000):
        candidate = path.with_name(f"{path.name}.{number:03d}")
        if not candidate.exists():
            path.rename(candidate)
            return
    path.unlink()


@dataclass
class JobstateEntry:
    """One parsed jobstate.log line (`job` is INTERNAL for the marker lines)."""

    ts: int
    job: str
    state: str
    detail: str = "-"
    site: str = "-"
    walltime: str = "-"
    seq: str = "-"


def read(path: str | Path) -> Iterator[JobstateEntry]:
    """Entries of a jobstate.log (malformed lines skipped)."""
    for _number, line in iter_lines(path):
        entry = parse_line(line)
        if entry is not None:
            yield entry


def parse_line(line: str) -> JobstateEntry | None:
    parts = line.split()
    if len(parts) < 3 or not (parts[0].isascii() and parts[0].isdigit() and len(parts[0]) <= 18):  # "²".isdigit()
        return None
    if parts[1] == "INTERNAL":
        inner = [p for p in parts[2:] if p != "***"]
        return JobstateEntry(int(parts[0]), "INTERNAL", inner[0] if inner else "", " ".join(inner[1:]) or "-")
    fields = parts[3:7] + ["-"] * (4 - len(parts[3:7]))
    return JobstateEntry(int(parts[0]), parts[1], parts[2], *fields)
