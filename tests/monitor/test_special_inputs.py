"""Special files and unreadable records in a submit directory (issue 27, items 4 and 5).

A workflow's files are someone else's: a kickstart `.out` that is a FIFO hung
`replay` with no message, a `dagman.out` that is a symbolic link to
`/dev/zero` never ended (and wrote ~39 MB of warnings a minute), and a
kickstart record that was garbage, used `!!python` tags or was an alias bomb
dropped its job's invocation events without a word. Each case here runs
`streamer replay` in a child with a timeout (a stall fails, it does not hang)
and checks: exit 0, no traceback, the loss named (file, job, reason) on stderr
and counted in the end summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.synth.generate import generate
from streamer.util.urls import EndpointURL

TIMEOUT = 60
"""Seconds a replay of the small workflow may take; it needs about one."""


def replay(directory: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamer", "replay", str(directory), "--dest", f"file://{out}", "--no-jobstate",
         *extra], capture_output=True, text=True, timeout=TIMEOUT)


def events(path: Path) -> list[tuple[str, str | None]]:
    return [(e["event"], e.get("job_id")) for e in map(json.loads, path.read_text().splitlines())]


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("wf") / "run", jobs=4, scenario="success", seed=19)


@pytest.fixture(scope="module")
def clean(workflow: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str | None]]:
    out = tmp_path_factory.mktemp("clean") / "clean.jsonl"
    run = replay(workflow, out)
    assert run.returncode == 0, run.stderr
    return events(out)


def copy_of(workflow: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    subprocess.run(["cp", "-a", str(workflow), str(target)], check=True)
    return target


def kickstart_out(directory: Path) -> Path:
    return sorted((directory / "00" / "00").glob("findrange_*.out.000"))[0]


def job_of(path: Path) -> str:
    return path.name.split(".out")[0]


def host_events(found: list[tuple[str, str | None]], job: str) -> list[str]:
    return [name for name, of in found if of == job and name == "stampede.job_inst.host.info"]


# ---------------------------------------------------------------- 4. special files

def test_a_fifo_kickstart_output_is_skipped_with_one_warning(workflow: Path, clean: list, tmp_path: Path) -> None:
    directory = copy_of(workflow, tmp_path)
    record = kickstart_out(directory)
    record.unlink()
    os.mkfifo(record)  # no writer: opening it for reading blocks for ever
    run = replay(directory, tmp_path / "out.jsonl")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    said = [line for line in run.stderr.splitlines() if str(record) in line]
    assert len(said) == 1, said
    assert f"{record}: is a FIFO (named pipe), not a regular file: skipped: job {job_of(record)}" in said[0]
    assert "streamer: 1 input(s) left out or cut short (special_file 1)" in run.stderr
    got = events(tmp_path / "out.jsonl")
    assert host_events(got, job_of(record)) == [] and host_events(clean, job_of(record)) != []
    assert got[-1] == ("stampede.xwf.end", None)


def test_a_dagman_out_linked_to_dev_zero_ends_with_one_warning(workflow: Path, tmp_path: Path) -> None:
    directory = copy_of(workflow, tmp_path)
    dagman_out = directory / "synth-0.dag.dagman.out"
    dagman_out.unlink()
    dagman_out.symlink_to("/dev/zero")
    run = replay(directory, tmp_path / "out.jsonl")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and len(run.stderr) < 5000, run.stderr[-2000:]
    assert f"{dagman_out}: is a device, not a regular file: skipped, not followed" in run.stderr
    assert run.stderr.count("not a regular file") == 1
    assert "(special_file 1)" in run.stderr


def test_a_symlink_loop_and_a_fifo_for_a_log_are_named(workflow: Path, tmp_path: Path) -> None:
    directory = copy_of(workflow, tmp_path)
    record = kickstart_out(directory)
    record.unlink()
    record.symlink_to(record.with_name("loop"))
    record.with_name("loop").symlink_to(record)
    dagman_out = directory / "synth-0.dag.dagman.out"
    dagman_out.unlink()
    os.mkfifo(dagman_out)
    run = replay(directory, tmp_path / "out.jsonl")
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"{dagman_out}: is a FIFO (named pipe), not a regular file: skipped, not followed" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_one_opener_refuses_what_is_no_regular_file(tmp_path: Path) -> None:
    from streamer.util.limits import NotRegularFile, open_regular, read_bounded

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "dir").mkdir()
    for name, what in [("pipe", "is a FIFO (named pipe)"), ("a", "symbolic link loop"), ("zero", "is a device"),
                       ("dir", "is a directory")]:
        with pytest.raises(NotRegularFile) as caught:
            read_bounded(tmp_path / name)
        assert str(caught.value).startswith(f"{tmp_path / name}: {what}"), caught.value
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")


def test_read_bounded_reads_by_the_file_size(tmp_path: Path) -> None:
    """A small file costs what it holds: no buffer sized by the 256 MiB limit is allocated for it."""
    import tracemalloc

    from streamer.util.limits import read_bounded

    path = tmp_path / "job.out"
    path.write_bytes(b"- invocation: True\n" * 10)
    tracemalloc.start()
    try:
        assert read_bounded(path) == b"- invocation: True\n" * 10
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert read_bounded(path, max_bytes=25) == (b"- invocation: True\n" * 10)[:25]


def test_read_bounded_closes_what_it_opens_and_says_what_it_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                                  ) -> None:
    """Read on the descriptor itself: every descriptor closed (a refused FIFO's too), a cut file said once."""
    from streamer.util.limits import NotRegularFile, read_bounded

    path, empty, fifo = tmp_path / "job.err", tmp_path / "empty.out", tmp_path / "fifo.out"
    path.write_bytes(bytes(range(256)) * 40)
    empty.write_bytes(b"")
    os.mkfifo(fifo)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        assert read_bounded(path) == bytes(range(256)) * 40
        assert read_bounded(empty) == b""
        with pytest.raises(NotRegularFile):
            read_bounded(fifo)
    assert len(os.listdir("/proc/self/fd")) == before
    with caplog.at_level("WARNING", logger="streamer.util.limits"):
        assert read_bounded(path, max_bytes=10_000) == (bytes(range(256)) * 40)[:10_000]
        assert read_bounded(path, max_bytes=10_240) == bytes(range(256)) * 40  # exactly the limit: nothing cut
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: larger than 10000 bytes: only its first 10000 bytes read"]


# ---------------------------------------------------------------- 5. nothing lost without a word

BOMB = "- invocation:\n    hostname: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"    l{i}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))
RECORDS = {
    "garbage": ("\x00\x01 this is no kickstart record at all\n" * 20,
                "kickstart output holds no kickstart record", "kickstart_empty"),
    "python tag": ("- invocation: !!python/object/apply:os.system ['echo owned']\n",
                   "unreadable YAML invocation record (record 1: could not determine a constructor for the tag "
                   "'tag:yaml.org,2002:python/object/apply:os.system')", "kickstart_record"),
    "alias bomb": (BOMB, "unreadable YAML invocation record (record 1: YAML alias *a refused", "kickstart_record"),
    "deep": ("- invocation: " + "[" * 500 + "]" * 500 + "\n",
             "unreadable YAML invocation record (record 1: YAML nested deeper than 100 levels)", "kickstart_record"),
}


