"""An event whose name cannot be a routing key (over AMQP's 255 bytes) is skipped alone, with a warning
naming it; the rest of the batch is published (issue 27 item 1: a name from the input never breaks out of
its place in AMQP)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.support.amqphelp import Capture, unique

XWF = "1e2a3b4c-0000-4000-8000-000000000001"


def line(name: str, second: int) -> str:
    return f"ts=2023-11-14T22:13:{second:02d}.000000Z event={name} level=Info xwf.id={XWF} n={second}\n"


async def test_a_name_longer_than_a_routing_key_is_skipped_alone(amqp_url: str, tmp_path: Path) -> None:
    long_name = "stampede.custom." + "a." * 200
    lines = line("stampede.custom.one", 1) + line(long_name, 2) + line("stampede.custom.two", 3)
    (tmp_path / "in.bp").write_text(lines)
    exchange = unique("names")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streamer", "load", str(tmp_path / "in.bp"), "--dest",
            f"{amqp_url}/{exchange}?events=*", "-q", stderr=asyncio.subprocess.PIPE)
        _, raw = await asyncio.wait_for(proc.communicate(), 60)
        got = await capture.wait_for(2, timeout=20)
    err = raw.decode()
    assert proc.returncode == 0, err
    assert sorted(m.routing_key for m in got) == ["stampede.custom.one", "stampede.custom.two"]
    assert "cannot be encoded, skipped: routing key 'stampede.custom.a.a." in err, err
