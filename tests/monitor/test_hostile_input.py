"""Hostile and broken inputs never crash, stall or poison a run (issue 19).

Each case first reproduced the failure on the code before the fix: a SIGSEGV
from deep YAML, a replay that never ended on a 100 MB line, an endpoint killed
by an out-of-range timestamp, tracebacks where a message belongs.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.endpoints.files import FileEndpoint
from streamer.endpoints.terminal import TerminalEndpoint
from streamer.events import Event, bp
from streamer.events.bp import BPError, parse_line
from streamer.util.limits import iter_lines
from streamer.monitor import tracker
from streamer.monitor.parsers import braindump, kickstart, yamlguard
from streamer.synth.generate import generate
from streamer.util.urls import EndpointURL

MODES = {"compiled": {}, "pure": {"STREAMER_PURE_PYTHON": "1"}}


def replay(directory: Path, out: Path, *, env: dict[str, str] | None = None,
           timeout: float = 120, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`streamer replay DIR --dest OUT` in a child process (a crash must not take the test down)."""
    return subprocess.run(
        [sys.executable, "-m", "streamer", "replay", str(directory), "--dest", f"file://{out}", "--no-jobstate",
         "-q", *extra],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def names(path: Path) -> list[tuple[str, str | None]]:
    return [(e["event"], e.get("job_id")) for e in map(json.loads, path.read_text().splitlines())]


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("wf") / "run", jobs=4, scenario="success", seed=19)


def copy_of(workflow: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    tmp_path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(workflow), str(target)], check=True)
    return target


def a_kickstart_out(directory: Path) -> Path:
    return sorted((directory / "00" / "00").glob("findrange_*.out.000"))[0]


# ---------------------------------------------------------------- 1. deep nesting

