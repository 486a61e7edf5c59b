"""Pegasus 3.x streams (seed 000): names, fields and values translated, so a 3.x stream loads
into a Stampede database as the 4.x stream of the same run does."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from streamer.events import Event, bp, schema
from streamer.events.legacy import LEGACY, STATE_EVENTS, translate
from streamer.synth.legacy3 import to_3x
from tests.support import dbcompare
from tests.conftest import SHARED, unavailable
from tests.support.dbstream import golden_events
from tests.endpoints.test_db import assert_same, load, sqlite_url

SEED_000 = SHARED / "seeds" / "000_3be852998c1ea033.txt"


def seed_examples() -> list[str]:
    """The sample events of seed 000, one line each (the page wraps them: a piece ending in `.` or `-`,
    or one starting with `/`, continues the word before it)."""
    if not SEED_000.is_file():
        unavailable(f"seed 000 not found at {SEED_000}")
    out = []
    for block in re.findall(r"```\n(.*?)\n```", SEED_000.read_text(), re.S):
        pieces = block.split("\n")
        line = pieces[0]
        for piece in pieces[1:]:
            line += piece if line.endswith((".", "-")) or piece.startswith("/") else " " + piece
        out.append(line)
    return out


def test_every_seed_example_becomes_a_valid_4x_event() -> None:
    lines = seed_examples()
    assert len(lines) == 19
    events = [bp.parse_line(line) for line in lines]
    names = [e.name for e in events]
    assert not [n for n in names if n not in schema.KNOWN_EVENTS or LEGACY.get(n, (n,))[0] != n], names
    by_name = {e.name: e for e in events}
    job = by_name["stampede.job.info"].fields
    assert (job["type_desc"], job["type"], job["clustered"], job["job.id"]) == (
        "create-dir", 6, 0, "create_dir_diamond_0_ISIViz")
    task = by_name["stampede.task.info"].fields
    assert (task["type_desc"], task["type"], task["task.id"]) == ("compute", 1, "ID0000001")
    # jobinstance.state -> the 4.x event of that state, with its js.id
    state = events[lines.index(next(x for x in lines if "jobinstance.state" in x))]
    assert state.name == "stampede.job_inst.post.start"
    assert (state.fields["js.id"], state.fields["job_inst.id"], state.fields["job.id"]) == (
        7, 1, "create_dir_diamond_0_ISIViz")
    # mainjob.start: the job found in dagman.out (it creates the instance, with its files)
    start = by_name["stampede.job_inst.submit.start"].fields
    assert (start["sched.id"], start["stdout.file"], start["job_inst.id"]) == (
        "388.0", "/workflow/run/create_dir_diamong_0_ISIViz.out", 1)
    pre = [e for e in events if e.name.startswith("stampede.job_inst.pre.")]
    assert [e.name for e in pre] == ["stampede.job_inst.pre.start", "stampede.job_inst.pre.end"]
    host = by_name["stampede.job_inst.host.info"].fields
    assert (host["total_memory"], host["ip"], host["site"]) == (2124730368, "128.9.72.178", "ISIViz")
    # no 3.x field name is left: every field is one the 4.x schema knows for that event
    for event in events:
        known = schema.fields_of(event.name)
        assert known is not None
        extra = [k for k in event.fields if k not in known]
        if event.name == "stampede.job_inst.submit.start":  # 3.x mainjob.start names the job's files early
            assert extra == ["stdout.file", "stderr.file", "stdin.file"]
        else:
            assert not extra, (event.name, event.fields)


def test_seed_examples_load_into_sqlite(tmp_path: Path) -> None:
    """Every example loads, except those that name a workflow or job the examples never declare
    (they are excerpts of different runs: `wf.id=wftest-id`, `preprocess_ID00000001`, ...);
    the same events in 4.x form are refused for the same reason."""
    events = [bp.parse_line(line) for line in seed_examples()]
    endpoint = asyncio.run(load(sqlite_url(tmp_path / "seed.db"), events, 100))
    reasons = [r.split(": ", 1)[1] for r in endpoint.rejected]
    assert reasons == [
        "unknown job preprocess_ID00000001 (no stampede.job.info loaded for it)",
        "unknown workflow wftest-id (no stampede.wf.plan loaded for it)",
        "unknown workflow wftest-id (no stampede.wf.plan loaded for it)",
        "unknown job stage_in_local_ISIViz_0 (no stampede.job.info loaded for it)",
        "unknown job preprocess_ID0000001 (no stampede.job.info loaded for it)",
    ]
    snap = dbcompare.sqlite_snapshot(str(tmp_path / "seed.db"))
    counts = dbcompare.counts(snap)
    assert (counts["workflow"], counts["workflowstate"], counts["job"], counts["task"], counts["task_edge"],
            counts["job_edge"], counts["job_instance"], counts["jobstate"], counts["invocation"],
            counts["host"]) == (1, 2, 1, 1, 1, 1, 1, 1, 1, 1)
    (ji,) = snap["job_instance"]
    assert "388.0" in ji and "ISIViz" in ji and "/tmp" in ji  # sched id, site, work dir of mainjob.*
    (js,) = snap["jobstate"]
    assert "POST_SCRIPT_STARTED" in js and 7 in js


def _run_3x(events: list[Event]) -> list[Event]:
    return [bp.parse_line(line) for line in to_3x(events).splitlines()]


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["process_wf_failure", "sample_wf_held", "process_wf_success"])
def test_3x_stream_of_a_run_loads_the_rows_of_its_4x_stream(tmp_path: Path, golden: Path, name: str) -> None:
    events = golden_events(golden, name)
    old = to_3x(events)
    assert "stampede.jobinstance.state" in old and "stampede.job_inst." not in old.replace(
        "stampede.job_inst.composite", "").replace("stampede.job_inst.tag", "")
    assert not re.search(r"event=stampede\.(xwf|task\.info|job\.info|inv\.end) ", old)
    translated = _run_3x(events)
    assert not [e.name for e in translated if LEGACY.get(e.name, (e.name,))[0] != e.name]
    new_db, old_db = tmp_path / "4x.db", tmp_path / "3x.db"
    four = asyncio.run(load(sqlite_url(new_db), events, 500))
    three = asyncio.run(load(sqlite_url(old_db), translated, 500))
    assert list(four.rejected) == [] and list(three.rejected) == []
    assert_same(dbcompare.sqlite_snapshot(str(old_db)), dbcompare.sqlite_snapshot(str(new_db)))
    assert dbcompare.counts(dbcompare.sqlite_snapshot(str(old_db)))["jobstate"] > 10


@pytest.mark.corpus
def test_3x_stream_of_a_pegasus_4_run(tmp_path: Path, corpus: Path) -> None:
    with open(corpus / "bp" / "blackdiamond.bp", encoding="utf-8") as fh:
        events = [bp.parse_line(line) for line in fh if line.strip()]
    four = asyncio.run(load(sqlite_url(tmp_path / "4x.db"), events, 500))
    three = asyncio.run(load(sqlite_url(tmp_path / "3x.db"), _run_3x(events), 500))
    assert list(four.rejected) == list(three.rejected) == []
    assert_same(dbcompare.sqlite_snapshot(str(tmp_path / "3x.db")), dbcompare.sqlite_snapshot(str(tmp_path / "4x.db")))


@pytest.mark.parametrize("state", sorted(STATE_EVENTS))
def test_every_3x_state_has_its_4x_event(state: str) -> None:
    name, fields = translate("stampede.jobinstance.state", {"wf.id": "x", "job.id": 3, "exec_job.id": "j",
                                                            "state": state, "js.id": 4})
    assert name.startswith("stampede.job_inst.") and name in schema.KNOWN_EVENTS
    assert fields["job_inst.id"] == 3 and fields["job.id"] == "j" and fields["js.id"] == 4
    assert "state" not in fields


def test_unknown_3x_state_keeps_its_name() -> None:
    name, fields = translate("stampede.jobinstance.state", {"wf.id": "x", "state": "JOB_SUSPENDED"})
    assert name == "stampede.jobinstance.state" and fields["state"] == "JOB_SUSPENDED"
