"""`streamer monitord -N` against the real `pegasus-monitord -N` (pegasus-wms 5.1.3, a test dependency).

Identical copies of synthetic workflows (success, retry, held, post-script failure with a failed
workflow, two-level hierarchical, a clustered job with three tasks) whose notify files (WORKFLOW, JOB and
INVOCATION lines) call a recorder script (one JSON file per call:
argv, cwd, every PEGASUS_* variable), each monitor with its own HOME whose ~/.pegasusrc names an AMQP
endpoint (`pegasus.catalog.workflow.amqp.url`, on a vhost of its own: monitord 5.1.3 cannot address
RabbitMQ's default vhost "/"). Equal: the notifications (times aside), the master DB rows, the
Stampede DB rows, jobstate.log and the AMQP messages.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamer.synth import generate
from streamer.synth.notify import write_notify, write_recorder
from tests.support.amqphelp import Capture, unique
from tests.conftest import AMQP_HOST, AMQP_PORT, port_open, unavailable
from tests.support.dbcompare import compare, format_diff, sqlite_snapshot
from tests.support.eventcompare import differences
from tests.monitor.test_monitor_golden import _without_monitord_lines
from tests.monitor.test_replay_db import without_total_memory

SCENARIOS = ("success", "retry", "held", "post_failure", "hierarchical", "clustered")
TIMES = ("PEGASUS_EVENT_TIMESTAMP", "PEGASUS_EVENT_TIMESTAMP_ISO")


@pytest.fixture(scope="module")
def monitord() -> list[str]:
    if importlib.util.find_spec("Pegasus") is None:
        unavailable("pegasus-wms (the reference monitord) is not installed")
    return [sys.executable, "-m", "Pegasus.cli.pegasus-monitord"]


@pytest.fixture(scope="module")
def vhost() -> Any:
    """A RabbitMQ vhost of our own (random name), removed afterwards."""
    if not port_open(AMQP_HOST, AMQP_PORT):
        unavailable(f"RabbitMQ not reachable at {AMQP_HOST}:{AMQP_PORT}")
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        unavailable("rabbitmqctl is needed to make a test vhost")
    name = unique("streamer-monitord")
    subprocess.run([ctl, "add_vhost", name], check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([ctl, "set_permissions", "-p", name, "guest", ".*", ".*", ".*"], check=True,
                       capture_output=True, timeout=120)
        yield name
    finally:
        subprocess.run([ctl, "delete_vhost", name], capture_output=True, timeout=120)


def notifications(calls: Path, root: Path) -> collections.Counter:
    """The recorded calls as a multiset of (argv, PEGASUS_* but times), the run dir spelled <DIR>."""
    out: collections.Counter = collections.Counter()
    for path in calls.glob("*.json"):
        record = json.loads(path.read_text())
        env = tuple(sorted((k, v.replace(str(root), "<DIR>")) for k, v in record["env"].items()
                           if k not in TIMES and k != "PEGASUS_BIN_DIR"))
        for key in TIMES:
            assert record["env"].get(key), f"{key} missing in {record}"
        out[(tuple(record["argv"]), env)] += 1
    return out


def _placeholder(value: Any, root: Path) -> Any:
    return value.replace(str(root), "<DIR>") if isinstance(value, str) else value


def stampede_rows(db: Path, root: Path, *, ours: bool) -> dict[str, collections.Counter]:
    snap = sqlite_snapshot(str(db))
    if ours:  # streamer fills host.total_memory, which monitord leaves empty (docs/guide/replay-follow.md: on purpose)
        snap = without_total_memory(snap)
    return {table: collections.Counter({tuple(_placeholder(v, root) for v in row): n for row, n in rows.items()})
            for table, rows in snap.items()}


def master_rows(home: Path, root: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    conn = sqlite3.connect(home / ".pegasus" / "workflow.db")
    try:
        workflows = sorted(tuple(_placeholder(v, root) for v in row) for row in conn.execute(
            'SELECT wf_uuid, dax_label, dax_version, dax_file, dag_file_name, timestamp, submit_hostname, submit_dir, '
            'planner_arguments, "user", grid_dn, planner_version, db_url, archived FROM master_workflow'))
        states = sorted(conn.execute(
            "SELECT w.wf_uuid, s.state, s.timestamp, s.restart_count, s.status, s.reason "
            "FROM master_workflowstate s JOIN master_workflow w ON w.wf_id = s.wf_id").fetchall())
    finally:
        conn.close()
    return workflows, states


def prepare(base: Path, name: str, scenario: str, amqp: str) -> tuple[Path, Path, Path]:
    run_dir = generate(base / name, jobs=3, scenario=scenario, seed=0)
    recorder = write_recorder(base / f"recorder-{name}", base / f"calls-{name}", sys.executable)
    write_notify(run_dir, str(recorder), invocations=3)  # INVOCATION lines too: tasks 1-3 of every job
    home = base / f"home-{name}"
    home.mkdir()
    (home / ".pegasusrc").write_text(f"pegasus.catalog.workflow.amqp.url = {amqp}\n")
    return run_dir, home, base / f"calls-{name}"


def match_messages(ours: list[dict[str, Any]], reference: list[dict[str, Any]]) -> list[str]:
    """Pair each reference message with an equal one of ours (event_id aside); report the rest."""
    left = list(ours)
    problems = []
    for want in reference:
        for index, body in enumerate(left):
            if body.get("event") == want.get("event") and not differences(body, want, ignore=("event_id",)):
                del left[index]
                break
        else:
            problems.append(f"missing: {want}")
    problems += [f"unexpected: {body}" for body in left]
    return problems


@pytest.mark.rabbitmq
@pytest.mark.timeout(600)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_streamer_monitord_matches_pegasus_monitord(monitord: list[str], vhost: str, tmp_path: Path,
                                                    scenario: str) -> None:
    exchanges = {name: unique(f"monitord-{name}") for name in ("ref", "ours")}
    base_url = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{vhost}"
    dirs = {name: prepare(tmp_path, name, scenario, f"{base_url}/{exchanges[name]}") for name in ("ref", "ours")}
    commands = {"ref": monitord, "ours": [sys.executable, "-m", "streamer", "monitord"]}

    async def run_both() -> dict[str, list[dict[str, Any]]]:
        async with Capture(f"{base_url}", exchanges["ref"]) as ref_capture, \
                Capture(f"{base_url}", exchanges["ours"]) as our_capture:
            await ref_capture.start()
            await our_capture.start()
            procs = {}
            for name, (run_dir, home, _calls) in dirs.items():
                dagman_out = next(run_dir.glob("*.dagman.out")).name
                env = {**os.environ, "TZ": "UTC", "HOME": str(home)}
                procs[name] = await asyncio.create_subprocess_exec(
                    *commands[name], "-N", dagman_out, cwd=run_dir, env=env,
                    stdout=open(tmp_path / f"{name}.log", "wb"), stderr=subprocess.STDOUT)
            codes = {name: await asyncio.wait_for(proc.wait(), 600) for name, proc in procs.items()}
            assert codes == {"ref": 0, "ours": 0}, (tmp_path / "ours.log").read_text()[-3000:]
            await ref_capture.wait_for(10**6, timeout=3)
            await our_capture.wait_for(len(ref_capture.messages), timeout=10)
            return {"ref": [json.loads(m.body) for m in ref_capture.messages],
                    "ours": [json.loads(m.body) for m in our_capture.messages]}

    messages = asyncio.run(run_both())
    (ref_dir, ref_home, ref_calls), (our_dir, our_home, our_calls) = dirs["ref"], dirs["ours"]

    # notifications: the same scripts with the same arguments and PEGASUS_* environment
    expected, ours = notifications(ref_calls, ref_dir), notifications(our_calls, our_dir)
    assert sum(expected.values()) > 20
    assert ours == expected, "\n".join(f"{expected[k]} {ours[k]} {k}" for k in set(ours) | set(expected)
                                       if ours[k] != expected[k])

    # jobstate.log of every workflow directory
    for ref_log in ref_dir.rglob("jobstate.log"):
        our_log = our_dir / ref_log.relative_to(ref_dir)
        assert _without_monitord_lines(our_log.read_text()) == _without_monitord_lines(ref_log.read_text())

    # the Stampede DB and the master (dashboard) DB
    our_rows = stampede_rows(next(our_dir.glob("*.stampede.db")), our_dir, ours=True)
    ref_rows = stampede_rows(next(ref_dir.glob("*.stampede.db")), ref_dir, ours=False)
    diff = compare(our_rows, ref_rows)
    if scenario == "hierarchical":
        # pegasus-monitord 5.1.3 (-N and -r alike) leaves most job_instance rows of a hierarchical run half-written:
        # the instance is inserted, its end never updates it (no host, duration, exit code, stdout). Where monitord
        # is wrong, the rows must still be the same instances (workflow, job, submit seq, condor id, site), and ours
        # complete.
        assert set(diff) == {"job_instance"}, format_diff(diff)
        extra, missing = diff.pop("job_instance")
        assert all(row[3] is None for row in missing), missing  # never linked to its host
        assert sorted(r[:3] + r[4:6] for r in extra if r[11] is None) == \
            sorted(r[:3] + r[4:6] for r in missing if r[11] is None)
        assert all(row[10] is not None and row[12] for row in extra), extra  # local_duration, stdout_file
    assert diff == {}, format_diff(diff)
    assert master_rows(our_home, our_dir) == master_rows(ref_home, ref_dir)
    assert master_rows(our_home, our_dir)[1], "no master workflow states"

    # AMQP: monitord's default filter for an endpoint without .events, the same messages
    assert messages["ref"], "the reference monitord published nothing"
    assert match_messages(messages["ours"], messages["ref"]) == []

    # monitord's files
    for name in ("monitord.started", "monitord.done", "monitord-notifications.log"):
        assert (our_dir / name).is_file(), name
    assert not (our_dir / "monitord.pid").exists()
