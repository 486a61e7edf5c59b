"""`streamer monitord`: monitord's options, properties, files, launcher, notify-file conditions."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.config.settings import ConfigError
from streamer.events import Event
from streamer.monitord import launcher, options, properties
from streamer.monitord.command import Watch, make_plan
from streamer.monitord.notify import Matcher, read_notify
from streamer.synth import generate
from streamer.synth.notify import PLANNER, write_notify, write_recorder
from streamer.util.urls import EndpointURL
from tests.support.pghelp import fresh_database_sync

ROOT = Path(__file__).resolve().parents[2]


def run_monitord(args: list[str], cwd: Path, home: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": "UTC", "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "streamer", "monitord", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- options

def test_every_monitord_option_is_accepted() -> None:
    opts = options.parse(["-N", "-r", "-d", "file:///tmp/x.bp", "-e", "json", "--conf", "p.properties", "-j", "js.log",
                          "-o", "out", "--no-recursive", "--no-database", "--no-notifications",
                          "--notifications-max", "3", "--notifications-timeout", "7", "-f", "-v", "-v", "--db-stats",
                          "--keep-state", "--skip-stdout", "--fast-start", "-a", "5", "-S", "10", "wf.dag.dagman.out"])
    assert (opts.dagman_out, opts.condor_daemon, opts.replay, opts.dest, opts.encoding, opts.conf, opts.jsd) == (
        "wf.dag.dagman.out", True, True, "file:///tmp/x.bp", "json", "p.properties", "js.log")
    assert (opts.output_dir, opts.recursive, opts.no_events, opts.notifications, opts.notifications_max,
            opts.notifications_timeout, opts.force, opts.verbose) == ("out", False, True, False, 3, 7, True, 2)
    assert (opts.db_stats, opts.keep_state, opts.skip_stdout, opts.adjust, opts.millisleep) == (True, True, True, 5, 10)
    assert opts.ignored == [options.FAST_START]  # the one option without an effect (none in monitord 5.1.3 either)
    for alias in ("--no-events", "--nodatabase"):
        assert options.parse([alias, "x.dagman.out"]).no_events


def test_bad_options_are_logged_never_fatal() -> None:
    opts = options.parse(["--bogus", "--notifications-max", "many", "-e", "xml", "a.dagman.out", "b.dagman.out",
                          "--notifications-timeout"])
    assert opts.dagman_out == "a.dagman.out"
    text = "\n".join(opts.ignored)
    assert "unknown option --bogus" in text and "not an integer: 'many'" in text and "'xml'" in text
    assert "extra argument 'b.dagman.out'" in text and "--notifications-timeout" in text
    assert opts.notifications_max is None and opts.encoding is None


def test_defines_are_split_off() -> None:
    defines, rest = properties.split_defines(["-Dpegasus.monitord.notifications=false", "-D", "a.b=c", "-N", "x"])
    assert {k: v.text for k, v in defines.items()} == {"pegasus.monitord.notifications": "false", "a.b": "c"}
    assert rest == ["-N", "x"]


# ---------------------------------------------------------------- properties

def _workflow(tmp_path: Path, scenario: str = "success") -> Path:
    return generate(tmp_path / "wf", jobs=2, scenario=scenario, seed=0)


def test_properties_found_as_monitord_finds_them(tmp_path: Path) -> None:
    run_dir = _workflow(tmp_path)
    home = tmp_path / "home"
    (home / ".pegasus").mkdir(parents=True)
    (home / ".pegasus" / "pegasus.conf").write_text("pegasus.monitord.encoding = json\n")
    out = f"{run_dir}/synth-0.dag.dagman.out"
    plan = make_plan([out], home=str(home))
    assert plan.props.sources == [str(home / ".pegasus" / "pegasus.conf")]  # the braindump's file is not there
    (home / ".pegasusrc").write_text("# comment\npegasus.catalog.workflow.amqp.url = amqp://u:secret@h/v/ex\n"
                                     "pegasus.catalog.workflow.file.url file:///tmp/all.bp\n"
                                     "pegasus.catalog.workflow.file.events = stampede.xwf.*\n"
                                     "pegasus.catalog.*.timeout = 12\n"
                                     "pegasus.monitord.notifications.timeout: 9\n"
                                     "pegasus.catalog.master.url = sqlite:////tmp/master.db\n"
                                     "some.unknown.key = whatever\n")
    plan = make_plan([out], home=str(home))
    assert plan.props.sources == [str(home / ".pegasusrc")]
    assert [(s.url.raw, s.events, s.options) for s in plan.endpoints] == [
        (f"sqlite:///{run_dir}/synth-0.stampede.db", None, {}),
        ("amqp://u:secret@h/v/ex", None, {"confirm_timeout": 12.0, "drain_timeout": 300.0}),  # patient: signals never cut it
        ("file:///tmp/all.bp", "stampede.xwf.*", {}),
    ]
    assert plan.notifications_timeout == 9 and plan.master_url.raw == "sqlite:////tmp/master.db"
    conf = tmp_path / "conf.properties"
    conf.write_text("pegasus.monitord.output = file:///tmp/o.jsonl\npegasus.monitord.arguments = --no-notifications -v\n")
    plan = make_plan(["-Dpegasus.catalog.master.url=sqlite:////tmp/m2.db", "--conf", str(conf), out], home=str(home))
    assert plan.props.sources == [str(conf), "-D"]  # --conf wins over ~/.pegasusrc, -D over both
    assert [s.url.raw for s in plan.endpoints] == ["file:///tmp/o.jsonl"]
    assert not plan.notifications and plan.opts.verbose == 1  # from pegasus.monitord.arguments
    assert plan.master_url.raw == "sqlite:////tmp/m2.db"
    assert make_plan(["-r", out], home=str(home)).notifications is False  # never in replay
    plan = make_plan(["-d", str(tmp_path / "x.bp"), "--no-events", out], home=str(home))
    assert plan.endpoints == [] and plan.master_url is None


def test_malformed_properties_name_file_and_line(tmp_path: Path) -> None:
    run_dir = _workflow(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    rc = home / ".pegasusrc"
    rc.write_text("# notifications\npegasus.monitord.notifications.max = many\npegasus.monitord.events = perhaps\n")
    plan = make_plan([f"{run_dir}/synth-0.dag.dagman.out"], home=str(home))
    text = "\n".join(plan.opts.ignored)
    assert f"{rc}:2: pegasus.monitord.notifications.max must be an integer, not 'many'; using the default" in text
    assert f"{rc}:3: pegasus.monitord.events must be true or false" in text
    assert plan.notifications_max == 10
    rc.write_text("pegasus.catalog.workflow.url = ftp://u:secret@host/x\n")
    with pytest.raises(ConfigError, match=f"{rc}:1: pegasus.catalog.workflow.url: unknown endpoint scheme .ftp. in ftp://u:\\*\\*\\*@host"):
        make_plan([f"{run_dir}/synth-0.dag.dagman.out"], home=str(home))
    with pytest.raises(ConfigError, match="no such properties file"):
        make_plan(["--conf", str(tmp_path / "missing"), f"{run_dir}/synth-0.dag.dagman.out"], home=str(home))


# ---------------------------------------------------------------- files and process

def test_pid_file_and_markers(tmp_path: Path) -> None:
    run_dir = _workflow(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (run_dir / "monitord.pid").write_text(f"pid {os.getpid()}\ntimestamp 2023-11-14T22:13:20+0000\n")
    done = run_dir / "monitord.done"
    done.write_text("stale\n")
    result = run_monitord(["-r", "synth-0.dag.dagman.out"], run_dir, home)
    assert result.returncode == 43, result.stderr
    assert "still running on this workflow" in result.stderr
    assert (run_dir / "monitord.pid").read_text().startswith(f"pid {os.getpid()}\n")
    assert done.read_text() == "stale\n"  # nothing touched
    (run_dir / "monitord.log").write_text("an earlier run\n")
    result = run_monitord(["-r", "-f", "synth-0.dag.dagman.out"], run_dir, home)
    assert result.returncode == 0, result.stderr
    assert not (run_dir / "monitord.pid").exists()
    assert done.read_text() != "stale\n" and (run_dir / "monitord.started").read_text().startswith("pid ")
    assert (run_dir / "monitord.log.000").read_text() == "an earlier run\n"  # rotated, as monitord -r does
    assert not (run_dir / "monitord.log").exists()  # replay logs to the console
    assert "graceful" not in result.stderr and "monitord process" in result.stderr
    db = sqlite3.connect(run_dir / "synth-0.stampede.db")
    assert db.execute("SELECT COUNT(*) FROM job_instance").fetchone()[0] == 7
    # a replay reloads: still one workflow, its rows once
    assert run_monitord(["-r", "synth-0.dag.dagman.out"], run_dir, home).returncode == 0
    assert db.execute("SELECT COUNT(*) FROM workflow").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM job_instance").fetchone()[0] == 7
    master = sqlite3.connect(home / ".pegasus" / "workflow.db")
    assert master.execute("SELECT COUNT(*) FROM master_workflow").fetchone()[0] == 1
    assert master.execute("SELECT COUNT(*) FROM master_workflowstate").fetchone()[0] == 2


def test_analyzer_style_run_and_ignored_options(tmp_path: Path) -> None:
    """`pegasus-analyzer --monitord` runs `pegasus-monitord -r --no-events --output-dir DIR dagman.out`."""
    run_dir = _workflow(tmp_path, "retry")
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "analyzer-out"
    result = run_monitord(["-r", "--no-events", "--output-dir", str(out), "--db-stats", "-a", "3", "--bogus",
                           "synth-0.dag.dagman.out"], run_dir, home)
    assert result.returncode == 0, result.stderr
    assert not list(run_dir.glob("*.stampede.db")) and not (home / ".pegasus").exists()
    (jobstate,) = out.glob("*-jobstate.log")  # <wf_uuid>-jobstate.log, where pegasus-analyzer reads it
    assert jobstate.read_text().count("JOB_SUCCESS") == 7  # 8 instances, one failed
    assert not (run_dir / "jobstate.log").exists()
    assert (out / "streamer.state.json").is_file() and not (run_dir / "streamer.state.json").exists()
    for text in ("unknown option --bogus",):
        assert text in result.stderr
    assert run_monitord([], run_dir, home).returncode == 1  # no dagman.out: usage, as monitord
    assert run_monitord(["braindump.yml"], run_dir, home).returncode == 1


def test_install_monitord_launcher(tmp_path: Path) -> None:
    bindir = tmp_path / "pegasus" / "bin"
    bindir.mkdir(parents=True)
    original = bindir / "pegasus-monitord"
    original.write_text("#!/bin/sh\necho pegasus\n")
    result = subprocess.run([sys.executable, "-m", "streamer", "install-monitord", str(bindir)], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert (bindir / "pegasus-monitord.orig").read_text() == "#!/bin/sh\necho pegasus\n"
    assert launcher.is_ours(original) and os.access(original, os.X_OK)
    help_text = subprocess.run([str(original), "--help"], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert "usage: streamer monitord" in help_text and "--notifications-timeout" in help_text
    assert launcher.uninstall(bindir).startswith("restored")
    assert original.read_text() == "#!/bin/sh\necho pegasus\n"


# ---------------------------------------------------------------- notify file conditions

def _events(uuid: str, **status: int) -> list[Event]:
    base = {"xwf.id": uuid, "root.xwf.id": uuid}
    job = {**base, "job.id": "findrange_ID0000001", "job_inst.id": 3}
    return [
        Event("stampede.xwf.start", {**base, "ts": 100, "restart_count": 0}),
        Event("stampede.job_inst.main.start", {**job, "ts": 110, "stdout.file": "00/00/f.out",
                                               "stderr.file": "00/00/f.err"}),
        Event("stampede.job_inst.main.end", {**job, "ts": 120, "status": status["job"], "exitcode": 0,
                                             "stdout.file": "00/00/f.out.000", "stderr.file": "00/00/f.err.000"}),
        Event("stampede.job_inst.post.end", {**job, "ts": 125, "status": status["job"],
                                             "exitcode": 0 if status["job"] == 0 else 256}),
        Event("stampede.xwf.end", {**base, "ts": 130, "status": status["wf"], "restart_count": 0}),
    ]


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_planner_spellings_do_what_the_seed_says(tmp_path: Path, outcome: str) -> None:
    """`end`, `error`, `success` (today's planner) as `at_end`, `on_error`, `on_success` — at workflow and job level."""
    run_dir = _workflow(tmp_path)
    write_notify(run_dir, "/bin/rec", spelling="planner")
    uuid = json.loads(json.dumps(__import__("yaml").safe_load((run_dir / "braindump.yml").read_text())))["wf_uuid"]
    rules = read_notify(run_dir / "synth-0.notify", uuid)
    assert set(rules.workflow) == set(PLANNER)
    matcher = Matcher(run_dir, str(run_dir / "synth-0.dag.dagman.out"))
    code = 0 if outcome == "success" else 1
    fired = [(n.env["PEGASUS_JOBID"], n.action.split()[-1], n.env["PEGASUS_EVENT"], n.env.get("PEGASUS_STATUS"))
             for e in _events(uuid, job=code and -1, wf=code) for n in matcher.match(e)]
    good = "success" if outcome == "success" else "error"
    expected = []
    for entity in (uuid, "findrange_ID0000001"):
        expected += [(entity, "start", "start", None), (entity, "all", "start", None)]
    job_status = "0" if outcome == "success" else "1"
    for entity, status in (("findrange_ID0000001", job_status), (uuid, str(code))):
        expected += [(entity, "end", "end", status), (entity, good, good, status), (entity, "all", "at_end", status)]
    assert sorted(fired, key=repr) == sorted(expected, key=repr)
    fresh = Matcher(run_dir)  # the end of a job with a POST script names the attempt's rotated files
    stdout = {n.env.get("PEGASUS_STDOUT") for e in _events(uuid, job=0, wf=0)[2:4] for n in fresh.match(e)}
    assert stdout == {"/home/synth/submit/synth/pegasus/synth/run0001/00/00/f.out.000"}


def test_bad_notify_lines_are_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    notify = tmp_path / "x.notify"
    notify.write_text("WORKFLOW abc start /bin/true\nJOB onlythree start\nJOB j someday /bin/true\n"
                      "INVOCATION j x on_error /bin/true\nWORKFLOW other start /bin/true\nJOB j never /bin/x\n"
                      "INVOCATION j 2 on_success /bin/inv a b\n")
    rules = read_notify(notify, "abc")
    assert rules.workflow == {"start": ["/bin/true"]} and rules.invocation == {"j": {2: {"on_success": ["/bin/inv a b"]}}}
    assert rules.job == {} and len(rules) == 2
    text = caplog.text
    for line in (2, 3, 4, 5):
        assert f"{notify}:{line}:" in text


def test_recorder_records(tmp_path: Path) -> None:
    recorder = write_recorder(tmp_path / "rec", tmp_path / "calls", sys.executable)
    subprocess.run([str(recorder), "a b", "c"], env={**os.environ, "PEGASUS_EVENT": "start"}, check=True)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "calls").glob("*.json")]
    assert record["argv"] == ["a b", "c"] and record["env"]["PEGASUS_EVENT"] == "start"


