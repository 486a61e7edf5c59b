"""Replaying an archived (read-only) submit dir: when nothing has to be written there, nothing is."""

from __future__ import annotations

import json
import os
from pathlib import Path


from streamer.cli import main
from streamer.synth import generate




def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file()}


def test_replay_writes_nothing_into_the_submit_dir_when_nothing_is_needed_there(tmp_path: Path, monkeypatch) -> None:
    run = generate(tmp_path / "archive" / "run0001", jobs=3, scenario="success", seed=0)
    state_home = tmp_path / "state"
    monkeypatch.setenv("STREAMER_STATE_DIR", str(state_home))
    before = snapshot(run)
    os.chmod(run, 0o555)  # read-only (root writes anyway: the snapshot is what proves it)
    try:
        out = tmp_path / "events.jsonl"
        assert main(["replay", str(run), "--no-jobstate", "--dest", str(out), "-q"]) == 0
        assert snapshot(run) == before  # no monitord.started/done, no streamer.state.json, no jobstate.log
        states = list((state_home / "replay").glob("run0001-*.state.json"))
        assert len(states) == 1 and json.loads(states[0].read_text())["complete"] is True
        lines = out.read_text().count("\n")
        assert lines > 50
        elsewhere = tmp_path / "my.state"
        assert main(["replay", str(run), "--no-jobstate", "--dest", str(tmp_path / "b.bp"), "-q",
                     "--state", str(elsewhere)]) == 0
        assert elsewhere.is_file() and snapshot(run) == before
        assert (tmp_path / "b.bp").read_text().count("\n") == lines
    finally:
        os.chmod(run, 0o755)