@pytest.mark.parametrize("case", RECORDS)
def test_a_record_that_gives_no_invocation_is_named_and_counted(workflow: Path, clean: list, tmp_path: Path,
                                                                case: str) -> None:
    text, message, reason = RECORDS[case]
    directory = copy_of(workflow, tmp_path)
    record = kickstart_out(directory)
    record.write_text(text)
    run = replay(directory, tmp_path / "out.jsonl")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert f"{record}: {message}" in run.stderr, run.stderr[-3000:]
    line = next(line for line in run.stderr.splitlines() if f"{record}: " in line)
    assert f"job {job_of(record)}: its invocation is made from the .sub file" in line
    assert f"streamer: 1 input(s) left out or cut short ({reason} 1): see the warnings above" in run.stderr
    got = events(tmp_path / "out.jsonl")
    assert host_events(got, job_of(record)) == [] and host_events(clean, job_of(record)) != []
    assert len(got) < len(clean)


def test_the_loss_is_in_the_metrics(workflow: Path, tmp_path: Path) -> None:
    """`streamer_input_dropped_total{reason}` counts what the monitor left out, as the summary does."""
    import asyncio

    from streamer.config.settings import EndpointSpec
    from streamer.run.metrics import Metrics
    from streamer.monitor.source import WorkflowSource
    from streamer.run.pipeline import Run, RunOptions
    from streamer.run.wiring import build_endpoints

    directory = copy_of(workflow, tmp_path)
    kickstart_out(directory).write_text(RECORDS["python tag"][0])
    records = sorted((directory / "00" / "00").glob("*.out.000"))
    records[-1].write_text("")
    exporter = Metrics()

    async def run() -> dict[str, int]:
        source = WorkflowSource(directory, timezone="UTC", write_jobstate=False)
        dest = EndpointSpec(url=EndpointURL.parse(f"file://{tmp_path / 'out.jsonl'}"))
        result = await Run(source, build_endpoints([dest]),
                           RunOptions(progress=False, exporter=exporter)).run()
        assert result.exit_code == 0
        return result.dropped

    assert asyncio.run(run()) == {"kickstart_record": 1, "kickstart_empty": 1}
    from prometheus_client import generate_latest

    text = generate_latest(exporter.registry).decode()
    assert 'streamer_input_dropped_total{reason="kickstart_record"} 1.0' in text
    assert 'streamer_input_dropped_total{reason="kickstart_empty"} 1.0' in text


def test_repeated_warnings_are_counted_not_repeated(workflow: Path, tmp_path: Path) -> None:
    """A dagman.out with thousands of lines of one bad kind: twenty are shown, the rest counted."""
    directory = copy_of(workflow, tmp_path)
    dagman_out = directory / "synth-0.dag.dagman.out"
    lines = dagman_out.read_bytes().splitlines(keepends=True)
    bad = b"11/15/23 99:99:99 Event: ULOG_EXECUTE for HTCondor Node nobody (1.0.0) {11/15/23 99:99:99}\n"
    dagman_out.write_bytes(b"".join(lines[:10]) + bad * 5_000 + b"".join(lines[10:]))
    run = replay(directory, tmp_path / "out.jsonl")
    assert run.returncode == 0, run.stderr[-2000:]
    shown = [line for line in run.stderr.splitlines()
             if line.startswith(f"streamer: WARNING: {dagman_out}:") and "line ignored: not a valid time" in line]
    assert len(shown) == 20, len(shown)
    assert "(more like this are counted, not shown)" in shown[-1]
    assert "4,980 more warnings like: " in run.stderr
    assert "(bad_line 5,000)" in run.stderr