# ---------------------------------------------------------------- master DB in PostgreSQL

def test_master_db_in_postgresql(tmp_path: Path, postgres_dsn: str) -> None:
    """`pegasus.catalog.master.url = postgresql://...`: registered, and registered once again after a replay."""
    import asyncio

    import asyncpg

    async def rows(url: str) -> tuple[list, list]:
        conn = await asyncpg.connect(url)
        try:
            workflows = [tuple(r) for r in await conn.fetch(
                "SELECT wf_uuid, dax_label, timestamp, submit_dir, db_url, archived FROM master_workflow")]
            states = [tuple(r) for r in await conn.fetch(
                "SELECT w.wf_uuid, s.state, s.timestamp, s.restart_count, s.status FROM master_workflowstate s "
                "JOIN master_workflow w ON w.wf_id = s.wf_id ORDER BY s.timestamp")]
            return workflows, states
        finally:
            await conn.close()

    with fresh_database_sync(postgres_dsn) as url:
        run_dir = _workflow(tmp_path, "post_failure")
        home = tmp_path / "home"
        home.mkdir()
        for _ in range(2):
            result = run_monitord([f"-Dpegasus.catalog.master.url={url}", "-r", "synth-0.dag.dagman.out"], run_dir,
                                  home)
            assert result.returncode == 0, result.stderr
            workflows, states = asyncio.run(rows(url))
            uuid_ = workflows[0][0]
            assert [w[1:] for w in workflows] == [
                ("synth", 1699999990, "/home/synth/submit/synth/pegasus/synth/run0001",
                 f"sqlite:///{run_dir}/synth-0.stampede.db", False)]
            assert states == [(uuid_, "WORKFLOW_STARTED", 1700000000, 0, None),
                              (uuid_, "WORKFLOW_TERMINATED", states[1][2], 0, 1)]


