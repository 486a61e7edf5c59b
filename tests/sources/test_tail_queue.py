"""Issue 16 item 3: `streamer tail … --queue Q --events …` must not delete what it does not show."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading

import aio_pika
import pytest

from streamer.events import bp, jsonenc
from tests.support.amqphelp import unique

XWF = "1e2a3b4c-0000-4000-8000-000000000001"
LINES = [f"ts=2023-11-14T22:13:2{i}.000000Z event={name} level=Info xwf.id={XWF} restart_count=0{status}"
         for i, (name, status) in enumerate([("stampede.xwf.start", ""), ("stampede.xwf.end", " status=0")])] + [
    f"ts=2023-11-14T22:13:3{i}.000000Z event=stampede.job.info level=Info xwf.id={XWF} job.id=j{i} "
    "submit_file=j.sub type=1 type_desc=compute clustered=0 max_retries=3 task_count=1 executable=/bin/true"
    for i in range(3)]  # events the schema accepts (messages against it are not events: issue 26.21)


async def _depth(channel: aio_pika.abc.AbstractChannel, queue: str) -> int:
    return int((await channel.declare_queue(queue, passive=True)).declaration_result.message_count)


@pytest.mark.rabbitmq
async def test_filtered_tail_of_a_shared_queue_leaves_every_message(amqp_url: str) -> None:
    exchange, queue = unique("streamer-tailq-ex"), unique("streamer-tailq")
    connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
    channel = await connection.channel()
    ex = await channel.declare_exchange(exchange, "topic", durable=True)
    declared = await channel.declare_queue(queue, durable=True)
    await declared.bind(exchange, routing_key="#")
    try:
        for line in LINES:
            event = bp.parse_line(line)
            await ex.publish(aio_pika.Message(jsonenc.dumps(event)), routing_key=event.name)
        assert await _depth(channel, queue) == 5
        tail = subprocess.Popen([sys.executable, "-m", "streamer", "tail", f"{amqp_url}/{exchange}", "--queue", queue,
                                 "--events", "stampede.xwf.*", "--format", "bp"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:  # it ends by itself at once; the timeout only bounds a tail that follows the queue instead
            out, err = tail.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            tail.send_signal(signal.SIGINT)
            out, err = tail.communicate(timeout=20)
        assert await _depth(channel, queue) == 5  # nothing taken from the queue's other readers
        assert tail.returncode == 2, err
        assert "reading a queue consumes" in err and "Leave out --queue" in err and "Traceback" not in err
        assert out == ""
        # the whole queue, explicitly: every message shown, then consumed
        whole = subprocess.Popen([sys.executable, "-m", "streamer", "tail", f"{amqp_url}/{exchange}", "--queue",
                                  queue, "--format", "bp"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # it follows the queue: interrupted once it showed the five (a slow start must not cut it short)
        shown = await asyncio.to_thread(_lines_of, whole, 5, 60)
        whole.send_signal(signal.SIGINT)
        rest, err = whole.communicate(timeout=30)
        out = "".join(shown) + rest
        assert [bp.parse_line(line).id for line in out.splitlines()] == [bp.parse_line(line).id for line in LINES]
        assert await _depth(channel, queue) == 0
    finally:
        await channel.queue_delete(queue)
        await channel.exchange_delete(exchange)
        await connection.close()


def _lines_of(process: subprocess.Popen[str], count: int, timeout: float) -> list[str]:
    """The first `count` lines `process` prints (fewer if it ends; killed after `timeout` seconds)."""
    assert process.stdout is not None
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        lines = []
        while len(lines) < count and (line := process.stdout.readline()):
            lines.append(line)
        return lines
    finally:
        timer.cancel()
