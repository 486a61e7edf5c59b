"""monitord's marker files in the submit dir: `monitord.started` and `monitord.done`.

Pegasus's tools (`pegasus-statistics`, `pegasus-analyzer`) refuse to read a
workflow's database until these exist, so streamer writes them as monitord
does: `pid N` / `timestamp <ISO with offset>` when it starts, `<ISO with
offset> <elapsed seconds>` when the workflow is done.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(moment))


def write_started(submit_dir: Path, started: float) -> None:
    (submit_dir / "monitord.started").write_text(f"pid {os.getpid()}\ntimestamp {_iso(started)}\n")


def write_done(submit_dir: Path, started: float, finished: float) -> None:
    (submit_dir / "monitord.done").write_text(f"{_iso(finished)} {finished - started:.3f}\n")
