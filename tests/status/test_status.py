"""`streamer status`: pegasus-status's numbers from a submit dir, an event file and an AMQP stream.

The reference is the real `pegasus-status --jsonrv` (pegasus-wms 5.1.3, a test
dependency) run on the same synthetic submit directories, with `condor_q`
stubbed at its boundary (an executable on PATH that prints an empty queue,
`[]`), so pegasus-status runs its whole path without HTCondor.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any
from pathlib import Path

import pytest

from streamer.events import bp
from streamer.events.tally.counts import DagCounts, document, percent
from streamer.status.progress import DagmanProgress, SubmitDirProgress, find_dagmans
from streamer.events.tally.excerpt import stderr_excerpt
from streamer.events.tally.tracker import STATUS_EVENTS, StatusTracker, exit_code
from streamer.synth import generate, iter_dagman_chunks
from tests.support import commands


def streamer(*args: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Exit 0 unless told otherwise: most status runs here must succeed."""
    return commands.streamer(*args, check=check, **kw)

SCENARIOS = ("success", "held", "retry", "held_abort", "post_failure", "pre_failure", "rescue", "hierarchical")


@pytest.fixture(scope="module")
def condor_q_stub(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH with a `condor_q` that reports an empty queue as JSON (what condor_q -json prints then)."""
    bin_dir = tmp_path_factory.mktemp("stub-bin")
    stub = bin_dir / "condor_q"
    stub.write_text("#!/bin/sh\necho '[]'\n")
    stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


REFERENCES: dict[Path, str] = {}
"""pegasus-status's document of each submit dir, run once per dir (they are never changed after `generate`)."""


def pegasus_status(path: Path, env: dict[str, str]) -> str:
    if path not in REFERENCES:
        result = subprocess.run([sys.executable, "-m", "Pegasus.cli.pegasus-status", "--jsonrv", str(path)],
                                capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        REFERENCES[path] = result.stdout
    return REFERENCES[path]


REPLAYED: dict[Path, bytes] = {}
"""The events of each submit dir, replayed once (a test gets its own copy of the file)."""


def replay_to(run_dir: Path, out: Path) -> Path:
    """The events of `run_dir` (replayed on a copy: replay writes markers and state) as a BP file."""
    if run_dir not in REPLAYED:
        copy = out.parent / f"{run_dir.name}-replayed"
        shutil.copytree(run_dir, copy, symlinks=True)
        streamer("replay", str(copy), "--dest", f"file://{out}", "--no-jobstate", "-q",
                 env={**os.environ, "TZ": "UTC"})
        REPLAYED[run_dir] = out.read_bytes()
    out.write_bytes(REPLAYED[run_dir])
    return out


@pytest.fixture(scope="module")
def scenario_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("status-scenarios")
    return {name: generate(base / name, jobs=3, scenario=name, seed=0) for name in SCENARIOS}


# ---------------------------------------------------------------- submit dir == pegasus-status

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_json_of_a_submit_dir_is_pegasus_status_json(scenario: str, scenario_dirs: dict[str, Path],
                                                     condor_q_stub: dict[str, str]) -> None:
    run_dir = scenario_dirs[scenario]
    theirs = pegasus_status(run_dir, condor_q_stub)
    ours = streamer("status", str(run_dir), "--json").stdout
    assert ours == theirs  # byte for byte: same keys, order, numbers and indentation
    doc = json.loads(ours)
    assert set(doc) == {"totals", "dags"} and "root" in doc["dags"]


def test_the_scenarios_cover_every_state(scenario_dirs: dict[str, Path], condor_q_stub: dict[str, str]) -> None:
    """The reference documents are not trivial: failures, unready nodes and sub-workflows occur."""
    docs = {name: json.loads(pegasus_status(d, condor_q_stub)) for name, d in scenario_dirs.items()}
    assert docs["held_abort"]["dags"]["root"]["state"] == "Failure"
    assert docs["held_abort"]["totals"]["failed"] == 1 and docs["held_abort"]["totals"]["unready"] == 3
    assert docs["post_failure"]["totals"]["failed"] == 1
    assert docs["rescue"]["dags"]["root"]["state"] == "Success"  # the rescue run finished the workflow
    assert set(docs["hierarchical"]["dags"]) == {"root", "inner"}
    assert docs["hierarchical"]["totals"]["total"] == 16
    assert docs["success"]["totals"]["percent_done"] == 100.0


# ---------------------------------------------------------------- events == pegasus-status

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_event_file_gives_the_same_table(scenario: str, scenario_dirs: dict[str, Path], tmp_path: Path,
                                         condor_q_stub: dict[str, str]) -> None:
    run_dir = scenario_dirs[scenario]
    theirs = json.loads(pegasus_status(run_dir, condor_q_stub))
    events = replay_to(run_dir, tmp_path / "events.bp")
    ours = json.loads(streamer("status", str(events), "--json").stdout)
    assert ours["totals"] == theirs["totals"]
    assert ours["dags"] == theirs["dags"]
    # and per workflow: id, label, submit host and directory
    (root_id,) = [k for k, v in ours["workflows"].items() if v["parent_xwf_id"] is None]
    root = ours["workflows"][root_id]
    assert root["label"] == "synth" and root["submit_hostname"] == "synth.example.org"
    assert root["submit_dir"] == "/home/synth/submit/synth/pegasus/synth/run0001"
    assert root["succeeded"] == theirs["dags"]["root"]["succeeded"]
    # the JSON-lines form of the same events agrees too
    jsonl = tmp_path / "events.jsonl"
    streamer("load", str(events), "--dest", f"file://{jsonl}", "-q")
    again = json.loads(streamer("status", str(jsonl), "--json").stdout)
    assert again["dags"] == theirs["dags"]


@pytest.mark.rabbitmq
@pytest.mark.parametrize("scenario", ["held_abort", "rescue", "hierarchical"])
def test_amqp_stream_gives_the_same_table(scenario: str, scenario_dirs: dict[str, Path], tmp_path: Path,
                                          amqp_url: str, condor_q_stub: dict[str, str]) -> None:
    from tests.support.amqphelp import Capture, unique

    run_dir = scenario_dirs[scenario]
    theirs = json.loads(pegasus_status(run_dir, condor_q_stub))
    events = replay_to(run_dir, tmp_path / "events.bp")
    exchange, queue = unique("status-x"), unique("status-q")

    async def scenario_run() -> dict:
        async with Capture(amqp_url, exchange, durable_queue=queue):  # the queue exists before publishing
            streamer("load", str(events), "--dest", f"{amqp_url}/{exchange}?events={STATUS_EVENTS}", "-q")
            result = await asyncio.to_thread(
                streamer, "status", f"{amqp_url}/{exchange}", "--queue", queue, "--json", "--idle", "1")
            return json.loads(result.stdout)

    ours = asyncio.run(scenario_run())
    assert ours["totals"] == theirs["totals"]
    assert ours["dags"] == theirs["dags"]


@pytest.mark.rabbitmq
def test_amqp_watch_follows_the_stream_until_the_workflows_end(scenario_dirs: dict[str, Path], tmp_path: Path,
                                                               amqp_url: str, condor_q_stub: dict[str, str]) -> None:
    from tests.support.amqphelp import Capture, unique

    theirs = json.loads(pegasus_status(scenario_dirs["retry"], condor_q_stub))["totals"]
    events = replay_to(scenario_dirs["retry"], tmp_path / "events.bp")
    exchange, queue = unique("status-x"), unique("status-q")

    async def scenario_run() -> subprocess.CompletedProcess:
        async with Capture(amqp_url, exchange, durable_queue=queue):
            streamer("load", str(events), "--dest", f"{amqp_url}/{exchange}?events={STATUS_EVENTS}", "-q")
            return await asyncio.to_thread(streamer, "status", f"{amqp_url}/{exchange}", "--queue", queue,
                                           "--watch", "--interval", "0.2", "--idle", "1")

    out = asyncio.run(scenario_run()).stdout  # ends by itself: the workflow ended, the stream went quiet
    report = out.splitlines()
    row = report[report.index(next(line for line in report if line.startswith("UNREADY"))) + 1]
    assert row.split() == [str(theirs[k]) for k in ("unready", "ready", "pre", "queued", "post", "succeeded",
                                                    "failed", "percent_done")]
    assert "guest:guest" not in out and "findrange_ID0000001 exit=1" in out


def test_live_view_renders_tree_held_jobs_and_failures(tmp_path: Path) -> None:
    from rich.console import Console

    from streamer.status.live import render
    from streamer.status.text import View, tracker_jobs, tracker_rows

    run_dir = generate(tmp_path / "wf", jobs=4, scenario="held,retry,hierarchical", seed=0)
    lines = replay_to(run_dir, tmp_path / "e.bp").read_text().splitlines()
    tracker = StatusTracker()
    cut = next(i for i, line in enumerate(lines) if "event=stampede.job_inst.held.start" in line)
    tracker.feed(bp.parse_line(line) for line in lines[:cut + 1])
    jobs = tracker_jobs(tracker)
    view = View("e.bp", tracker_rows(tracker), list(tracker.failures), [j for j in jobs if j.state == "Held"], jobs)
    console = Console(record=True, width=200, color_system=None)
    console.print(render(view, long=True))
    text = console.export_text()
    assert "Held jobs" in text and "Transfer output files failure at execution point" in text
    assert "Last failures" not in text
    assert re.search(r"analyze_ID0000002\s+Held\s+0\s+condorpool", text)  # --long: the job rows
    tracker.feed(bp.parse_line(line) for line in lines[cut + 1:])  # to the end: the sub-workflow appears
    view = View("e.bp", tracker_rows(tracker), list(tracker.failures), [], [], tracker.finished)
    console = Console(record=True, width=200, color_system=None)
    console.print(render(view))
    text = console.export_text()
    assert "synth-0.dag" in text and "└─ inner.dag" in text and "TOTALS (17 jobs)" in text
    assert "finished" in text and "Held jobs" not in text
    assert re.search(r"Last failures\s*\n.*\n.*synth\s+findrange_ID0000001\s+1\s+worker-\d+\.synth\.example\.org\s+"
                     r"User task failed with exitcode 1", text)


@pytest.mark.parametrize("watch", [[], ["--watch"]])
def test_amqp_password_is_masked_in_errors(watch: list[str]) -> None:
    result = streamer("status", "amqp://user:s3cret@127.0.0.1:1/%2F/x", "--idle", "0.5", *watch, check=False)
    assert result.returncode == 2  # --watch too: the stream was the view's only source
    assert "s3cret" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert "cannot connect to amqp://user" in result.stderr


# ---------------------------------------------------------------- the readers

def test_dagman_progress_reads_a_growing_file_like_the_whole(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=5, scenario="retry,held", seed=2)
    whole = SubmitDirProgress(run_dir)
    whole.poll()
    final = whole.counts()["root"].as_dict()
    log = run_dir / "synth-0.dag.dagman.out"
    progress = DagmanProgress(str(log), "root", "synth-0.dag")
    seen = []
    for chunk in iter_dagman_chunks(run_dir, pieces=25, seed=3):  # cut mid-line
        with open(log, "a") as handle:
            handle.write(chunk)
        progress.poll()
        seen.append(progress.counts.succeeded)
    assert progress.counts.as_dict() == final
    assert seen == sorted(seen) and len(set(seen)) > 3  # counts advanced piece by piece
    log.write_text("")  # truncated: read again from the start
    assert progress.poll() is False and progress.offset == 0
    log.write_text(log.with_suffix(".missing").name)  # no table at all yet
    progress.poll()
    assert progress.counts.total == 0 and progress.counts.state == "Running"


@pytest.mark.parametrize("tag", ["", "(D_ALWAYS) "])
def test_progress_table_without_total_line_and_exit_status(tmp_path: Path, tag: str) -> None:
    """Read by the one DAGMan grammar: with HTCondor's debug category after the stamp the table reads the same
    (pegasus-status's own patterns missed all of it), and only DAGMan's own exit line ends the DAG."""
    log = tmp_path / "x.dag.dagman.out"
    stamp = f"11/14/23 22:13:20 {tag}"
    log.write_text(f"{stamp}    1       0        0       0       0          0        0        0\n"
                   f"{stamp}DAG status: 0 (DAG_STATUS_OK)\n"
                   f"{stamp}Of 4 nodes total:\n"
                   f"{stamp}    1       0        1       0       2          0        0        0\n"
                   "EXITING WITH STATUS 0\n")  # not DAGMan's exit line: no stamp, no (condor_DAGMAN)
    progress = DagmanProgress(str(log), "root", "x.dag")
    progress.poll()
    assert progress.counts.as_dict() == {"unready": 0, "ready": 2, "pre": 0, "queued": 1, "post": 0,
                                         "succeeded": 1, "failed": 0, "percent_done": 25.0, "total": 4,
                                         "dagname": "x.dag", "state": "Running"}
    with open(log, "a") as handle:
        handle.write(f"11/14/23 22:14:20 {tag}**** condor_scheduniv_exec.1.0 (condor_DAGMAN) pid 7 "
                     "EXITING WITH STATUS 2\n")
    progress.poll()
    assert progress.counts.state == "Failure"


def test_find_dagmans_does_not_follow_symlinks(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=3, scenario="hierarchical", seed=0)
    found = [Path(p).relative_to(run_dir).as_posix() for p in find_dagmans(str(run_dir))]
    assert sorted(found) == ["00/00/inner_subworkflow.000/inner.dag.dagman.out", "synth-0.dag.dagman.out"]


def test_counts_document_and_percent() -> None:
    assert percent(1, 3) == 33.33 and percent(0, 0) == 0.0
    doc = document({"root": DagCounts(succeeded=2, total=3, dagname="a.dag"),
                    "b": DagCounts(failed=1, unready=2, total=3, dagname="b.dag", state="Failure")})
    assert doc["totals"] == {"unready": 2, "ready": 0, "pre": 0, "queued": 0, "post": 0, "succeeded": 2,
                             "failed": 1, "percent_done": 33.33, "total": 6}
    assert list(doc["dags"]["b"]) == ["unready", "ready", "pre", "queued", "post", "succeeded", "failed",
                                      "percent_done", "total", "dagname", "state"]


def test_tracker_follows_states_of_a_retried_and_held_job(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=3, scenario="retry,held", seed=0)
    events = [bp.parse_line(line) for line in replay_to(run_dir, tmp_path / "e.bp").read_text().splitlines()]
    tracker = StatusTracker()
    phases: dict[str, list[str]] = {}
    for event in events:
        tracker.feed([event])
        for wf in tracker.workflows.values():
            for job in wf.jobs.values():
                seq = phases.setdefault(job.name, [])
                state = wf.node_state(job)
                if not seq or seq[-1] != state:
                    seq.append(state)
    # job.info comes before its edges (READY for that instant); a failed attempt with a retry left
    # is READY again until the retry is submitted, as in DAGMan's table
    assert phases["findrange_ID0000001"] == ["ready", "", "ready", "queued", "running", "post", "ready",
                                             "queued", "running", "post", "success"]
    assert "held" in phases["analyze_ID0000002"]
    (wf,) = tracker.workflows.values()
    retried = wf.jobs["findrange_ID0000001"]
    assert retried.retries == 1 and retried.site == "condorpool" and retried.host.endswith("synth.example.org")
    (failure,) = tracker.failures
    assert (failure.job, failure.exitcode, failure.instance) == ("findrange_ID0000001", 1, 3)
    assert failure.stderr == "User task failed with exitcode 1"  # what explains it, not the wrapper's log
    assert failure.step == "job"
    assert tracker.finished and wf.state == "Success"


def test_exit_code_and_stderr_excerpt() -> None:
    assert exit_code(256) == 1 and exit_code(0) == 0 and exit_code(-1) == -1 and exit_code("x") is None
    assert stderr_excerpt("%0A  %0Aboom: no such file%0Asecond") == "boom: no such file"
    assert stderr_excerpt("") is None and stderr_excerpt(None) is None
    assert stderr_excerpt("2023-11-14 22:14:05: PegasusLite: version 5.0.5%0A2023-11-14 22:14:05: Executing on host w1"
                      "%0A%0A######################[Pegasus Lite] Executing the user task ######################"
                      "%0Atraceback: boom%0A") == "traceback: boom"


# ---------------------------------------------------------------- text, --long, errors

def test_plain_table_and_long_rows(scenario_dirs: dict[str, Path]) -> None:
    out = streamer("status", str(scenario_dirs["hierarchical"])).stdout
    assert out.splitlines() == [
        "UNREADY  READY   PRE   QUEUED   POST   SUCCESS  FAILURE  %DONE",
        "   0       0      0      0       0       16        0     100.0",
        "Summary: 2 DAGs total (Success:2)"]
    long = streamer("status", str(scenario_dirs["held_abort"]), "--long").stdout
    lines = long.splitlines()
    assert lines[1].split() == ["3", "0", "0", "0", "0", "4", "1", "50.0", "Failure", "synth-0.dag"]
    rows = {line.split()[1]: line.split() for line in lines if line.startswith("synth ")}
    assert rows["findrange_ID0000001"][2:5] == ["Failure", "0", "condorpool"]
    assert rows["analyze_ID0000002"][2:6] == ["Success", "0", "condorpool", "worker-14.synth.example.org"]
    assert rows["analyze_ID0000002"][6] == "00:06"
    assert rows["cleanup_synth_0_local"][2:] == ["Unready", "0", "-", "-", "-"]
    assert "Last failures:" in long and "findrange_ID0000001 exit=1" in long


def test_failures_name_the_failing_script(scenario_dirs: dict[str, Path], tmp_path: Path) -> None:
    out = streamer("status", str(replay_to(scenario_dirs["post_failure"], tmp_path / "post.bp")), "--long").stdout
    assert "synth findrange_ID0000001 (POST script) exit=1 host=worker-13.synth.example.org" in out
    out = streamer("status", str(replay_to(scenario_dirs["pre_failure"], tmp_path / "pre.bp")), "--long").stdout
    assert "synth findrange_ID0000001 (PRE script) exit=1" in out
    # the submit dir is left as it was: no state file, no jobstate.log, no database
    assert not list(scenario_dirs["held_abort"].glob("streamer.state.json"))
    assert not (scenario_dirs["held_abort"] / "jobstate.log").exists()


def test_retries_show_in_long_rows_from_events(scenario_dirs: dict[str, Path], tmp_path: Path) -> None:
    events = replay_to(scenario_dirs["rescue"], tmp_path / "e.bp")
    out = streamer("status", str(events), "--long").stdout
    row = next(line.split() for line in out.splitlines() if line.startswith("synth  ") and " findrange_ID0000001 " in line)
    assert row[2:4] == ["Success", "2"]  # two failed instances in the first run, one in the rescue run
    assert out.count(" findrange_ID0000001 exit=1 host=worker-") == 2


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/wf"], "/nonexistent/wf: no such submit directory or event file"),
    (["--watch", "--json", "."], "--json prints the status once"),
])
def test_bad_arguments(args: list[str], message: str) -> None:
    result = streamer("status", *args, check=False)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_not_a_submit_dir(tmp_path: Path) -> None:
    result = streamer("status", str(tmp_path), check=False)
    assert result.returncode == 2
    assert "not a workflow submit directory" in result.stderr


