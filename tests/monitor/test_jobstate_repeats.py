"""A jobstate.log whose lines repeat (issue 27, item 6).

A log of 10 million identical lines was taken as 20,000,002 events: every
copy of a SUBMIT line became a new submit.start/submit.end pair (a new
`js.id` each), so rows multiplied. An exact repeat of a line already read
(same time, node, state, condor id, job tag and sequence) gives no events now:
it is said (the first few by line, then a count) and counted in the summary.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from streamer.monitor.plain.dagmanlog import DagmanJobstate
from streamer.monitor.plain.jobstate import JobstateSource
from tests.support.dagjobstate import LINES, log_text, write_plain_dag
from tests.monitor.test_dagman_jobstate import _db_rows, _events

COPIES = 3_000


def repeated_log(directory: Path) -> tuple[Path, int]:
    """The generated plain DAG's log with every line written twice and one SUBMIT line COPIES times more
    (the DAGMAN_STARTED line is written twice in a row as well); (path, repeats written)."""
    path = write_plain_dag(directory)
    out: list[str] = []
    repeats = 0
    for line in log_text().splitlines(keepends=True):
        out += [line, line]
        repeats += 1
        if " A SUBMIT " in line:
            out += [line] * COPIES
            repeats += COPIES
    path.write_text("".join(out))
    return path, repeats


def replay_db(path: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamer", "replay", str(path), "--dest", f"sqlite:///{db}"],
                          capture_output=True, text=True, timeout=120)


def test_repeated_lines_do_not_multiply_rows(tmp_path: Path) -> None:
    clean = write_plain_dag(tmp_path / "clean")
    assert replay_db(clean, tmp_path / "clean.db").returncode == 0
    path, repeats = repeated_log(tmp_path / "repeated")
    run = replay_db(path, tmp_path / "repeated.db")
    assert run.returncode == 0, run.stderr[-2000:]
    got, expected = _db_rows(tmp_path / "repeated.db"), _db_rows(tmp_path / "clean.db")
    assert len(got.pop("workflow")) == len(expected.pop("workflow")) == 1  # its id comes from its directory
    assert got == expected
    named = [line for line in run.stderr.splitlines() if "exact repeat of an earlier line" in line]
    assert len(named) == 10 and named[0].endswith(f"{path}:2: exact repeat of an earlier line (same time, node, "
                                                  "state, condor id, sequence): ignored")
    assert f"{path}: {repeats - 10:,} more exact repeats of earlier lines ignored ({repeats:,} in all)" in run.stderr
    assert f"(repeated_line {repeats:,})" in run.stderr


def test_what_a_repeat_is(tmp_path: Path) -> None:
    """The same line again is a repeat; a line that differs in time, state, condor id or sequence is not."""
    from streamer.monitor.plain.dagmanlog import RepeatedLine

    converter = DagmanJobstate(tmp_path / "jobstate.log")
    submit = "1700000001 A SUBMIT 101.0 local - 1"
    assert [e.name for e in converter.feed(submit)][-2:] == ["stampede.job_inst.submit.start",
                                                              "stampede.job_inst.submit.end"]
    for again in (submit, "1700000001  A  SUBMIT  101.0  local  -  1  "):
        try:
            converter.feed(again)
        except RepeatedLine:
            continue
        raise AssertionError(f"not taken as a repeat: {again!r}")
    for different in ("1700000002 A SUBMIT 101.0 local - 1", "1700000001 A SUBMIT 102.0 local - 1",
                      "1700000001 A EXECUTE 101.0 local - 1", "1700000001 A SUBMIT 101.0 local - 2"):
        assert converter.feed(different), different
    # the end of an instance is remembered: its lines again are repeats, a new instance is not
    converter.feed("1700000009 A POST_SCRIPT_SUCCESS - local - 2")
    try:
        converter.feed("1700000009 A POST_SCRIPT_SUCCESS - local - 2")
        raise AssertionError("a repeated last line of an ended instance was taken")
    except RepeatedLine:
        pass
    assert converter.feed("1700000010 A SUBMIT 103.0 local - 3")
    # and survives a checkpoint
    restored = DagmanJobstate(tmp_path / "jobstate.log")
    restored.restore(converter.to_state())
    try:
        restored.feed("1700000010 A SUBMIT 103.0 local - 3")
        raise AssertionError("a repeat after a restore was taken")
    except RepeatedLine:
        pass


def test_a_source_counts_repeats_in_its_batches(tmp_path: Path) -> None:
    path, repeats = repeated_log(tmp_path)
    messages: list[str] = []
    source = JobstateSource(path, report=messages.append)

    async def dropped() -> int:
        count = 0
        async for batch in source.batches():
            count += batch.dropped.get("repeated_line", 0)
        return count

    assert asyncio.run(dropped()) == repeats == source.repeats
    again = JobstateSource(write_plain_dag(tmp_path / "clean"))
    assert len(asyncio.run(_events(JobstateSource(path)))) == len(asyncio.run(_events(again)))
    assert len(LINES) > 10
