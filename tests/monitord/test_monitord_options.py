"""`streamer monitord`'s -a, -j, --skip-stdout, --keep-state, --db-stats, -S, -e bson and `${var}` properties."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.events import Event, bsonenc
from streamer.monitor.parsers.dagman import LineParser
from streamer.monitor.engine.job import Job
from streamer.monitor.engine.workflow import Workflow
from streamer.monitor.engineopts import EngineOptions
from streamer.monitord import options, properties
from streamer.synth import generate
from tests.conftest import unavailable
from tests.support.eventcompare import differences

ROOT = Path(__file__).resolve().parents[2]
DAGMAN_OUT = "synth-0.dag.dagman.out"


def _run(command: list[str], args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": "UTC", "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


STREAMER = [sys.executable, "-m", "streamer", "monitord"]


def _json_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _jobstate(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if "MONITORD_" not in line]


def test_adjust_job_and_skip_stdout_as_real_monitord(tmp_path: Path) -> None:
    """`-r -a 3600 -j my.jobstate --skip-stdout -e json -d FILE`: the same file, lines and events as monitord 5.1.3."""
    if importlib.util.find_spec("Pegasus") is None:
        unavailable("pegasus-wms (the reference monitord) is not installed")
    home = tmp_path / "home"
    home.mkdir()
    runs = {}
    for name, command in (("ours", STREAMER), ("real", [sys.executable, "-m", "Pegasus.cli.pegasus-monitord"])):
        run_dir = generate(tmp_path / name, jobs=2, scenario="post_failure", seed=3)
        out = run_dir / "events.json"
        result = _run(command, ["-r", "--no-notifications", "-a", "3600", "-j", "my.jobstate", "--skip-stdout",
                                "-e", "json", "-d", str(out), DAGMAN_OUT], run_dir, home)
        assert result.returncode == 0, result.stderr[-3000:]
        assert not (run_dir / "jobstate.log").exists()
        runs[name] = (run_dir, _json_events(out))
    (ours_dir, ours), (real_dir, real) = runs["ours"], runs["real"]
    assert _jobstate(ours_dir / "my.jobstate") == _jobstate(real_dir / "my.jobstate")
    # the adjustment is in every time: DAGMan's first line is 2 s before its start stamp in the synthetic log
    first = next(line for line in _jobstate(ours_dir / "my.jobstate") if "DAGMAN_STARTED" in line)
    unadjusted = LineParser("UTC").timestamp((ours_dir / DAGMAN_OUT).read_text().splitlines()[0])
    assert unadjusted is not None and int(first.split()[0]) - unadjusted in (3600, 3601, 3602, 3603)
    ends = [e for e in ours if e["event"] in ("stampede.job_inst.main.end", "stampede.job_inst.composite")]
    assert ends and all("stdout_text" not in e and "stderr_text" not in e for e in ends)
    assert all("stdout_file" in e for e in ends)
    left = [e for e in ours]
    missing = []
    for want in real:
        want.pop("total_memory", None)
        for index, body in enumerate(left):
            body.pop("total_memory", None)
            # static.start/end: streamer gives them the plan's time as `ts`, monitord's JSON file none
            ignore = ("event_id", "ts") if want["event"].startswith("stampede.static.") else ("event_id",)
            if body["event"] == want["event"] and not differences(body, want, ignore=ignore):
                del left[index]
                break
        else:
            missing.append(want)
    assert not missing, missing[:3]
    assert not left, left[:3]


def test_jobstate_name_and_output_dir_as_analyzer_reads_it(tmp_path: Path) -> None:
    """`-o DIR`: `DIR/<wf_uuid>-jobstate.log` (pegasus-analyzer --monitord --output-dir reads it there);
    an absolute `-j` is that one file, sub-workflows not followed."""
    run_dir = generate(tmp_path / "wf", jobs=2, scenario="success", seed=0)
    home = tmp_path / "home"
    home.mkdir()
    wf_uuid = next(line.split(":", 1)[1].strip().strip("\"") for line in (run_dir / "braindump.yml").read_text().splitlines()
                   if line.startswith("wf_uuid:"))
    out = tmp_path / "analyzer"
    result = _run(STREAMER, ["-r", "--no-events", "-o", str(out), "-j", "js.log", DAGMAN_OUT], run_dir, home)
    assert result.returncode == 0, result.stderr
    assert (out / f"{wf_uuid}-js.log").read_text().count("JOB_SUCCESS") == 7
    assert not (run_dir / "jobstate.log").exists() and not (run_dir / "js.log").exists()
    absolute = tmp_path / "elsewhere.log"
    result = _run(STREAMER, ["-r", "--no-events", "-j", str(absolute), DAGMAN_OUT], run_dir, home)
    assert result.returncode == 0, result.stderr
    assert absolute.read_text().count("JOB_SUCCESS") == 7
    assert "absolute filename: sub-workflows are not followed" in result.stderr


def test_options_parsed_with_monitord_meaning() -> None:
    opts = options.parse(["-a", "-7200", "-S", "25", "--skip-stdout", "--keep-state", "--db-stats", "--fast-start",
                          "-e", "bson", "wf.dag.dagman.out"])
    assert (opts.adjust, opts.millisleep, opts.skip_stdout, opts.keep_state, opts.db_stats, opts.encoding) == (
        -7200, 25, True, True, True, "bson")
    assert opts.ignored == [options.FAST_START]
    bad = options.parse(["-a", "soon", "-S", "-1", "wf.dag.dagman.out"])
    assert (bad.adjust, bad.millisleep) == (0, None)
    assert any("-a/--adjust: not an integer" in text for text in bad.ignored)
    assert any("-S/--sim must be >= 0" in text for text in bad.ignored)


def test_keep_state_keeps_finished_jobs_across_a_dagman_restart(tmp_path: Path) -> None:
    """monitord's start_wf() (DAGMan's Condor id line) forgets finished jobs unless --keep-state.

    streamer's engine drops a finished instance as soon as it ends, so this only shows on an instance
    still held when DAGMan restarts (here put there by hand)."""
    run_dir = generate(tmp_path / "wf", jobs=2, scenario="success", seed=0)
    kept = {}
    for keep in (False, True):
        wf = Workflow(run_dir, run_dir / DAGMAN_OUT, parser=LineParser("UTC"), write_jobstate=False,
                      options=EngineOptions(keep_state=keep))
        job = Job("stage_in_local_0", str(run_dir), 1)
        job.state = "JOB_SUCCESS"
        wf.jobs.jobs["stage_in_local_0\x001"] = job
        wf.jobs.jobs_map["stage_in_local_0"] = 1
        wf.feed("03/03/23 22:23:43 ** condor_scheduniv_exec.17.0 (CONDOR_DAGMAN) STARTING UP\n")
        kept[keep] = (list(wf.jobs.jobs), dict(wf.jobs.jobs_map))
    assert kept[False] == ([], {})
    assert kept[True] == (["stage_in_local_0\x001"], {"stage_in_local_0": 1})


def test_db_stats_sim_and_bson_file(tmp_path: Path) -> None:
    """`-r --db-stats -S 1 -e bson -d events.bson`, the properties adding a BP file of the same events."""
    run_dir = generate(tmp_path / "wf", jobs=2, scenario="success", seed=0)
    home = tmp_path / "home"
    home.mkdir()
    bp = run_dir / "events.bp"
    conf = tmp_path / "p.properties"
    conf.write_text(f"pegasus.catalog.workflow.bp.url = file://{bp}?encoding=bp\n")
    result = _run(STREAMER, ["-r", "--conf", str(conf), "--db-stats", "-S", "1", "-e", "bson", "-d", "events.bson",
                             DAGMAN_OUT], run_dir, home)
    assert result.returncode == 0, result.stderr
    names = [name for name, _ in _bson_documents((run_dir / "events.bson").read_bytes())]
    assert names == [line.split(" event=", 1)[1].split()[0] for line in bp.read_text().splitlines()]
    stats = [line.split("db-stats: ", 1)[1] for line in result.stderr.splitlines() if "db-stats: " in line]
    assert len(stats) == 3, result.stderr  # the two files and the master DB
    assert f"file://{run_dir}/events.bson: {len(names)} events in " in stats[0], stats
    assert f"file://{bp}?encoding=bp: {len(names)} events in " in stats[1], stats
    assert stats[2].startswith(f"master DB sqlite:///{home}/.pegasus/workflow.db: 3 events in "), stats
    assert "simulation delay of 1 ms per dagman.out line" in result.stderr


def test_sim_sleeps_after_every_dagman_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-S MS: the tracker sleeps MS ms after each dagman.out line, as monitord's read loop does."""
    from streamer.monitor import tracker

    run_dir = generate(tmp_path / "wf", jobs=2, scenario="success", seed=0)
    sleeps: list[float] = []
    monkeypatch.setattr(tracker.time, "sleep", sleeps.append)
    core = tracker.Tracker(str(run_dir / DAGMAN_OUT), write_jobstate=False, engine=EngineOptions(line_delay=0.025))
    while not core.all_at_eof():
        core.step(final=True)
    core.close()
    assert sleeps == [0.025] * (run_dir / DAGMAN_OUT).read_text().count("\n")