def test_malformed_event_lines_are_reported_and_skipped(scenario_dirs: dict[str, Path], tmp_path: Path) -> None:
    events = replay_to(scenario_dirs["success"], tmp_path / "e.bp")
    lines = events.read_text().splitlines()
    broken = tmp_path / "broken.bp"
    broken.write_text("\n".join(lines[:3] + ["ts=2023 event=stampede.job_inst.main.end job_inst.id=x"] + lines[3:]) + "\n")
    result = streamer("status", str(broken), "--json")
    assert f"{broken}:4: " in result.stderr and "Traceback" not in result.stderr
    assert json.loads(result.stdout)["totals"]["succeeded"] == 8


def test_help_teaches() -> None:
    out = streamer("status", "--help").stdout
    for text in ("SUBMIT_DIR|EVENT_FILE|AMQP_URL", "--watch", "--json", "--long", "--events", "pegasus-status",
                 "amqp://", "examples:"):
        assert text in out


def test_submit_dir_rows_are_a_tree_and_late_sub_workflows_are_found(tmp_path: Path) -> None:
    import asyncio as aio

    from streamer.status.command import SubmitDirStatus

    run_dir = generate(tmp_path / "wf", jobs=3, scenario="hierarchical", seed=0)
    inner = run_dir / "00" / "00" / "inner_subworkflow.000" / "inner.dag.dagman.out"
    text = inner.read_text()
    inner.unlink()  # the sub-workflow has not started yet
    status = SubmitDirStatus(run_dir, events=None, long=False, timezone=None)
    aio.run(status.refresh())
    assert [(r.depth, r.name) for r in status.rows()] == [(0, "synth-0.dag")]
    inner.write_text(text)
    for _ in range(5):  # the directory is walked again every few refreshes, not on every one
        aio.run(status.refresh())
    rows = status.rows()
    assert [(r.depth, r.name, r.counts.succeeded) for r in rows] == [(0, "synth-0.dag", 8), (1, "inner.dag", 8)]
    assert status.finished


