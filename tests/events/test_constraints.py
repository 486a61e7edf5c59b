"""The constraints the event schema declares (seed 002), applied to events read from outside (issue 26.21):
mandatory fields, 0/1 flags, the 0-11 job and task type range, the task-type list; with monitord's
documented tolerances (non-UUID workflow ids, fields older releases and monitord's JSON leave out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.events import FieldError, bp, constraints, jsonenc
from streamer.sources.decode import decode_line

WF = "ea17e8ac-02ac-4909-b5e3-16e367392556"
TS = "ts=2023-03-04T06:23:33.000000Z"
JOB = (f"{TS} event=stampede.job.info xwf.id={WF} job.id=j1 submit_file=j1.sub type=1 type_desc=compute "
       "clustered=0 max_retries=3 task_count=1 executable=/bin/true")
TASK = f"{TS} event=stampede.task.info xwf.id={WF} task.id=ID1 transformation=t type=1 type_desc=compute"


def refusal(line: str) -> str:
    event = bp.parse_line(line)
    with pytest.raises(FieldError) as caught:
        constraints.check(event)
    return str(caught.value)


def test_valid_events_pass() -> None:
    for line in (JOB, TASK, f"{TS} event=stampede.xwf.start xwf.id={WF} restart_count=0",
                 f"{TS} event=stampede.xwf.end xwf.id={WF} restart_count=0 status=0"):
        constraints.check(bp.parse_line(line))


def test_a_mandatory_field_missing_is_refused() -> None:
    assert refusal(f"{TS} event=stampede.xwf.start xwf.id={WF}") == \
        "stampede.xwf.start: mandatory field restart_count missing"
    assert refusal(f"{TS} event=stampede.xwf.end xwf.id={WF} restart_count=0") == \
        "stampede.xwf.end: mandatory field status missing"
    assert refusal(JOB.replace(" executable=/bin/true", "")) == "stampede.job.info: mandatory field executable missing"
    assert refusal(f"{TS} event=stampede.job_inst.main.term xwf.id={WF} job.id=j1 sched.id=1.0 status=0") == \
        "stampede.job_inst.main.term: mandatory field job_inst.id missing"


def test_flags_ranges_and_task_types_are_refused() -> None:
    assert refusal(JOB.replace("clustered=0", "clustered=2")) == \
        "stampede.job.info: field clustered = 2 is not within 0..1"
    assert refusal(JOB.replace("type=1 ", "type=12 ")) == "stampede.job.info: field type = 12 is not within 0..11"
    assert refusal(TASK.replace("type=1", "type=-1")) == "stampede.task.info: field type = -1 is not within 0..11"
    assert refusal(JOB.replace("type_desc=compute", "type_desc=teleport")) == (
        "stampede.job.info: field type_desc = 'teleport' is not a task type of the schema (unknown, compute, "
        "stage-in-tx, stage-out-tx, registration, inter-site-tx, create-dir, staged-compute, cleanup, chmod, "
        "dax, dag)")
    assert refusal(TASK.replace("type_desc=compute", "type_desc=Compute")).endswith("is not a task type of the "
                                                                                     "schema (unknown, compute, "
                                                                                     "stage-in-tx, stage-out-tx, "
                                                                                     "registration, inter-site-tx, "
                                                                                     "create-dir, staged-compute, "
                                                                                     "cleanup, chmod, dax, dag)")


def test_monitord_s_tolerances_are_kept() -> None:
    # a workflow id that is not a UUID (braindump says what it says): used as given
    constraints.check(bp.parse_line(f"{TS} event=stampede.xwf.start xwf.id=not-a-uuid restart_count=0"))
    # monitord's JSON has no ts on static.start/end and rc.pfn
    constraints.check(jsonenc.parse_line('{"event": "stampede.static.start", "xwf_id": "x"}'))
    # a value written None is a value (monitord writes sched.id=None for a job never given a condor id)
    constraints.check(bp.parse_line(f"{TS} event=stampede.job_inst.submit.end xwf.id={WF} job.id=j1 "
                                    "job_inst.id=1 sched.id=None status=-1"))
    # Pegasus 3.1/4.0 streams: host.info names its job exec_job.id, main/post.end have no exitcode
    constraints.check(bp.parse_line(f"{TS} event=stampede.job_inst.host.info xwf.id={WF} job_inst.id=1 "
                                    "site=local hostname=h ip=1.2.3.4 exec_job.id=j1"))
    # events the schema does not name, and provenance records, are not Stampede's to check
    constraints.check(bp.parse_line(f"{TS} event=stampede.something.new xwf.id={WF}"))


@pytest.mark.corpus
def test_every_corpus_and_golden_line_passes(corpus: Path, golden: Path) -> None:
    files = [*sorted((corpus / "bp").glob("*.bp")), *sorted(golden.glob("*.bp")), *sorted(golden.glob("*.json"))]
    assert len(files) >= 12
    checked = 0
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                event = decode_line(line)
                if event is None:
                    continue
                try:
                    constraints.check(event)
                except FieldError as exc:
                    raise AssertionError(f"{path}:{number}: {exc}") from None
                checked += 1
    assert checked > 10_000
