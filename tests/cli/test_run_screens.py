"""What a person reads at the end of a run and while it goes (issue 26 items 11 and 14): no line that another
contradicts, no warning written over the progress line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from streamer.synth import generate
from tests.screen import Terminal, terminal  # noqa: F401 - the fixture


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
