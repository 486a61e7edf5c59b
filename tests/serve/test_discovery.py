"""streamer/serve/discovery.py and watch.py: a workflow is followed whatever order and timing its files
appear in under a watched root, and serve says at its default level which workflow it starts and stops
following."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from streamer.cli.main import main
from streamer.synth import generate
from tests.serve.test_serve import event_ids, wait_serving
from tests.support.commands import wait_for

EVENTS = "events.jsonl"


def _files_but(src: Path, dest: Path, *left_out: str) -> None:
    """Copy `src` to `dest` without the named top-level files."""
    shutil.copytree(src, dest, symlinks=True, ignore=lambda d, names: [n for n in names if d == str(src)
                                                                      and n in left_out])


def _braindump_written_late(src: Path, dest: Path) -> None:
    """dagman.out first; braindump.yml created empty, its content written a moment later (in two writes)."""
    _files_but(src, dest, "braindump.yml")
    time.sleep(0.5)
    (dest / "braindump.yml").touch()
    time.sleep(0.5)
    text = (src / "braindump.yml").read_text()
    with open(dest / "braindump.yml", "w") as handle:
        handle.write(text[:40])
        handle.flush()
        time.sleep(0.3)
        handle.write(text[40:])


def _braindump_renamed_into_place(src: Path, dest: Path) -> None:
    _files_but(src, dest, "braindump.yml")
    time.sleep(0.5)
    shutil.copy(src / "braindump.yml", dest / ".braindump.yml.tmp")
    os.rename(dest / ".braindump.yml.tmp", dest / "braindump.yml")


def _moved_in(src: Path, dest: Path) -> None:
    os.rename(src, dest)


def _dagman_out_last(src: Path, dest: Path) -> None:
    """braindump first (DAGMan not started yet), then dagman.out created and growing."""
    dagman_out = next(src.glob("*.dag.dagman.out"))
    _files_but(src, dest, dagman_out.name)
    time.sleep(0.5)
    text = dagman_out.read_text()
    with open(dest / dagman_out.name, "w") as handle:
        for start in range(0, len(text), len(text) // 3 + 1):
            handle.write(text[start:start + len(text) // 3 + 1])
            handle.flush()
            time.sleep(0.3)


def _in_new_nested_directories(src: Path, dest: Path) -> None:
    """A run made in directories that do not exist yet (pegasus-plan's --dir user/pegasus/label/run0001)."""
    deep = dest / "alice" / "pegasus" / "run0001"
    deep.parent.mkdir(parents=True)
    _files_but(src, deep, "braindump.yml")
    time.sleep(0.3)
    (deep / "braindump.yml").write_text((src / "braindump.yml").read_text())


ORDERS: dict[str, Callable[[Path, Path], None]] = {
    "braindump-late": _braindump_written_late,
    "braindump-renamed": _braindump_renamed_into_place,
    "moved-in": _moved_in,
    "dagman-out-last": _dagman_out_last,
    "nested": _in_new_nested_directories,
}


def test_serve_follows_workflows_whatever_order_their_files_appear_in(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    made: dict[str, Path] = {}
    for index, name in enumerate(ORDERS):
        made[name] = generate(tmp_path / "gen" / name, jobs=3, scenario="retry" if index % 2 else "success",
                              seed=index + 1)
        reference = tmp_path / "ref" / name
        shutil.copytree(made[name], reference, symlinks=True)
        assert main(["replay", str(reference), "-q", "--no-jobstate", "--state", str(tmp_path / f"{name}.st"),
                         "--dest", f"file://{reference}/{EVENTS}"]) == 0
    env = {**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "streamer", "serve", "--watch", str(root), "--no-jobstate",
                             "--workflow-dest", "file://{submit_dir}/" + EVENTS], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_serving(tmp_path / "state")
        time.sleep(0.3)
        for name, place in ORDERS.items():
            place(made[name], root / name)
        runs = {name: root / name / ("alice/pegasus/run0001" if name == "nested" else "") for name in ORDERS}
        followed = {name: (run / "monitord.done").exists for name, run in runs.items()}
        try:
            wait_for(lambda: all(done() for done in followed.values()), "every workflow to be followed", 60)
        except AssertionError:
            missed = [name for name, done in followed.items() if not done()]
            raise AssertionError(f"never followed: {missed}") from None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    for name, run in runs.items():
        assert sorted(event_ids(run / EVENTS)) == sorted(event_ids(tmp_path / "ref" / name / EVENTS)), name
        # said at the default level, without -v
        assert f"following {run.resolve()}" in err, err
        assert f"finished following {run.resolve()}" in err, err


def test_serve_announces_the_resume_of_a_workflow(tmp_path: Path) -> None:
    """A serve restarted while a workflow runs says, without -v, where it resumes that workflow."""
    root = tmp_path / "root"
    submit = generate(root / "wf", jobs=4, seed=5)
    dagman_out = next(submit.glob("*.dag.dagman.out"))
    text = dagman_out.read_text()
    lines = text.splitlines(keepends=True)
    dagman_out.write_text("".join(lines[: len(lines) // 2]))
    env = {**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-m", "streamer", "serve", "--watch", str(root), "--no-jobstate",
               "--workflow-dest", "file://{submit_dir}/" + EVENTS]
    state = submit / "streamer.state.json"
    errors = []
    for step in ("first", "again"):
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_serving(tmp_path / "state")
            if step == "first":
                wait_for(lambda: state.exists() and '"workflows"' in state.read_text(), "a checkpoint", 60)
            else:
                with dagman_out.open("a") as handle:  # DAGMan goes on (it appends)
                    handle.write("".join(lines[len(lines) // 2:]))
                wait_for((submit / "monitord.done").exists, "the workflow to finish", 60)
        finally:
            proc.send_signal(signal.SIGTERM)
            errors.append(proc.communicate(timeout=60)[1])
    assert f"{submit.resolve()}: resuming {dagman_out.resolve()} from line " in errors[1], errors[1]
    assert "resuming" not in errors[0]
