"""Event loop choice, log masking and the progress line."""

from __future__ import annotations

import asyncio
import io
import logging
import sys

from streamer.util import runtime
from streamer.console.progress import Progress


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_is_the_loop_on_linux() -> None:
    assert runtime.run(_loop_module()).startswith("uvloop")


def test_falls_back_to_asyncio_without_uvloop(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError
    assert runtime.run(_loop_module()).startswith("asyncio")


def test_log_lines_never_show_passwords() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(runtime.MaskingFormatter("%(message)s"))
    logger = logging.getLogger("streamer.test.mask")
    logger.addHandler(handler)
    try:
        logger.error("cannot reach %s", "amqp://alice:s3cret@broker:5672/%2F/x")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue().strip() == "cannot reach amqp://alice:***@broker:5672/%2F/x"


def test_progress_line_shows_rate_and_share() -> None:
    stream = io.StringIO()
    progress = Progress(stream, enabled=True, interval=0.0)
    progress.update(5000, done=50, total=200)
    text = stream.getvalue()
    assert text.startswith("\r5,000 events  ") and "events/s" in text and "25.0%" in text
    progress.finish()
    silent = io.StringIO()
    Progress(silent, enabled=False, interval=0.0).update(10)
    assert silent.getvalue() == ""


def test_load_progress_shows_the_current_rate_not_the_lifetime_average() -> None:
    now = [0.0]
    stream = io.StringIO()
    meter = Progress(stream, True, clock=lambda: now[0])
    for t, events in ((10.0, 100_000), (16.0, 100_060), (20.0, 100_100)):  # a burst, then a trickle
        now[0] = t
        meter.update(events)
    last = stream.getvalue().split("\r")[-1].strip()
    assert last == "100,100 events  10 events/s now"  # the lifetime average would be 5,005 events/s
