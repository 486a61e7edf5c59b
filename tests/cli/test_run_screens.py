"""What a person reads at the end of a run and while it goes (issue 26 items 11 and 14): no line that another
contradicts, no warning written over the progress line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from streamer.synth import generate
from tests.support.screen import Terminal, terminal  # noqa: F401 - the fixture


def _replay(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamer", "replay", str(run), *args],
                          capture_output=True, text=True, timeout=120)


def test_no_pegasus_tool_is_suggested_for_a_stampede_db_that_is_not_written(tmp_path: Path) -> None:
    """The note said the Stampede DB is not written; the summary then suggested `pegasus-statistics DIR`."""
    for scenario, tool in (("success", "pegasus-statistics"), ("post_failure", "pegasus-analyzer")):
        run = generate(tmp_path / scenario, jobs=3, scenario=scenario, seed=0)
        done = _replay(run, "--dest", str(tmp_path / f"{scenario}.jsonl"))
        assert done.returncode == 0, done.stderr
        assert "synth-0.stampede.db is not written" in done.stderr
        assert tool not in done.stderr.split("to keep monitord's database", 1)[1], done.stderr
        assert re.search(r"^workflow synth: (Success|Failure)", done.stderr, re.MULTILINE)
        kept = _replay(run, "--dest", str(tmp_path / f"{scenario}2.jsonl"), "--dest",
                       f"sqlite:///{run}/synth-0.stampede.db")
        assert kept.returncode == 0, kept.stderr
        assert "is not written" not in kept.stderr and f"{tool}" in kept.stderr  # the database is there: use it


def test_load_writes_its_warnings_above_the_progress_line_never_onto_it(tmp_path: Path, terminal: Terminal) -> None:
    """Issue 26 item 14: `streamer: in.jsonl:N: ...` was printed onto the end of `12,000 events 4,000 events/s`."""
    run = generate(tmp_path / "wf", jobs=3, scenario="success", seed=0)
    events = tmp_path / "events.jsonl"
    subprocess.run([sys.executable, "-m", "streamer", "replay", str(run), "--dest", str(events), "-q"], check=True,
                   timeout=120)
    lines = events.read_text().splitlines()
    body = "\n".join(lines * (3_000 // len(lines))) + "\n"  # several reads: the line is drawn before the bad one
    source = tmp_path / "in.jsonl"
    source.write_text(body + "this is not json\n" + body + "[1, 2]\n" + body)
    out = tmp_path / "out.jsonl"
    terminal.type(f"cd {tmp_path} && {sys.executable} -m streamer load in.jsonl --dest {out}; echo EXIT=$?")
    screen = terminal.wait_for(lambda s: re.search(r"^EXIT=\d", s, re.MULTILINE) is not None, "the end",
                               timeout=120)
    assert "EXIT=0" in screen
    warnings = [line for line in screen.splitlines() if "not a JSON object" in line]
    assert [line.split(": not a JSON")[0] for line in warnings] == [
        f"streamer: in.jsonl:{len(body.splitlines()) + 1}", f"streamer: in.jsonl:{2 * len(body.splitlines()) + 2}"]
    assert not any("events/s now" in line for line in screen.splitlines()), screen  # nothing left of the line
    assert "2 malformed line(s) skipped" in screen