def _bson_documents(data: bytes) -> list[tuple[str, bytes]]:
    """(event name, document) of every document back to back (the name is the last element, a string)."""
    out = []
    while data:
        size = struct.unpack("<i", data[:4])[0]
        doc, data = data[:size], data[size:]
        assert doc[-1:] == b"\x00"
        name = doc[doc.rindex(b"\x02event\x00") + 11:-2].decode()
        out.append((name, doc))
    return out


def test_bson_encoding_of_one_event() -> None:
    event = Event("stampede.xwf.end", {"ts": 1700000000.5, "xwf.id": "a", "restart_count": 0, "status": 5000000000})
    expected = (b"\x01ts\x00" + struct.pack("<d", 1700000000.5) + b"\x02xwf__id\x00\x02\x00\x00\x00a\x00"
                + b"\x10restart_count\x00\x00\x00\x00\x00" + b"\x12status\x00" + struct.pack("<q", 5000000000)
                + b"\x02event\x00\x11\x00\x00\x00stampede.xwf.end\x00")
    assert bsonenc.dumps(event) == struct.pack("<i", len(expected) + 5) + expected + b"\x00"


def test_properties_substitute_variables(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_text("base = ${HOME}/runs\n"
                    "pegasus.catalog.workflow.url = sqlite:///${base}/wf.db\n"
                    "pegasus.monitord.output = ${user.home}-${user.name}-${NOPE}-${site}\n"
                    "later = ${after}\n"
                    "after = x\n")
    env = {"HOME": "/home/ann", "USER": "ann"}
    values = properties.parse_file(path, {"site": properties.Value("condor", "-D")}, env)
    assert {k: v.text for k, v in values.items()} == {
        "base": "/home/ann/runs", "pegasus.catalog.workflow.url": "sqlite:////home/ann/runs/wf.db",
        "pegasus.monitord.output": "/home/ann-ann--condor", "later": "", "after": "x"}
    assert values["pegasus.catalog.workflow.url"].origin == f"{path}:2"
