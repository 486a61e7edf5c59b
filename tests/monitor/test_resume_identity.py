"""streamer/monitor/source.py: resume state belongs to one run of one workflow (its dagman.out), and a follower
that cannot go on says it once and stops."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from streamer.cli.main import main
from tests.support.commands import wait_for


def test_a_workflow_planned_again_at_the_same_path_is_read_from_its_start(tmp_path: Path) -> None:
    """`follow` killed part-way, the run directory deleted and another workflow planned at the same path, the
    same command again: the saved state belongs to the old run (another dagman.out), so the new follow starts
    clean, says so, and delivers every event of the new workflow (it resumed the old position, printed `file
    shrank below offset` in a loop and delivered nothing)."""
    import signal
    import subprocess
    import sys

    from streamer.synth import generate

    run = tmp_path / "run"
    submit = generate(run, jobs=6, scenario="success", seed=1)
    dagman_out = next(submit.glob("*.dag.dagman.out"))
    lines = dagman_out.read_text().splitlines(keepends=True)
    dagman_out.write_text("".join(lines[: len(lines) * 3 // 4]))  # DAGMan still running
    out = tmp_path / "events.jsonl"
    env = {**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-m", "streamer", "follow", str(submit), "--no-jobstate", "--dest", f"file://{out}"]
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    states = tmp_path / "state" / "replay"
    wait_for(lambda: first.poll() is not None or any('"workflows"' in p.read_text() for p in states.glob("*.json")),
             "the first follow to save a position", 60)
    assert first.poll() is None, "the first follow ended"
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    before = len(out.read_text().splitlines())

    shutil.rmtree(run)
    again = generate(run, jobs=9, scenario="retry", seed=7)  # another workflow, planned at the same path
    reference = tmp_path / "reference.jsonl"
    assert main(["replay", str(shutil.copytree(again, tmp_path / "copy")), "-q", "--no-jobstate",
                 "--state", str(tmp_path / "ref.state"), "--dest", f"file://{reference}"]) == 0
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resuming" not in second.stderr and "shrank" not in second.stderr, second.stderr[-2000:]
    assert "another run" in second.stderr and "starting from the beginning" in second.stderr, second.stderr
    ids = [json.loads(line)["event_id"] for line in out.read_text().splitlines()]
    expected = [json.loads(line)["event_id"] for line in reference.read_text().splitlines()]
    assert sorted(ids[before:]) == sorted(expected)


async def test_a_follower_whose_dagman_out_shrank_says_so_once_and_stops(tmp_path: Path) -> None:
    """The dagman.out being followed is cut below what was read of it: one warning, and the follow ends (it
    warned on every step, tens of thousands of times a minute, and never ended)."""
    import asyncio

    from streamer.monitor.source import WorkflowSource
    from streamer.synth import generate

    submit = generate(tmp_path / "run", jobs=4, seed=2)
    dagman_out = next(submit.glob("*.dag.dagman.out"))
    text = dagman_out.read_text()
    dagman_out.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    source = WorkflowSource(submit, follow=True, write_jobstate=False, state_path=tmp_path / "state.json")
    warnings: list[str] = []

    async def run() -> None:
        async for batch in source.batches():
            warnings.extend(batch.warnings)
            if batch.position and batch.position["workflows"][0]["offset"] > 100 \
                    and dagman_out.stat().st_size > 100:
                dagman_out.write_text(text[:100])
            if len(warnings) > 3:
                break

    await asyncio.wait_for(run(), 30)
    await source.close()
    shrank = [w for w in warnings if "shrank" in w]
    assert len(shrank) == 1 and len(warnings) == 1, warnings
    assert shrank[0].startswith(f"{dagman_out}: file shrank below offset ") and shrank[0].endswith("stopped following it")
