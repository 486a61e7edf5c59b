"""Following event files like `tail -F`, and resuming from checkpoints without loss or repeats."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from streamer.config.settings import EndpointSpec
from streamer.events import bp, jsonenc
from streamer.run.pipeline import Run, RunOptions
from streamer.run.wiring import build_endpoints
from streamer.sources.eventfile import CheckpointStore, EventFileSource
from streamer.sources.follow import FileFollower, FilePosition, FollowError
from streamer.util.urls import EndpointURL

POLL = 0.02


async def until(condition, limit: float = 4.0) -> None:
    """Yield to the loop until `condition()` holds (a bound, not a timing assertion)."""
    for _ in range(int(limit / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)


class Collector:
    """Runs a follower in the background and keeps (line number, text) of every line it yields."""

    def __init__(self, follower: FileFollower) -> None:
        self.follower = follower
        self.lines: list[tuple[int, str]] = []
        self.positions: list[FilePosition] = []
        self.problems: list[tuple[int, str]] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for chunk in self.follower.chunks():
            for n, raw in enumerate(chunk.lines, chunk.first_line):
                self.lines.append((n, raw.decode()))
            self.positions.append(chunk.position)
            self.problems.extend(chunk.problems)

    @property
    def texts(self) -> list[str]:
        return [t for _, t in self.lines]

    async def stop(self) -> None:
        self.follower.stop()
        await asyncio.wait_for(self.task, 4)


def append(path: Path, text: str | bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)


# ---------------------------------------------------------------- FileFollower

async def test_partial_last_line_is_held_until_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("one\n")
    got = Collector(FileFollower(path, follow=True, poll_interval=POLL))
    await until(lambda: got.texts == ["one"])
    append(path, "tw")
    await asyncio.sleep(POLL * 4)
    append(path, "o-par")
    await asyncio.sleep(POLL * 4)
    assert got.texts == ["one"]  # "two-par" is incomplete: held back
    append(path, "t\nthree\n")
    await until(lambda: len(got.texts) == 3)
    await got.stop()
    assert got.lines == [(1, "one"), (2, "two-part"), (3, "three")]
    assert got.positions[-1].offset == path.stat().st_size and got.positions[-1].line == 3


async def test_replay_takes_an_unterminated_last_line_as_complete(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("a\nb\nlast")
    got = Collector(FileFollower(path, follow=False))
    await asyncio.wait_for(got.task, 4)
    assert got.lines == [(1, "a"), (2, "b"), (3, "last")]
    assert got.positions[-1].offset == 8 and got.positions[-1].line == 3


async def test_truncated_file_is_read_again_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("old-1 with some length\nold-2 with some length\nold-3 with some length\n")
    follower = FileFollower(path, follow=True, poll_interval=POLL)
    got = Collector(follower)
    await until(lambda: len(got.texts) == 3)
    with open(path, "r+b") as handle:
        handle.truncate(0)
    append(path, "new-1\nnew-2\n")
    await until(lambda: len(got.texts) == 5)
    await got.stop()
    assert got.texts == ["old-1 with some length", "old-2 with some length", "old-3 with some length",
                         "new-1", "new-2"]
    assert got.lines[3][0] == 1  # numbering restarts with the file
    assert follower.truncations == 1
    assert got.positions[-1].offset == len("new-1\nnew-2\n") and got.positions[-1].line == 2


async def test_rotation_by_rename_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("".join(f"a{i}\n" for i in range(3)))
    follower = FileFollower(path, follow=True, poll_interval=POLL)
    got = Collector(follower)
    await until(lambda: len(got.texts) == 3)
    append(path, "".join(f"a{i}\n" for i in range(3, 6)))  # written just before the rename
    os.rename(path, tmp_path / "f.log.1")
    path.write_text("".join(f"b{i}\n" for i in range(3)))
    await until(lambda: len(got.texts) == 9)
    append(path, "b3\n")
    await until(lambda: len(got.texts) == 10)
    await got.stop()
    assert got.texts == [f"a{i}" for i in range(6)] + [f"b{i}" for i in range(4)]
    assert follower.rotations == 1
    assert [n for n, _ in got.lines] == [1, 2, 3, 4, 5, 6, 1, 2, 3, 4]
    assert got.positions[-1].ino == path.stat().st_ino


async def test_rotation_with_a_gap_before_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("a0\n")
    got = Collector(FileFollower(path, follow=True, poll_interval=POLL))
    await until(lambda: got.texts == ["a0"])
    append(path, "a1\n")
    os.rename(path, tmp_path / "f.log.1")
    await until(lambda: got.texts == ["a0", "a1"])
    await asyncio.sleep(POLL * 3)  # the path names nothing for a while
    path.write_text("b0\n")
    await until(lambda: len(got.texts) == 3)
    await got.stop()
    assert got.texts == ["a0", "a1", "b0"]


async def test_file_created_later_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "later.log"
    got = Collector(FileFollower(path, follow=True, poll_interval=POLL))
    await asyncio.sleep(POLL * 3)
    assert got.lines == [] and not got.task.done()
    path.write_text("first\nsecond\n")
    await until(lambda: len(got.texts) == 2)
    await got.stop()
    assert got.lines == [(1, "first"), (2, "second")]


async def test_stop_while_waiting_for_a_missing_file_ends_quietly(tmp_path: Path) -> None:
    got = Collector(FileFollower(tmp_path / "never.log", follow=True, poll_interval=POLL))
    await asyncio.sleep(POLL * 2)
    await got.stop()
    assert got.lines == []


async def test_replay_of_a_missing_file_or_directory_raises_follow_error(tmp_path: Path) -> None:
    with pytest.raises(FollowError, match="no such file"):
        async for _ in FileFollower(tmp_path / "missing.bp").chunks():
            pass
    with pytest.raises(FollowError, match="is a directory"):
        async for _ in FileFollower(tmp_path).chunks():
            pass


async def test_overlong_line_is_reported_and_skipped_with_exact_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"short\n" + b"x" * 5000 + b"\nafter\n" + b"y" * 5000 + b"\nend\n")
    got = Collector(FileFollower(path, follow=False, read_size=1024, max_line=2048))
    await asyncio.wait_for(got.task, 4)
    assert got.lines == [(1, "short"), (3, "after"), (5, "end")]
    assert [n for n, _ in got.problems] == [2, 4]
    assert all("longer than 2048 bytes" in reason for _, reason in got.problems)
    assert got.positions[-1].offset == path.stat().st_size and got.positions[-1].line == 5


async def test_resume_from_a_position_and_a_position_of_another_file(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("l1\nl2\nl3\n")
    st = path.stat()
    start = FilePosition(str(path), st.st_dev, st.st_ino, offset=3, line=1)
    got = Collector(FileFollower(path, start=start))
    await asyncio.wait_for(got.task, 4)
    assert got.lines == [(2, "l2"), (3, "l3")]
    other = FilePosition(str(path), st.st_dev, st.st_ino + 1, offset=3, line=1)  # replaced file
    got = Collector(FileFollower(path, start=other))
    await asyncio.wait_for(got.task, 4)
    assert got.lines == [(1, "l1"), (2, "l2"), (3, "l3")]


# ---------------------------------------------------------------- EventFileSource + checkpoints

def bp_lines(corpus: Path, count: int | None = None, rep: int = 0) -> list[str]:
    """Montage's BP lines with `rep=REP` and `seq=N` added: every event id distinct (the file repeats lines)."""
    lines = (corpus / "bp" / "montage-1.0.bp").read_text().splitlines()
    return [f"{line} rep={rep} seq={n}" for n, line in enumerate(lines[:count])]


