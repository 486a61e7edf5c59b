"""The tracker's reads are sized by what the file holds, never by the step's limit (issue 28 item 2)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path


from streamer.monitor.runner import MonitorCore
from streamer.synth import generate


def test_a_step_over_a_few_new_bytes_allocates_for_those_bytes_not_for_the_read_limit(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=3, seed=7)
    dagman_out = next(directory.glob("*.dag.dagman.out"))
    limit = 32 << 20
    core = MonitorCore(str(dagman_out), recursive=False, tz="UTC", write_jobstate=False, state=None,
                       read_size=limit)
    try:
        for _ in range(100):  # follow mode: catch up with the log
            if core.step_raw(False).at_eof:
                break
        with dagman_out.open("a") as handle:  # a live DAGMan appends a line
            handle.write("11/27/26 09:00:00 Note: nothing to do\n")
        tracemalloc.start()
        try:
            step = core.step_raw(False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert step.at_eof
        assert peak < 4 << 20, f"a step over 38 new bytes allocated {peak:,} bytes (read limit {limit:,})"
    finally:
        core.close()
