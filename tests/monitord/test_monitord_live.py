"""`streamer monitord -N` live, started as pegasus-dagman starts it: notifications as lines arrive,
signals, SIGTERM and resume, a hanging notification script, DAGMan dying without its exit line."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamer.monitord.launcher import install
from streamer.synth import generate
from streamer.synth.notify import write_notify, write_recorder
from tests.support.amqphelp import Capture, Forwarder, unique
from tests.conftest import AMQP_PORT
from tests.support.dbcompare import compare, format_diff, sqlite_snapshot
from tests.monitor.test_monitor_golden import _without_monitord_lines
from tests.support.commands import wait_for

ROOT = Path(__file__).resolve().parents[2]
DAGMAN = "synth-0.dag.dagman.out"
_STAMP = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d) ")


def dagman_env(run_dir: Path, home: Path, pegasus_home: Path) -> dict[str, str]:
    """What pegasus-dagman's environment gives the monitor (plus TZ for the synthetic UTC log)."""
    return {**os.environ, "_CONDOR_DAGMAN_LOG": str(run_dir / DAGMAN), "PEGASUS_HOME": str(pegasus_home),
            "CONDOR_ID": "10.0", "HOME": str(home), "TZ": "UTC", "PYTHONPATH": str(ROOT)}


def start_like_pegasus_dagman(run_dir: Path, home: Path, pegasus_home: Path) -> subprocess.Popen[bytes]:
    """pegasus-dagman: find pegasus-monitord in $PEGASUS_HOME/bin, run `-N $_CONDOR_DAGMAN_LOG` in the submit dir,
    output appended to monitord.log (rotated first)."""
    monitord = pegasus_home / "bin" / "pegasus-monitord"
    assert os.access(monitord, os.X_OK)
    log = run_dir / "monitord.log"
    if log.exists():
        log.rename(run_dir / "monitord.log.000")
    env = dagman_env(run_dir, home, pegasus_home)
    with open(log, "a") as handle:
        return subprocess.Popen([str(monitord), "-N", env["_CONDOR_DAGMAN_LOG"]], cwd=run_dir, env=env,
                                stdout=handle, stderr=subprocess.STDOUT)


def live_workflow(tmp_path: Path, scenario: str, pid: int) -> tuple[Path, list[str]]:
    """A synthetic workflow with recorder notifications; its dagman.out emptied, its lines returned (DAGMan's pid
    set to `pid`)."""
    run_dir = generate(tmp_path / "run", jobs=3, scenario=scenario, seed=0)
    recorder = write_recorder(tmp_path / "recorder", tmp_path / "calls", sys.executable)
    write_notify(run_dir, str(recorder))
    text = re.sub(r"\*\* PID = \d+", f"** PID = {pid}", (run_dir / DAGMAN).read_text())
    (run_dir / DAGMAN).write_text("")
    return run_dir, text.splitlines(keepends=True)


def cause(lines: list[str], env: dict[str, str]) -> int:
    """Index of the dagman.out line that makes monitord fire a notification with this environment."""
    job, event = env["PEGASUS_JOBID"], env["PEGASUS_EVENT"]
    if "PEGASUS_STDERR" not in env:  # a workflow notification
        marker = ("Parsing ", ".dag ...") if event == "start" else ("EXITING WITH STATUS",)
    elif event == "start":
        marker = ("ULOG_EXECUTE", f" {job} ")
    else:  # every synthetic job has a POST script: its end is the POST script's
        marker = ("POST Script of node", f" {job} ")
    return next(i for i, line in enumerate(lines) if all(m.lower() in line.lower() for m in marker))


def calls(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in directory.glob("*.json")]


def signature(records: list[dict], root: Path) -> collections.Counter:
    return collections.Counter(
        (tuple(r["argv"]), tuple(sorted((k, v.replace(str(root), "<DIR>")) for k, v in r["env"].items()
                                        if "TIMESTAMP" not in k and k != "PEGASUS_BIN_DIR")))
        for r in records)