DEPLOY_README_FILTER = ("stampede.wf.plan,stampede.xwf.*,stampede.job_inst.*,stampede.inv.*,stampede.int.metric,"
                        "stampede.task.monitoring")
"""What deploy/README.md suggests publishing to save bandwidth: no stampede.job.info (the retry limits)."""


@pytest.mark.rabbitmq
def test_amqp_status_says_it_waits_and_when_the_totals_cannot_be_complete(
        scenario_dirs: dict[str, Path], tmp_path: Path, amqp_url: str, condor_q_stub: dict[str, str]) -> None:
    """On a quiet exchange `status amqp://` says it is waiting (it used to wait silently); fed the filtered
    exchange deploy/README suggests, its totals miss the failure (SUCCESS 2 FAILURE 0 where pegasus-status says
    FAILURE 1) and it must say they cannot be complete, and why."""
    from tests.support.amqphelp import Capture, unique

    theirs = json.loads(pegasus_status(scenario_dirs["held_abort"], condor_q_stub))["totals"]
    assert theirs["failed"] == 1
    events = replay_to(scenario_dirs["held_abort"], tmp_path / "events.bp")
    exchange, queue = unique("status-x"), unique("status-q")

    async def scenario_run() -> tuple[str, str, str]:
        async with Capture(amqp_url, exchange, durable_queue=queue):
            run = subprocess.Popen([sys.executable, "-m", "streamer", "status", f"{amqp_url}/{exchange}",
                                    "--queue", queue, "--idle", "1"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                first = await asyncio.wait_for(asyncio.to_thread(run.stderr.readline), 30)  # type: ignore[union-attr]
                streamer("load", str(events), "--dest", f"{amqp_url}/{exchange}?events={DEPLOY_README_FILTER}", "-q")
                out, err = await asyncio.to_thread(run.communicate, timeout=60)
            finally:
                if run.poll() is None:
                    run.kill()
                    run.communicate()
            return first, out, err

    first, out, err = asyncio.run(scenario_run())
    assert "waiting for events" in first and exchange in first and "guest:guest" not in first, first
    assert "cannot be complete" in err and "stampede.job.info" in err, err
    assert "guest:guest" not in out + err


def test_event_file_status_says_when_the_totals_cannot_be_complete(scenario_dirs: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    events = replay_to(scenario_dirs["held_abort"], tmp_path / "events.bp")
    whole = streamer("status", str(events))
    assert "cannot be complete" not in whole.stderr, whole.stderr
    filtered = tmp_path / "filtered.bp"
    streamer("load", str(events), "--dest", f"file://{filtered}?events={DEPLOY_README_FILTER}", "-q")
    done = streamer("status", str(filtered))
    assert "cannot be complete" in done.stderr and "stampede.job.info" in done.stderr, done.stderr
    late = tmp_path / "late.bp"  # a stream joined after the workflow started: no wf.plan, no xwf.start
    late.write_text("".join(line for line in events.read_text().splitlines(keepends=True)
                            if "event=stampede.wf.plan" not in line and "event=stampede.xwf.start" not in line))
    done = streamer("status", str(late))
    assert "cannot be complete" in done.stderr and "began before" in done.stderr, done.stderr
