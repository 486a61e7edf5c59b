"""`streamer serve`: many live workflows in one process, discovery, SIGKILL and SIGHUP.

The acceptance test: 20 synthetic workflows (mixed scenarios, two hierarchical) under one root, their
dagman.out files growing in pieces at once, six of them moved into the root while serve runs, serve
SIGKILLed twice and restarted. Each workflow's events, SQLite Stampede DB and jobstate.log (its
sub-workflows' included) must equal those of its own `streamer replay` of the finished directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from streamer.cli import main as cli
from streamer.serve.discovery import classify
from streamer.synth import generate, iter_dagman_chunks
from tests.support import dbcompare
from tests.support.pghelp import fresh_database_sync, pg_snapshot
from tests.conftest import unavailable
from tests.support.commands import wait_for

SCENARIOS = ["success", "retry", "held", "held_abort", "evicted", "pre_failure", "post_failure",
             "submit_failure", "clustered", "xml_kickstart"]
PIECES = 6
EVENTS_FILE = "events.jsonl"


def make_workflows(base: Path, count: int, hierarchical: set[int]) -> list[tuple[Path, Path, list[str]]]:
    """(live dir, finished copy, chunks of its dagman.out) per workflow; the live dagman.out starts empty."""
    out = []
    for i in range(count):
        scenario = "hierarchical" if i in hierarchical else SCENARIOS[i % len(SCENARIOS)]
        live = generate(base / "gen" / f"wf{i:02d}", jobs=3 + i % 3, scenario=scenario, seed=10 * i + 1)
        ref = base / "ref" / live.name
        shutil.copytree(live, ref, symlinks=True)
        out.append((live, ref, list(iter_dagman_chunks(live, pieces=PIECES, seed=i))))
    return out


def serve_cmd(root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "streamer", "serve", "--watch", str(root), "--timezone", "UTC",
            "--workflow-dest", "sqlite", "--workflow-dest", "file://{submit_dir}/" + EVENTS_FILE, *extra]


def replay(ref: Path, *extra: str) -> None:
    code = cli.main(["replay", str(ref), "--timezone", "UTC", "-q", "--state", str(ref / "replay.state"),
                     "--dest", f"file://{ref}/{EVENTS_FILE}", "--dest", f"sqlite:///{ref}/synth-0.stampede.db",
                     *(x for url in extra for x in ("--dest", url))])
    assert code == 0


def event_ids(path: Path) -> list[str]:
    return [json.loads(line)["event_id"] for line in path.read_text().splitlines()]


def jobstate_logs(submit: Path) -> dict[str, list[str]]:
    """Every jobstate.log of a workflow (sub-workflows' too), without MONITORD_* lines (wall-clock times,
    one pair per process that followed it)."""
    found = {}
    for path in sorted(submit.rglob("jobstate.log")):
        if path.parent.is_symlink() or any(p.is_symlink() for p in path.relative_to(submit).parents if p != Path(".")):
            continue
        found[str(path.relative_to(submit))] = [ln for ln in path.read_text().splitlines() if "MONITORD_" not in ln]
    return found


def assert_same_as_replay(live: Path, ref: Path) -> int:
    expected, got = event_ids(ref / EVENTS_FILE), event_ids(live / EVENTS_FILE)
    # as multisets: a clustered job's replay itself repeats an identical event (same id) once per task
    repeated, lost = Counter(got) - Counter(expected), Counter(expected) - Counter(got)
    assert not repeated, f"{live.name}: {sum(repeated.values())} events repeated or foreign"
    assert not lost, f"{live.name}: {sum(lost.values())} events lost"
    diff = dbcompare.compare(dbcompare.sqlite_snapshot(str(live / "synth-0.stampede.db")),
                             dbcompare.sqlite_snapshot(str(ref / "synth-0.stampede.db")))
    assert not diff, f"{live.name}: " + dbcompare.format_diff(diff)
    assert jobstate_logs(live) == jobstate_logs(ref), f"{live.name}: jobstate.log differs"
    assert (live / "monitord.done").exists()
    return len(got)


@pytest.fixture
def central_db(postgres_dsn: str):
    """A fresh PostgreSQL database (the site's central Stampede DB), dropped afterwards."""
    with fresh_database_sync(postgres_dsn, "streamer_serve") as url:
        yield url


def wait_serving(state_dir: Path, timeout: float = 120) -> None:
    """Until a serve holds the state dir's lock (taken once its signal handlers are in place)."""
    import fcntl

    def held() -> bool:
        try:
            fd = os.open(state_dir / "serve" / "serve.lock", os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    wait_for(held, "serve to start", timeout=timeout)


def test_serve_twenty_live_workflows_sigkill_twice(tmp_path: Path) -> None:
    rng = random.Random(1313)
    workflows = make_workflows(tmp_path, 20, hierarchical={3, 16})
    root = tmp_path / "root"
    (root / "alice" / "pegasus").mkdir(parents=True)
    first, later = workflows[:14], workflows[14:]
    live: list[tuple[Path, list[str]]] = []
    for src, _, chunks in first:
        dest = root / "alice" / "pegasus" / src.name
        shutil.move(str(src), dest)
        live.append((dest, chunks))
    env = {**os.environ, "TZ": "UTC", "STREAMER_STATE_DIR": str(tmp_path / "state")}
    errors: list[str] = []

    def grow() -> None:
        """Round-robin, a piece of every present workflow per round; the six later ones arrive at round 2."""
        progress = [0] * 20
        for rnd in range(PIECES + 4):
            if rnd == 2:
                for src, _, chunks in later:  # a new run appears (renamed in, as a copy finishing)
                    dest = root / "alice" / "pegasus" / src.name
                    shutil.move(str(src), dest)
                    live.append((dest, chunks))
            for index, (dest, chunks) in enumerate(list(live)):
                if progress[index] < len(chunks):
                    with open(next(dest.glob("*.dag.dagman.out")), "a") as fh:
                        fh.write(chunks[progress[index]])
                    progress[index] += 1
            time.sleep(0.4)

    writer = threading.Thread(target=grow, daemon=True)
    proc = subprocess.Popen(serve_cmd(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    writer.start()
    for _ in range(2):
        time.sleep(rng.uniform(1.5, 2.5))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert "Traceback" not in err, err
        proc = subprocess.Popen(serve_cmd(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
    writer.join(timeout=60)
    try:
        wait_for(lambda: all((d / "monitord.done").exists() for d, _ in live), "every workflow to finish", timeout=240)
        registry = json.loads((tmp_path / "state" / "serve" / "workflows.json").read_text())
        wait_for(lambda: not json.loads((tmp_path / "state" / "serve" / "workflows.json").read_text())["followed"], timeout=60, what=f"the registry to empty ({registry})")
    finally:
        if proc.poll() is None:
            wait_serving(tmp_path / "state")  # a SIGTERM during start-up would find no handler yet
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err

    total = 0
    for (dest, _), (_, ref, _) in zip(sorted(live), sorted(workflows, key=lambda w: w[0].name)):
        replay(ref)
        total += assert_same_as_replay(dest, ref)
    print(f"\n20 workflows, 2 SIGKILLs: {total} events, each equal to its replay")
    assert total > 2000


def test_discovery_skips_subworkflows_and_finished_runs(tmp_path: Path) -> None:
    submit = generate(tmp_path / "h", jobs=3, scenario="hierarchical", seed=2)
    found = classify(str(submit))
    assert found is not None and found.dag == "synth-0" and found.submit_dir == str(submit.resolve())
    sub = next(p for p in (submit / "00" / "00").iterdir() if p.is_dir() and p.name.endswith(".000"))
    assert (sub / "braindump.yml").exists()
    assert classify(str(sub)) is None  # followed through its parent
    (submit / "streamer.state.json").write_text('{"version": 1, "complete": true, "workflows": []}')
    assert classify(str(submit)) is None  # followed to the end by a serve killed before it marked it done
    assert (submit / "monitord.done").exists()  # marked now
    (submit / "streamer.state.json").unlink()
    assert classify(str(submit)) is None  # history


@pytest.mark.postgres
def test_serve_sighup_adds_shared_endpoint_and_master_db(tmp_path: Path, central_db: str) -> None:
    """Two workflows into their own SQLite DBs and one shared PostgreSQL DB; SIGHUP with a changed config:
    followers detach at their checkpoint and resume with the new endpoints (nothing lost or repeated per
    workflow, the central DB equal to both replays loaded into one DB); a workflow registered in the master
    DB (outside any root) is followed too."""
    central = central_db
    root = tmp_path / "root"
    root.mkdir()
    (a, a_ref, a_chunks), (b, b_ref, b_chunks) = make_workflows(tmp_path, 2, hierarchical=set())
    a_live = root / a.name
    shutil.move(str(a), a_live)
    master = tmp_path / "workflow.db"
    with sqlite3.connect(master) as conn:  # the columns serve reads of Pegasus's master_workflow
        conn.execute("CREATE TABLE master_workflow (wf_id INTEGER PRIMARY KEY, submit_dir TEXT)")
        conn.execute("INSERT INTO master_workflow VALUES (1, ?)", (str(b),))
    shared = tmp_path / "shared.jsonl"
    config = tmp_path / "streamer.toml"
    base = (f'[serve]\nwatch = ["{root}"]\nmaster_db = "sqlite:///{master}"\nmaster_poll = 0.5\n'
            f'timezone = "UTC"\nworkflow_dest = ["sqlite", "file://{{submit_dir}}/{EVENTS_FILE}"]\n'
            f'\n[[endpoint]]\nurl = "{central}"\n')
    config.write_text(base)
    env = {**os.environ, "TZ": "UTC", "STREAMER_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "streamer", "serve", "--config", str(config)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for((tmp_path / "state" / "serve" / "workflows.json").exists, "serve to start", timeout=30)
        for k in range(PIECES):
            if k == PIECES // 2:
                config.write_text(base + f'\n[[endpoint]]\nurl = "file://{shared}"\n')
                proc.send_signal(signal.SIGHUP)
            for path, chunks in ((a_live, a_chunks), (b, b_chunks)):
                with open(next(path.glob("*.dag.dagman.out")), "a") as fh:
                    fh.write(chunks[k])
            time.sleep(0.7)
        finished = True
        wait_for(lambda: (a_live / "monitord.done").exists() and (b / "monitord.done").exists(), timeout=240, what="both workflows to finish")
    except AssertionError:
        finished = False
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert finished, f"both workflows should have finished:\n{err}"
    assert proc.returncode == 0, err
    assert "SIGHUP: configuration re-read" in err
    both = tmp_path / "both.db"
    for live, ref in ((a_live, a_ref), (b, b_ref)):
        replay(ref, f"sqlite:///{both}")
        assert_same_as_replay(live, ref)
    diff = dbcompare.compare(asyncio.run(pg_snapshot(central)), dbcompare.sqlite_snapshot(str(both)))
    if "rc_meta" in diff:  # both synthetic workflows name the same files: the last writer's value wins (by design)
        extra, missing = diff["rc_meta"]
        if sorted(r[:2] for r in extra) == sorted(r[:2] for r in missing):
            del diff["rc_meta"]
    assert not diff, dbcompare.format_diff(diff)
    after = event_ids(shared)
    assert after and len(after) == len(set(after))
    assert set(after) <= set(event_ids(a_ref / EVENTS_FILE)) | set(event_ids(b_ref / EVENTS_FILE))


def test_deploy_serve_config_example_is_valid(tmp_path: Path) -> None:
    """deploy/systemd/streamer.toml.example is read by `serve` as shipped (its root made to exist here)."""
    import argparse

    from streamer.serve.config import load_serve_config

    example = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "streamer.toml.example"
    text = example.read_text().replace("/home/pegasus/runs", str(tmp_path))
    (tmp_path / "amqp.password").write_text("secret\n")
    text = text.replace("/etc/streamer/amqp.password", str(tmp_path / "amqp.password"))
    config = tmp_path / "streamer.toml"
    config.write_text(text)
    args = argparse.Namespace(config=str(config), dest=[], watch=[], conf=None, events=None, on_error=None)
    serve = load_serve_config(args)
    assert serve.roots == [tmp_path.resolve()]
    assert serve.workflow_dest == ["sqlite"] and serve.jobstate
    assert [s.url.raw for s in serve.shared] == ["amqp://streamer@broker.example.org:5672/pegasus/workflows"]
    specs = serve.workflow_specs("/runs/r1", "diamond-0", "u", "sqlite:////runs/r1/diamond-0.stampede.db")
    assert [s.url.raw for s in specs] == ["sqlite:////runs/r1/diamond-0.stampede.db"]
    unit = (example.parent / "streamer-serve.service").read_text()
    assert "streamer serve --config /etc/streamer/streamer.toml" in unit and "ExecReload=/bin/kill -HUP" in unit


def test_serve_usage_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "streamer.toml"
    bad.write_text('[serve]\nwatch = ["/nonexistent/runs"]\nwatchh = 1\n')
    done = subprocess.run([sys.executable, "-m", "streamer", "serve", "--config", str(bad)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert f"{bad}: [serve]: unknown key(s) watchh" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "streamer", "serve", "--watch", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"watch root {tmp_path / 'nope'}: no such directory" in done.stderr
    done = subprocess.run([sys.executable, "-m", "streamer", "serve"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "nothing to serve" in done.stderr


def test_serve_systemd_unit_verifies(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze not installed (the unit is only parsed by systemd)")
    unit = (Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "streamer-serve.service").read_text()
    local = tmp_path / "streamer-serve.service"
    local.write_text(unit.replace("/opt/streamer/bin/streamer", sys.executable))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if local.name in line] == []


async def test_a_dagman_out_write_wakes_the_workflow_that_owns_it(tmp_path: Path) -> None:
    """inotify's write on a sub-workflow's dagman.out wakes its root's follower; one state dir, one serve."""
    from streamer.config.settings import ConfigError
    from streamer.serve.config import ServeConfig
    from streamer.serve.follower import Followed, ServeSource
    from streamer.serve.supervisor import Supervisor

    submit = generate(tmp_path / "h", jobs=3, scenario="hierarchical", seed=2)
    found = classify(str(submit))
    assert found is not None
    supervisor = Supervisor(ServeConfig(roots=[tmp_path], state_dir=tmp_path / "state"))
    source = ServeSource(found.submit_dir, follow=True)
    supervisor.followed[found.submit_dir] = Followed(found, source=source)
    sub_log = next(p for p in (submit / "00" / "00").rglob("*.dagman.out") if not p.parent.is_symlink())
    supervisor.wrote(str(tmp_path / "elsewhere" / "x.dag.dagman.out"))
    assert not source.wake.is_set()
    supervisor.wrote(str(sub_log))
    assert source.wake.is_set()
    await asyncio.wait_for(source.idle(3600), 10)  # returns at once: the write is not waited out
    assert not source.wake.is_set()

    supervisor._lock()
    with pytest.raises(ConfigError, match="another streamer serve uses this state directory"):
        Supervisor(ServeConfig(roots=[tmp_path], state_dir=tmp_path / "state"))._lock()


def test_serve_metrics_count_every_workflow(tmp_path: Path) -> None:
    """`serve --metrics`: one exporter for all followed workflows: the active count while they run and
    the events a shared endpoint got, equal to what it wrote."""
    from tests.run.test_metrics import get, samples
    from tests.support.ownservers import free_port

    workflows = make_workflows(tmp_path, 2, set())
    root = tmp_path / "gen"
    port = free_port()
    shared = f"file://{tmp_path}/all.jsonl"
    env = {**os.environ, "TZ": "UTC", "STREAMER_STATE_DIR": str(tmp_path / "state")}
    for live, _, chunks in workflows:  # DAGMan has started: the first piece of each log is there
        next(live.glob("*.dag.dagman.out")).write_text(chunks[0])
    proc = subprocess.Popen(serve_cmd(root, "--dest", shared, "--metrics", f"127.0.0.1:{port}", "-q"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_serving(tmp_path / "state")
        wait_for(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, timeout=60, what="the metrics server")
        active = ("streamer_workflows_active", ())
        wait_for(lambda: samples(port).get(active) == 2, timeout=60, what="two active workflows")
        for live, _, chunks in workflows:
            with next(live.glob("*.dag.dagman.out")).open("a") as handle:
                handle.write("".join(chunks[1:]))
        wait_for(lambda: samples(port).get(active) == 0, timeout=120, what="both workflows let go")
        out = ("streamer_events_out_total", (("endpoint", shared),))
        written = len((tmp_path / "all.jsonl").read_text().splitlines())
        assert written > 0 and samples(port).get(out) == written
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


async def test_serve_starts_its_worker_threads_before_following_and_never_on_the_loop(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """Starting a thread waits until the new thread runs, which on a loaded machine can take long: the
    worker pool serve's checkpoints and endpoint threads use is started whole, off the event loop, before
    any workflow is followed, so no workflow's latency ever includes a thread start on the loop."""
    from streamer.serve import supervisor as supervisor_module
    from streamer.serve.config import ServeConfig
    from streamer.serve.supervisor import Supervisor

    root = tmp_path / "root"
    submit = generate(root / "wf", jobs=3, seed=3)
    starts: list[tuple[str, int]] = []
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        starts.append((self.name, threading.get_ident()))
        original(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    supervisor = Supervisor(ServeConfig(roots=[root], state_dir=tmp_path / "state",
                                        workflow_dest=["file://{submit_dir}/events.jsonl"], timezone="UTC"))
    task = asyncio.create_task(supervisor.run())
    deadline = time.monotonic() + 60
    while not (submit / "monitord.done").exists():
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.05)
    supervisor.stop()
    assert await asyncio.wait_for(task, 30) == 0
    loop_thread = threading.get_ident()
    pool = [ident for name, ident in starts if name.startswith("streamer-serve")]
    assert len(pool) == supervisor_module.WORKER_THREADS
    assert loop_thread not in pool
    assert (submit / "events.jsonl").read_bytes().count(b"\n") > 0