def input_ids(path: Path) -> list[str]:
    return [bp.parse_line(line).id for line in path.read_text().splitlines() if line.strip()]


def output_ids(path: Path, live: bool = False) -> list[str]:
    """Event ids in a JSONL output. `live`: the writer may be mid-line, so a partial last line is not counted yet."""
    if not path.exists():
        return []
    text = path.read_text()
    if live:
        text = text[: text.rfind("\n") + 1]
    return [jsonenc.parse_line(line).id for line in text.splitlines()]


async def test_replay_resumes_from_the_checkpoint_without_loss_or_repeats(tmp_path: Path, corpus: Path) -> None:
    source_path, out, ck = tmp_path / "in.bp", tmp_path / "out.jsonl", tmp_path / "ck.json"
    lines = bp_lines(corpus)
    source_path.write_text("\n".join(lines[:1000]) + "\n")
    specs = [EndpointSpec(url=EndpointURL.parse(f"file://{out}"))]
    first = await Run(EventFileSource([source_path], checkpoint=ck), build_endpoints(specs), RunOptions(progress=False)).run()
    assert first.exit_code == 0 and first.events == 1000
    saved = CheckpointStore(ck).load()[str(source_path.resolve())]
    assert (saved.line, saved.offset) == (1000, source_path.stat().st_size)
    append(source_path, "\n".join(lines[1000:]) + "\n")
    second = await Run(EventFileSource([source_path], checkpoint=ck), build_endpoints(specs), RunOptions(progress=False)).run()
    assert second.exit_code == 0 and second.events == len(lines) - 1000
    third = await Run(EventFileSource([source_path], checkpoint=ck), build_endpoints(specs), RunOptions(progress=False)).run()
    assert third.events == 0
    assert output_ids(out) == input_ids(source_path)
    assert len(set(output_ids(out))) == len(lines) == 3588


