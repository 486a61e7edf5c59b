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


def _workflow_at_minus_eight(tmp_path: Path) -> Path:
    """A small synthetic workflow whose braindump says it was planned at -08:00."""
    import re

    from streamer.synth import generate

    submit = generate(tmp_path / "gen" / "wf", jobs=3, scenario="retry", seed=4)
    braindump = submit / "braindump.yml"
    braindump.write_text(re.sub(r'timestamp: "(\d{8}T\d{6})[+-]\d{4}"', r'timestamp: "\1-0800"',
                                braindump.read_text()))
    assert '-0800"' in braindump.read_text()
    return submit


def _ids(path: Path) -> list[str]:
    import json

    return sorted(json.loads(line)["event_id"] for line in path.read_text().splitlines())


def test_replay_follow_serve_and_monitord_read_dagman_times_by_one_rule(tmp_path: Path, monkeypatch) -> None:
    """The machine runs at +09:00, braindump.yml records -08:00: every command that reads DAGMan's zone-less
    times reads them in the recorded offset, so one workflow gets the same event ids from each (serve and the
    monitord drop-in read them in the machine's zone before)."""
    import asyncio
    import os
    import subprocess
    import sys

    from streamer.serve.config import ServeConfig
    from streamer.serve.supervisor import Supervisor

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        original = _workflow_at_minus_eight(tmp_path)
        copies = {}
        for name in ("replay", "follow", "serve", "monitord"):
            copies[name] = tmp_path / name / "wf"
            shutil.copytree(original, copies[name], symlinks=True)
        outputs = {name: tmp_path / f"{name}.jsonl" for name in copies}
        for name in ("replay", "follow"):
            assert main([name, str(copies[name]), "-q", "--dest", f"file://{outputs[name]}", "--no-jobstate",
                         "--state", str(tmp_path / f"{name}.state")]) == 0

        async def serve() -> None:
            supervisor = Supervisor(ServeConfig(roots=[tmp_path / "serve"], state_dir=tmp_path / "serve-state",
                                                workflow_dest=[f"file://{outputs['serve']}"], jobstate=False))
            task = asyncio.create_task(supervisor.run())
            deadline = time.monotonic() + 60
            while not (copies["serve"] / "monitord.done").exists():
                assert time.monotonic() < deadline and not task.done(), "serve did not finish the workflow"
                await asyncio.sleep(0.05)
            supervisor.stop()
            assert await asyncio.wait_for(task, 30) == 0

        asyncio.run(serve())
        dagman_out = next(copies["monitord"].glob("*.dag.dagman.out")).name
        done = subprocess.run([sys.executable, "-m", "streamer", "monitord", "-r", "--dest",
                               f"file://{outputs['monitord']}?encoding=json", dagman_out],
                              cwd=copies["monitord"], env={**os.environ, "TZ": "Asia/Tokyo", "HOME": str(tmp_path)},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    finally:
        monkeypatch.undo()
        time.tzset()
    reference = _ids(outputs["replay"])
    assert len(reference) > 30
    for name in ("follow", "serve", "monitord"):
        assert _ids(outputs[name]) == reference, name


def test_the_config_key_and_the_monitord_property_override_the_recorded_offset(tmp_path: Path, utc_machine) -> None:
    """`timezone` in streamer.toml (replay, follow, serve) and `pegasus.monitord.timezone` (the monitord
    drop-in) read DAGMan's times as --timezone does."""
    import os
    import subprocess
    import sys

    submit = _workflow_at_minus_eight(tmp_path)
    out = {name: tmp_path / f"{name}.jsonl" for name in ("flag", "config", "recorded", "monitord")}
    common = ["-q", "--no-jobstate"]
    assert main(["replay", str(submit), "--timezone", "Asia/Tokyo", "--dest", str(out["flag"]), *common,
                 "--state", str(tmp_path / "s1")]) == 0
    config = tmp_path / "streamer.toml"
    config.write_text(f'timezone = "Asia/Tokyo"\n[[endpoint]]\nurl = "file://{out["config"]}"\n')
    assert main(["replay", str(submit), "--config", str(config), *common, "--state", str(tmp_path / "s2")]) == 0
    assert main(["replay", str(submit), "--dest", str(out["recorded"]), *common,
                 "--state", str(tmp_path / "s3")]) == 0
    (tmp_path / "tokyo.properties").write_text("pegasus.monitord.timezone = Asia/Tokyo\n")
    done = subprocess.run([sys.executable, "-m", "streamer", "monitord", "-r", "--conf",
                           str(tmp_path / "tokyo.properties"), "--dest", f"file://{out['monitord']}?encoding=json",
                           next(submit.glob("*.dagman.out")).name],
                          cwd=submit, env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert _ids(out["config"]) == _ids(out["flag"]) == _ids(out["monitord"])
    assert _ids(out["recorded"]) != _ids(out["flag"])
