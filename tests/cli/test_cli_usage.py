"""What a new user meets first: per-command --help, inputs that are no event files, odd --dest forms."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from streamer.cli.main import main
from streamer.synth import generate




def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_help_per_command_lists_its_own_options_urls_examples_and_exit_codes(capsys) -> None:
    load = help_of("load", capsys)
    for option in ("buffer=", "batch=", "mode=", "fsync=", "encoding=", "drain_timeout=", "confirm_timeout=",
                   "spool_size=", "exchange_type=", "retry_for=", "fields=", "password_file="):
        assert option in load, option
    assert "exit codes:" in load and "streamer load run.bp" in load and "streamer replay /path" not in load
    tail = help_of("tail", capsys)
    assert "exit codes:" in tail and "streamer tail /tmp/all.jsonl" in tail
    for absent in ("--dest", "postgresql://", "fsync=", "streamer load "):  # tail takes no endpoint
        assert absent not in tail, absent
    replay = help_of("replay", capsys)
    assert "--timezone" in replay and "streamer replay /path/to/submit/dir" in replay and "-08:00" in replay
    assert "streamer tail " not in replay and "exit codes:" in replay


def _bp_lines(tmp_path: Path) -> Path:
    path = tmp_path / "ok.bp"
    path.write_text("".join(f"ts=2023-03-03T23:11:0{i}.000000Z event=stampede.xwf.meta level=Info "
                            f"xwf.id=f84f05fc-a8d0-42b5-bac5-52d6f41a77e3 key=k{i} value=v\n" for i in range(3)))
    return path


def test_load_refuses_files_that_are_no_event_files_with_a_hint(tmp_path: Path, capsys) -> None:
    run = generate(tmp_path / "wf", jobs=3, scenario="success", seed=0)
    out = tmp_path / "out.jsonl"
    dagman_out = next(run.glob("*.dagman.out"))
    assert main(["load", str(dagman_out), "--dest", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"streamer: error: {dagman_out}: not an event file" in err
    assert f"this looks like a DAGMan log: use streamer replay {run}" in err and err.count("\n") == 1
    dag = next(run.glob("*.dag"))
    assert main(["load", str(dag), "--dest", str(out)]) == 2
    assert "this looks like a DAG file: use streamer replay" in capsys.readouterr().err
    db = tmp_path / "x.stampede.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE workflow (wf_id INTEGER)")
    assert main(["load", str(db), "--dest", str(out)]) == 2
    assert "this is an SQLite database" in capsys.readouterr().err
    assert not out.exists()


def test_dest_dash_query_without_equals_and_a_file_endpoint_in_a_missing_directory(tmp_path: Path, capsys) -> None:
    events = _bp_lines(tmp_path)
    assert main(["load", str(events), "-q", "--dest", "-?events=stampede.xwf.meta&format=bp"]) == 0
    assert capsys.readouterr().out.count("event=stampede.xwf.meta") == 3
    missing = tmp_path / "nonexistent" / "dir"
    assert main(["load", str(events), "-q", "--dest", f"{missing}/out.jsonl"]) == 2
    err = capsys.readouterr().err
    assert f"directory {missing} does not exist" in err and "Traceback" not in err
    assert not missing.exists() and not missing.parent.exists()


def test_demo_warns_of_nothing_and_suggests_commands_that_run_here(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a fresh shell: the venv is not activated
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    err = capsys.readouterr().err
    assert "WARNING" not in err  # not even for the demo's own sub-workflow job (its .out is DAGMan's)
    script = Path(sys.executable).parent / "streamer"  # by its path (relative to here when under it)
    script = script.relative_to(Path.cwd()) if script.is_relative_to(Path.cwd()) else script
    assert f"  try: {script} tail {tmp_path / 'demo' / 'events.jsonl'} --from-start" in err
    assert f"       {sys.executable} -m Pegasus.cli.pegasus-statistics -s all {tmp_path / 'demo' / 'workflow'}" in err


def test_tail_refuses_files_that_are_no_event_files_with_a_hint(tmp_path: Path, capsys) -> None:
    """Issue 26 item 7: `tail` of a dagman.out or a Stampede DB gave one parse error per line and exit 0."""
    run = generate(tmp_path / "wf", jobs=3, scenario="success", seed=0)
    dagman_out = next(run.glob("*.dagman.out"))
    db = tmp_path / "x.stampede.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE workflow (wf_id INTEGER)")
    for extra in (["--from-start", "--no-follow"], ["--no-follow"], []):
        assert main(["tail", str(dagman_out), *extra]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == (f"streamer: error: {dagman_out}: not an event file (none of its first 5 lines is an event; "
                       f"line 1: expected key=value, found '11/14/23'); this looks like a DAGMan log: "
                       f"use streamer follow {run} --dest - (its events as they come) or streamer status {run} "
                       f"--watch\n")
        assert main(["tail", str(db), *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == (f"streamer: error: {db}: not an event file; this is an SQLite database "
                                     "(a Stampede DB?): read it with pegasus-statistics or pegasus-analyzer\n")
