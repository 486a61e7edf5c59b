"""Exactly-once files: the mark saved with a checkpoint, and the cut back on resume."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.core.bus import Bus, make_route
from streamer.events.codec import JSON_LINES
from streamer.endpoints import EndpointError, create_endpoint
from streamer.endpoints.files import encode_batch
from streamer.events import bp
from streamer.sources.base import Batch
from streamer.util.urls import EndpointURL

LINES = [f"ts=2024-01-01T00:00:{i:02d}.000000Z event=stampede.xwf.meta level=Info xwf.id=ab key=k{i} value=v{i}"
         for i in range(30)]


def events(lo: int, hi: int) -> list:
    return [bp.parse_line(line) for line in LINES[lo:hi]]


def test_mark_is_taken_at_the_committed_position_not_at_the_acknowledged_batch(tmp_path: Path) -> None:
    """A batch without a position of its own is written with the one before it; the mark saved with that
    position must not include it (the source will send it again)."""
    out = tmp_path / "out.jsonl"
    saved: list[tuple[object, dict]] = []

    async def commit(position: object, marks: dict | None = None) -> None:
        saved.append((position, marks or {}))

    async def run() -> None:
        endpoint = create_endpoint(EndpointURL.parse(f"file://{out}"))
        bus = Bus([make_route(endpoint, codec=JSON_LINES)], commit=commit)
        await bus.start()
        await bus.publish(Batch(events(0, 10), position="after-10"))
        await bus.publish(Batch(events(10, 15), position=None))  # no position: may be merged with the first
        await bus.close()

    asyncio.run(run())
    key = f"file:{out.absolute()}"
    length = len(encode_batch(events(0, 10), "json"))
    assert saved[-1][0] == "after-10"
    assert saved[-1][1][key]["length"] == length
    assert out.stat().st_size == length + len(encode_batch(events(10, 15), "json"))


def _open(url: str, mark: dict | None) -> object:
    endpoint = create_endpoint(EndpointURL.parse(url))
    if mark is not None:
        endpoint.resume(mark)

    async def cycle() -> None:
        await endpoint.open()
        await endpoint.close()

    asyncio.run(cycle())
    return endpoint


def test_resume_cuts_back_only_the_file_the_checkpoint_recorded(tmp_path: Path, caplog) -> None:
    out = tmp_path / "out.bp"
    out.write_bytes(b"line one\nline two\nhalf a li")
    st = os.stat(out)
    mark = {"length": 9, "dev": st.st_dev, "ino": st.st_ino, "tail": b"line one\n".hex()}
    endpoint = _open(f"file://{out}", mark)
    assert out.read_bytes() == b"line one\n"
    assert endpoint.cut_back == len(b"line two\nhalf a li")

    # another file under the same name (rotated, replaced; it may even get the same inode number):
    # appended to, not cut
    out.unlink()
    out.write_bytes(b"new file, longer than nine bytes\n")
    _open(f"file://{out}", mark)
    assert out.read_bytes() == b"new file, longer than nine bytes\n"
    assert "not the file the checkpoint recorded" in caplog.text

    # shorter than recorded (truncated by someone): appended to, with a warning
    st = os.stat(out)
    _open(f"file://{out}", {"length": 1000, "dev": st.st_dev, "ino": st.st_ino, "tail": ""})
    assert out.stat().st_size == st.st_size
    assert "shorter than the 1000" in caplog.text

    # mode=truncate cannot resume (issue 16 item 4: it would lose every event before the checkpoint)
    with pytest.raises(EndpointError, match=r"\?mode=truncate cannot resume from a checkpoint"):
        _open(f"file://{out}?mode=truncate", {"length": 3, "dev": st.st_dev, "ino": st.st_ino})
    assert out.stat().st_size == st.st_size


def test_load_checkpoint_keeps_the_file_length_and_a_rerun_cuts_back(tmp_path: Path) -> None:
    """`streamer load --checkpoint`: the file's length is saved with the input position; output written
    after the checkpoint (as a crash leaves it) is removed by the next run, so each event is there once."""
    source = tmp_path / "in.bp"
    source.write_text("\n".join(LINES[:20]) + "\n")
    out, ck = tmp_path / "out.jsonl", tmp_path / "ck.json"
    cmd = [sys.executable, "-m", "streamer", "load", str(source), "-q", "--checkpoint", str(ck),
           "--dest", f"file://{out}"]
    assert subprocess.run(cmd, capture_output=True, timeout=120).returncode == 0
    saved = json.loads(ck.read_text())
    assert saved["endpoints"][f"file:{out.absolute()}"]["length"] == out.stat().st_size
    # a crash after writing more than was checkpointed: the next events and a half line
    with open(out, "ab") as fh:
        fh.write(encode_batch(events(20, 25), "json") + b'{"half')
    with open(source, "a") as fh:
        fh.write("\n".join(LINES[20:]) + "\n")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    assert got == [f"k{i}" for i in range(30)]


def test_a_small_write_does_not_wait_for_a_busy_executor_and_a_large_one_is_written_whole(tmp_path: Path) -> None:
    """The hot path of `streamer serve`: a few events appended to a JSONL file are written at once, not
    queued behind other workflows' parsing steps and fsyncs in the default executor (every worker busy
    here); a write larger than `INLINE_WRITE` still goes to a thread, and both land whole, in order."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from streamer.endpoints.files import INLINE_WRITE
    from streamer.events import jsonenc

    out = tmp_path / "out.jsonl"
    small = events(0, 5)
    large = [bp.parse_line(LINES[i % 30].replace("value=v", "value=" + "x" * 2000)) for i in range(INLINE_WRITE // 1000)]
    release = threading.Event()

    async def run() -> list[float]:
        loop = asyncio.get_running_loop()
        busy = ThreadPoolExecutor(max_workers=1)
        loop.set_default_executor(busy)
        loop.run_in_executor(None, release.wait)  # the only worker blocks
        endpoint = create_endpoint(EndpointURL.parse(f"file://{out}"))
        took = []
        try:
            await asyncio.wait_for(endpoint.open(), 2.0)
            for _ in range(3):
                started = loop.time()
                await asyncio.wait_for(endpoint.write(small), 2.0)
                took.append(loop.time() - started)
        finally:
            release.set()
        await endpoint.write(large)
        await endpoint.close()
        return took

    took = asyncio.run(run())
    assert max(took) < 0.5
    assert out.read_bytes() == jsonenc.join(small * 3) + jsonenc.join(large)
    assert len(jsonenc.join(large)) > INLINE_WRITE