def test_live_follow_as_pegasus_dagman_starts_it(tmp_path: Path) -> None:
    home, pegasus_home = tmp_path / "home", tmp_path / "pegasus"
    home.mkdir()
    install(pegasus_home / "bin")
    run_dir, lines = live_workflow(tmp_path, "success", os.getpid())
    (run_dir / "monitord.done").write_text("from an earlier run\n")
    (run_dir / "monitord.log").write_text("an earlier monitor's log\n")
    proc = start_like_pegasus_dagman(run_dir, home, pegasus_home)
    try:
        wait_for(lambda: (run_dir / "monitord.pid").exists())
        wait_for(lambda: not (run_dir / "monitord.done").exists(), "the old monitord.done removed", timeout=10)
        assert (run_dir / "monitord.log.000").read_text() == "an earlier monitor's log\n"
        groups: dict[str, list[str]] = {}
        order: list[str] = []
        for line in lines:  # DAGMan's lines, grouped by their second
            match = _STAMP.match(line)
            key = match.group(1) if match else (order[-1] if order else "")
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(line)
        written: list[float] = []  # per line of `lines`: when it was appended (the file's mtime after the write)
        for index, key in enumerate(order):
            with open(run_dir / DAGMAN, "a") as handle:
                handle.write("".join(groups[key]))
            written += [os.stat(run_dir / DAGMAN).st_mtime] * len(groups[key])
            if index == len(order) // 2:
                for signum in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGABRT):
                    proc.send_signal(signum)  # pegasus-dagman forwards these: none may stop the monitor
            time.sleep(0.3)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    records = calls(tmp_path / "calls")
    assert len(records) == 45  # 5 workflow-level + 5 for each of the 8 jobs (start, all-start, at_end, on_success, all)
    # live, not at the end: a notification whose line is in the first half of the log ran before the last write
    # (how soon is a figure for bench/, not a timed assertion here: this machine's load varies)
    last_write, half = written[-1], written[len(written) // 2]
    late = []
    for record in records:
        caused_at = written[cause(lines, record["env"])]
        assert record["time"] - caused_at > -0.05, record  # never before its line
        if caused_at <= half and record["time"] > last_write:
            late.append((round(record["time"] - caused_at, 2), record["argv"]))
    assert late == [], f"notifications run only after the workflow's last line: {late}"
    log = (run_dir / "monitord.log").read_text()
    for text in ("ignoring signal SIGHUP", "ignoring signal SIGABRT", "log level now"):
        assert text in log
    assert (run_dir / "monitord.done").is_file() and not (run_dir / "monitord.pid").exists()
    assert {r["cwd"] for r in records} == {str(run_dir)}
    assert {r["env"]["PEGASUS_BIN_DIR"] for r in records} == {str(pegasus_home / "bin")}


def test_sigterm_mid_run_then_resume_loses_nothing(tmp_path: Path) -> None:
    home, pegasus_home = tmp_path / "home", tmp_path / "pegasus"
    home.mkdir()
    install(pegasus_home / "bin")
    whole_base = tmp_path / "whole"
    whole_base.mkdir()
    whole_dir, lines = live_workflow(whole_base, "retry", os.getpid())
    (whole_dir / DAGMAN).write_text("".join(lines))
    whole = start_like_pegasus_dagman(whole_dir, home, pegasus_home)
    assert whole.wait(timeout=120) == 0

    run_dir, lines = live_workflow(tmp_path, "retry", os.getpid())
    half = len(lines) // 2
    (run_dir / DAGMAN).write_text("".join(lines[:half]))
    proc = start_like_pegasus_dagman(run_dir, home, pegasus_home)
    wait_for(lambda: (run_dir / "streamer.state.json").exists() and len(calls(tmp_path / "calls")) > 5)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)  # a repeated signal must not cut the flush short
    assert proc.wait(timeout=60) == 1
    assert not (run_dir / "monitord.pid").exists() and not (run_dir / "monitord.done").exists()
    assert "graceful exit on signal SIGTERM" in (run_dir / "monitord.log").read_text()
    first = len(calls(tmp_path / "calls"))
    with open(run_dir / DAGMAN, "a") as handle:
        handle.write("".join(lines[half:]))
    proc = start_like_pegasus_dagman(run_dir, home, pegasus_home)
    assert proc.wait(timeout=120) == 0
    assert 5 < first < len(calls(tmp_path / "calls"))
    assert signature(calls(tmp_path / "calls"), run_dir) == signature(calls(whole_base / "calls"), whole_dir)
    assert _without_monitord_lines((run_dir / "jobstate.log").read_text()) == \
        _without_monitord_lines((whole_dir / "jobstate.log").read_text())
    diff = compare(sqlite_snapshot(str(run_dir / "synth-0.stampede.db")),
                   sqlite_snapshot(str(whole_dir / "synth-0.stampede.db")))
    diff.pop("workflow", None)  # db_url names the file
    assert diff == {}, format_diff(diff)


