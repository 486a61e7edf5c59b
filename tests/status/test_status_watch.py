"""`streamer status --watch`: the live view on a real terminal (tmux), and plain lines elsewhere.

The terminal tests run their own tmux server (a socket in the test's temporary
directory, so nothing is shared with other tmux users) and read the screen with
`tmux capture-pane`. They wait for what the screen must show, never for a fixed time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from streamer.status.progress import DagmanProgress
from streamer.synth import generate, iter_dagman_chunks
from tests.support.screen import Terminal, terminal  # noqa: F401 - the fixture

DAG = "synth-0.dag"
ROW = re.compile(r"^\s*" + re.escape(DAG) + r"\s+\S+\s+" + r"(\d+)\s+" * 7 + r"([\d.]+)\s+(Running|Success|Failure)",
                 re.MULTILINE)


def shown(screen: str) -> tuple | None:
    """(unready, ready, pre, queued, post, succeeded, failed, %done, state) of the root row on the screen."""
    rows = ROW.findall(screen)
    if not rows:
        return None
    *numbers, pct, state = rows[-1]
    return (*map(int, numbers), float(pct), state)


def expected(log: Path) -> tuple:
    progress = DagmanProgress(str(log), "root", DAG)
    progress.poll()
    c = progress.counts
    return (c.unready, c.ready, c.pre, c.queued, c.post, c.succeeded, c.failed, c.percent_done, c.state)


def command(run_dir: Path, *extra: str) -> str:
    return f"{sys.executable} -m streamer status {run_dir} --watch --interval 0.2 {' '.join(extra)}; echo EXIT=$?"


def pegasus_status(run_dir: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "Pegasus.cli.pegasus-status", "--jsonrv", "--noqueue", str(run_dir)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out)


def test_watch_shows_counts_advancing_and_ends_on_the_final_numbers(tmp_path: Path, terminal: Terminal) -> None:
    run_dir = generate(tmp_path / "wf", jobs=6, scenario="success", seed=0)
    log = run_dir / f"{DAG}.dagman.out"
    chunks = list(iter_dagman_chunks(run_dir, pieces=10, seed=1))  # the log is now empty
    terminal.type(command(run_dir))
    terminal.wait_for(lambda s: shown(s) is not None, "the table")
    assert terminal.flag("alternate_on") == "1"  # drawn on the alternate screen: the terminal never scrolls
    seen = []
    for chunk in chunks[:-1]:
        with open(log, "a") as handle:
            handle.write(chunk)
        want = expected(log)
        screen = terminal.wait_for(lambda s: shown(s) == want, f"{want} after {log.stat().st_size} bytes")
        assert "Ctrl-C to exit" in screen and screen.count(DAG) == 1  # redrawn in place, not appended
        seen.append(want[5])
    with open(log, "a") as handle:
        handle.write(chunks[-1])
    final = terminal.wait_for(lambda s: re.search(r"^EXIT=\d", s, re.MULTILINE) is not None, "the end")
    assert "\nEXIT=0" in final
    assert seen == sorted(seen) and len(set(seen)) >= 3  # SUCCESS advanced piece by piece
    theirs = pegasus_status(run_dir)["dags"]["root"]
    assert shown(final) == (theirs["unready"], theirs["ready"], theirs["pre"], theirs["queued"], theirs["post"],
                            theirs["succeeded"], theirs["failed"], theirs["percent_done"], "Success")
    assert theirs["succeeded"] == theirs["total"] == 11
    assert terminal.flag("alternate_on") == "0" and terminal.flag("cursor_flag") == "1"


def test_ctrl_c_restores_the_terminal(tmp_path: Path, terminal: Terminal) -> None:
    run_dir = generate(tmp_path / "wf", jobs=4, scenario="held", seed=0)
    log = run_dir / f"{DAG}.dagman.out"
    lines = log.read_text().splitlines(keepends=True)
    held_at = next(i for i, line in enumerate(lines) if "Hold reason:" in line)
    log.write_text("".join(lines[:held_at + 1]))  # DAGMan is still running: the job is held
    terminal.type(command(run_dir, "--long"))
    screen = terminal.wait_for(lambda s: "Held jobs" in s and shown(s) is not None, "the held job")
    assert "Transfer output files failure" in screen  # its hold reason
    assert terminal.flag("alternate_on") == "1" and terminal.flag("cursor_flag") == "0"
    before = shown(screen)
    terminal.tmux("send-keys", "-t", "status", "C-c")
    after = terminal.wait_for(lambda s: re.search(r"^EXIT=\d", s, re.MULTILINE) is not None, "the command's exit")
    assert "EXIT=0" in after and "Traceback" not in after
    assert terminal.flag("alternate_on") == "0" and terminal.flag("cursor_flag") == "1"
    assert shown(after) == before  # the last view stays on the normal screen
    terminal.type("echo typed-after-exit")
    terminal.wait_for(lambda s: "\ntyped-after-exit" in s, "the shell echoing again")


def test_watch_without_a_terminal_prints_lines(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=4, scenario="retry", seed=0)
    log = run_dir / f"{DAG}.dagman.out"
    chunks = list(iter_dagman_chunks(run_dir, pieces=6, seed=2))
    proc = subprocess.Popen([sys.executable, "-m", "streamer", "status", str(run_dir), "--watch", "--interval", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for chunk in chunks:
            with open(log, "a") as handle:
                handle.write(chunk)
            time.sleep(0.3)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "\x1b" not in out  # no terminal control sequences in a pipe
    lines = [line for line in out.splitlines() if " success=" in line]
    assert lines, out
    done = [int(re.search(r" success=(\d+)", line).group(1)) for line in lines]
    assert done == sorted(done)
    assert len(set(lines)) == len(lines)  # a line only when the numbers changed
    final = pegasus_status(run_dir)["totals"]
    report = out.splitlines()
    row = report[report.index(next(line for line in report if line.startswith("UNREADY"))) + 1]
    assert row.split() == [str(final[k]) for k in ("unready", "ready", "pre", "queued", "post", "succeeded",
                                                   "failed", "percent_done")]


def test_watch_follows_a_growing_event_file(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=3, scenario="post_failure", seed=0)
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, symlinks=True)
    events = tmp_path / "events.jsonl"
    subprocess.run([sys.executable, "-m", "streamer", "replay", str(copy), "--dest", f"file://{events}",
                    "--no-jobstate", "-q"], check=True, timeout=120)
    lines = events.read_text().splitlines(keepends=True)
    events.write_text("".join(lines[: len(lines) // 2]))
    proc = subprocess.Popen([sys.executable, "-m", "streamer", "status", str(events), "--watch", "--interval", "0.1",
                             "--idle", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        with open(events, "a") as handle:
            handle.write("".join(lines[len(lines) // 2:]))
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    theirs = pegasus_status(run_dir)["totals"]
    table = out.rstrip().splitlines()
    row = table[table.index(next(l for l in table if l.startswith("UNREADY"))) + 1].split()
    assert row == [str(theirs[k]) for k in ("unready", "ready", "pre", "queued", "post", "succeeded", "failed",
                                            "percent_done")]
    assert "Last failures:" in out and "findrange_ID0000001 (POST script) exit=1" in out


def test_held_jobs_show_the_whole_job_name_and_cut_the_hold_reason(tmp_path: Path) -> None:
    """Issue 26 item 18: the held-jobs table cut the job name and gave the hold reason the whole width."""
    run_dir = generate(tmp_path / "wf", jobs=4, scenario="held", seed=0)
    log = run_dir / f"{DAG}.dagman.out"
    lines = log.read_text().splitlines(keepends=True)
    held_at = next(i for i, line in enumerate(lines) if "Hold reason:" in line)
    log.write_text("".join(lines[:held_at + 1]))  # DAGMan is still running: the job is held
    term = Terminal(tmp_path, width=120)
    try:
        term.type(command(run_dir))
        screen = term.wait_for(lambda s: "Held jobs" in s and shown(s) is not None, "the held job")
    finally:
        term.close()
    rows = screen[screen.index("Held jobs"):].splitlines()[2:]
    row = next(line for line in rows if "synth" in line)
    assert re.search(r"^\s*synth\s+\w+_ID\d{7}\s+Transfer", row), screen  # the workflow and the whole job name
    assert row.rstrip().endswith("…") and "Transfer output files failure" in row, screen  # the reason, cut
    assert len(row.rstrip()) <= 120
