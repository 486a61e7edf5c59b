"""Differential test: our replay vs the real pegasus-monitord (pegasus-wms, a test dependency) on
synthetic submit dirs covering retries, holds, evictions, PRE/POST/submit failures, rescue DAGs,
clustered jobs, Pegasus 4 XML kickstart records and sub-workflows.

Both run on identical copies with TZ=UTC; the BP events (ours through a BP round trip) must match
as a multiset and jobstate.log line for line (monitord's own start/finish lines aside).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.events import bp
from streamer.synth.generate import generate
from tests.conftest import unavailable
from tests.monitor.test_monitor_golden import _without_monitord_lines, match, replay

SCENARIOS = ("success", "retry", "held", "held_abort", "evicted", "pre_failure", "post_failure",
             "submit_failure", "rescue", "clustered", "xml_kickstart", "hierarchical")


@pytest.fixture(scope="module")
def monitord() -> list[str]:
    if importlib.util.find_spec("Pegasus") is None:
        unavailable("pegasus-wms (the reference monitord) is not installed")
    return [sys.executable, "-m", "Pegasus.cli.pegasus-monitord"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_same_events_as_pegasus_monitord(monitord: list[str], tmp_path: Path, scenario: str) -> None:
    reference_dir = Path(generate(tmp_path / "reference", jobs=6, scenario=scenario, seed=3))
    ours_dir = tmp_path / "ours"
    shutil.copytree(reference_dir, ours_dir, symlinks=True)
    dagman_out = next(reference_dir.glob("*.dagman.out")).name
    reference_bp = tmp_path / "reference.bp"
    run = subprocess.run(monitord + ["-r", "--dest", f"file://{reference_bp}", dagman_out], cwd=reference_dir,
                         env={**os.environ, "TZ": "UTC"}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    expected = [bp.parse_line(line) for line in reference_bp.read_text().splitlines() if line.strip()]
    ours = [bp.parse_line(bp.format_event(event)) for event in replay(ours_dir)]
    assert len(ours) == len(expected)
    report = match([(e.name, e.fields) for e in ours], [(e.name, e.fields) for e in expected])
    assert report == [], "\n".join(report[:40])
    assert _without_monitord_lines((ours_dir / "jobstate.log").read_text()) == \
        _without_monitord_lines((reference_dir / "jobstate.log").read_text())
