"""Replaying an archived (read-only) submit dir: when nothing has to be written there, nothing is; when something
would be, the run stops at once naming the read-only path and what to give instead.

The directory is really read-only, for root too (the CI runs as root, which ignores permission bits): a
read-only bind mount of it (`mount --bind`, then `mount -o remount,ro,bind`), unmounted afterwards. Without
root, its permission bits do. Where neither works the test fails under CI=true (skips elsewhere)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import unavailable
from streamer.cli.main import main
from streamer.synth import generate


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in directory.rglob("*") if p.is_file()}


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """`directory` read-only for this process, root or not."""
    if os.geteuid() != 0:
        os.chmod(directory, 0o555)
        try:
            yield
        finally:
            os.chmod(directory, 0o755)
        return
    for argv in (["mount", "--bind", str(directory), str(directory)],
                 ["mount", "-o", "remount,ro,bind", str(directory)]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            if argv[1] != "--bind":
                subprocess.run(["umount", str(directory)], capture_output=True)
            unavailable(f"running as root, and a read-only bind mount is not permitted ({' '.join(argv)}: "
                        f"{done.stderr.strip()}): nothing here can make {directory} read-only")
    try:
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True)


@pytest.fixture
def archive(tmp_path: Path, monkeypatch) -> Iterator[tuple[Path, Path]]:
    """(a read-only submit dir, the user's state dir)."""
    run = generate(tmp_path / "archive" / "run0001", jobs=3, scenario="success", seed=0)
    state_home = tmp_path / "state"
    monkeypatch.setenv("STREAMER_STATE_DIR", str(state_home))
    with read_only(run):
        with pytest.raises(OSError):  # really read-only: the test proves something, as root too
            (run / "probe").write_text("x")
        yield run, state_home


def test_replay_writes_nothing_into_the_submit_dir_when_nothing_is_needed_there(archive, tmp_path: Path) -> None:
    run, state_home = archive
    before = snapshot(run)
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


def test_a_replay_that_would_write_into_a_read_only_submit_dir_stops_naming_it(archive, tmp_path: Path,
                                                                                capsys) -> None:
    run, state_home = archive
    before = snapshot(run)
    advice = (" there: replay an archived submit dir with --no-jobstate and --dest URL (its resume state then goes "
              f"to {state_home / 'replay'}, or --state FILE)")
    out = tmp_path / "events.jsonl"
    capsys.readouterr()
    assert main(["replay", str(run), "--dest", str(out), "-q"]) == 2  # jobstate.log by default
    err = capsys.readouterr().err
    assert (f"streamer: error: {run} is read-only, and this run would write jobstate.log, monitord.started/done, "
            f"streamer.state.json{advice}") in err, err
    assert main(["replay", str(run), "--no-jobstate", "-q"]) == 2  # monitord's default database
    err = capsys.readouterr().err
    assert (f"streamer: error: {run} is read-only, and this run would write synth-0.stampede.db, "
            f"monitord.started/done, streamer.state.json{advice}") in err, err
    assert main(["replay", str(run), "--no-jobstate", "--dest", str(out), "-q", "--state", str(run / "x.state")]) == 2
    err = capsys.readouterr().err
    assert f"streamer: error: --state {run}/x.state: {run} is read-only; give a state file in a writable directory" \
        in err, err
    assert not out.exists() and snapshot(run) == before  # stopped before reading anything
