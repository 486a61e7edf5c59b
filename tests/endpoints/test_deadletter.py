"""Dead letters (issue 13 item 4): what an endpoint refuses for good goes to its file, with the reason;
`streamer load` of that file re-delivers it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Sequence

import asyncpg
import orjson
import pytest

from streamer.config.settings import EndpointSpec
from streamer.endpoints.base import Endpoint
from streamer.endpoints.layers.deadletter import DeadLetters
from streamer.endpoints.layers.resilience import Rejected
from streamer.events import bp, jsonenc
from streamer.run.pipeline import Run, RunOptions
from streamer.run.wiring import build_endpoints, unfiltered
from streamer.sources.base import Batch, Source
from streamer.util.urls import EndpointURL
from tests.support.pghelp import fresh_database_sync

XWF = "1e2a3b4c-0000-4000-8000-000000000001"


def job_info(job: str, second: int = 0) -> str:
    return (f"ts=2023-11-14T22:13:{second:02d}.000000Z event=stampede.job.info level=Info xwf.id={XWF} "
            f"job.id={job} submit_file=j.sub type=1 type_desc=compute clustered=0 max_retries=3 task_count=1 "
            "executable=/bin/true")


class Picky(Endpoint):
    """Refuses any batch holding a job whose id starts with `bad` (as a database refuses a value)."""

    def __init__(self) -> None:
        super().__init__(EndpointURL.parse("term:"))
        self.written: list[Any] = []
        self.attempts = 0

    async def write(self, batch: Sequence[Any]) -> None:
        self.attempts += 1
        bad = [e for e in batch if str(e.fields.get("job.id", "")).startswith("bad")]
        if bad:
            raise Rejected(f"value too long for job.id {bad[0].fields['job.id']}")
        self.written.extend(batch)


class Listed(Source):
    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def batches(self) -> Any:
        yield Batch(events=self.events, position=None)


def test_refused_events_go_to_the_file_and_the_rest_is_written(tmp_path: Path) -> None:
    events = [bp.parse_line(job_info(f"bad{i}" if i in (3, 11) else f"ok{i}", i)) for i in range(16)]
    picky = Picky()
    layer = DeadLetters(picky, tmp_path / "dead.jsonl")
    result = asyncio.run(Run(Listed(events), [unfiltered(layer)], RunOptions(progress=False, signals=False)).run())
    assert result.exit_code == 0
    assert [e.id for e in picky.written] == [e.id for i, e in enumerate(events) if i not in (3, 11)]
    lines = (tmp_path / "dead.jsonl").read_bytes().splitlines()
    assert len(lines) == 2 and layer.dead_lettered == 2
    first = orjson.loads(lines[0])
    assert first["dead_letter"]["reason"] == "value too long for job.id bad3"
    assert first["job_id"] == "bad3" and first["event_id"] == events[3].id
    # re-delivered by streamer load (the dead_letter key is not a field)
    out = tmp_path / "again.jsonl"
    done = subprocess.run([sys.executable, "-m", "streamer", "load", str(tmp_path / "dead.jsonl"), "--dest", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().splitlines() == [jsonenc.dumps(events[3]), jsonenc.dumps(events[11])]


def test_without_a_dead_letter_file_a_refusal_fails_the_endpoint(tmp_path: Path) -> None:
    events = [bp.parse_line(job_info("bad1"))]
    result = asyncio.run(Run(Listed(events), [unfiltered(Picky())], RunOptions(progress=False, signals=False)).run())
    assert result.exit_code == 1


def test_dead_letter_option_wraps_the_endpoint(tmp_path: Path) -> None:
    (endpoint, _), = build_endpoints([EndpointSpec(url=EndpointURL.parse(f"file://{tmp_path}/a.jsonl?dead_letter={tmp_path}/d.jsonl"))])
    assert isinstance(endpoint, DeadLetters) and endpoint.path == tmp_path / "d.jsonl"
    assert endpoint.state_key == endpoint.inner.state_key


@pytest.mark.postgres
def test_postgres_refusal_is_dead_lettered_and_counted(postgres_dsn: str, tmp_path: Path) -> None:
    with fresh_database_sync(postgres_dsn, "streamer_dl") as db:
        plan = (f"ts=2023-11-14T22:13:00.000000Z event=stampede.wf.plan level=Info xwf.id={XWF} "
                "submit.hostname=h dax.label=d dax.version=1 dax.file=d.yml dag.file.name=d.dag "
                "planner.version=5.1.3 grid_dn=None user=u submit.dir=/s argv=a root.xwf.id=" + XWF)
        source = tmp_path / "in.bp"
        source.write_text("\n".join([plan, job_info("ok1", 1), job_info("x" * 300, 2), job_info("ok2", 3)]) + "\n")
        dead = tmp_path / "pg.dead.jsonl"
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest",
                               f"{db}?dead_letter={dead}"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        rows = asyncio.run(_fetch(db, "SELECT exec_job_id FROM job ORDER BY exec_job_id"))
        assert rows == ["ok1", "ok2"]
        (line,) = dead.read_bytes().splitlines()
        refused = orjson.loads(line)
        assert refused["job_id"] == "x" * 300 and refused["dead_letter"]["reason"] == "job.exec_job_id is 300 characters long, the column holds 255"
        assert "1 event(s) refused and written to" in done.stderr


async def _fetch(dsn: str, sql: str) -> list[Any]:
    conn = await asyncpg.connect(dsn)
    try:
        return [r[0] for r in await conn.fetch(sql)]
    finally:
        await conn.close()


@pytest.mark.rabbitmq
def test_unroutable_messages_are_dead_lettered(amqp_url: str, tmp_path: Path) -> None:
    """`mandatory` (the default): messages the broker returns because no queue is bound go to the dead-letter
    file with the reason, are counted, and `streamer load` of that file re-delivers them."""
    import aio_pika

    exchange = f"streamer-dl-{uuid.uuid4().hex[:10]}"
    source = tmp_path / "in.bp"
    source.write_text("\n".join(job_info(f"job{i}", i) for i in range(5)) + "\n")
    dead = tmp_path / "amqp.dead.jsonl"
    try:
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest",
                               f"{amqp_url}/{exchange}?events=*&dead_letter={dead}&spool=off"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        lines = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
        assert [line["job_id"] for line in lines] == [f"job{i}" for i in range(5)]  # the message's JSON
        assert {line[jsonenc.DEAD_LETTER_KEY]["reason"] for line in lines} == {
            "unroutable: no queue bound for routing key stampede.job.info"}
        again = tmp_path / "again.jsonl"
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(dead), "--dest", str(again)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert again.read_bytes().splitlines() == [jsonenc.dumps(bp.parse_line(job_info(f"job{i}", i)))
                                                   for i in range(5)]
    finally:
        async def drop() -> None:
            connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
            channel = await connection.channel()
            await channel.exchange_delete(exchange)
            await connection.close()
        asyncio.run(drop())


def test_a_dead_lettered_event_is_reported_once(postgres_dsn: str, tmp_path: Path) -> None:
    """Issue 26 item 14: the database endpoint and the dead-letter layer each reported the refused event."""
    with fresh_database_sync(postgres_dsn, "streamer_dl") as db:
        source = tmp_path / "in.bp"
        plan = (f"ts=2023-11-14T22:13:00.000000Z event=stampede.wf.plan level=Info xwf.id={XWF} "
                "submit.hostname=h dax.label=d dax.version=1 dax.file=d.yml dag.file.name=d.dag "
                "planner.version=5.1.3 grid_dn=None user=u submit.dir=/s argv=a root.xwf.id=" + XWF)
        source.write_text("\n".join([plan, job_info("ok1", 1), job_info("x" * 300, 2)]) + "\n")
        dead = tmp_path / "pg.dead.jsonl"
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest",
                               f"{db}?dead_letter={dead}"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert len(dead.read_bytes().splitlines()) == 1
        reports = [line for line in done.stderr.splitlines() if "300 characters" in line]
        assert len(reports) == 1, done.stderr
        assert "refused, written to" in reports[0] and "the column holds 255" in reports[0]
        (line,) = [line for line in done.stderr.splitlines() if " -> postgresql://" in line]
        assert line.split(" -> ")[0].strip() == "2" and line.endswith(f"ok · 1 dead-lettered to {dead}"), line


@pytest.mark.rabbitmq
def test_unroutable_events_are_neither_reported_twice_nor_summarised_as_delivered(amqp_url: str,
                                                                                  tmp_path: Path) -> None:
    """Issue 26 items 11 and 14: `5 events were unroutable` was followed by `5 -> amqp… ok`, and each
    dead-lettered message was reported by the AMQP endpoint and again by the dead-letter layer."""
    import aio_pika

    exchange = f"streamer-dl-{uuid.uuid4().hex[:10]}"
    source = tmp_path / "in.bp"
    source.write_text("\n".join(job_info(f"job{i}", i) for i in range(5)) + "\n")
    dead = tmp_path / "amqp.dead.jsonl"
    try:
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest",
                               f"{amqp_url}/{exchange}?events=*&spool=off"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        (line,) = [line for line in done.stderr.splitlines() if f"/{exchange}" in line and " -> " in line]
        assert line.split(" -> ")[0].strip() == "0", done.stderr
        assert line.endswith("ok · 5 unroutable (no queue bound: the broker dropped them)"), done.stderr
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest",
                               f"{amqp_url}/{exchange}?events=*&dead_letter={dead}&spool=off"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert len(dead.read_bytes().splitlines()) == 5
        per_event = [line for line in done.stderr.splitlines() if "no queue bound" in line]
        assert len(per_event) == 5 and all("refused, written to" in line for line in per_event), done.stderr
        (line,) = [line for line in done.stderr.splitlines() if f"/{exchange}" in line and " -> " in line]
        assert line.split(" -> ")[0].strip() == "0" and line.endswith(f"ok · 5 dead-lettered to {dead}")
    finally:
        async def drop() -> None:
            connection = await aio_pika.connect(amqp_url.replace("%2F", ""))
            channel = await connection.channel()
            await channel.exchange_delete(exchange)
            await connection.close()
        asyncio.run(drop())
