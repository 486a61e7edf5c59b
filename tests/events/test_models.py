"""Pydantic models of the schema, the registry and legacy (3.x) translation."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from streamer.events import KNOWN_EVENTS, Event, bp, jsonenc
from streamer.events.legacy import LEGACY, translate
from streamer.events.models import MODELS, GenericEvent, model_for
from streamer.events.registry import model_of
from streamer.events import registry

UUID = "f00c0056-abd4-4e8e-b793-24eb760dda1f"


def test_one_model_per_event_name_including_names_the_yang_file_omits() -> None:
    assert set(MODELS) == set(KNOWN_EVENTS)
    for name in ("stampede.job_inst.composite", "stampede.rc.pfn", "stampede.job_inst.abort.info",
                 "stampede.job_inst.tag", "stampede.int.metric", "stampede.task.monitoring",
                 "stampede.job_inst.grid.submit.start", "stampede.job_inst.globus.submit.end",
                 "stampede.wf.map.file", "stampede.xwf.map.subwf_job", "stampede.job_inst.pre.term"):
        assert name in MODELS
    assert model_for("stampede.inv.end").event_name == "stampede.inv.end"
    assert model_for("stampede.no.such") is GenericEvent


def test_model_types_mandatory_fields_and_extra_fields_round_trip() -> None:
    model = model_for("stampede.job_inst.main.end").model_validate({
        "ts": "2023-03-03T22:23:54.000000Z", "xwf.id": UUID, "job.id": "ls", "job_inst.id": "2", "sched.id": "3.0",
        "stdout.file": "o", "stderr.file": "e", "site": "condorpool", "status": "0", "exitcode": "0",
        "multiplier_factor": "1", "local.dur": "3", "root.xwf.id": UUID, "wf.ts": "1677911013",
        "something.new": "kept",
    })
    assert model.job_inst_id == 2 and model.status == 0 and model.wf_ts == 1677911013
    dumped = model.model_dump(by_alias=True, exclude_none=True)
    assert dumped["something.new"] == "kept"
    assert dumped["job_inst.id"] == 2 and dumped["ts"] == 1677882234
    with pytest.raises(ValidationError) as info:
        model_for("stampede.job_inst.main.end").model_validate({"ts": 1, "job.id": "x"})
    missing = {e["loc"][0] for e in info.value.errors()}
    assert {"job_inst.id", "sched.id", "stdout.file", "stderr.file", "site", "status", "exitcode",
            "multiplier_factor"} <= missing


def test_enums_uuid_and_timestamp_patterns() -> None:
    task = model_for("stampede.task.info")
    base = {"ts": 1, "transformation": "t", "type": 1, "type_desc": "compute", "task.id": "ID1"}
    assert task.model_validate(base).type_desc == "compute"
    for bad in ({"type_desc": "bogus"}, {"type": 12}, {"xwf.id": "not-a-uuid"}, {"level": "Warning"},
                {"ts": "yesterday"}):
        with pytest.raises(ValidationError):
            task.model_validate({**base, **bad})
    job = model_for("stampede.job.info")
    with pytest.raises(ValidationError):
        job.model_validate({"ts": 1, "job.id": "j", "submit_file": "s", "type": 1, "type_desc": "compute",
                            "clustered": 2, "max_retries": 0, "task_count": 0, "executable": "e"})


def test_every_golden_event_validates_against_its_model(golden) -> None:
    count = 0
    for path in sorted(golden.glob("*.bp")):
        for line in path.read_text().splitlines():
            event = bp.parse_line(line)
            model_of(event)  # raises on any schema violation
            count += 1
    assert count == 560


def test_event_model_method_keeps_values() -> None:
    event = bp.parse_line(f"ts=5 event=stampede.xwf.end xwf.id={UUID} restart_count=1 status=-1")
    model = model_of(event)
    assert (model.restart_count, model.status, model.xwf_id) == (1, -1, UUID)


def test_unknown_stampede_names_pass_through_with_one_warning(caplog) -> None:
    registry._warned.discard("stampede.brand.new")
    with caplog.at_level(logging.WARNING, logger="streamer.events"):
        first = bp.parse_line("ts=1 event=stampede.brand.new a=1 b=x")
        second = bp.parse_line("ts=2 event=stampede.brand.new a=2")
    assert first.name == "stampede.brand.new" and first.fields == {"ts": 1, "a": "1", "b": "x"}
    assert second.fields["ts"] == 2
    assert [r.message for r in caplog.records].count(
        "unknown event name stampede.brand.new: passed through as a generic event") == 1


def test_legacy_plan_event_from_seed_000() -> None:
    line = ('ts=2010-10-12T17:43:23.000000Z event=stampede.workflow.plan level=Info parent.wf.id=None '
            'root.wf.id=934cb609-ddd4-4b67-ad7a-886ae40fc94d submit_hostname=butterfly.isi.edu dax_label=diamond '
            'dax_index=0 planner_version=3.0.0cvs grid_dn=null user=prasanth submit_dir=/ifs1/work '
            'wf.id=934cb609-ddd4-4b67-ad7a-886ae40fc94d planner_arguments="--dax /dax/diamond.dax --force" '
            'dax_version=3.2 dax_file=/dax/diamond.dax')
    event = bp.parse_line(line)
    assert event.name == "stampede.wf.plan"
    assert event.fields == {
        "ts": 1286905403, "parent.xwf.id": None, "root.xwf.id": "934cb609-ddd4-4b67-ad7a-886ae40fc94d",
        "submit.hostname": "butterfly.isi.edu", "dax.label": "diamond", "dax.index": "0",
        "planner.version": "3.0.0cvs", "grid_dn": "null", "user": "prasanth", "submit.dir": "/ifs1/work",
        "xwf.id": "934cb609-ddd4-4b67-ad7a-886ae40fc94d", "argv": "--dax /dax/diamond.dax --force",
        "dax.version": "3.2", "dax.file": "/dax/diamond.dax",
    }
    with pytest.raises(ValidationError, match="dag.file.name"):  # 3.x plans did not name the DAG
        model_of(event)


@pytest.mark.parametrize("old, new, fields, expected", [
    ("stampede.workflow.start", "stampede.xwf.start", {"wf.id": "w", "restart_count": "0"},
     {"xwf.id": "w", "restart_count": 0}),
    ("stampede.jobinstance.mainjob.start", "stampede.job_inst.submit.start",
     {"wf.id": "w", "sched.id": "388.0", "job.id": "1", "exec_job.id": "create_dir", "job_stdout": "/o",
      "job_stderr": "/e", "job_stdin": "None"},
     {"xwf.id": "w", "sched.id": "388.0", "job_inst.id": 1, "job.id": "create_dir", "stdout.file": "/o",
      "stderr.file": "/e", "stdin.file": None}),
    ("stampede.jobinstance.mainjob.end", "stampede.job_inst.main.end",
     {"remote_user": "p", "site_name": "ISIViz", "exec_job.id": "cd", "remote_working_dir": "/tmp", "job.id": "1",
      "local_duration": "5.23", "cluster_start_time": "None"},
     {"user": "p", "site": "ISIViz", "job.id": "cd", "work_dir": "/tmp", "job_inst.id": 1, "local.dur": 5.23,
      "cluster.start": None}),
    ("stampede.invocation.postscript", "stampede.inv.end",
     {"exec_job.id": "cd", "start_time": "1318441455", "job.id": "1", "remote_duration": "5", "task.id": "-2",
      "arguments": "x", "transformation": "dagman::post", "exitcode": "0", "abs_task.id": "None"},
     {"job.id": "cd", "start_time": 1318441455, "job_inst.id": 1, "dur": 5, "inv.id": -2, "argv": "x",
      "transformation": "dagman::post", "exitcode": 0, "task.id": None}),
    ("stampede.host", "stampede.job_inst.host.info",
     {"job.id": "1", "site_name": "ISIViz", "exec_job.id": "cd", "total_ram": "2124730368", "hostname": "h",
      "ip_address": "128.9.72.178"},
     {"job_inst.id": 1, "site": "ISIViz", "job.id": "cd", "total_memory": 2124730368, "hostname": "h",
      "ip": "128.9.72.178"}),
    ("stampede.job", "stampede.job.info",
     {"exec_job.id": "cd", "submit_file": "cd.sub", "jobtype": "create dir", "clustered": "False",
      "max_retries": "3", "executable": "/bin/k", "arguments": "-n x", "task_count": "0"},
     {"job.id": "cd", "submit_file": "cd.sub", "type_desc": "create-dir", "type": 6, "clustered": 0,
      "max_retries": 3, "executable": "/bin/k", "argv": "-n x", "task_count": 0}),
    ("stampede.task.edge", "stampede.task.edge", {"parent_abs_task.id": "ID1", "child_abs_task.id": "ID2"},
     {"parent.task.id": "ID1", "child.task.id": "ID2"}),
    ("stampede.job.edge", "stampede.job.edge", {"parent_exec_job.id": "a", "child_exec_job.id": "b"},
     {"parent.job.id": "a", "child.job.id": "b"}),
    ("stampede.task.map", "stampede.wf.map.task_job", {"abs_task.id": "ID1", "exec_job.id": "j"},
     {"task.id": "ID1", "job.id": "j"}),
])
def test_legacy_translation_table(old: str, new: str, fields: dict, expected: dict) -> None:
    line = f"ts=1 event={old} " + " ".join(f'{k}="{v}"' for k, v in fields.items())
    event = bp.parse_line(line)
    assert event.name == new
    assert event.fields == {"ts": 1, **expected}
    # JSON input is translated the same way
    assert jsonenc.from_dict({"event": old, "ts": 1, **fields}).fields == event.fields


def test_every_legacy_name_has_a_translation_target() -> None:
    for old, (new, _, _) in LEGACY.items():
        # jobinstance.state: the target depends on its state (legacy.STATE_EVENTS, tests/events/test_legacy3x.py)
        assert new in MODELS or old == "stampede.jobinstance.state", old
    assert translate("stampede.inv.end", {"a": 1}) == ("stampede.inv.end", {"a": 1})


def test_event_equality_includes_id() -> None:
    a = Event("stampede.xwf.start", {"ts": 1, "restart_count": 0})
    b = Event("stampede.xwf.start", {"ts": 1, "restart_count": 0}, event_id="other")
    assert a != b and a == Event("stampede.xwf.start", {"ts": 1, "restart_count": 0})
