"""Bad input never crashes `streamer load`: FILE:LINE: reason, counted, skipped; --strict stops; clear errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from streamer.events import bp, jsonenc
from tests.conftest import unavailable
from tests.support.commands import streamer

MAX_LINE = 16 * 1024 * 1024


@pytest.fixture
def good_lines(corpus: Path) -> list[str]:
    path = corpus / "bp" / "montage-1.0.bp"
    if not path.is_file():
        unavailable(f"{path} missing")
    return path.read_text().splitlines()[:10]


def output_events(path: Path) -> list:
    return [jsonenc.parse_line(line) for line in path.read_text().splitlines()] if path.exists() else []


def write_mixed(path: Path, good: list[str]) -> None:
    path.write_text("\n".join([
        good[0], good[1], good[2],
        "this is not an event",                          # 4
        "ts=2012-03-14T14:04:46.000000Z level=Info",      # 5
        'ts=2012 event=stampede.x "unterminated',        # 6
        good[3],
        "",                                              # 8: blank, ignored
        '{"broken json',                                 # 9
        "# a comment",                                   # 10: ignored
        good[4],
    ]) + "\n")


def test_malformed_lines_are_reported_counted_and_skipped(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source, out = tmp_path / "bad.bp", tmp_path / "out.jsonl"
    write_mixed(source, good_lines)
    run = streamer("load", "bad.bp", "--dest", f"file://{out}", cwd=tmp_path)
    assert run.returncode == 0
    lines = run.stderr.splitlines()
    assert lines[:4] == [
        "streamer: bad.bp:4: expected key=value, found 'this'",
        "streamer: bad.bp:5: no event= field",
        "streamer: bad.bp:6: unterminated quoted value",
        "streamer: bad.bp:9: invalid JSON: unexpected end of data: line 1 column 14 (char 13)",
    ]
    assert "streamer: 5 events read" in lines[4]
    assert lines[-1] == "streamer: 4 malformed line(s) skipped (see messages above; --strict stops at the first)"
    assert output_events(out) == [bp.parse_line(good_lines[i]) for i in range(5)]


def test_strict_stops_at_the_first_bad_line_with_exit_1(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source, out = tmp_path / "bad.bp", tmp_path / "out.jsonl"
    write_mixed(source, good_lines)
    run = streamer("load", "bad.bp", "--dest", f"file://{out}", "--strict", cwd=tmp_path)
    assert "bad.bp:4: expected key=value, found 'this'" in run.stderr
    assert "bad.bp:5" not in run.stderr
    assert run.returncode == 1, run.stderr


def test_strict_delivers_the_lines_before_the_bad_one(python: str, good_lines: list[str], tmp_path: Path) -> None:
    """Stopping *at* the first bad line: the three good lines before it are published and checkpointed."""
    source, out, ck = tmp_path / "bad.bp", tmp_path / "out.jsonl", tmp_path / "ck.json"
    write_mixed(source, good_lines)
    streamer("load", "bad.bp", "--dest", f"file://{out}", "--strict", "--checkpoint", str(ck), cwd=tmp_path)
    assert output_events(out) == [bp.parse_line(good_lines[i]) for i in range(3)]
    assert json.loads(ck.read_text())["files"][str(source.resolve())]["line"] == 3


def test_binary_garbage_is_reported_per_line_and_skipped(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source, out = tmp_path / "garbage.bp", tmp_path / "out.jsonl"
    garbage = bytes(range(0x80, 0x100)) * 40 + b"\n" + os.urandom(4000).replace(b"\n", b"\xff") + b"\n"
    source.write_bytes(garbage + good_lines[0].encode() + b"\n")
    run = streamer("load", str(source), "--dest", f"file://{out}")
    assert run.returncode == 0
    assert f"streamer: {source}:1: not UTF-8 text (byte 0)" in run.stderr
    assert f"streamer: {source}:2: not UTF-8 text" in run.stderr
    assert "2 malformed line(s) skipped" in run.stderr
    assert output_events(out) == [bp.parse_line(good_lines[0])]


def test_nul_bytes_are_reported_and_skipped(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source, out = tmp_path / "nul.bp", tmp_path / "out.jsonl"
    source.write_bytes(b"\x00\x00\x00\n" + good_lines[0].replace(" level=", " \x00level=").encode() + b"\n"
                       + good_lines[1].encode() + b"\n")
    run = streamer("load", str(source), "--dest", f"file://{out}")
    assert run.returncode == 0
    assert f"streamer: {source}:1: NUL byte in line" in run.stderr
    assert f"streamer: {source}:2: NUL byte in line" in run.stderr
    assert output_events(out) == [bp.parse_line(good_lines[1])]


def test_jsonl_input_with_bad_records(python: str, good_lines: list[str], tmp_path: Path) -> None:
    events = [bp.parse_line(line) for line in good_lines[:3]]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join([jsonenc.dumps(events[0]).decode(), "[1, 2]", "{}",
                                 jsonenc.dumps(events[1]).decode(), jsonenc.dumps(events[2]).decode()]) + "\n")
    run = streamer("load", str(source), "--dest", f"file://{out}")
    assert run.returncode == 0
    assert f"{source}:2: " in run.stderr and f"{source}:3: " in run.stderr
    assert "2 malformed line(s) skipped" in run.stderr
    assert output_events(out) == events


def test_a_100_mb_line_is_skipped_without_holding_it(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source, out, rss = tmp_path / "huge.bp", tmp_path / "out.jsonl", tmp_path / "rss"
    with open(source, "wb") as handle:
        handle.write(good_lines[0].encode() + b"\n")
        block = b"x" * (1 << 20)
        for _ in range(100):
            handle.write(block)
        handle.write(b"\n" + good_lines[1].encode() + b"\n")
    # run the CLI under a wrapper that records the process's peak memory at exit
    # (VmHWM of this process image; ru_maxrss would include the parent's peak inherited across fork/exec)
    wrapper = ("import atexit, os, re, runpy, sys\n"
               "out = sys.argv[1]\n"
               "def peak():\n"
               "    if not os.path.exists('/proc/self/status'):\n"
               "        return\n"
               "    status = open('/proc/self/status').read()\n"
               "    open(out, 'w').write(re.search(r'VmHWM:\\s*(\\d+) kB', status).group(1))\n"
               "atexit.register(peak)\n"
               "sys.argv = ['streamer'] + sys.argv[2:]\n"
               "runpy.run_module('streamer', run_name='__main__')\n")
    run = subprocess.run([python, "-c", wrapper, str(rss), "load", str(source), "--dest", f"file://{out}"],
                         capture_output=True, text=True, timeout=60)
    source.unlink()
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert f"streamer: {source}:2: line longer than {MAX_LINE} bytes: skipped" in run.stderr
    assert "1 malformed line(s) skipped" in run.stderr
    assert output_events(out) == [bp.parse_line(good_lines[0]), bp.parse_line(good_lines[1])]
    if not Path("/proc/self/status").exists():  # pragma: no cover - not Linux
        return
    peak_kib = int(rss.read_text())
    assert peak_kib < 100 * 1024, f"peak RSS {peak_kib} KiB: the 100 MiB line was held in memory"


def test_empty_file_gives_zero_events_and_exit_0(python: str, tmp_path: Path) -> None:
    source, out = tmp_path / "empty.bp", tmp_path / "out.jsonl"
    source.write_bytes(b"")
    run = streamer("load", str(source), "--dest", f"file://{out}")
    assert run.returncode == 0
    assert "streamer: 0 events read" in run.stderr
    assert "malformed" not in run.stderr
    assert output_events(out) == []


def test_missing_file_is_a_clear_error_exit_2(python: str, tmp_path: Path) -> None:
    run = streamer("load", "missing.bp", "--dest", f"file://{tmp_path}/out.jsonl", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == "streamer: error: missing.bp: no such file\n"
    run = streamer("tail", "missing.bp", "--no-follow", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == "streamer: error: missing.bp: no such file\n"


def test_directory_given_as_a_file_is_a_clear_error_exit_2(python: str, tmp_path: Path) -> None:
    (tmp_path / "submit").mkdir()
    for extra in ([], ["--follow"]):
        run = streamer("load", "submit", *extra, "--dest", f"file://{tmp_path}/out.jsonl", cwd=tmp_path)
        assert run.returncode == 2
        assert run.stderr == ("streamer: error: submit: is a directory, not an event file "
                              "(for a submit dir use: streamer replay submit)\n")
    run = streamer("tail", "submit", "--no-follow", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == "streamer: error: submit: is a directory, not an event file\n"


def test_unreadable_checkpoint_is_a_clear_error_exit_2(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source, ck = tmp_path / "in.bp", tmp_path / "ck.json"
    source.write_text(good_lines[0] + "\n")
    ck.write_text("{not json")
    run = streamer("load", str(source), "--dest", f"file://{tmp_path}/o.jsonl", "--checkpoint", str(ck))
    assert run.returncode == 2
    assert run.stderr.startswith(f"streamer: error: {ck}: unreadable checkpoint: ")
    ck.write_text('{"files": {}}')
    run = streamer("load", str(source), "--dest", f"file://{tmp_path}/o.jsonl", "--checkpoint", str(ck))
    assert run.returncode == 2
    assert run.stderr == f"streamer: error: {ck}: not a streamer checkpoint (version 1)\n"


def test_unwritable_destination_is_a_clear_error(python: str, good_lines: list[str], tmp_path: Path) -> None:
    source = tmp_path / "in.bp"
    source.write_text(good_lines[0] + "\n")
    (tmp_path / "dir.jsonl").mkdir()
    run = streamer("load", str(source), "--dest", f"file://{tmp_path}/dir.jsonl")
    assert run.returncode == 1
    assert f"{tmp_path}/dir.jsonl: is a directory" in run.stderr


def test_a_line_that_is_no_json_in_a_jsonl_file_gets_a_json_message(python: str, good_lines: list[str],
                                                                     tmp_path: Path) -> None:
    """Issue 26 item 14: it got the BP parser's `expected key=value, found 'this'`."""
    events = [bp.parse_line(line) for line in good_lines[:2]]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join([jsonenc.dumps(events[0]).decode(), "this is not json", "[1, 2]", "x" * 200,
                                 jsonenc.dumps(events[1]).decode()]) + "\n")
    run = streamer("load", "in.jsonl", "--dest", f"file://{out}", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stderr.splitlines()[:3] == [
        "streamer: in.jsonl:2: not a JSON object (a .jsonl file holds one JSON event per line): 'this is not json'",
        "streamer: in.jsonl:3: not a JSON object (a .jsonl file holds one JSON event per line): '[1, 2]'",
        f"streamer: in.jsonl:4: not a JSON object (a .jsonl file holds one JSON event per line): '{'x' * 40}…'"]
    assert output_events(out) == events

# ---------------------------------------------------------------- the schema's constraints (issue 26.21)

WF = "ea17e8ac-02ac-4909-b5e3-16e367392556"
JOB_INFO = ("ts=2023-03-04T06:23:33.000000Z event=stampede.job.info xwf.id=" + WF + " job.id=j1 submit_file=j1.sub "
            "type=1 type_desc=compute clustered=0 max_retries=3 task_count=1 executable=/bin/true")
AGAINST_THE_SCHEMA = [
    ("ts=2023-03-04T06:23:33.000000Z event=stampede.xwf.start xwf.id=" + WF,
     "stampede.xwf.start: mandatory field restart_count missing"),
    (JOB_INFO.replace("clustered=0", "clustered=2"), "stampede.job.info: field clustered = 2 is not within 0..1"),
    (JOB_INFO.replace("type=1 ", "type=12 "), "stampede.job.info: field type = 12 is not within 0..11"),
    (JOB_INFO.replace("type_desc=compute", "type_desc=teleport"),
     "stampede.job.info: field type_desc = 'teleport' is not a task type of the schema"),
]


@pytest.mark.parametrize("form", ["bp", "jsonl"])
def test_events_against_the_schema_are_refused_with_file_and_line(tmp_path: Path, form: str) -> None:
    good = [f"ts=2023-03-04T06:23:3{i}.000000Z event=stampede.xwf.start xwf.id={WF} restart_count={i}"
            for i in range(3)] + [JOB_INFO, JOB_INFO.replace("xwf.id=" + WF, "xwf.id=not-a-uuid")]
    lines = [good[0], *(bad for bad, _ in AGAINST_THE_SCHEMA), *good[1:]]
    if form == "jsonl":  # the same refusals when the events come as monitord's JSON
        text = [jsonenc.dumps(bp.parse_line(line)).decode() for line in lines]
    else:
        text = lines
    source, out = tmp_path / f"in.{form}", tmp_path / "out.jsonl"
    source.write_text("\n".join(text) + "\n")
    run = streamer("load", source.name, "--dest", f"file://{out}", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    for number, (_, reason) in enumerate(AGAINST_THE_SCHEMA, 2):
        assert f"streamer: {source.name}:{number}: {reason}" in run.stderr
    assert f"{len(AGAINST_THE_SCHEMA)} malformed line(s) skipped" in run.stderr
    assert output_events(out) == [bp.parse_line(line) for line in good]  # a non-UUID workflow id is kept
    strict = streamer("load", source.name, "--dest", f"file://{tmp_path}/strict.jsonl", "--strict",
                      cwd=tmp_path)
    assert strict.returncode == 1
    assert f"{source.name}:2: {AGAINST_THE_SCHEMA[0][1]}" in strict.stderr


def test_a_message_against_the_schema_is_not_an_event() -> None:
    """The AMQP sources decode through `decode_message`: the same refusal (the message is counted as bad)."""
    from streamer.sources.amqp.tail import decode_message

    body = jsonenc.dumps(bp.parse_line(JOB_INFO.replace("clustered=0", "clustered=2")))
    with pytest.raises(ValueError, match="field clustered = 2 is not within 0..1"):
        decode_message(body)
    assert decode_message(jsonenc.dumps(bp.parse_line(JOB_INFO))).fields["clustered"] == 0


def test_streamer_s_own_output_reads_back_without_refusal(tmp_path: Path) -> None:
    """What the monitor emits where a fact is absent (a plain DAG: no Pegasus submit files, no planner; a job
    never given a condor id) is monitord's tolerance too: the engine's output loads again with nothing refused."""
    from streamer.synth import generate
    from tests.support.dagjobstate import write_plain_dag, write_plain_dagman_out

    inputs = [write_plain_dag(tmp_path / "plain"), write_plain_dagman_out(tmp_path / "out"),
              generate(tmp_path / "wf", jobs=6, scenario="submit_failure,pre_failure,clustered,hierarchical", seed=7)]
    for i, path in enumerate(inputs):
        out = tmp_path / f"events{i}.jsonl"
        run = streamer("replay", str(path), "--timezone", "UTC", "-q", "--no-jobstate", "--dest", str(out),
                       timeout=120)
        assert run.returncode == 0, run.stderr
        again = streamer("load", str(out), "--dest", f"file://{tmp_path}/again{i}.jsonl")
        assert again.returncode == 0, again.stderr
        assert "malformed" not in again.stderr, again.stderr
        assert output_events(tmp_path / f"again{i}.jsonl") == output_events(out)

def test_malformed_lines_are_counted_as_dropped_input(good_lines: list[str], tmp_path: Path) -> None:
    """Each batch says how many lines it left out: the bus sums them for the summary and
    `streamer_input_dropped_total{reason="bad_line"}` (issue 27)."""
    import asyncio

    from streamer.sources.eventfile import EventFileSource

    path = tmp_path / "mixed.bp"
    write_mixed(path, good_lines)
    source = EventFileSource([path], report=lambda message: None)

    async def dropped() -> int:
        return sum([batch.dropped.get("bad_line", 0) async for batch in source.batches()])

    assert asyncio.run(dropped()) == source.stats.bad > 0


@pytest.mark.parametrize("kind", ["device", "socket"])
def test_a_device_or_socket_given_as_a_file_is_a_clear_error_exit_2(tmp_path: Path, kind: str) -> None:
    import socket

    path = tmp_path / "events.bp"
    if kind == "device":
        path.symlink_to("/dev/zero")  # it never ends: reading it would stall the load for ever
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    run = streamer("load", str(path), "--dest", str(tmp_path / "out.jsonl"), timeout=30)
    assert run.returncode == 2, run.stderr
    assert f"{path}: is a {kind}, not a regular file" in run.stderr
    assert not (tmp_path / "out.jsonl").exists() or (tmp_path / "out.jsonl").read_text() == ""
