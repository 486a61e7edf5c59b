"""`streamer follow` on a terminal (tmux): the progress line while a workflow grows, and the end summary.

As in tests/status/test_status_watch.py, the test waits for what the screen must show, never for a fixed time.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from streamer.synth import generate, iter_dagman_chunks
from tests.support.screen import Terminal, terminal  # noqa: F401 - the tmux fixture

LINE = re.compile(r"^synth: (\d+)/(\d+) jobs · (\d+) running · (\d+) held · (\d+) failed · \d+:\d\d elapsed",
                  re.MULTILINE)

ENDED = re.compile(r"^EXIT=\d", re.MULTILINE)


def progress(screen: str) -> tuple[int, ...] | None:
    found = LINE.findall(screen)
    return tuple(map(int, found[-1])) if found else None


def test_follow_shows_the_progress_line_and_ends_with_the_summary(tmp_path: Path, terminal: Terminal) -> None:
    run_dir = generate(tmp_path / "wf", jobs=6, scenario="held", seed=0)
    log = run_dir / "synth-0.dag.dagman.out"
    chunks = list(iter_dagman_chunks(run_dir, pieces=8, seed=1))  # the log is now empty
    (run_dir / "00" / "00" / "analyze_ID0000005.out.000").unlink()  # a warning mid-run, while the line shows
    out = tmp_path / "events.jsonl"
    terminal.type(f"{sys.executable} -m streamer follow {run_dir} --dest {out} --no-jobstate; echo EXIT=$?")
    terminal.wait_for(lambda s: "waiting for DAGMan to start" in s, "the waiting state")
    seen = []
    for chunk in chunks[:-1]:
        with open(log, "a") as handle:
            handle.write(chunk)
        lines = out.read_text().count("\n") if out.exists() else 0
        # the piece's events delivered (or none in it), then the line as it stands
        terminal.wait_for(lambda s: (out.exists() and out.read_text().count("\n") > lines) or ENDED.search(s)
                          is not None or progress(s) is not None and (not seen or progress(s) != seen[-1]),
                          f"progress after {log.stat().st_size} bytes", timeout=30)
        screen = terminal.wait_for(lambda s: progress(s) is not None or ENDED.search(s) is not None, "the line")
        if progress(screen) is not None:
            seen.append(progress(screen))
            assert len(LINE.findall(screen)) == 1  # one line, redrawn in place
    with open(log, "a") as handle:
        handle.write(chunks[-1])
    terminal.wait_for(lambda s: ENDED.search(s) is not None, "the end")
    final = terminal.screen(joined=True)  # lines the terminal wrapped (a long path) as the one line printed
    assert "\nEXIT=0" in final
    done = [s[0] for s in seen]
    assert done == sorted(done) and len(set(done)) >= 2 and all(s[1] == 11 for s in seen), seen
    assert "workflow synth: Success · 11/11 jobs succeeded · 0 failed" in final
    assert "synth-0.stampede.db is not written" in final  # --dest given: so no pegasus-statistics suggested
    assert "statistics:" not in final  # (issue 26 item 11)
    assert progress(final) is None and "waiting for DAGMan" not in final  # the line is gone at the end
    warnings = [line for line in final.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and warnings[0].startswith("streamer: WARNING: cannot read kickstart output "), warnings
    assert "analyze_ID0000005.out.000" in warnings[0] and "jobs ·" not in warnings[0]  # whole, never over the line



def test_quiet_replay_feeds_no_status_view(tmp_path: Path, monkeypatch) -> None:
    """-q shows no progress line and no summary: the status view is not fed (a few % of a replay's CPU)."""
    from streamer.cli.main import main
    from streamer.events.tally.tracker import StatusTracker

    fed: list[int] = []
    monkeypatch.setattr(StatusTracker, "feed", lambda self, events: fed.append(len(list(events))))
    monkeypatch.setenv("STREAMER_STATE_DIR", str(tmp_path / "state"))
    quiet, shown = tmp_path / "quiet.jsonl", tmp_path / "shown.jsonl"
    assert main(["replay", str(generate(tmp_path / "a", jobs=3, seed=0)), "--no-jobstate", "--dest", str(quiet),
                 "-q"]) == 0
    assert quiet.read_text().count("\n") > 50 and fed == []
    assert main(["replay", str(generate(tmp_path / "b", jobs=3, seed=0)), "--no-jobstate", "--dest", str(shown)]) == 0
    assert sum(fed) == shown.read_text().count("\n") == quiet.read_text().count("\n")
