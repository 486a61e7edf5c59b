"""kill -9 at random moments of a live `streamer follow` to JSONL + BP files, SQLite, PostgreSQL and AMQP.

A 200-job synthetic workflow's dagman.out grows in 80 pieces while `streamer follow` runs into five
endpoints at once; the process is SIGKILLed at 20 random moments and restarted each time, then left to
finish. Against a clean replay of the finished submit directory:

- the files hold every event exactly once, in order (the checkpoint records their lengths, a restart
  cuts them back before appending);
- the SQLite and PostgreSQL databases hold exactly the clean rows;
- AMQP has every event, and any duplicate is a re-send of an event (same `message_id`) — at-least-once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import aio_pika
import pytest

from streamer.synth import generate, iter_dagman_chunks
from tests.support import dbcompare
from tests.support.amqphelp import unique
from tests.support.pghelp import pg_snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

KILLS = 20
JOBS = 200
PIECES = 80


def jsonl_ids(path: Path) -> list[str]:
    return [json.loads(line)["event_id"] for line in path.read_text().splitlines()]


def bp_ids(path: Path) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        assert line.startswith("ts="), f"broken BP line in {path}: {line[:80]!r}"
        out.append(line.rsplit("event.id=", 1)[1].split()[0])
    return out


def command(submit: Path, state: Path, dests: list[str], follow: bool = True) -> list[str]:
    cmd = [sys.executable, "-m", "streamer", "follow" if follow else "replay", str(submit), "--timezone", "UTC",
           "-q", "--state", str(state)]
    for dest in dests:
        cmd += ["--dest", dest]
    return cmd


async def drain_queue(url: str, queue_name: str, expected: int) -> list[str]:
    connection = await aio_pika.connect(url)
    ids: list[str] = []
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, durable=True, passive=True)
        idle = time.monotonic()
        while time.monotonic() - idle < (3 if len(ids) >= expected else 20):
            message = await queue.get(no_ack=True, fail=False)
            if message is None:
                await asyncio.sleep(0.05)
                continue
            ids.append(message.message_id)
            idle = time.monotonic()
        await queue.delete(if_unused=False, if_empty=False)
    finally:
        await connection.close()
    return ids


async def bind_queue(url: str, exchange: str, queue_name: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        ex = await channel.declare_exchange(exchange, "topic", durable=True)
        queue = await channel.declare_queue(queue_name, durable=True)
        await queue.bind(ex, "#")
    finally:
        await connection.close()


async def delete_exchange(url: str, exchange: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        await channel.exchange_delete(exchange)
    finally:
        await connection.close()


@pytest.mark.timeout(900)
async def test_kill9_during_follow_exactly_once(tmp_path: Path, pg_db: str, amqp_url: str) -> None:  # noqa: F811
    rng = random.Random(1212)
    submit = generate(tmp_path / "wf", jobs=JOBS, scenario="retry,held", seed=5)
    finished = tmp_path / "clean"
    shutil.copytree(submit, finished, symlinks=True)  # the whole run, for the clean replay
    chunks = list(iter_dagman_chunks(submit, pieces=PIECES, seed=3))
    dagman_out = next(submit.glob("*.dag.dagman.out"))

    out = tmp_path / "out"
    out.mkdir()
    exchange, queue_name = unique("streamer-kill9"), unique("streamer-kill9-q")
    await bind_queue(amqp_url, exchange, queue_name)
    dests = [f"file://{out}/events.jsonl", f"file://{out}/events.bp", f"sqlite:///{out}/wf.db", pg_db,
             f"{amqp_url}/{exchange}?events=*&confirm_timeout=5&drain_timeout=60"]
    env = {**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "xdg"), "TZ": "UTC"}
    state = tmp_path / "state.json"

    stop_writing = threading.Event()

    def grow() -> None:
        for chunk in chunks:
            with open(dagman_out, "a") as fh:
                fh.write(chunk)
            if stop_writing.wait(0.3):
                return

    writer = threading.Thread(target=grow, daemon=True)
    writer.start()
    try:
        for _ in range(KILLS):
            proc = subprocess.Popen(command(submit, state, dests), env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            await asyncio.sleep(rng.uniform(0.6, 2.2))
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
            assert "Traceback" not in err, err
        writer.join(timeout=120)
        final = subprocess.run(command(submit, state, dests), env=env, capture_output=True, text=True, timeout=300)
        assert final.returncode == 0, final.stderr
    finally:
        stop_writing.set()
        writer.join(timeout=30)

    # the clean reference: one replay of the finished directory
    ref = tmp_path / "ref"
    ref.mkdir()
    clean = subprocess.run(command(finished, tmp_path / "ref.state", [f"file://{ref}/events.jsonl",
                                                                       f"sqlite:///{ref}/wf.db"], follow=False),
                           env=env, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    expected = jsonl_ids(ref / "events.jsonl")
    assert len(expected) > 5000

    got_jsonl, got_bp = jsonl_ids(out / "events.jsonl"), bp_ids(out / "events.bp")
    dup_jsonl = len(got_jsonl) - len(set(got_jsonl))
    dup_bp = len(got_bp) - len(set(got_bp))
    lost = len(set(expected) - set(got_jsonl))
    print(f"\nkill -9 x{KILLS}: {len(expected)} events; JSONL lost {lost}, duplicated {dup_jsonl}; "
          f"BP duplicated {dup_bp}")
    assert got_jsonl == expected  # every event once, in order
    assert got_bp == expected

    clean_rows = dbcompare.sqlite_snapshot(str(ref / "wf.db"))
    diff_sqlite = dbcompare.compare(dbcompare.sqlite_snapshot(str(out / "wf.db")), clean_rows)
    diff_pg = dbcompare.compare(await pg_snapshot(pg_db), clean_rows)
    print(f"SQLite rows equal: {not diff_sqlite}; PostgreSQL rows equal: {not diff_pg}")
    assert not diff_sqlite, dbcompare.format_diff(diff_sqlite)
    assert not diff_pg, dbcompare.format_diff(diff_pg)

    amqp_ids = await drain_queue(amqp_url, queue_name, len(expected))
    await delete_exchange(amqp_url, exchange)
    counts = Counter(amqp_ids)
    resent = sum(n - 1 for n in counts.values())
    print(f"AMQP: {len(amqp_ids)} messages, {len(set(expected) - set(counts))} lost, {resent} re-sent duplicates")
    assert set(counts) == set(expected)  # nothing lost, nothing foreign: duplicates are same-id re-sends
