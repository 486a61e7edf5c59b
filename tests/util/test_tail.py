"""The one incremental file reader: complete lines only, bounded reads, a changed file said once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamer.monitord.command import Watch
from streamer.util.limits import NotRegularFile
from streamer.util.tail import OnChange, Tail


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def test_partial_last_line_is_held_back_until_its_newline_or_a_final_read(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"one\ntw")
    tail = Tail(path)
    found = tail.read()
    assert found.lines() == [b"one"] and tail.offset == 4 and not found.at_end and found.seen_to_end
    assert tail.read().lines() == []
    append(path, b"o\nthr")
    assert tail.read().lines() == [b"two"]
    found = tail.read(final=True)
    assert found.lines() == [b"thr"] and found.at_end and tail.offset == path.stat().st_size


def test_reads_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(100)))
    tail = Tail(path)
    sizes = []
    while found := tail.read(20).data:
        assert len(found) <= 20
        sizes.append(len(found))
    assert sum(sizes) == path.stat().st_size


def test_an_overlong_line_ending_in_the_read_that_crossed_the_limit_keeps_the_lines_after_it(tmp_path: Path) -> None:
    """The dagman.out tracker's copy skipped on to the end of that read, losing the next lines with it."""
    path = tmp_path / "f.log"
    path.write_bytes(b"short\n" + b"x" * 3000 + b"\nafter\nend\n")
    tail = Tail(path, max_line=2048)
    assert tail.read(1024).lines() == [b"short"]
    found = tail.read(1024)
    assert found.skipped == 3001 and found.data == b"" and found.start == 6
    assert tail.read(1024).lines() == [b"after", b"end"]


def test_an_overlong_line_not_ended_yet_is_skipped_once_its_newline_comes(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"x" * 5000)
    tail = Tail(path, max_line=2048)
    found = tail.read(1024)
    assert found.skipped == 0 and found.data == b"" and found.seen_to_end and tail.skip_to is not None
    append(path, b"x" * 100 + b"\nnext\n")
    assert tail.read(1024).skipped == 5101
    assert tail.read(1024).lines() == [b"next"]


def test_truncated_restarts_once_said(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"old line one\nold line two\n")
    said: list[str] = []
    tail = Tail(path, say=said.append)
    tail.read()
    with open(path, "r+b") as handle:
        handle.truncate(0)
    append(path, b"new\n")
    found = tail.read()
    assert found.restarted and found.lines() == [b"new"]
    assert said == [f"{path}: file shrank below offset 26 (truncated or replaced); reading it again from its start"]
    assert tail.read().lines() == [] and len(said) == 1 and tail.truncations == 1


def test_truncated_or_replaced_stops_once_said(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"old line one\n")
    said: list[str] = []
    tail = Tail(path, say=said.append, on_change=OnChange.STOP)
    tail.read()
    (tmp_path / "new").write_bytes(b"a much longer line than before\n")
    os.replace(tmp_path / "new", path)
    assert tail.read().data == b"" and tail.stopped
    assert tail.read().data == b""
    assert said == [f"{path}: replaced by another file (its device and inode changed); stopped following it"]


def test_holding_the_file_reads_a_rotated_one_to_its_end_first(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_bytes(b"a0\n")
    said: list[str] = []
    tail = Tail(path, say=said.append, hold=True)
    assert tail.read().lines() == [b"a0"]
    append(path, b"a1\na2")
    os.rename(path, tmp_path / "f.log.1")
    assert tail.read().lines() == [b"a1"]  # renamed away, nothing in its place yet: read on, a2 held back
    path.write_bytes(b"b0\n")
    assert tail.read().lines() == [b"a2"]  # the old file to its end: its last line is complete
    found = tail.read()
    assert found.restarted and found.lines() == [b"b0"] and tail.replacements == 1
    assert said == [f"{path}: rotated (renamed away, another file in its place); reading it again from its start"]
    tail.close()


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match="FIFO"):
        Tail(fifo).read()
    with pytest.raises(FileNotFoundError):
        Tail(tmp_path / "none").read()


def test_monitord_watch_reads_a_truncated_dagman_out_again(tmp_path: Path) -> None:
    """monitord's copy kept its offset past the end of a truncated log and never saw DAGMan's new pid."""
    log = tmp_path / "x.dag.dagman.out"
    log.write_bytes(b"11/14/23 22:13:20 ** PID = 1111\n")
    watch = Watch(None, log, follow=True)
    watch._scan()
    assert watch._pid == 1111
    log.write_bytes(b"11/14/23 22:13:20 ** PID = 22\n")
    watch._scan()
    assert watch._pid == 22