HANG_IGNORING_TERM = "#!/bin/sh\ntrap '' TERM\nsleep 600 &\nwait\nsleep 600\n"
HANG = "#!/bin/sh\nexec sleep 600\n"
WAITER = """#!{python}
# waits until the Stampede DB holds the workflow's end: only possible if a hanging script stalls nothing
import sqlite3, sys, time
for _ in range(300):
    try:
        rows = sqlite3.connect({db!r}).execute("SELECT COUNT(*) FROM workflowstate WHERE state = 'WORKFLOW_TERMINATED'")
        if rows.fetchone()[0]:
            open({marker!r}, "w").write("seen")
            sys.exit(0)
    except sqlite3.Error:
        pass
    time.sleep(0.1)
sys.exit(3)
"""


def test_hanging_notification_is_killed_and_stalls_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run_dir = generate(tmp_path / "run", jobs=1, scenario="success", seed=0)
    text = re.sub(r"\*\* PID = \d+", f"** PID = {os.getpid()}", (run_dir / DAGMAN).read_text())
    (run_dir / DAGMAN).write_text(text)
    scripts = {}
    for name, body in (("stubborn", HANG_IGNORING_TERM), ("sleeper", HANG),
                       ("waiter", WAITER.format(python=sys.executable, db=str(run_dir / "synth-0.stampede.db"),
                                                marker=str(tmp_path / "seen")))):
        scripts[name] = tmp_path / name
        scripts[name].write_text(body)
        scripts[name].chmod(0o755)
    uuid = re.search(r'wf_uuid: "([^"]+)"', (run_dir / "braindump.yml").read_text()).group(1)
    (run_dir / "synth-0.notify").write_text("".join(f"WORKFLOW {uuid} start {scripts[n]}\n" for n in scripts))
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "streamer", "monitord", "-N", "--notifications-timeout", "4",
                             DAGMAN], cwd=run_dir, env={**os.environ, "HOME": str(home), "TZ": "UTC",
                                                        "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed < 30
    assert (tmp_path / "seen").read_text() == "seen"
    log = (run_dir / "monitord-notifications.log").read_text()
    blocks = {b.split("Notification action: ")[1].split("\n")[0]: b for b in log.split("-" * 80) if "action" in b}
    assert "Notification status: 0" in blocks[str(scripts["waiter"])]
    assert "terminated after the 4 s timeout (SIGTERM)" in blocks[str(scripts["sleeper"])]
    assert "killed after the 4 s timeout (SIGTERM ignored for 5 s, SIGKILL)" in blocks[str(scripts["stubborn"])]
    assert "PEGASUS_EVENT : start" in blocks[str(scripts["waiter"])]
    out = (run_dir / "monitord.log").read_text()
    assert "notification expired after 4 s" in out


def test_dagman_gone_without_exit_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run_dir = generate(tmp_path / "run", jobs=1, scenario="success", seed=0)
    dead = subprocess.Popen(["true"])
    dead.wait()
    text = re.sub(r"\*\* PID = \d+", f"** PID = {dead.pid}", (run_dir / DAGMAN).read_text())
    text = "".join(line for line in text.splitlines(keepends=True) if "EXITING WITH STATUS" not in line)
    (run_dir / DAGMAN).write_text(text)
    result = subprocess.run([sys.executable, "-m", "streamer", "monitord", "-N", DAGMAN], cwd=run_dir,
                            env={**os.environ, "HOME": str(home), "TZ": "UTC", "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 42
    assert "DAGMan is gone!" in (run_dir / "monitord.log").read_text()
    db = sqlite3.connect(run_dir / "synth-0.stampede.db")
    assert db.execute("SELECT COUNT(*) FROM job_instance").fetchone()[0] == 6  # everything DAGMan wrote
    assert not (run_dir / "monitord.done").exists() and not (run_dir / "monitord.pid").exists()
    shutil.rmtree(run_dir)


@pytest.mark.rabbitmq
async def test_signals_do_not_cut_the_amqp_spool_flush(tmp_path: Path, amqp_url: str) -> None:
    """The broker is unreachable while the workflow is read (events go to the AMQP spool); pegasus-dagman's
    repeated signals arrive; once the broker is back every event is delivered before the monitor exits."""
    forwarder = Forwarder()
    port = await forwarder.start()
    exchange = unique("streamer-monitord-spool")
    home = tmp_path / "home"
    home.mkdir()
    via = amqp_url.replace(f":{AMQP_PORT}/", f":{port}/")
    (home / ".pegasusrc").write_text(f"pegasus.catalog.workflow.amqp.url = {via}/{exchange}?retry_max=1\n"
                                     "pegasus.catalog.workflow.amqp.events = *\n")
    run_dir = generate(tmp_path / "run", jobs=2, scenario="retry", seed=0)
    text = re.sub(r"\*\* PID = \d+", f"** PID = {os.getpid()}", (run_dir / DAGMAN).read_text())
    (run_dir / DAGMAN).write_text(text)
    expected = tmp_path / "expected.jsonl"
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, symlinks=True)
    replay = subprocess.run([sys.executable, "-m", "streamer", "replay", str(copy), "-q", "--dest",
                             f"file://{expected}"], env={**os.environ, "TZ": "UTC"}, capture_output=True, text=True)
    assert replay.returncode == 0, replay.stderr
    ids = {json.loads(line)["event_id"] for line in expected.read_text().splitlines()}
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streamer", "monitord", "-N", DAGMAN, cwd=run_dir,
            env={**os.environ, "HOME": str(home), "TZ": "UTC", "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.monotonic() + 60
            while "broker unavailable" not in _log(run_dir):  # the events are going to the spool
                assert time.monotonic() < deadline, _log(run_dir)
                await asyncio.sleep(0.2)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGINT, signal.SIGUSR2):
                proc.send_signal(signum)  # pegasus-remove: SIGINT every 15 s after 200 s
                await asyncio.sleep(0.5)
            assert proc.returncode is None, "a signal cut the flush of the spool short"
            forwarder.up = True
            assert await asyncio.wait_for(proc.wait(), 120) == 1  # stopped by a signal (monitord's code)
        finally:
            if proc.returncode is None:
                proc.kill()
            await forwarder.close()
        messages = await capture.wait_for(len(ids), timeout=30)
    assert {m.message_id for m in messages} == ids and len(messages) == len(ids)
    log = _log(run_dir)
    assert "graceful exit on signal SIGTERM" in log and "already finishing" in log


def _log(run_dir: Path) -> str:
    try:
        return (run_dir / "monitord.log").read_text()
    except FileNotFoundError:
        return ""