async def test_follow_source_stopped_then_resumed_delivers_each_event_once(tmp_path: Path, corpus: Path) -> None:
    source_path, ck = tmp_path / "in.bp", tmp_path / "ck.json"
    out1, out2 = tmp_path / "out1.jsonl", tmp_path / "out2.jsonl"
    lines = bp_lines(corpus, 600)
    source_path.write_text("\n".join(lines[:200]) + "\n")
    source = EventFileSource([source_path], follow=True, checkpoint=ck, poll_interval=POLL)
    run = asyncio.create_task(Run(source, build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{out1}"))]), RunOptions(progress=False)).run())
    await until(lambda: len(output_ids(out1, live=True)) == 200)
    append(source_path, "\n".join(lines[200:400]) + "\n")
    await until(lambda: len(output_ids(out1, live=True)) == 400)
    source.stop()
    result = await asyncio.wait_for(run, 4)
    assert result.exit_code == 0 and result.events == 400
    assert CheckpointStore(ck).load()[str(source_path.resolve())].line == 400
    append(source_path, "\n".join(lines[400:]) + "\n")
    source = EventFileSource([source_path], follow=False, checkpoint=ck)
    result = await Run(source, build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{out2}"))]), RunOptions(progress=False)).run()
    assert result.events == 200
    assert output_ids(out1) + output_ids(out2) == input_ids(source_path)


async def test_follow_several_files_keeps_each_in_order(tmp_path: Path, corpus: Path) -> None:
    a, b, out = tmp_path / "a.bp", tmp_path / "b.bp", tmp_path / "out.jsonl"
    a.write_text("\n".join(bp_lines(corpus, 300, rep=1)) + "\n")
    b.write_text("\n".join(bp_lines(corpus, 300, rep=2)) + "\n")
    source = EventFileSource([a, b], follow=True, poll_interval=POLL, checkpoint=tmp_path / "ck")
    run = asyncio.create_task(Run(source, build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{out}"))]), RunOptions(progress=False)).run())
    await until(lambda: len(output_ids(out, live=True)) == 600)
    source.stop()
    await asyncio.wait_for(run, 4)
    got = [jsonenc.parse_line(line) for line in out.read_text().splitlines()]
    assert [e.id for e in got if e.fields["rep"] == "1"] == input_ids(a)
    assert [e.id for e in got if e.fields["rep"] == "2"] == input_ids(b)
    saved = CheckpointStore(tmp_path / "ck").load()
    assert {k: v.line for k, v in saved.items()} == {str(a.resolve()): 300, str(b.resolve()): 300}


def test_cli_follow_sigterm_then_resume_has_every_event_once(tmp_path: Path, corpus: Path, python: str) -> None:
    source_path, ck = tmp_path / "in.bp", tmp_path / "ck.json"
    out1, out2 = tmp_path / "out1.jsonl", tmp_path / "out2.jsonl"
    lines = [line for r in range(3) for line in bp_lines(corpus, rep=r)]
    source_path.write_text("\n".join(lines[:5000]) + "\n")
    proc = subprocess.Popen([python, "-m", "streamer", "load", str(source_path), "--dest", f"file://{out1}",
                             "--follow", "--checkpoint", str(ck), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(800):
            if out1.exists() and out1.stat().st_size > 0:
                break
            proc.poll()
            assert proc.returncode is None, proc.stderr.read()
            time.sleep(0.005)
        append(source_path, "\n".join(lines[5000:8000]) + "\n")  # grows while it runs
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=10)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "SIGTERM: flushing buffered events" in stderr
    done = json.loads(ck.read_text())["files"][str(source_path.resolve())]["line"]
    first = output_ids(out1)
    assert len(first) == done
    append(source_path, "\n".join(lines[8000:]) + "\n")
    rerun = subprocess.run([python, "-m", "streamer", "load", str(source_path), "--dest", f"file://{out2}",
                            "--checkpoint", str(ck), "-q"], capture_output=True, text=True, timeout=30)
    assert rerun.returncode == 0, rerun.stderr
    assert first + output_ids(out2) == input_ids(source_path)
    assert len(set(first + output_ids(out2))) == len(lines)
