"""WorkflowSource: checkpoints that resume without loss or repeats, follow mode, state file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from streamer.events import bp
from streamer.monitor.source import WorkflowSource
from tests.monitor.test_monitor_golden import _without_monitord_lines, fresh_copy, match, replay


async def _run(source: WorkflowSource, *, stop_after: int | None = None, commit: bool = True) -> list:
    """Events of `source`, committing positions as the bus does (a batch may carry none);
    with stop_after, take that many batches then 'crash' (abandon it). Returns the events
    up to the last committed position: what a restart must not repeat."""
    events: list = []
    committed = 0
    count = 0
    async for batch in source.batches():
        if stop_after is not None and count == stop_after:
            break  # this batch is never acknowledged
        events.extend(batch.events)
        if commit and batch.position is not None:
            await source.commit(batch.position)
            committed = len(events)
        count += 1
    return events[:committed] if stop_after is not None else events


@pytest.mark.parametrize("stop_after", [1, 3, 7])
def test_resume_after_crash_loses_and_repeats_nothing(corpus: Path, golden: Path, tmp_path: Path,
                                                       stop_after: int) -> None:
    reference = [e.id for e in replay(fresh_copy(corpus, "process_wf_failure", tmp_path / "ref"))]
    directory = fresh_copy(corpus, "process_wf_failure", tmp_path / "run")
    first = WorkflowSource(directory, timezone="UTC", snapshot_interval=0)
    first.read_size = 1500  # many small batches, each with its position
    before = asyncio.run(_run(first, stop_after=stop_after))
    assert before, "a position was committed before the crash"
    assert (directory / "streamer.state.json").is_file()
    second = WorkflowSource(directory, timezone="UTC")
    after = asyncio.run(_run(second))
    assert second.resumed
    assert [e.id for e in before] + [e.id for e in after] == reference
    jobstate = (directory / "jobstate.log").read_text()
    expected = (golden / "process_wf_failure.jobstate.log").read_text()
    assert _without_monitord_lines(jobstate) == _without_monitord_lines(expected)


def test_state_file_is_json_and_complete_replay_starts_over(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "process_wf_success", tmp_path)
    source = WorkflowSource(directory, timezone="UTC")
    first = asyncio.run(_run(source))
    state = json.loads((directory / "streamer.state.json").read_text())
    assert state["complete"] is True and state["version"] == 1
    assert [w["offset"] for w in state["workflows"]] == [(directory / "process-0.dag.dagman.out").stat().st_size]
    again = WorkflowSource(directory, timezone="UTC")
    second = asyncio.run(_run(again))
    assert not again.resumed
    assert [e.id for e in second] == [e.id for e in first]
    assert list(directory.glob("jobstate.log.000")), "a replay keeps the previous jobstate.log, as monitord"


def test_custom_state_path(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "sample_wf_held", tmp_path)
    state_path = tmp_path / "elsewhere.json"
    asyncio.run(_run(WorkflowSource(directory, timezone="UTC", state_path=state_path)))
    assert state_path.is_file() and not (directory / "streamer.state.json").exists()


def test_progress_counts_jobs(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "process_wf_success", tmp_path)

    async def last_batch():
        source = WorkflowSource(directory, timezone="UTC")
        last = None
        async for batch in source.batches():
            last = batch
        return last

    batch = asyncio.run(last_batch())
    assert (batch.done, batch.total) == (5, 5)


def test_follow_lines_arriving_in_pieces(corpus: Path, golden: Path, tmp_path: Path) -> None:
    """Live dagman.out written in odd-sized pieces (lines cut mid-way) gives the golden events."""
    directory = fresh_copy(corpus, "process_wf_success", tmp_path)
    dagman_out = directory / "process-0.dag.dagman.out"
    content = dagman_out.read_bytes()
    dagman_out.write_bytes(b"")

    async def writer() -> None:
        step = 997
        for start in range(0, len(content), step):
            with open(dagman_out, "ab") as handle:
                handle.write(content[start:start + step])
            await asyncio.sleep(0.001)

    async def main() -> list:
        source = WorkflowSource(directory, timezone="UTC", follow=True)
        task = asyncio.create_task(writer())
        events = await asyncio.wait_for(_run(source), timeout=60)
        await task
        return events

    events = asyncio.run(main())
    expected = [bp.parse_line(l) for l in (golden / "process_wf_success.bp").read_text().splitlines() if l.strip()]
    report = match([(e.name, e.fields) for e in events], [(e.name, e.fields) for e in expected])
    assert report == [], "\n".join(report[:20])


def test_no_recursion_skips_subworkflows(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "hierarchical_wf_success", tmp_path)

    async def main() -> list:
        return await _run(WorkflowSource(directory, timezone="UTC", recursive=False))

    events = asyncio.run(main())
    ids = {e.get("xwf.id") for e in events}
    assert ids == {WorkflowSource(directory).root_xwf_id}
    names = [e.name for e in events]
    assert "stampede.xwf.map.subwf_job" not in names  # the link is made when the sub-workflow is followed
    assert len(events) == 319 - 53 - 1  # the sub-workflow's 53 static events and the link are gone


def test_follow_ends_when_a_subworkflow_never_starts(corpus: Path, golden: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The hierarchical corpus's sub-workflow never ran: follow ends once it has been quiet long enough."""
    from streamer.monitor.tracker import Tracker

    monkeypatch.setattr(Tracker, "subwf_idle_polls", 3)
    directory = fresh_copy(corpus, "hierarchical_wf_success", tmp_path)
    source = WorkflowSource(directory, timezone="UTC", follow=True)
    events = asyncio.run(asyncio.wait_for(_run(source), 60))
    expected = [bp.parse_line(l) for l in (golden / "hierarchical_wf_success.bp").read_text().splitlines() if l.strip()]
    assert match([(e.name, e.fields) for e in events], [(e.name, e.fields) for e in expected]) == []


def test_keep_alive_waits_for_a_rescue_run(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "process_wf_failure", tmp_path)
    dagman_out = directory / "process-0.dag.dagman.out"
    first_run = dagman_out.read_text()

    async def main() -> list[tuple[str, int]]:
        source = WorkflowSource(directory, timezone="UTC", follow=True, keep_alive=True)
        seen: list[tuple[str, int]] = []
        async for batch in source.batches():
            for event in batch.events:
                if event.name in ("stampede.xwf.start", "stampede.xwf.end"):
                    seen.append((event.name, event.get("restart_count")))
                    if event.name == "stampede.xwf.end" and event.get("restart_count") == 0:
                        with open(dagman_out, "a") as handle:  # the rescue DAG's DAGMan appends
                            handle.write(first_run)
                    elif event.name == "stampede.xwf.end":
                        source.stop()
        return seen

    seen = asyncio.run(asyncio.wait_for(main(), 60))
    assert seen == [("stampede.xwf.start", 0), ("stampede.xwf.end", 0),
                    ("stampede.xwf.start", 1), ("stampede.xwf.end", 1)]


def test_without_jobstate(corpus: Path, tmp_path: Path) -> None:
    directory = fresh_copy(corpus, "process_wf_success", tmp_path)
    events = asyncio.run(_run(WorkflowSource(directory, timezone="UTC", write_jobstate=False)))
    assert len(events) == 98
    assert not (directory / "jobstate.log").exists()
