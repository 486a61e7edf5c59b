"""Bad input never crashes or hangs the monitor: a warning names file and line, events are best effort."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from streamer.monitor.source import WorkflowSource
from tests.monitor.test_monitor_golden import fresh_copy

GHOST = [
    "03/03/23 22:24:05 Submitting HTCondor Node ghost_job job(s)...\n",
    "03/03/23 22:24:06 Event: ULOG_SUBMIT for HTCondor Node ghost_job (99.0.0) {03/03/23 22:24:05}\n",
    "03/03/23 22:24:07 Event: ULOG_EXECUTE for HTCondor Node phantom (98.0.0) {03/03/23 22:24:06}\n",
    "03/03/23 22:24:08 Something DAGMan never said before\n",
    "03/03/23 22:24:09 Event: ULOG_JOB_TERMI\n",
    "\x00\x00garbage without a timestamp\n",
    "03/03/23 22:24:10 Hold reason: nobody\n",
]


async def _collect(directory: Path) -> tuple[list, list[str]]:
    source = WorkflowSource(directory, timezone="UTC")
    events, warnings = [], []
    async for batch in source.batches():
        events.extend(batch.events)
        warnings.extend(batch.warnings)
    return events, warnings


def broken_copy(corpus: Path, tmp_path: Path) -> Path:
    directory = fresh_copy(corpus, "process_wf_success", tmp_path)
    jobs = directory / "00" / "00"
    ls_out = jobs / "ls_ID0000001.out.000"
    ls_out.write_bytes(ls_out.read_bytes()[:700])  # half-written kickstart record
    (jobs / "create_dir_process_0_local.out.000").write_text("- invocation: [\n  }}} not yaml\n")
    (jobs / "cleanup_process_0_local.sub").unlink()
    dagman_out = directory / "process-0.dag.dagman.out"
    lines = dagman_out.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "Submitting HTCondor Node ls_ID0000001" in line)
    dagman_out.write_text("".join(lines[:cut] + GHOST + lines[cut:]) + "03/03/23 22:25:01 Event: ULOG_SUB")
    return directory


def test_bad_inputs_give_warnings_and_best_effort_events(corpus: Path, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    directory = broken_copy(corpus, tmp_path)
    events, warnings = asyncio.run(asyncio.wait_for(_collect(directory), 60))
    out = str(directory / "process-0.dag.dagman.out")
    jobs = directory / "00" / "00"
    assert any(w.startswith(f"{out}:") and "job ghost_job is not in process-0.dag" in w for w in warnings)
    assert any(w.startswith(f"{out}:") and "EXECUTE for unknown job phantom" in w for w in warnings)
    assert any(f"cannot read submit file {jobs / 'cleanup_process_0_local.sub'}" in w for w in warnings)
    # the ghost job still gets its submit events, numbered after create_dir
    ghost = [(e.name, e.get("job_inst.id")) for e in events if e.get("job.id") == "ghost_job"]
    # ... and, as in monitord, the orphan "Hold reason" goes to the last job seen (DAGMan >= 8.3.3)
    assert ghost == [("stampede.job_inst.submit.start", 2), ("stampede.job_inst.submit.end", 2),
                     ("stampede.job_inst.held.start", 2)]
    held = next(e for e in events if e.name == "stampede.job_inst.held.start")
    assert held.get("reason") == " nobody"
    assert f"{jobs / 'ls_ID0000001.out.000'}: unreadable YAML invocation record" in caplog.text
    # unreadable kickstart records: one invocation made from the .sub file and DAGMan's times
    ls_end = [e for e in events if e.name == "stampede.inv.end" and e.get("job.id") == "ls_ID0000001"]
    assert [(e.get("inv.id"), e.get("transformation"), e.get("task.id"), e.get("exitcode")) for e in ls_end] == [
        (1, "ls", "ID0000001", 0), (-2, "dagman::post", None, 0)]
    create_end = [e for e in events if e.name == "stampede.inv.end" and e.get("job.id") == "create_dir_process_0_local"]
    assert [e.get("inv.id") for e in create_end] == [1, -2]
    # the job without .sub: no site, but the run goes on to the end
    assert [e.name for e in events][-1] == "stampede.xwf.end"
    assert events[-1].get("status") == 0


def test_missing_dagman_out_ends_replay(tmp_path: Path, corpus: Path) -> None:
    directory = fresh_copy(corpus, "process_wf_success", tmp_path)
    (directory / "process-0.dag.dagman.out").unlink()
    events, _ = asyncio.run(asyncio.wait_for(_collect(directory), 30))
    assert [e.name for e in events][:2] == ["stampede.wf.plan", "stampede.static.start"]
    assert "stampede.xwf.start" not in [e.name for e in events]
