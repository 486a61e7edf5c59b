"""DAGMan's own jobstate.log as a source (seed 001): events, database rows, follow + kill -9 + resume."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from streamer.monitor.plain.dagmanlog import DagmanJobstate, DagmanLogError, workflow_uuid
from streamer.monitor.plain.jobstate import JobstateSource
from tests.support.dagjobstate import LINES, log_text, write_plain_dag
from tests.conftest import SHARED, unavailable

SEED_001 = SHARED / "seeds" / "001_95b8a5e717ff66ec.txt"


def seed_example() -> str:
    """The example jobstate.log of seed 001 (the indented lines that start with a timestamp)."""
    if not SEED_001.is_file():
        unavailable(f"seed 001 not found at {SEED_001}")
    lines = [line.strip() for line in SEED_001.read_text().splitlines() if re.match(r"^\s+\d{10} ", line)]
    return "\n".join(lines) + "\n"


async def _events(source: JobstateSource, *, commit: bool = True) -> list:
    out = []
    async for batch in source.batches():
        out.extend(batch.events)
        if commit:
            await source.commit(batch.position)
    return out


def _brief(event) -> tuple:
    f = event.fields
    return (event.name.removeprefix("stampede."), f.get("job.id"), f.get("job_inst.id"), f.get("js.id"),
            f.get("sched.id"), f.get("status"), f.get("exitcode"))


def test_seed_001_example_gives_monitord_events(tmp_path: Path) -> None:
    path = tmp_path / "diamond.jobstate.log"
    path.write_text(seed_example())
    assert len(path.read_text().splitlines()) == 11
    events = asyncio.run(_events(JobstateSource(path, state_path=tmp_path / "state")))
    wf = workflow_uuid(path)
    assert {e.fields["xwf.id"] for e in events} == {wf}
    assert [_brief(e) for e in events] == [
        ("wf.plan", None, None, None, None, None, None),
        ("xwf.start", None, None, None, None, None, None),
        ("job.info", "NodeA", None, None, None, None, None),  # no .dag found: at the node's first line
        ("job_inst.pre.start", "NodeA", 1, 1, None, None, None),
        ("job_inst.pre.term", "NodeA", 1, 2, None, None, None),  # monitord's, as from a dagman.out
        ("job_inst.pre.end", "NodeA", 1, 3, None, 0, 0),
        ("job_inst.submit.start", "NodeA", 1, 4, "4973.0", None, None),
        ("job_inst.submit.end", "NodeA", 1, 4, "4973.0", 0, None),
        ("job_inst.main.start", "NodeA", 1, 5, "4973.0", None, None),
        ("job_inst.main.term", "NodeA", 1, 6, "4973.0", 0, None),
        ("job_inst.main.end", "NodeA", 1, 7, "4973.0", 0, 0),
        ("job_inst.post.start", "NodeA", 1, 8, "4973.0", None, None),
        ("job_inst.post.term", "NodeA", 1, 9, "4973.0", None, None),
        ("job_inst.post.end", "NodeA", 1, 10, "4973.0", 0, 0),
        ("xwf.end", None, None, None, None, 0, None),
    ]
    assert events[0].fields["ts"] == 1292620511 and events[-1].fields["ts"] == 1292620535
    submit = events[6]
    assert submit.name == "stampede.job_inst.submit.start"
    assert submit.fields["site"] == "local"
    main_end = events[10]
    assert main_end.fields["site"] == "local" and main_end.fields["local.dur"] == 1  # EXECUTE 525 -> TERMINATED 526
    assert events[0].fields["dag.file.name"] == "diamond.jobstate.log"
    assert events[0].fields["submit.dir"] == str(tmp_path.resolve())


def _pre_states(events: list, node: str) -> list[tuple[str, int, int | float]]:
    return [(e.name.removeprefix("stampede.job_inst."), e.fields["js.id"], e.fields["ts"]) for e in events
            if e.name.startswith("stampede.job_inst.pre.") and e.fields.get("job.id") == node]


def test_pre_script_terminated_is_not_lost(tmp_path: Path) -> None:
    """Issue 26.19: DAGMan writes no PRE_SCRIPT_TERMINATED, monitord's dagman.out reading makes one (and
    writes it into its own jobstate.log): pre.start, pre.term, pre.end as from the dagman.out, with its row."""
    plain = tmp_path / "plain.jobstate.log"
    plain.write_text(seed_example())
    events = asyncio.run(_events(JobstateSource(plain, state_path=tmp_path / "s1")))
    assert _pre_states(events, "NodeA") == [("pre.start", 1, 1292620523), ("pre.term", 2, 1292620523),
                                            ("pre.end", 3, 1292620523)]
    # the lines after it count on from there, as monitord's do
    assert [(e.name, e.fields["js.id"]) for e in events if e.name == "stampede.job_inst.submit.start"] == [
        ("stampede.job_inst.submit.start", 4)]
    # a jobstate.log monitord wrote has the line itself: one pre.term, with that line's number
    written = tmp_path / "monitord" / "jobstate.log"
    written.parent.mkdir()
    written.write_text("1292620511 INTERNAL *** DAGMAN_STARTED 4972.0 ***\n"
                       "1292620523 NodeA PRE_SCRIPT_STARTED - local - 1\n"
                       "1292620524 NodeA PRE_SCRIPT_TERMINATED - local - 1\n"
                       "1292620525 NodeA PRE_SCRIPT_SUCCESS - local - 1\n")
    events = asyncio.run(_events(JobstateSource(written, state_path=tmp_path / "s2")))
    assert _pre_states(events, "NodeA") == [("pre.start", 1, 1292620523), ("pre.term", 2, 1292620524),
                                            ("pre.end", 3, 1292620525)]
    # a failed PRE script terminates too, before its pre.end and main.end
    failed = tmp_path / "failed" / "jobstate.log"
    failed.parent.mkdir()
    failed.write_text("5 D PRE_SCRIPT_STARTED - - - 6\n6 D PRE_SCRIPT_FAILURE - - - 6\n")
    events = asyncio.run(_events(JobstateSource(failed, state_path=tmp_path / "s3")))
    assert [(e.name.removeprefix("stampede.job_inst."), e.fields["js.id"], e.fields.get("status"))
            for e in events if e.name.startswith("stampede.job_inst.")] == [
        ("pre.start", 1, None), ("pre.term", 2, None), ("pre.end", 3, -1), ("main.end", 3, -1)]


def test_pre_script_states_equal_the_dagman_out_s(tmp_path: Path, python: str) -> None:
    """The same DAGMan run read from its jobstate.log and from its dagman.out: the same PRE script states,
    numbers and times, and the PRE_SCRIPT_TERMINATED row in the database."""
    from tests.support.dagjobstate import write_plain_dagman_out

    log = write_plain_dag(tmp_path / "log")
    from_log = asyncio.run(_events(JobstateSource(log, state_path=tmp_path / "s")))
    dagman_out = write_plain_dagman_out(tmp_path / "out")
    out = tmp_path / "out.jsonl"
    run = subprocess.run([python, "-m", "streamer", "replay", str(dagman_out), "--timezone", "UTC", "-q",
                          "--dest", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    from_out = [(e["event"].removeprefix("stampede.job_inst."), e["js_id"], e["ts"]) for e in
                (json.loads(line) for line in out.read_text().splitlines())
                if e["event"].startswith("stampede.job_inst.pre.") and e["job_id"] == "A"]
    assert _pre_states(from_log, "A") == from_out == [
        ("pre.start", 1, 1700000002), ("pre.term", 2, 1700000003), ("pre.end", 3, 1700000003)]
    db = tmp_path / "log.db"
    run = subprocess.run([python, "-m", "streamer", "replay", str(log), "-q", "--dest", f"sqlite:///{db}"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    states = [row[2:] for row in _db_rows(db)["jobstate"] if row[:2] == ("A", 1)]
    assert sorted(states, key=lambda r: r[1])[:3] == [("PRE_SCRIPT_STARTED", 1), ("PRE_SCRIPT_TERMINATED", 2),
                                                     ("PRE_SCRIPT_SUCCESS", 3)]


def test_workflow_id_is_stable_and_comes_from_the_dag_path(tmp_path: Path) -> None:
    path = write_plain_dag(tmp_path / "a")
    other = write_plain_dag(tmp_path / "b")
    first = asyncio.run(_events(JobstateSource(path, state_path=tmp_path / "s1")))
    again = asyncio.run(_events(JobstateSource(path, state_path=tmp_path / "s2")))
    elsewhere = asyncio.run(_events(JobstateSource(other, state_path=tmp_path / "s3")))
    assert [e.id for e in first] == [e.id for e in again]
    assert first[0].fields["xwf.id"] == workflow_uuid(tmp_path / "a" / "plain.dag")
    assert elsewhere[0].fields["xwf.id"] != first[0].fields["xwf.id"]
    assert first[0].fields["dag.file.name"] == "plain.dag"


def test_every_line_kind_of_the_generated_log(tmp_path: Path) -> None:
    path = write_plain_dag(tmp_path)
    source = JobstateSource(path, state_path=tmp_path / "state")
    events = asyncio.run(_events(source))
    assert source.bad == 0
    names = [e.name.removeprefix("stampede.") for e in events]
    # the DAG file gives the jobs (submit file, RETRY, executable) and the edges
    infos = {e.fields["job.id"]: e.fields for e in events if e.name == "stampede.job.info"}
    assert sorted(infos) == ["A", "B", "C", "D"]
    assert (infos["B"]["max_retries"], infos["B"]["submit_file"], infos["B"]["executable"]) == (2, "b.sub", "/bin/sleep")
    assert infos["A"]["type_desc"] == "unknown" and infos["A"]["clustered"] == 0
    edges = [(e.fields["parent.job.id"], e.fields["child.job.id"]) for e in events if e.name == "stampede.job.edge"]
    assert edges == [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")]
    # three DAGMan runs: finished 1, restarted without an end (status 2 at ts-1), recovery failure
    wf = [(n, e.fields["restart_count"], e.fields.get("status"), e.fields.get("reason"), e.fields["ts"])
          for n, e in zip(names, events) if n.startswith("xwf.")]
    assert wf == [
        ("xwf.start", 0, None, None, 1700000000), ("xwf.end", 0, 1, None, 1700000040),
        ("xwf.start", 1, None, None, 1700000100),
        ("xwf.end", 1, 2, "DAGMan started again without DAGMAN_FINISHED", 1700000199),
        ("xwf.start", 2, None, None, 1700000200), ("xwf.end", 2, 2, "DAGMan recovery failed", 1700000210),
    ]
    # retries: B#2 fails (exit 1), B#4 succeeds; C#3 has a submit failure, then fails; C#5 succeeds
    ends = [(e.fields["job.id"], e.fields["job_inst.id"], e.fields["status"], e.fields.get("exitcode"))
            for e in events if e.name == "stampede.job_inst.main.end"]
    assert ends == [("A", 1, 0, 0), ("B", 2, -1, 1), ("C", 3, -1, 2), ("B", 4, 0, 0), ("C", 5, 0, 0),
                    ("D", 6, -1, None), ("D", 7, -1, -1)]
    submit_failure = [e for e in events if e.name == "stampede.job_inst.submit.end" and e.fields["status"] == -1]
    assert [(e.fields["job.id"], e.fields["js.id"]) for e in submit_failure] == [("C", 1)]
    # js.id counts every line of the instance, also those without a Stampede event (JOB_SUSPENDED)
    c3 = [(n, e.fields["js.id"]) for n, e in zip(names, events) if e.fields.get("job_inst.id") == 3]
    assert c3[-2:] == [("job_inst.main.term", 6), ("job_inst.main.end", 7)]
    assert source.converter.unmapped == 2
    held = [n for n, e in zip(names, events) if e.fields.get("job_inst.id") == 2]
    assert "job_inst.held.start" in held and "job_inst.held.end" in held
    assert names.count("job_inst.abort.info") == 1


def _jobstate_rows_expected() -> list[tuple[str, int, str, int]]:
    """(node, seq, state, js.id) the DB must hold: every log line with a state, DB state names."""
    names = {"SUBMIT_FAILURE": "SUBMIT_FAILED", "PRE_SCRIPT_FAILURE": "PRE_SCRIPT_FAILED",
             "POST_SCRIPT_FAILURE": "POST_SCRIPT_FAILED"}
    counters: dict[tuple[str, int], int] = {}
    rows = []
    for _, text in LINES:
        parts = text.split()
        if parts[0] == "INTERNAL":
            continue
        key = (parts[0], int(parts[5]))
        if parts[1] in ("PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE"):  # monitord's PRE_SCRIPT_TERMINATED first
            counters[key] = counters.get(key, 0) + 1
            rows.append((parts[0], key[1], "PRE_SCRIPT_TERMINATED", counters[key]))
        counters[key] = counters.get(key, 0) + 1
        if parts[1] in ("JOB_SUSPENDED", "JOB_UNSUSPENDED"):
            continue
        rows.append((parts[0], key[1], names.get(parts[1], parts[1]), counters[key]))
        if parts[1] == "PRE_SCRIPT_FAILURE":
            rows.append((parts[0], key[1], "JOB_FAILURE", counters[key]))
    return sorted(rows)


def _db_rows(db: Path) -> dict:
    conn = sqlite3.connect(db)
    try:
        return {
            "workflow": conn.execute("SELECT wf_uuid, dag_file_name, submit_dir FROM workflow").fetchall(),
            "job": conn.execute("SELECT exec_job_id, submit_file, type_desc, max_retries, executable "
                                "FROM job ORDER BY exec_job_id").fetchall(),
            "job_edge": conn.execute("SELECT parent_exec_job_id, child_exec_job_id FROM job_edge "
                                     "ORDER BY 1, 2").fetchall(),
            "job_instance": conn.execute(
                "SELECT j.exec_job_id, i.job_submit_seq, i.sched_id, i.exitcode, i.site FROM job_instance i "
                "JOIN job j USING (job_id) ORDER BY i.job_submit_seq").fetchall(),
            "jobstate": sorted(conn.execute(
                "SELECT j.exec_job_id, i.job_submit_seq, s.state, s.jobstate_submit_seq FROM jobstate s "
                "JOIN job_instance i USING (job_instance_id) JOIN job j USING (job_id)").fetchall()),
            "workflowstate": conn.execute("SELECT state, timestamp, restart_count, status FROM workflowstate "
                                          "ORDER BY timestamp, state").fetchall(),
        }
    finally:
        conn.close()


def test_replay_into_sqlite_gives_workflow_job_instance_and_jobstate_rows(tmp_path: Path, python: str) -> None:
    path = write_plain_dag(tmp_path)
    run = subprocess.run([python, "-m", "streamer", "replay", str(path), "-q"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    db = tmp_path / "plain.stampede.db"  # monitord's default name, next to the DAG
    rows = _db_rows(db)
    assert rows["workflow"] == [(workflow_uuid(tmp_path / "plain.dag"), "plain.dag", str(tmp_path.resolve()))]
    assert rows["job"] == [("A", "a.sub", "unknown", 0, "/bin/true"), ("B", "b.sub", "unknown", 2, "/bin/sleep"),
                           ("C", "c.sub", "unknown", 3, "/bin/false"), ("D", "d.sub", "unknown", 0, "/bin/echo")]
    assert rows["job_edge"] == [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")]
    assert rows["job_instance"] == [("A", 1, "101.0", 0, "local"), ("B", 2, "102.0", 1, ""),
                                    ("C", 3, "103.0", 2, ""), ("B", 4, "104.0", 0, ""),
                                    ("C", 5, "201.0", 0, ""), ("D", 6, None, None, ""),
                                    ("D", 7, "301.0", -1, "")]
    assert rows["jobstate"] == _jobstate_rows_expected()
    assert rows["workflowstate"] == [
        ("WORKFLOW_STARTED", 1700000000, 0, None), ("WORKFLOW_TERMINATED", 1700000040, 0, 1),
        ("WORKFLOW_STARTED", 1700000100, 1, None), ("WORKFLOW_TERMINATED", 1700000199, 1, 2),
        ("WORKFLOW_STARTED", 1700000200, 2, None), ("WORKFLOW_TERMINATED", 1700000210, 2, 2),
    ]
    # a second replay replaces the rows (monitord -r), it does not add to them
    again = subprocess.run([python, "-m", "streamer", "replay", str(path), "-q"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert _db_rows(db) == rows


def test_load_recognises_a_jobstate_log_by_content(tmp_path: Path, python: str) -> None:
    path = write_plain_dag(tmp_path)
    renamed = tmp_path / "history.txt"
    renamed.write_text(path.read_text())
    out = tmp_path / "out.jsonl"
    run = subprocess.run([python, "-m", "streamer", "load", str(renamed), "--dest", str(out), "-q"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "malformed" not in run.stderr
    events = [json.loads(line) for line in out.read_text().splitlines()]
    # no .dag names history.txt as its JOBSTATE_LOG: no edges, job.info from the lines themselves
    by_dag = asyncio.run(_events(JobstateSource(path, state_path=tmp_path / "st")))
    assert len(events) == len([e for e in by_dag if e.name != "stampede.job.edge"]) == 60
    assert events[0]["event"] == "stampede.wf.plan"
    mixed = subprocess.run([python, "-m", "streamer", "load", str(renamed), str(out), "--dest", str(tmp_path / "x.bp")],
                           capture_output=True, text=True)
    assert mixed.returncode == 2 and "loaded on its own" in mixed.stderr


def test_bad_lines_are_reported_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "jobstate.log"
    path.write_text("1292620511 INTERNAL *** DAGMAN_STARTED 4972.0 ***\n"
                    "garbage here\n"
                    "1292620525 NodeA SUBMIT 4973.0 local - x\n"
                    "1292620535 INTERNAL *** DAGMAN_FINISHED 0 ***\n")
    messages: list[str] = []
    source = JobstateSource(path, report=messages.append)
    events = asyncio.run(_events(source))
    assert source.bad == 2
    assert messages[0].startswith(f"{path}:2: not a DAGMan jobstate.log line")
    assert messages[1] == f"{path}:3: sequence number 'x' is not an integer"
    assert [e.name for e in events] == ["stampede.wf.plan", "stampede.xwf.start", "stampede.xwf.end"]
    with pytest.raises(DagmanLogError):
        DagmanJobstate(path).feed("1 INTERNAL *** SOMETHING_ELSE ***")


def test_follow_kill9_resume_loses_and_repeats_nothing(tmp_path: Path, python: str) -> None:
    path = write_plain_dag(tmp_path, with_log=False)
    text = log_text()
    lines = text.splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    state = tmp_path / "state.json"

    def start() -> subprocess.Popen:
        return subprocess.Popen([python, "-m", "streamer", "load", str(path), "--follow", "--checkpoint",
                                 str(state), "--dest", str(out), "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_committed(size: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if json.loads(state.read_text())["position"]["offset"] == size:
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        raise AssertionError("the follower never committed the end of the log")

    with open(path, "w") as handle:
        handle.writelines(lines[:20])
        handle.write(lines[20][:9])  # a line cut mid-way: held until it is complete
    proc = start()
    try:
        wait_committed(sum(len(x) for x in lines[:20]))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with open(path, "a") as handle:
            handle.write(lines[20][9:])
            handle.writelines(lines[21:35])
        proc = start()
        wait_committed(sum(len(x) for x in lines[:35]))
        with open(path, "a") as handle:
            handle.writelines(lines[35:])
        wait_committed(len(text.encode()))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reference = asyncio.run(_events(JobstateSource(path, state_path=tmp_path / "refstate")))
    assert len(reference) == 64
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["event_id"] for e in got] == [e.id for e in reference]


# ---------------------------------------------------------------- a plain DAG's dagman.out

def test_plain_dagman_out_without_braindump(tmp_path: Path, python: str) -> None:
    from tests.support.dagjobstate import write_plain_dagman_out

    dagman_out = write_plain_dagman_out(tmp_path)
    out = tmp_path / "events.jsonl"
    run = subprocess.run([python, "-m", "streamer", "replay", str(dagman_out), "--timezone", "UTC", "-q",
                          "--dest", str(out), "--dest", f"sqlite:///{tmp_path}/plain.stampede.db"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in out.read_text().splitlines()]
    # the same workflow id as its jobstate.log would give: the DAG's path
    assert {e["xwf_id"] for e in events} == {workflow_uuid(tmp_path / "plain.dag")}
    names = [e["event"].removeprefix("stampede.") for e in events]
    assert names.count("job.info") == 4 and names.count("job.edge") == 4
    # DAGMan's facts only: no kickstart record, no host (absent, not invented)
    assert "job_inst.host.info" not in names and not [e for e in events if e["event"] == "stampede.inv.end"
                                                      and e["inv_id"] > 0]
    ends = [(e["job_id"], e["job_inst_id"], e["status"], e["exitcode"]) for e in events
            if e["event"] == "stampede.job_inst.main.end"]
    assert ends == [("A", 1, 0, 0), ("B", 2, -1, 256), ("C", 3, -1, 512), ("B", 4, 0, 0)]
    assert [(e["event"], e.get("status")) for e in events if e["event"].startswith("stampede.xwf.")] == [
        ("stampede.xwf.start", None), ("stampede.xwf.end", 1)]
    # nothing of monitord's written into DAGMan's directory (it may hold DAGMan's own jobstate.log)
    assert not (tmp_path / "jobstate.log").exists() and not (tmp_path / "monitord.started").exists()
    conn = sqlite3.connect(tmp_path / "plain.stampede.db")
    try:
        assert conn.execute("SELECT COUNT(*) FROM job_instance").fetchone() == (4,)
        assert conn.execute("SELECT COUNT(*) FROM jobstate").fetchone() == (sum(
            1 for e in events if "js_id" in e and e["event"] not in (
                "stampede.job_inst.submit.start", "stampede.job_inst.composite")),)
        assert conn.execute("SELECT wf_uuid, dag_file_name FROM workflow").fetchall() == [
            (workflow_uuid(tmp_path / "plain.dag"), "plain.dag")]
    finally:
        conn.close()


def test_directory_without_braindump_nor_dag_is_refused(tmp_path: Path, python: str) -> None:
    (tmp_path / "x.dag.dagman.out").write_text("")
    run = subprocess.run([python, "-m", "streamer", "replay", str(tmp_path), "-q"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "no DAG file" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.corpus
def test_a_jobstate_log_monitord_wrote(tmp_path: Path, golden: Path, python: str) -> None:
    """monitord's jobstate.log (MONITORD_* markers, its state names) reads without a bad line; in a Pegasus
    submit dir the default database is the directory's, so streamer asks for the directory or a --dest."""
    text = (golden / "process_wf_failure.jobstate.log").read_text()
    path = tmp_path / "plain" / "jobstate.log"
    path.parent.mkdir()
    path.write_text(text)
    source = JobstateSource(path, state_path=tmp_path / "state")
    events = asyncio.run(_events(source))
    assert source.bad == 0
    node_lines = [line.split() for line in text.splitlines() if " INTERNAL " not in line]
    instances = {(p[1], int(p[6])) for p in node_lines}
    starts = [e for e in events if e.name == "stampede.job_inst.submit.start"]
    assert {(e.fields["job.id"], e.fields["job_inst.id"]) for e in starts} == instances
    assert [(e.name, e.fields.get("status")) for e in events if e.name.startswith("stampede.xwf.")] == [
        ("stampede.xwf.start", None), ("stampede.xwf.end", 1)]
    pegasus_dir = tmp_path / "submit"
    pegasus_dir.mkdir()
    (pegasus_dir / "jobstate.log").write_text(text)
    (pegasus_dir / "braindump.yml").write_text("wf_uuid: f84f05fc-a8d0-42b5-bac5-52d6f41a77e3\ndag: process-0.dag\n")
    run = subprocess.run([python, "-m", "streamer", "replay", str(pegasus_dir / "jobstate.log")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "replay the directory" in run.stderr
    assert not list(pegasus_dir.glob("*.stampede.db"))
    out = tmp_path / "x.jsonl"
    ok = subprocess.run([python, "-m", "streamer", "replay", str(pegasus_dir / "jobstate.log"), "--dest", str(out),
                         "-q"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert {json.loads(line)["xwf_id"] for line in out.read_text().splitlines()} == {
        "f84f05fc-a8d0-42b5-bac5-52d6f41a77e3"}


def test_follow_ends_when_dagman_has_finished(tmp_path: Path, python: str) -> None:
    path = write_plain_dag(tmp_path, with_log=False)
    lines = log_text().splitlines(keepends=True)
    path.write_text("".join(lines[:20]))
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([python, "-m", "streamer", "follow", str(path), "--dest", str(out), "-q"],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") < 20):
            time.sleep(0.05)
        assert proc.poll() is None  # DAGMan has not finished: still following
        with open(path, "a") as handle:
            handle.writelines(lines[20:])
        _, err = proc.communicate(timeout=60)  # ends by itself after DAGMAN_FINISHED
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out.read_text().count("\n") == 64


def test_follow_of_a_plain_dagman_out_ends_with_dagman(tmp_path: Path, python: str) -> None:
    from tests.support.dagjobstate import write_plain_dagman_out

    dagman_out = write_plain_dagman_out(tmp_path / "dag")
    outs = []
    for command in ("replay", "follow"):
        out = tmp_path / f"{command}.jsonl"
        run = subprocess.run([python, "-m", "streamer", command, str(dagman_out), "--timezone", "UTC", "-q",
                              "--dest", str(out), "--state", str(tmp_path / f"{command}.state")],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        outs.append([json.loads(line)["event_id"] for line in out.read_text().splitlines()])
    assert outs[0] == outs[1] and len(outs[0]) == 47
