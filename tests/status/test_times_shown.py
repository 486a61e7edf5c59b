"""Times on screen (issue 26 item 13): in the local zone (TZ), with the zone said, the same in `tail`,
`status DIR --long` and `status` of the run's events."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from streamer.synth import generate


def _run(*args: str, tz: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "streamer", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TZ": tz})
    assert done.returncode == 0, done.stderr
    return done


def test_tail_and_status_show_one_failure_at_one_local_time_with_its_zone(tmp_path: Path) -> None:
    run = generate(tmp_path / "wf", jobs=3, scenario="retry", seed=0)
    events = tmp_path / "events.jsonl"
    _run("replay", str(run), "--dest", str(events), "--dest", f"sqlite:///{run}/synth-0.stampede.db", "-q",
         tz="UTC")
    for tz, ended, shown in (("America/Los_Angeles", "2023-11-14 14:14:11 PST", "14:14:16 PST"),
                             ("UTC", "2023-11-14 22:14:11 UTC", "22:14:16 UTC"),
                             ("Asia/Kolkata", "2023-11-15 03:44:11 IST", "03:44:16 IST")):
        tail = _run("tail", str(events), "--from-start", "--no-follow", "--events", "stampede.job_inst.main.end",
                    "--color", "never", tz=tz).stdout
        failed = [line for line in tail.splitlines() if "exitcode=256" in line]  # the attempt that failed
        assert len(failed) == 1 and failed[0].startswith(f"{ended} "), tail
        for source in (str(run), str(events)):  # its POST script's end, 5 s later, is the failure's time
            long = _run("status", source, "--long", tz=tz).stdout
            (line,) = [line for line in long.splitlines() if re.search(r"findrange_ID0000001 exit=1 ", line)]
            assert line.startswith(f"{shown} synth findrange_ID0000001 exit=1 "), long
