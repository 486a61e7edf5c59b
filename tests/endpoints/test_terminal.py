"""The terminal endpoint's pretty line: coloured by outcome, compact by default, everything with -v."""

from __future__ import annotations

import io

from streamer.endpoints.terminal import TerminalEndpoint, pretty_line
from streamer.events import bp
from streamer.util.urls import EndpointURL

RED, GREEN, YELLOW = "\x1b[1;31m", "\x1b[32m", "\x1b[1;33m"
WF = "xwf.id=f84f05fc-a8d0-42b5-bac5-52d6f41a77e3"
OK_INV = (f"ts=2023-03-04T07:09:55.000000Z event=stampede.inv.end level=Error {WF} job.id=ls_ID0000001 "
          "job_inst.id=1 inv.id=1 transformation=ls start_time=1677913793 dur=2.22 exitcode=0 "
          "executable=/usr/bin/ls argv=\"-l /tmp\"")
BAD_INV = OK_INV.replace("exitcode=0", "exitcode=512").replace("level=Error", "level=Info")
MAIN_END = (f"ts=2023-03-03T23:11:04.000000Z event=stampede.job_inst.main.end level=Error {WF} "
            "job.id=ls_ID0000001 job_inst.id=2 js.id=4 site=condorpool user=mzalam local.dur=1 exitcode=512 "
            "sched.id=9.0 status=-1 work_dir=/home/u/condor/execute/dir_148321 "
            "stdout.file=00/00/ls_ID0000001.out.000 stderr.file=00/00/ls_ID0000001.err.000 "
            "stdout.text=\"#@ 1 stderr%0A /bin/ls: invalid option -- %27z%27%0A\" "
            "stderr.text=\"2023-03-03 23:10:59: PegasusLite: version 5.0.5%0A%0Atar: write error%0APegasusLite: exitcode 2%0A\" "
            "reason=None")
HELD = f"ts=2023-03-03T23:11:04.000000Z event=stampede.job_inst.held.start level=Info {WF} job.id=a job_inst.id=1 js.id=3"


def test_colour_follows_the_outcome_not_monitords_level() -> None:
    ok = pretty_line(bp.parse_line(OK_INV), colour=True)
    assert RED not in ok and f"{GREEN}stampede.inv.end" in ok  # exitcode 0 is a success, level=Error or not
    bad = pretty_line(bp.parse_line(BAD_INV), colour=True)
    assert f"{RED}stampede.inv.end" in bad
    assert f"{YELLOW}stampede.job_inst.held.start" in pretty_line(bp.parse_line(HELD), colour=True)


def test_compact_line_by_default_and_every_field_with_verbose(in_utc: None) -> None:
    event = bp.parse_line(MAIN_END)
    line = pretty_line(event, colour=False)
    assert line == ("2023-03-03 23:11:04 UTC f84f05fc stampede.job_inst.main.end        ls_ID0000001#2 site=condorpool "
                    "user=mzalam local.dur=1 exitcode=512 sched.id=9.0 status=-1 stderr.text=\"tar: write error\"")
    stream = io.StringIO()
    full = TerminalEndpoint(EndpointURL.parse("term:?fields=all"), stream=stream).render(event)
    assert "work_dir=/home/u/condor/execute/dir_148321" in full and "stdout.file=00/00/ls_ID0000001.out.000" in full
    assert "%0A" not in full  # job output decoded, one line per line, indented under its event
    assert "stdout.text=\"#@ 1 stderr\n     /bin/ls: invalid option -- 'z'\" stderr.text=" in full
