"""A replay overwrites its file endpoints (monitord -r --dest file.bp); `?mode=append` / `--append` keep them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from streamer.synth import generate
from tests.support.dagjobstate import write_plain_dag
from tests.support.commands import streamer


def test_replay_overwrites_a_file_endpoint_unless_asked_to_append(tmp_path: Path, python: str) -> None:
    directory = generate(tmp_path / "wf", jobs=3, seed=5)
    out = tmp_path / "out.bp"
    out.write_text("ts=2020-01-01T00:00:00Z event=stampede.xwf.meta level=Info key=old value=line\n")
    streamer("replay", str(directory), "--dest", str(out), "--timezone", "UTC", "-q", check=True)
    once = out.read_text()
    assert "key=old" not in once and once.count("\n") > 20
    streamer("replay", str(directory), "--dest", str(out), "--timezone", "UTC", "-q", check=True)
    assert out.read_text() == once  # replaced, not doubled
    streamer("replay", str(directory), "--dest", f"file://{out}?mode=append", "--timezone", "UTC", "-q", check=True)
    assert out.read_text() == once + once
    streamer("replay", str(directory), "--dest", str(out), "--append", "--timezone", "UTC", "-q", check=True)
    assert out.read_text() == once * 3
    streamer("replay", str(directory), "--dest", f"file://{out}?mode=truncate", "--timezone", "UTC", "-q", check=True)
    assert out.read_text() == once


def test_load_and_follow_still_append(tmp_path: Path, python: str) -> None:
    log = write_plain_dag(tmp_path / "dag")
    out = tmp_path / "out.jsonl"
    streamer("load", str(log), "--dest", str(out), "-q", check=True)
    once = out.read_text()
    assert once.count("\n") == 64  # 61 lines; the 3 PRE script ends bring a PRE_SCRIPT_TERMINATED each
    streamer("load", str(log), "--dest", str(out), "-q", check=True)
    assert out.read_text() == once + once
    # a replay of the same jobstate.log overwrites
    streamer("replay", str(log), "--dest", str(out), "-q", check=True)
    assert out.read_text() == once


def test_unknown_mode_is_a_clear_error(tmp_path: Path, python: str) -> None:
    log = write_plain_dag(tmp_path / "dag")
    run = subprocess.run([python, "-m", "streamer", "replay", str(log), "--dest", f"file://{tmp_path}/x.bp?mode=rewrite"],
                         capture_output=True, text=True)
    assert run.returncode != 0
    assert "option mode: 'rewrite' is not one of append, truncate" in run.stderr
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
