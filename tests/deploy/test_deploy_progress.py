"""The progress panels of the Grafana dashboards (deploy/grafana/progress_panels.py).

Progress % per workflow, held jobs with hold reasons, failing and retried jobs,
CPU per transformation, integrity metrics and the sub-workflow drill-down: each
SQL query runs on the machine's PostgreSQL over the four golden Stampede
databases (loaded as test_deploy_postgres.py loads them) and its rows are
compared with the same facts computed here straight from SQLite. The
Elasticsearch panels are checked against streamer's published fields by
test_deploy_fields.py (every panel of the events dashboard); here, that they
are there and name the events they need.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.deploy import test_deploy_postgres as base

pytestmark = [pytest.mark.postgres, pytest.mark.corpus]
B = base.B
DASHBOARDS = base.ROOT / "deploy" / "grafana" / "dashboards"


@pytest.fixture(scope="module")
def stampede(golden: Path) -> Iterator[Any]:
    import asyncio

    with base.provisioned() as (writer, reader):
        asyncio.run(base._load(golden, writer))
        yield base.Stampede(reader, base.golden_workflow_ids(golden))


def _rows(golden: Path, sql: str) -> list[tuple[str, tuple]]:
    out = []
    for name in base.GOLDEN:
        with sqlite3.connect(golden / f"{name}.stampede.db") as db:
            out += [(name, row) for row in db.execute(sql)]
    return out


def _run(stampede: Any, sql: str) -> list[Any]:
    import asyncio

    return asyncio.run(stampede.query(sql))


def test_progress_per_workflow(stampede: Any, golden: Path) -> None:
    jobs: dict[str, Counter] = defaultdict(Counter)
    for _name, (label, uuid, exitcode, started) in _rows(golden, """
            SELECT w.dax_label, w.wf_uuid, (SELECT ji.exitcode FROM job_instance ji WHERE ji.job_id = j.job_id
                                             ORDER BY ji.job_submit_seq DESC LIMIT 1),
                   EXISTS (SELECT 1 FROM job_instance ji WHERE ji.job_id = j.job_id)
            FROM job j JOIN workflow w ON w.wf_id = j.wf_id"""):
        key = f"{label} ({uuid[:8]})"
        jobs[key]["jobs"] += 1
        jobs[key]["succeeded" if exitcode == 0 else "failed" if exitcode is not None else
                  "running" if started else "not started"] += 1
    rows = _run(stampede, B.SQL_PROGRESS)
    got = {r["workflow"]: dict(r) for r in rows}
    assert got.keys() == jobs.keys()
    for key, counts in jobs.items():
        row = got[key]
        assert [row[k] for k in ("jobs", "succeeded", "failed", "running", "not started")] == \
            [counts[k] for k in ("jobs", "succeeded", "failed", "running", "not started")], key
        assert float(row["% done"]) == pytest.approx(round(100 * counts["succeeded"] / counts["jobs"], 2))
    assert any(float(r["% done"]) == 100.0 for r in rows) and any(float(r["% done"]) < 100 for r in rows)


def test_held_jobs_with_hold_reasons(stampede: Any, golden: Path) -> None:
    expected = {(job, seq, reason.strip()) for _n, (job, seq, reason) in _rows(golden, """
        SELECT j.exec_job_id, ji.job_submit_seq, js.reason FROM jobstate js
        JOIN job_instance ji USING (job_instance_id) JOIN job j USING (job_id) WHERE js.state = 'JOB_HELD'""")}
    rows = _run(stampede, B.SQL_HELD)
    assert {(r["job"], r["try"], r["hold reason"]) for r in rows} == expected
    assert expected and all(r["hold reason"].startswith("Transfer output files failure") for r in rows)
    assert {r["then"] for r in rows} <= {"held", "released"}


def test_failing_and_retried_jobs(stampede: Any, golden: Path) -> None:
    tries: dict[tuple, list] = defaultdict(list)
    for name, (wf, label, job, seq, exitcode) in _rows(golden, """
            SELECT j.wf_id, w.dax_label, j.exec_job_id, ji.job_submit_seq, ji.exitcode FROM job_instance ji
            JOIN job j USING (job_id) JOIN workflow w ON w.wf_id = j.wf_id"""):
        tries[(name, wf, label, job)].append((seq, exitcode))
    expected = set()
    for (_name, _wf, label, job), runs in tries.items():
        failed = sum(1 for _, code in runs if code not in (0, None))
        if len(runs) > 1 or failed:
            last = max(runs)[1]
            outcome = "succeeded" if last == 0 else "running" if last is None else "failed"
            expected.add((label, job, len(runs), failed, last, outcome))
    rows = _run(stampede, B.SQL_RETRIED)
    got = {(r["workflow"], r["job"], r["tries"], r["failed tries"], r["last exit code"], r["outcome"]) for r in rows}
    assert got == expected and len(rows) == len(expected)
    assert ("process", "ls_ID0000001", 2, 2, 256, "failed") in got  # the golden failed workflow's job


def test_cpu_per_transformation(stampede: Any, golden: Path) -> None:
    cpu: dict[str, list[float]] = defaultdict(list)
    for _n, (xform, value) in _rows(golden, "SELECT transformation, remote_cpu_time FROM invocation "
                                            "WHERE remote_cpu_time IS NOT NULL"):
        cpu[xform].append(float(value))
    rows = _run(stampede, B.SQL_CPU)
    got = {r["transformation"]: (r["invocations"], float(r["cpu (s)"])) for r in rows}
    assert got.keys() == cpu.keys()
    for xform, values in cpu.items():
        assert got[xform][0] == len(values)
        assert got[xform][1] == pytest.approx(sum(values), abs=0.002)


def test_integrity_checks(stampede: Any, golden: Path) -> None:
    expected: dict[tuple, list] = defaultdict(lambda: [set(), 0, 0.0])
    for name, (kind, files, inst, count, duration) in _rows(
            golden, "SELECT type, file_type, job_instance_id, count, duration FROM integrity"):
        entry = expected[(kind, files or "-")]
        entry[0].add((name, inst))
        entry[1] += count
        entry[2] += float(duration)
    rows = _run(stampede, B.SQL_INTEGRITY)
    got = {(r["type"], r["files"]): (r["job instances"], r["checksums"], float(r["duration (s)"])) for r in rows}
    assert got.keys() == expected.keys() == {("check", "output"), ("compute", "output")}
    for key, (instances, count, duration) in expected.items():
        assert got[key][:2] == (len(instances), count)
        assert got[key][2] == pytest.approx(duration, abs=0.002)


def test_sub_workflow_drill_down(stampede: Any, golden: Path) -> None:
    rows = _run(stampede, B.SQL_SUBWORKFLOWS)
    assert [(r["parent"], r["sub-workflow"], r["status"]) for r in rows] == \
        [("hierarchical-workflow", "blackdiamond", "succeeded")]
    (row,) = rows
    with sqlite3.connect(golden / "hierarchical_wf_success.stampede.db") as db:
        (job,) = db.execute("SELECT j.exec_job_id FROM job_instance ji JOIN job j USING (job_id) "
                            "WHERE ji.subwf_id IS NOT NULL").fetchone()
        (jobs,) = db.execute("SELECT count(*) FROM job WHERE wf_id = 2").fetchone()
    assert row["job"] == job and row["jobs"] == jobs
    assert row["wf_id"] in stampede.workflow_ids  # the drill-down link's variable value
    dashboard = json.loads((DASHBOARDS / "stampede-db.json").read_text())
    (panel,) = [p for p in dashboard["panels"] if p["title"] == "Sub-workflows"]
    (link,) = panel["fieldConfig"]["overrides"][0]["properties"][0]["value"]
    assert link["url"].startswith("/d/pegasus-stampede-db?var-workflow=${__data.fields.wf_id}")
    assert dashboard["templating"]["list"][0]["name"] == "workflow"


def test_dashboards_have_the_progress_panels() -> None:
    db = {p["title"] for p in json.loads((DASHBOARDS / "stampede-db.json").read_text())["panels"]}
    assert {"Progress per workflow", "Held jobs", "Failing and retried jobs", "CPU per transformation",
            "Integrity checks", "Sub-workflows"} <= db
    events = json.loads((DASHBOARDS / "stampede-events.json").read_text())
    titles = {p["title"]: p for p in events["panels"]}
    assert {"Held jobs", "Job tries", "Memory and CPU per transformation", "Integrity metrics",
            "Sub-workflows"} <= set(titles)
    text = json.dumps(titles["Memory and CPU per transformation"])
    assert '"maxrss"' in text and '"avg_cpu"' in text and "stampede.inv.end" in text
    assert "stampede.int.metric" in json.dumps(titles["Integrity metrics"])
    assert "reason" in json.dumps(titles["Held jobs"]["transformations"])