def test_a_replay_that_resumes_keeps_what_the_interrupted_one_delivered(tmp_path: Path) -> None:
    """`monitord -r` after an interrupted `monitord -r` resumes from the state it left (streamer.state.json): its
    outputs must not start afresh then, or what the first run delivered is lost. One rule for every command now
    (`run/workflow.WorkflowRun`: a replay starts its outputs afresh unless it resumes); monitord's own copy passed
    `replay=True` even when resuming, and the events file was truncated to the events after the resumed position."""
    import asyncio

    from streamer.config.settings import EndpointSpec
    from streamer.monitor.source import WorkflowSource
    from streamer.run.pipeline import Run, RunOptions
    from streamer.run.wiring import build_endpoints

    run_dir = generate(tmp_path / "wf", jobs=20, seed=0)
    home = tmp_path / "home"
    home.mkdir()
    out, whole = tmp_path / "events.jsonl", tmp_path / "whole.jsonl"
    source = WorkflowSource(run_dir / "synth-0.dag.dagman.out", snapshot_interval=0)
    source.read_size = 2048
    # the interrupted replay: let go after its first checkpointed batch, as a crash or a signal leaves it
    options = RunOptions(progress=False, signals=False,
                         watch=lambda batch: source.detach() if batch.position is not None else None)
    first = asyncio.run(Run(source, build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{out}"))]), options).run())
    state = json.loads((run_dir / "streamer.state.json").read_text())
    assert first.exit_code == 0 and 0 < first.events and not state.get("complete")
    resumed = run_monitord(["-r", "--dest", f"file://{out}", "synth-0.dag.dagman.out"], run_dir, home)
    assert resumed.returncode == 0, resumed.stderr
    again = run_monitord(["-r", "--dest", f"file://{whole}", "synth-0.dag.dagman.out"], run_dir, home)
    assert again.returncode == 0, again.stderr  # (the state says complete: a replay from the start)
    assert len(out.read_text().splitlines()) == len(whole.read_text().splitlines()) > first.events
    assert out.read_text() == whole.read_text()


def test_watch_reads_dagmans_pid_and_exit_as_the_monitor_does(tmp_path: Path) -> None:
    """DAGMan's pid and its exit line through the one DAGMan grammar: a restart after an exit read in the same
    block is running again (the old byte patterns saw the earlier exit line and took it for finished), and
    only DAGMan's own exit line ends it."""
    log = tmp_path / "x.dag.dagman.out"
    log.write_text("03/03/23 22:23:43 ** PID = 100\n"
                   "03/03/23 22:25:00 **** condor_scheduniv_exec.1.0 (condor_DAGMAN) pid 100 EXITING WITH STATUS 1\n"
                   "03/03/23 22:26:00 ** PID = 200\n"
                   "03/03/23 22:26:01 Node a: EXITING WITH STATUS 0\n")
    watch = Watch(None, log, follow=True)
    assert watch._scan() == log.stat().st_size
    assert (watch._pid, watch._exited) == (200, False)
    with open(log, "a") as handle:
        handle.write("03/03/23 22:27:00 **** condor_scheduniv_exec.1.0 (condor_DAGMAN) pid 200 EXITING WITH ")
    watch._scan()
    assert watch._exited is False  # an unfinished line is not read
    with open(log, "a") as handle:
        handle.write("STATUS 0\n")
    watch._scan()
    assert (watch._pid, watch._exited) == (200, True)
