"""Where the monitor's parsing runs: a worker thread, or a child process on a second core.

The `Tracker` (dagman.out lines, .sub/.out/.err files, the engine) is
synchronous CPU work. In a thread it shares the GIL with the event loop, so a
replay does parsing and encoding/publishing on one core, one after the other.
In a child process the two overlap: the child parses step k+1 while the
parent types, encodes and delivers step k. Events cross as raw
`(name, fields, dagman_out, line)` tuples, typed in the parent (which has
cycles to spare), the checkpoint position as the tracker's JSON state.

- `core.py`: `MonitorCore`, the tracker and its checkpoint-snapshot policy, the same in both;
- `thread.py`: `ThreadRunner`, the core in the parse pool every workflow of the process shares;
- `process.py`: `ProcessRunner`, the parent's side of the core in a child process;
- `child.py`: the child's side, `serve()`;
- here: `make_runner`, which of the two a workflow gets.
"""

from __future__ import annotations

import os
from typing import Any

from streamer.monitor.runner.process import ProcessRunner
from streamer.monitor.runner.thread import ThreadRunner


def make_runner(kind: str, **options: Any) -> ThreadRunner | ProcessRunner:
    """`thread`, `process`, or `auto` (a process for a large dagman.out on a machine with 2+ cores)."""
    if kind == "auto":
        kind = "process" if _worth_a_process(options["dagman_out"]) else "thread"
    if kind == "process":
        return ProcessRunner(**options)
    if kind == "thread":
        return ThreadRunner(**options)
    raise ValueError(f"unknown parser mode {kind!r} (thread, process or auto)")


PROCESS_THRESHOLD = 4 << 20
"""dagman.out bytes from which `auto` parses in a child process (~3,000 jobs; below, start-up costs more)."""


def _worth_a_process(dagman_out: str) -> bool:
    """A large log, and a core to spare: measured (docs/benchmarks.md, 2026-11-27), the child overlaps parsing
    with delivery only on an idle second core; on a busy machine (load 15-30 on 2 cores) it cost 1-3% more
    CPU, 21-43% more wall and 9-20% more memory than the thread at 1,000 and 5,000 jobs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        size = os.path.getsize(dagman_out)
    except OSError:
        size = 0
    if cores < 2 or size < PROCESS_THRESHOLD:
        return False
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average here: as before
        return True
    return load <= cores - 1
