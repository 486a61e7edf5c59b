"""--timezone: IANA names and fixed offsets, one-line refusals, and by default the zone the workflow recorded."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from streamer.cli.main import main
from streamer.events import bp




@pytest.fixture
def utc_machine(monkeypatch):
    """The replaying machine's own zone is UTC (the workflow ran at -08:00)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def hierarchical(corpus: Path, tmp_path: Path) -> Path:
    target = tmp_path / "hierarchical_wf_success"
    shutil.copytree(corpus / "pegasus" / "hierarchical_wf_success", target, symlinks=True)
    for pattern in ("monitord.*", "jobstate.log", "*.stampede.db", "streamer.state.json"):
        for path in target.rglob(pattern):
            path.unlink()
    return target


def first_ts(path: Path, name: str) -> float:
    for line in path.read_text().splitlines():
        event = bp.parse_line(line)
        if event.name == name:
            return event.fields["ts"]
    raise AssertionError(f"no {name}")


def test_timezone_names_offsets_refusals_and_the_recorded_default(corpus: Path, tmp_path: Path, capsys,
                                                                   utc_machine) -> None:
    run = hierarchical(corpus, tmp_path)
    out = tmp_path / "a.bp"
    assert main(["replay", str(run), "--timezone", "PST", "--dest", str(out), "--no-jobstate"]) == 2
    err = capsys.readouterr().err
    assert err == ("streamer: error: unknown time zone 'PST': give an IANA name (America/Los_Angeles), "
                   "UTC, or an offset (-08:00)\n")
    # default: the offset braindump.yml records (-0800), whatever the replaying machine's zone
    assert main(["replay", str(run), "--dest", str(out), "--no-jobstate", "--state", str(tmp_path / "s1")]) == 0
    err = capsys.readouterr().err
    assert "streamer: DAGMan times read in UTC-08:00, the offset braindump.yml records; --timezone to change" in err
    skew = first_ts(out, "stampede.inv.start") - first_ts(out, "stampede.xwf.start")
    assert 0 <= skew < 600, skew  # DAGMan's times and kickstart's agree (8 hours apart when read in UTC)
    default = out.read_text()
    for zone in ("-08:00", "America/Los_Angeles"):
        other = tmp_path / f"{zone.replace('/', '_')}.bp"
        assert main(["replay", str(run), "--timezone", zone, "--dest", str(other), "--no-jobstate", "-q",
                     "--state", str(tmp_path / f"s-{zone.replace('/', '_')}")]) == 0
        assert other.read_text() == default
