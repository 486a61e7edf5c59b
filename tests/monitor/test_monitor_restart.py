"""DAGMan restarts (rescue DAGs appended to the same dagman.out): numbering continues, restart_count grows."""

from __future__ import annotations

import asyncio
from pathlib import Path

from streamer.monitor.source import WorkflowSource
from tests.monitor.test_monitor_golden import fresh_copy


def _events(directory: Path) -> list:
    async def run() -> list:
        out = []
        async for batch in WorkflowSource(directory, timezone="UTC").batches():
            out.extend(batch.events)
        return out

    return asyncio.run(asyncio.wait_for(run(), 60))


def test_rescue_run_continues_numbering(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "process_wf_failure", tmp_path)
    dagman_out = directory / "process-0.dag.dagman.out"
    text = dagman_out.read_text()
    dagman_out.write_text(text + text)
    events = _events(directory)
    starts = [(e.get("restart_count"), e.ts) for e in events if e.name == "stampede.xwf.start"]
    assert starts == [(0, 1677884988), (1, 1677884988)]
    ends = [(e.get("restart_count"), e.get("status"), e.get("level")) for e in events if e.name == "stampede.xwf.end"]
    assert ends == [(0, 1, "Error"), (1, 1, "Error")]
    submits = [(e.get("job.id"), e.get("job_inst.id")) for e in events if e.name == "stampede.job_inst.submit.start"]
    assert submits == [("create_dir_process_0_local", 1), ("ls_ID0000001", 2), ("ls_ID0000001", 3),
                       ("create_dir_process_0_local", 4), ("ls_ID0000001", 5), ("ls_ID0000001", 6)]
    jobstate = (directory / "jobstate.log").read_text().splitlines()
    assert [line.split()[3:5] for line in jobstate if "DAGMAN_" in line] == [
        ["DAGMAN_STARTED", "7.0"], ["DAGMAN_FINISHED", "1"], ["DAGMAN_STARTED", "7.0"], ["DAGMAN_FINISHED", "1"]]


def test_restart_without_end_inserts_synthetic_end(corpus: Path, tmp_path: Path) -> None:
    """A DAGMan killed without its EXITING line: the next start closes the previous run (status 2, ts-1)."""
    directory = fresh_copy(corpus, "process_wf_failure", tmp_path)
    dagman_out = directory / "process-0.dag.dagman.out"
    text = dagman_out.read_text()
    crashed = "".join(line for line in text.splitlines(keepends=True) if "EXITING WITH STATUS" not in line)
    dagman_out.write_text(crashed + text)
    events = _events(directory)
    ends = [(e.get("restart_count"), e.get("status"), e.ts) for e in events if e.name == "stampede.xwf.end"]
    assert ends == [(0, 2, 1677884988 - 1), (1, 1, 1677885084)]
    jobstate = (directory / "jobstate.log").read_text()
    assert f"{1677884988 - 1} INTERNAL *** DAGMAN_FINISHED 2 ***" in jobstate
