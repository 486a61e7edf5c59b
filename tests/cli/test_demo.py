"""`streamer demo`: the README's first set-up command (docs/guide/demo.md), on the bundled example."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path


def test_demo_replays_the_bundled_example_to_the_embedded_default(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "streamer", "demo", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    workflow = tmp_path / "workflow"
    db = workflow / "example-0.stampede.db"
    events = (tmp_path / "events.jsonl").read_text().splitlines()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM workflow").fetchone()[0] == 2
        instances = conn.execute("SELECT count(*) FROM job_instance").fetchone()[0]
    decoded = [json.loads(e) for e in events]
    assert instances == len({(e["xwf_id"], e["job_id"], e["job_inst_id"]) for e in decoded
                             if e["event"].startswith("stampede.job_inst.")})
    assert (workflow / "jobstate.log").read_text().count("DAGMAN_FINISHED") == 1
    assert f"{len(events)} -> sqlite:///{db}" in done.stderr.replace(",", "")
    # deterministic: a second run gives the same events (same stable ids)
    again = tmp_path / "again"
    subprocess.run([sys.executable, "-m", "streamer", "demo", "--out", str(again), "-q"], check=True, timeout=120)
    assert (again / "events.jsonl").read_text().splitlines() == events


def test_demo_live_grows_a_workflow_that_follow_reads_as_replay_does(tmp_path: Path) -> None:
    """Issue 26 item 15: a growing test workflow from one command, with what to run next printed, to try
    `follow`, `tail`, `status --watch` and `serve` before a first real run."""
    import re
    import time

    from tests.support.screen import Terminal

    out = tmp_path / "demo"
    term = Terminal(tmp_path, width=200)
    try:
        term.type(f"{sys.executable} -m streamer demo --live --out {out} --duration 4; echo EXIT=$?")
        screen = term.wait_for(lambda s: "in another terminal" in s, "what to run next")
        workflow = out / "live"
        for command in (f"follow {workflow} --dest -", f"status {workflow} --watch", f"tail {out}/events.jsonl",
                        f"serve --watch {out}"):
            assert command in screen, screen
        log = workflow / "live-0.dag.dagman.out"
        follow = subprocess.Popen([sys.executable, "-m", "streamer", "follow", str(workflow), "--dest",
                                   str(tmp_path / "followed.jsonl"), "--no-jobstate", "-q",
                                   "--state", str(tmp_path / "state.json")])
        sizes = set()
        while follow.poll() is None and len(sizes) < 200:
            sizes.add(log.stat().st_size)
            time.sleep(0.05)
        assert follow.wait(timeout=60) == 0
        assert len(sizes) >= 3  # it grew while followed
        final = term.wait_for(lambda s: re.search(r"^EXIT=\d", s, re.MULTILINE) is not None, "the demo's end")
        assert "EXIT=0" in final and "DAGMan finished" in final
    finally:
        term.close()
    replayed = tmp_path / "replayed.jsonl"
    subprocess.run([sys.executable, "-m", "streamer", "replay", str(workflow), "--dest", str(replayed),
                    "--no-jobstate", "-q", "--state", str(tmp_path / "replay-state.json")], check=True, timeout=120)
    followed = [json.loads(line)["event_id"] for line in (tmp_path / "followed.jsonl").read_text().splitlines()]
    assert followed and sorted(followed) == sorted(json.loads(line)["event_id"]
                                                   for line in replayed.read_text().splitlines())