DEEP = {
    "flow": "- invocation: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "block": "- invocation:\n    mainjob:\n      status:\n        - " + "- " * 60_000 + "x\n",
    "mapping": "- invocation: " + "{a: " * 50_000 + "1" + "}" * 50_000 + "\n",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", DEEP)
def test_deeply_nested_kickstart_record_is_reported_and_skipped(workflow: Path, tmp_path: Path,
                                                                mode: str, shape: str) -> None:
    directory = copy_of(workflow, tmp_path)
    record = a_kickstart_out(directory)
    record.write_text(DEEP[shape])
    plain = copy_of(workflow, tmp_path / "plain")
    a_kickstart_out(plain).write_text("- invocation: [\n  }}} not yaml\n")  # an ordinary unreadable record

    run = replay(directory, tmp_path / "deep.jsonl", env=MODES[mode])
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"{record}: unreadable YAML invocation record (record 1: YAML nested deeper than 100 levels)" \
        in run.stderr
    reference = replay(plain, tmp_path / "plain.jsonl", env=MODES[mode])
    assert reference.returncode == 0
    # the deep record costs exactly what any unreadable record costs: the same events
    assert names(tmp_path / "deep.jsonl") == names(tmp_path / "plain.jsonl")
    assert names(tmp_path / "deep.jsonl")[-1] == ("stampede.xwf.end", None)


def test_deep_multipart_record_and_braindump_are_refused_by_name(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    text = ("- invocation:\n    hostname: h\n" + kickstart.MULTIPART_MARKER + "\n- integrity:\n    x: "
            + "[" * 100_000 + "]" * 100_000 + "\n")
    with caplog.at_level(logging.WARNING):
        records = kickstart.parse(text, "job.out")
    assert "job.out: record 2: unreadable multipart record ignored (YAML nested deeper than 100 levels)" \
        in caplog.text
    assert [r.get("invocation") for r in records] == [True]  # the invocation before it is kept
    (tmp_path / "braindump.yml").write_text("wf_uuid: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(braindump.BraindumpError, match=r"braindump.yml:1: not readable YAML: .*deeper than 100"):
        braindump.load(tmp_path)


def test_subset_walks_bound_their_own_recursion() -> None:
    """The kickstart-subset loader steps aside past 200 levels instead of recursing on."""
    from streamer.monitor.parsers import yamlsub

    text = "".join("  " * i + f"a{i}:\n" for i in range(300)) + "  " * 300 + "x: 1\n"
    with pytest.raises(yamlsub.Unsupported, match="nesting too deep at line 201"):
        yamlsub.load(text)


def test_nesting_guard_counts_exactly_and_lets_ordinary_records_through(corpus: Path) -> None:
    assert yamlguard.depth("a: [[1], {b: [2]}]") == 4
    yamlguard.check("[" * 100 + "]" * 100)  # exactly the limit: taken
    with pytest.raises(yamlguard.TooDeep):
        yamlguard.check("[" * 101 + "]" * 101)
    # brackets and dashes inside text do not count as levels: a job's stderr full of them is fine
    yamlguard.check("- invocation:\n    stderr: |\n" + "      [[[[ - - - {{{{\n" * 200)
    outs = [p for p in corpus.rglob("*.out*") if p.is_file()]
    assert outs
    for path in outs:  # every real record passes the guard unchanged
        for kind, chunk in kickstart.split_records(path.read_text(errors="replace")):
            if kind in ("invocation", "multipart"):
                yamlguard.check(chunk)


# ---------------------------------------------------------------- 2. overlong lines

def test_100mb_dagman_line_is_skipped_with_its_line_number(workflow: Path, tmp_path: Path) -> None:
    directory = copy_of(workflow, tmp_path)
    dagman_out = directory / "synth-0.dag.dagman.out"
    lines = dagman_out.read_bytes().splitlines(keepends=True)
    cut = len(lines) // 2
    bad_time = b"11/15/23 99:99:99 Event: ULOG_EXECUTE for HTCondor Node nobody (1.0.0) {11/15/23 99:99:99}\n"
    dagman_out.write_bytes(b"".join(lines[:cut]) + b"x" * (100 << 20) + b"\n" + bad_time + b"".join(lines[cut:]))
    clean = replay(workflow, tmp_path / "clean.jsonl")
    run = replay(directory, tmp_path / "long.jsonl", timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"{dagman_out}:{cut + 1}: line longer than 16777216 bytes (104857601 bytes): skipped" in run.stderr
    # later lines keep their numbers; a time that is no time is one line of message, no traceback
    assert f"{dagman_out}:{cut + 2}: line ignored: not a valid time" in run.stderr
    assert "Traceback" not in run.stderr
    assert names(tmp_path / "long.jsonl") == names(tmp_path / "clean.jsonl") and clean.returncode == 0


def test_line_longer_than_a_read_but_under_the_limit_is_processed(workflow: Path, tmp_path: Path) -> None:
    directory = copy_of(workflow, tmp_path)
    dagman_out = directory / "synth-0.dag.dagman.out"
    lines = dagman_out.read_bytes().splitlines(keepends=True)
    # 2 MB of comment after a real line's text: the line is still read whole and means what it says
    index = next(i for i, line in enumerate(lines) if b"ULOG_EXECUTE" in line)
    lines[index] = lines[index].rstrip(b"\n") + b" " + b"y" * (2 << 20) + b"\n"
    dagman_out.write_bytes(b"".join(lines))
    run = replay(directory, tmp_path / "out.jsonl")
    assert run.returncode == 0 and "longer than" not in run.stderr
    assert names(tmp_path / "out.jsonl") == names(_replayed(workflow, tmp_path))


def _replayed(workflow: Path, tmp_path: Path) -> Path:
    out = tmp_path / "reference.jsonl"
    assert replay(workflow, out).returncode == 0
    return out


def test_following_a_long_line_written_in_pieces(workflow: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Live: the overlong line arrives over several polls; the lines after it are read on."""
    monkeypatch.setattr(tracker, "MAX_LINE", 4096)
    directory = copy_of(workflow, tmp_path)
    dagman_out = directory / "synth-0.dag.dagman.out"
    lines = dagman_out.read_bytes().splitlines(keepends=True)
    cut = 30
    dagman_out.write_bytes(b"".join(lines[:cut]) + b"z" * 3000)
    track = tracker.Tracker(str(dagman_out), tz="UTC", write_jobstate=False)
    for _ in range(5):
        track.step(max_bytes=1024)
    with dagman_out.open("ab") as handle:
        handle.write(b"z" * 3000)
    track.step(max_bytes=1024)
    with dagman_out.open("ab") as handle:
        handle.write(b"z" * 3000 + b"\n" + b"".join(lines[cut:]))
    for _ in range(200):
        track.step(max_bytes=1024)
    assert [w for w in track.warnings if "longer than" in w] == [
        f"{dagman_out}:{cut + 1}: line longer than 4096 bytes (9001 bytes): skipped"]
    engine = track.tracked[0].workflow
    assert engine is not None and engine.line_no == len(lines) + 1
    assert engine.last_wf_state == "end"


def test_line_reader_of_whole_files_skips_overlong_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "x.static.bp"
    path.write_bytes(b"one\n" + b"a" * 5000 + b"\nthree\r\n" + b"b" * 3_000_000 + b"\nfive")
    with caplog.at_level(logging.WARNING):
        got = list(iter_lines(path, max_line=4096))
    assert got == [(1, "one"), (3, "three\r"), (5, "five")]
    assert f"{path}:2: line longer than 4096 bytes: skipped" in caplog.text
    assert f"{path}:4: line longer than 4096 bytes: skipped" in caplog.text


# ---------------------------------------------------------------- 3. timestamps

@pytest.mark.parametrize("ts", ["1e300", "-99999999999", "253402300800", "nan", "inf", "10000-01-01T00:00:00Z"])
def test_out_of_range_timestamps_are_refused_on_input(ts: str) -> None:
    with pytest.raises(BPError, match="timestamp out of range|not a finite number|bad timestamp"):
        parse_line(f"ts={ts} event=stampede.xwf.start xwf.id=7a53210c-eb8a-4986-8c14-80e6e523598f restart_count=0")


def test_range_edges_are_taken() -> None:
    for ts, epoch in [("0", 0), ("253402300799.5", 253402300799.5), ("9999-12-31T23:59:59Z", 253402300799)]:
        line = f"ts={ts} event=stampede.xwf.start xwf.id=7a53210c-eb8a-4986-8c14-80e6e523598f restart_count=0"
        assert parse_line(line).fields["ts"] == epoch


def test_load_reports_bad_timestamps_by_line_and_delivers_the_rest(tmp_path: Path) -> None:
    good = "event=stampede.xwf.start xwf.id=7a53210c-eb8a-4986-8c14-80e6e523598f restart_count={}"
    source = tmp_path / "in.bp"
    source.write_text("\n".join([
        "ts=2023-03-04T06:23:33.000000Z " + good.format(0),
        "ts=1e300 " + good.format(1),
        "ts=-99999999999 " + good.format(2),
        '{"ts": 1e300, "event": "stampede.xwf.start", "xwf_id": "7a53210c-eb8a-4986-8c14-80e6e523598f", '
        '"restart_count": 3}',
        "ts=1677911013 " + good.format(4),
    ]) + "\n")
    bp_out, term = tmp_path / "out.bp", tmp_path / "term.txt"
    run = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest", f"file://{bp_out}",
                          "--dest", "term:?format=pretty"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    for line in (2, 3, 4):
        assert f"{source}:{line}: " in run.stderr and "timestamp out of range" in run.stderr
    assert [e.fields["restart_count"] for e in map(parse_line, bp_out.read_text().splitlines())] == [0, 4]
    assert run.stdout.count("xwf.start") == 2
    term.write_text(run.stdout)


def test_an_event_no_codec_can_write_is_skipped_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Events the engine builds are not typed from text: an endpoint still survives one it cannot encode."""
    uuid = "7a53210c-eb8a-4986-8c14-80e6e523598f"
    events = [Event("stampede.xwf.start", {"ts": ts, "xwf.id": uuid, "restart_count": n})
              for n, ts in enumerate([1677911013, 1e300, 1677911014])]
    path = tmp_path / "out.bp"
    stream = io.StringIO()

    async def run() -> None:
        for endpoint in (FileEndpoint(EndpointURL.parse(f"file://{path}")),
                         TerminalEndpoint(EndpointURL.parse("term:?format=bp"), stream=stream)):
            await endpoint.open()
            await endpoint.write(events)
            await endpoint.close()
            assert endpoint.unencodable == 1

    with caplog.at_level(logging.WARNING):
        asyncio.run(run())
    assert [e.fields["restart_count"] for e in map(parse_line, path.read_text().splitlines())] == [0, 2]
    assert [e.fields["restart_count"] for e in map(parse_line, stream.getvalue().splitlines())] == [0, 2]
    assert f"event stampede.xwf.start (xwf.id={uuid}) cannot be encoded, skipped" in caplog.text


# ---------------------------------------------------------------- 4. messages, not tracebacks; the child dies with its parent

def _live_copy(workflow: Path, tmp_path: Path) -> Path:
    """The workflow with DAGMan still running: its dagman.out stops half-way, so `follow` waits on."""
    directory = copy_of(workflow, tmp_path)
    dagman_out = directory / "synth-0.dag.dagman.out"
    lines = dagman_out.read_bytes().splitlines(keepends=True)
    dagman_out.write_bytes(b"".join(lines[: len(lines) // 2]))
    return directory


def _follow(directory: Path, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "streamer", "follow", str(directory), "--parser", "process", "--no-jobstate",
         "-q", "--dest", f"file://{tmp_path / 'live.jsonl'}", "--state", str(tmp_path / "state.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _worker_of(process: subprocess.Popen[str], timeout: float = 30) -> "psutil.Process":
    import time

    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = psutil.Process(process.pid).children()
        if children:
            return children[0]
        time.sleep(0.05)
    raise AssertionError("the monitor worker process never started")


PARENT = """
import asyncio, os, sys, time
from streamer.monitor.runner.process import ProcessRunner

async def main():
    runner = ProcessRunner(dagman_out=sys.argv[1], recursive=True, tz="UTC", write_jobstate=False, state=None,
                           read_size=1 << 18)
    await runner.open()
    print(runner.process.pid, flush=True)
    if os.fork() == 0:  # any forked helper holds the worker's pipes open: its stdin never closes
        time.sleep(120)
        os._exit(0)
    time.sleep(120)

asyncio.run(main())
"""


def test_worker_process_dies_with_a_sigkilled_parent(workflow: Path, tmp_path: Path) -> None:
    import psutil

    directory = _live_copy(workflow, tmp_path)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(directory / "synth-0.dag.dagman.out")],
                              stdout=subprocess.PIPE, text=True)
    helpers = []
    try:
        worker = psutil.Process(int(parent.stdout.readline()))
        helpers = [c for c in psutil.Process(parent.pid).children() if c.pid != worker.pid]
        parent.kill()
        parent.wait(10)
        gone, alive = psutil.wait_procs([worker], timeout=5)
        assert gone and not alive, "the worker outlived its SIGKILLed parent"
    finally:
        parent.kill()
        for helper in helpers:
            helper.kill()


def test_interrupting_twice_prints_no_traceback(workflow: Path, tmp_path: Path) -> None:
    import signal
    import time

    import psutil

    process = _follow(_live_copy(workflow, tmp_path), tmp_path)
    try:
        worker = _worker_of(process)
        deadline = time.monotonic() + 30
        while not (tmp_path / "live.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
        psutil.wait_procs([worker], timeout=5)
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
    finally:
        process.kill()


def test_worker_whose_parent_stopped_listening_exits_quietly(workflow: Path) -> None:
    """The parent left at a second Ctrl-C: the worker's reply finds a closed pipe (was a BrokenPipeError)."""
    import pickle

    from streamer.monitor.runner.process import CHILD

    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # the parent is gone: nobody reads the reply
    options = {"dagman_out": str(workflow / "synth-0.dag.dagman.out"), "recursive": True, "tz": "UTC",
               "write_jobstate": False, "state": None, "read_size": 1 << 18}
    data = pickle.dumps(("open", (options, logging.WARNING)))
    child.stdin.write(len(data).to_bytes(8, "little") + data)
    child.stdin.flush()
    err = child.stderr.read().decode()
    child.stdin.close()
    assert child.wait(30) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.postgres
def test_postgres_restarts_mid_load_are_one_line_each_not_tracebacks(tmp_path: Path) -> None:
    """asyncpg's pool logged CannotConnectNowError tracebacks while the server shut down and came back."""
    import sqlite3
    import time

    import psycopg2

    from tests.support.ownservers import own_postgres

    directory = generate(tmp_path / "big", jobs=1500, scenario="success", seed=7)
    with own_postgres() as cluster:
        load = subprocess.Popen([sys.executable, "-m", "streamer", "replay", str(directory), "--no-jobstate", "-q",
                                 "--dest", cluster.dsn], stderr=subprocess.PIPE, text=True)

        def rows() -> int:
            try:
                with psycopg2.connect(cluster.dsn) as conn, conn.cursor() as cur:
                    cur.execute("SELECT count(*) FROM job_instance")
                    return cur.fetchone()[0]
            except psycopg2.Error:
                return 0

        deadline = time.monotonic() + 120
        while rows() == 0 and time.monotonic() < deadline and load.poll() is None:
            time.sleep(0.1)
        assert load.poll() is None, "the load ended before the server was restarted"
        cluster.ctl("restart", "-m", "fast")
        cluster.ctl("stop", "-m", "fast")
        time.sleep(1)
        cluster.ctl("start")
        cluster.wait_ready()
        _out, err = load.communicate(timeout=300)
        assert load.returncode == 0, err[-3000:]
        assert "Traceback" not in err and "CannotConnectNowError" not in err, err[-3000:]
        reference = tmp_path / "clean.db"
        subprocess.run([sys.executable, "-m", "streamer", "replay", str(directory), "--no-jobstate", "-q",
                        "--dest", f"sqlite:///{reference}"], check=True, timeout=300)
        with sqlite3.connect(reference) as db:
            expected = db.execute("SELECT count(*) FROM job_instance").fetchone()[0]
        assert expected > 1500 and rows() == expected  # every job instance once, as a clean load gives


# ---------------------------------------------------------------- 5. nothing accepted without a word

UUID = "7a53210c-eb8a-4986-8c14-80e6e523598f"


def load(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamer", "load", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_an_id_is_kept_only_where_the_text_cannot_give_it_back(tmp_path: Path) -> None:
    """The monitor's composite event carries lists the schema does not type: read back from BP they are
    text, so its id cannot be recomputed from the line; a well-formed id is kept there, as written."""
    event = Event("stampede.job_inst.composite", {"ts": 1677911013, "xwf.id": UUID, "job.id": "j",
                                                  "job_inst.id": 1, "invocations": [{"exitcode": 0}]})
    line = bp.format_event(event)
    assert bp.parse_line(line).id == event.id
    with pytest.raises(BPError, match="is not an event id"):
        bp.parse_line(line.replace(event.id, "z" * 32))


def test_lines_that_say_one_thing_twice_or_an_unknown_level_are_reported(tmp_path: Path) -> None:
    source = tmp_path / "in.bp"
    good = f"ts=1677911013 event=stampede.xwf.start xwf.id={UUID} restart_count=0"
    source.write_text("\n".join([
        good,
        f"ts=1677911013 event=stampede.xwf.start xwf.id={UUID} restart_count=0 restart_count=1",
        f"ts=1677911013 event=stampede.xwf.start event=stampede.xwf.end xwf.id={UUID} restart_count=0",
        f"ts=1677911013 event=stampede.xwf.start level=Panic xwf.id={UUID} restart_count=0",
        good.replace("restart_count=0", "restart_count=5") + " event.id=not-a-hash",
        good.replace("restart_count=0", "restart_count=7") + " event.id=" + "0" * 32,  # well formed, not its own
        '{"ts": 1677911013, "event": "stampede.xwf.start", "xwf_id": "%s", "restart_count": 6, '
        '"event_id": "not-a-hash"}' % UUID,
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    run = load(str(source), "--dest", str(out))
    assert run.returncode == 0, run.stderr
    assert f"{source}:2: key 'restart_count' given twice" in run.stderr
    assert f"{source}:3: key 'event' given twice" in run.stderr
    assert f"{source}:4: field level: not a level of the schema (Info, Error): 'Panic'" in run.stderr
    assert f"{source}:5: event id 'not-a-hash' is not an event id (32 hex digits)" in run.stderr
    assert f"{source}:7: event id 'not-a-hash' is not an event id (32 hex digits)" in run.stderr
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["restart_count"] for e in written] == [0]
    assert f"{source}:6: event id '{'0' * 32}' is not this event's id" in run.stderr
    assert written[0]["event_id"] != "not-a-hash" and len(written[0]["event_id"]) == 32


def test_braindump_with_a_list_for_an_id_is_refused_by_line(tmp_path: Path, workflow: Path) -> None:
    directory = copy_of(workflow, tmp_path)
    text = (directory / "braindump.yml").read_text()
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.startswith("wf_uuid:"))
    lines[number - 1] = "wf_uuid: [1, 2]"
    (directory / "braindump.yml").write_text("\n".join(lines) + "\n")
    with pytest.raises(braindump.BraindumpError) as caught:
        braindump.load(directory)
    assert str(caught.value) == f"{directory / 'braindump.yml'}:{number}: wf_uuid: expected a single value, found a list"
    run = replay(directory, tmp_path / "out.jsonl")
    assert f"braindump.yml:{number}: wf_uuid: expected a single value, found a list" in run.stderr
    assert '"[1, 2]"' not in (tmp_path / "out.jsonl").read_text() if (tmp_path / "out.jsonl").exists() else True


def test_unreadable_inputs_are_named_for_what_they_are(tmp_path: Path) -> None:
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere.bp")
    os.mkfifo(tmp_path / "pipe")
    out = str(tmp_path / "out.jsonl")
    cases = {
        "loop-a": "symbolic link loop (too many levels of symbolic links)",
        "dangling": f"dangling symbolic link (to {tmp_path / 'nowhere.bp'})",
        "pipe": "is a FIFO (named pipe), not a regular file",  # opening it would block for ever: no writer
    }
    for name, message in cases.items():
        run = load(str(tmp_path / name), "--dest", out, timeout=20)
        assert run.returncode == 2 and f"streamer: error: {tmp_path / name}: {message}" in run.stderr, run.stderr
    tail = subprocess.run([sys.executable, "-m", "streamer", "tail", str(tmp_path / "pipe")], capture_output=True,
                          text=True, timeout=20)
    assert tail.returncode == 2 and "is a FIFO" in tail.stderr


# ---------------------------------------------------------------- 6. passwords off the command line

@pytest.mark.rabbitmq
def test_passwords_from_a_file_or_the_environment(amqp_url: str, tmp_path: Path, golden: Path) -> None:
    from tests.support.amqphelp import Capture, unique

    source = golden / "sample_wf_held.bp"
    expected = len([line for line in source.read_text().splitlines() if line.strip()])
    secret = tmp_path / "amqp.password"
    secret.write_text("guest\n")
    secret.chmod(0o600)
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n")
    host = amqp_url.split("@", 1)[1].rsplit("/", 1)[0]
    exchange_a, exchange_b = unique("streamer-pw"), unique("streamer-pw")

    async def run() -> tuple[int, int, subprocess.CompletedProcess[str]]:
        async with Capture(amqp_url, exchange_a) as a, Capture(amqp_url, exchange_b) as b:
            await a.start()
            await b.start()
            done = await asyncio.to_thread(subprocess.run, [
                sys.executable, "-m", "streamer", "load", str(source), "--events", "*",
                "--dest", f"amqp://guest@{host}/%2F/{exchange_a}?password_file={secret}",
                "--dest", f"amqp://guest@{host}/%2F/{exchange_b}?password_env=STREAMER_TEST_PW"],
                capture_output=True, text=True, timeout=60, env={**os.environ, "STREAMER_TEST_PW": "guest"})
            return len(await a.wait_for(expected)), len(await b.wait_for(expected)), done

    got_a, got_b, done = asyncio.run(run())
    assert done.returncode == 0, done.stderr
    assert (got_a, got_b) == (expected, expected)
    assert "guest:***@" in done.stderr and "guest:guest" not in done.stderr
    refused = load(str(source), "--dest", f"amqp://guest@{host}/%2F/{exchange_a}?password_file={wrong}&retry_for=1",
                   timeout=120)
    assert refused.returncode != 0 and "not-the-password" not in refused.stderr
    missing = load(str(source), "--dest", f"amqp://guest@{host}/%2F/x?password_env=STREAMER_NO_SUCH_VAR")
    assert missing.returncode == 2
    assert "password_env: the environment variable STREAMER_NO_SUCH_VAR is not set" in missing.stderr
