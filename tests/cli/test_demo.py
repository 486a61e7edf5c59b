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
