"""Replaying each corpus submit dir gives monitord's events, JSON and jobstate.log (../golden).

Each run works on a temp copy of the corpus dir with monitord's own outputs
removed (as the golden files were made), reading DAGMan times in UTC.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from streamer.events import Event, bp, jsonenc
from streamer.monitor.source import WorkflowSource
from tests.support.eventcompare import WALL_CLOCK_EVENTS, differences

NAMES = ("process_wf_success", "process_wf_failure", "sample_wf_held", "hierarchical_wf_success")

EXTRA_FIELDS = {
    # documented in docs/guide/replay-follow.md ("Where it differs from monitord"): monitord's parser drops the kickstart RAM total
    "stampede.job_inst.host.info": ("total_memory",),
}
EXTRA_JSON = {"event_id"}


def fresh_copy(corpus: Path, name: str, tmp_path: Path) -> Path:
    """A writable copy of a corpus dir without monitord's outputs (as the golden runs had)."""
    target = tmp_path / name
    shutil.copytree(corpus / "pegasus" / name, target, symlinks=True)
    for pattern in ("monitord.*", "jobstate.log", "*.stampede.db"):
        for path in target.rglob(pattern):
            path.unlink()
    return target


async def _replay(directory: Path, parser: str = "auto") -> list[Event]:
    source = WorkflowSource(directory, timezone="UTC", parser=parser)
    events: list[Event] = []
    async for batch in source.batches():
        events.extend(batch.events)
    await source.close()
    return events


def replay(directory: Path, parser: str = "auto") -> list[Event]:
    return asyncio.run(_replay(directory, parser))


def _ignored(name: str) -> tuple[str, ...]:
    return (("ts",) if name in WALL_CLOCK_EVENTS else ()) + EXTRA_FIELDS.get(name, ())


def match(ours: list[tuple[str, dict]], golden: list[tuple[str, dict]]) -> list[str]:
    """Multiset match of (name, fields) pairs; a precise report of what differs (empty if equal)."""
    left = list(ours)
    missing = []
    for name, fields in golden:
        for index, (our_name, our_fields) in enumerate(left):
            if our_name == name and not differences(our_fields, fields, ignore=_ignored(name)):
                del left[index]
                break
        else:
            missing.append((name, fields))
    report = []
    for name, fields in missing:
        keys = ("job.id", "job_inst.id", "inv.id", "js.id", "job_id", "job_inst_id", "inv_id", "js_id")
        where = {k: fields[k] for k in keys if k in fields}
        report.append(f"missing {name} {where}")
        near = [f for n, f in left if n == name and all(f.get(k) == v for k, v in where.items())]
        if near:
            report.append("    nearest differs: " + "; ".join(differences(near[0], fields, ignore=_ignored(name))))
    for name, fields in left:
        report.append(f"extra {name} {fields.get('job.id', fields.get('job_id', ''))}")
    return report


@pytest.fixture(scope="module")
def replays(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Event]]]:
    out = {}
    for name in NAMES:
        directory = fresh_copy(corpus, name, tmp_path_factory.mktemp("golden"))
        out[name] = (directory, replay(directory))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_bp_events_equal_golden(replays, golden: Path, name: str) -> None:
    events = replays[name][1]
    expected = [bp.parse_line(line) for line in (golden / f"{name}.bp").read_text().splitlines() if line.strip()]
    assert len(events) == len(expected)
    report = match([(e.name, e.fields) for e in events], [(e.name, e.fields) for e in expected])
    assert report == [], "\n".join(report[:40])


@pytest.mark.parametrize("name", NAMES)
def test_json_events_equal_golden(replays, golden: Path, name: str) -> None:
    events = replays[name][1]
    expected = []
    for line in (golden / f"{name}.json").read_text().splitlines():
        if line.strip():
            obj = json.loads(line)
            expected.append((obj.pop("event"), obj))
    ours = []
    for event in events:
        obj = jsonenc.to_dict(event)
        for key in EXTRA_JSON | {k.replace(".", "_") for k in EXTRA_FIELDS.get(event.name, ())}:
            obj.pop(key, None)
        ours.append((obj.pop("event"), obj))
    report = match(ours, expected)
    assert report == [], "\n".join(report[:40])


def _without_monitord_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "MONITORD_STARTED" not in line and "MONITORD_FINISHED" not in line]


@pytest.mark.parametrize("name", NAMES)
def test_jobstate_log_equals_golden(replays, golden: Path, name: str) -> None:
    directory = replays[name][0]
    ours = (directory / "jobstate.log").read_text()
    expected = (golden / f"{name}.jobstate.log").read_text()
    assert _without_monitord_lines(ours) == _without_monitord_lines(expected)
    first, last = ours.splitlines()[0], ours.splitlines()[-1]
    assert first.endswith(" INTERNAL *** MONITORD_STARTED ***")
    assert last.endswith(" INTERNAL *** MONITORD_FINISHED 0 ***")


@pytest.mark.parametrize("name", NAMES)
def test_replay_ids_are_stable(replays, corpus: Path, tmp_path: Path, name: str) -> None:
    """Same input, same event ids: endpoints can drop duplicates across replays."""
    again = replay(fresh_copy(corpus, name, tmp_path))
    assert [e.id for e in again] == [e.id for e in replays[name][1]]


def test_default_db_url(replays) -> None:
    directory = replays["process_wf_success"][0]
    source = WorkflowSource(directory)
    assert source.default_db_url() == f"sqlite:///{directory}/process-0.stampede.db"
    assert source.root_xwf_id == "f00c0056-abd4-4e8e-b793-24eb760dda1f"
    assert source.submit_dir == str(directory)
    by_file = WorkflowSource(directory / "process-0.dag.dagman.out")
    assert by_file.submit_dir == str(directory)


@pytest.mark.parametrize("name", NAMES)
def test_child_process_parser_gives_the_same_stream(replays, corpus: Path, tmp_path: Path, name: str) -> None:
    """`--parser process` (the default for large workflows) changes where parsing runs, nothing else."""
    directory = fresh_copy(corpus, name, tmp_path)
    events = replay(directory, parser="process")
    assert [(e.id, e.name, e.fields) for e in events] == [(e.id, e.name, e.fields) for e in replays[name][1]]
    ours = (directory / "jobstate.log").read_text()
    assert _without_monitord_lines(ours) == _without_monitord_lines((replays[name][0] / "jobstate.log").read_text())
