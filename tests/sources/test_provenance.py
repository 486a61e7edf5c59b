"""Chimbuko provenance records: models, codecs, the follower, the CLI, bad records, kill -9 and resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from streamer.config.settings import EndpointSpec
from streamer.endpoints.db.schema import provenance as provenance_schema
from streamer.endpoints.terminal import pretty_line
from streamer.events import bp, chimbuko, jsonenc
from streamer.events.chimbuko import models as chimbuko_models
from streamer.events.registry import model_of
from streamer.run.pipeline import Run, RunOptions
from streamer.run.wiring import build_endpoints
from streamer.sources.eventfile import EventFileSource
from streamer.sources.provenance import ProvenanceSource, _Scanner, is_provenance_file, open_source
from streamer.synth.provenance import dump_records, generate, write_collections
from streamer.util.urls import EndpointURL

COLLECTIONS = generate(ranks=3, steps=3, per_step=5, seed=11)
ALL = [(c, r) for c, records in COLLECTIONS.items() for r in records]


def event_of(collection: str, record: dict):
    return chimbuko.event_from_record(record, collection=collection)


async def read_all(source) -> list:
    out = []
    async for batch in source.batches():
        out.extend(batch.events)
    return out


def replay(paths, **options) -> tuple[list, list[str], object]:
    messages: list[str] = []
    source = ProvenanceSource(list(paths), report=messages.append, **options)
    return asyncio.run(read_all(source)), messages, source


# ---------------------------------------------------------------- models and events

def test_generator_covers_every_record_type_and_feature() -> None:
    assert {c: len(r) > 0 for c, r in COLLECTIONS.items()} == dict.fromkeys(chimbuko.COLLECTIONS, True)
    anomalies = COLLECTIONS["anomalies"]
    assert {r["rid"] for r in anomalies + COLLECTIONS["normalexecs"]} == {0, 1, 2}
    assert {r["io_step"] for r in anomalies + COLLECTIONS["normalexecs"]} == {0, 1, 2}
    assert all(r["call_stack"][0]["is_anomaly"] is True for r in anomalies)
    assert any(r["is_gpu_event"] and r["gpu_parent"]["call_stack"] for r in anomalies + COLLECTIONS["normalexecs"])
    assert any(r["counter_events"] for r in anomalies)
    assert any(r["event_window"]["comm_window"] for r in anomalies)
    assert any(r["anomaly_metrics"] is None for r in COLLECTIONS["func_stats"])
    assert any(r["anomaly_metrics"] is not None for r in COLLECTIONS["func_stats"])
    assert generate(ranks=3, steps=3, per_step=5, seed=11) == COLLECTIONS  # deterministic


@pytest.mark.parametrize("collection", list(chimbuko.COLLECTIONS))
def test_every_record_validates_and_names_its_event(collection: str) -> None:
    for record in COLLECTIONS[collection]:
        event = event_of(collection, record)
        assert event.name == chimbuko.COLLECTIONS[collection]
        assert chimbuko.classify(record) == event.name  # recognised by content alone
        assert chimbuko.record_of(event) == record
        assert "event.label" in event.fields or collection not in ("anomalies", "normalexecs")


def test_event_model_is_the_records_pydantic_model() -> None:
    record = next(r for r in COLLECTIONS["anomalies"] if r["is_gpu_event"])
    model = model_of(event_of("anomalies", record))
    assert isinstance(model, chimbuko_models.FunctionEvent)
    assert model.call_stack[0].is_anomaly is True and model.sonata_id == record["__id"]
    assert model.gpu_location.thread == record["tid"] and model.gpu_parent.call_stack[0].func == "cudaLaunchKernel"
    assert isinstance(model.algo_params, chimbuko_models.HistogramParams)
    assert model.algo_params.histogram.bin_edges == record["algo_params"]["histogram"]["Histogram Bin Edges"]
    stats = model_of(event_of("func_stats", COLLECTIONS["func_stats"][2]))
    assert isinstance(stats.runtime_profile.inclusive_runtime, chimbuko_models.RunStats)


def test_stable_id_is_the_records_identity() -> None:
    record = COLLECTIONS["anomalies"][0]
    event = event_of("anomalies", record)
    again = event_of("anomalies", json.loads(json.dumps(record)))
    assert event.id == again.id and len(event.id) == 32
    rescored = event_of("anomalies", {**record, "outlier_score": 99.5, "__id": 12345})
    assert rescored.id == event.id  # same execution, same id: a re-read is a duplicate
    other_rank = event_of("anomalies", {**record, "rid": record["rid"] + 1})
    other_label = event_of("anomalies", {**record, "event_id": "0:0:999"})
    other_program = event_of("anomalies", {**record, "pid": 1})
    assert len({event.id, other_rank.id, other_label.id, other_program.id}) == 4
    ids = [event_of(c, r).id for c, r in ALL]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("bad, message", [
    ({"fid": "7"}, "field fid: input should be a valid integer (got \"7\")"),
    ({"is_gpu_event": 1}, "field is_gpu_event: input should be a valid boolean (got 1)"),
    ({"event_id": "seven"}, "field event_id: string should match pattern"),
    ({"call_stack": [{"entry": 1, "exit": 2, "fid": 1, "func": "f"}]}, "missing field call_stack.0.event_id"),
    ({"gpu_location": {"context": 1, "device": 0, "stream": 0}}, "missing field gpu_location.thread"),
])
def test_wrong_types_and_missing_fields_name_the_field(bad: dict, message: str) -> None:
    record = {**COLLECTIONS["normalexecs"][0], **bad}
    with pytest.raises(chimbuko.RecordError) as info:
        chimbuko.event_from_record(record, collection="normalexecs")
    assert str(info.value).startswith(message)


def test_missing_mandatory_field() -> None:
    record = dict(COLLECTIONS["metadata"][0])
    del record["rid"]
    with pytest.raises(chimbuko.RecordError, match="^missing field rid$"):
        chimbuko.event_from_record(record, collection="metadata")


# ---------------------------------------------------------------- codecs

@pytest.mark.parametrize("collection", list(chimbuko.COLLECTIONS))
def test_json_and_bp_round_trip_every_record_type(collection: str) -> None:
    for record in COLLECTIONS[collection]:
        event = event_of(collection, record)
        data = jsonenc.dumps(event)
        obj = orjson.loads(data)
        assert obj["event"] == event.name and obj["event_id"] == event.id
        assert "event.label" not in obj and "__id" not in obj
        expected = {("event_label" if k == "event_id" else "sonata_id" if k == "__id" else k): v
                    for k, v in record.items()}
        assert {k: v for k, v in obj.items() if k not in ("event", "event_id")} == expected  # nested kept as JSON
        back = jsonenc.parse_line(data)
        assert back == event and chimbuko.record_of(back) == record
        line = bp.format_event(event)
        assert line.startswith("ts=") and f" event={event.name} " in line
        again = bp.parse_line(line)
        assert again == event and chimbuko.record_of(again) == record


def test_bp_keeps_text_that_looks_like_json_as_text() -> None:
    record = {"descr": "Version", "pid": 0, "rid": 0, "tid": 0, "value": "5", "__id": 3}
    event = chimbuko.event_from_record(record)
    line = bp.format_event(event)
    assert 'value="\\"5\\""' in line
    assert chimbuko.record_of(bp.parse_line(line)) == record


def test_bp_ts_is_the_entry_time_of_an_execution() -> None:
    record = COLLECTIONS["anomalies"][0]
    line = bp.format_event(event_of("anomalies", record))
    assert line.startswith("ts=2023-11-14T22:13:2")
    assert bp.format_event(event_of("metadata", COLLECTIONS["metadata"][0])).startswith("ts=1970-01-01T00:00:00")


def test_pretty_lines(in_utc: None) -> None:
    record = COLLECTIONS["anomalies"][0]
    line = pretty_line(event_of("anomalies", record), colour=False)
    assert line == (f"2023-11-14 22:13:{20 + (record['entry'] - 1_700_000_000_000_000) // 1_000_000:02d} UTC anomaly"
                    f"       {record['func']} rank={record['rid']} step={record['io_step']} "
                    f"runtime={record['runtime_total']}us score={record['outlier_score']:.3g} "
                    f"severity={record['outlier_severity']:.3g} [{record['event_id']}]"
                    + (" gpu" if record["is_gpu_event"] else ""))
    meta = COLLECTIONS["metadata"][0]
    assert pretty_line(event_of("metadata", meta), colour=False) == \
        f"--:--:-- metadata      rank=0 tid=0 {meta['descr']}={meta['value']!r}"


# ---------------------------------------------------------------- the follower

@pytest.mark.parametrize("fmt", ["jsonl", "array", "pretty"])
def test_replay_of_each_export_format(tmp_path: Path, fmt: str) -> None:
    paths = write_collections(tmp_path, COLLECTIONS, formats=dict.fromkeys(COLLECTIONS, fmt))
    assert all(is_provenance_file(p) for p in paths.values())
    events, messages, source = replay(paths.values())
    assert messages == [] and source.stats.bad == 0
    assert [(e.name, chimbuko.record_of(e)) for e in events] == \
        [(chimbuko.COLLECTIONS[c], r) for c, r in ALL]


def test_records_carrying_their_collection_in_any_file(tmp_path: Path) -> None:
    mixed = [dict(r, collection=c) for c, r in ALL]
    path = tmp_path / "export.json"
    path.write_bytes(orjson.dumps(mixed))  # one compact line: a JSON array
    events, messages, _ = replay([path])
    assert messages == []
    assert [(e.name, chimbuko.record_of(e)) for e in events] == [(chimbuko.COLLECTIONS[c], r) for c, r in ALL]


def test_recognised_by_content_without_a_collection_name(tmp_path: Path) -> None:
    path = tmp_path / "dump.jsonl"
    path.write_bytes(dump_records(COLLECTIONS["func_stats"] + COLLECTIONS["anomalies"]))
    assert is_provenance_file(path)
    events, messages, _ = replay([path])
    assert messages == []
    assert [e.name for e in events] == ["chimbuko.func_stats"] * len(COLLECTIONS["func_stats"]) + \
        ["chimbuko.anomaly"] * len(COLLECTIONS["anomalies"])


def test_stampede_files_are_not_provenance_files(tmp_path: Path) -> None:
    bp_file, js_file = tmp_path / "run.bp", tmp_path / "run.jsonl"
    bp_file.write_text("ts=2023-03-04T06:23:33.000000Z event=stampede.xwf.start level=Info "
                       "xwf.id=ea17e8ac-02ac-4909-b5e3-16e367392556 restart_count=0\n")
    js_file.write_text('{"ts": 1, "xwf_id": "ea17e8ac-02ac-4909-b5e3-16e367392556", "restart_count": 0, '
                       '"event": "stampede.xwf.start"}\n')
    assert not is_provenance_file(bp_file) and not is_provenance_file(js_file)
    assert type(open_source([bp_file, js_file])) is EventFileSource
    prov = tmp_path / "anomalies.jsonl"
    prov.write_bytes(dump_records(COLLECTIONS["anomalies"][:2]))
    events, messages, _ = replay([bp_file, prov, js_file])  # one load takes both kinds
    assert messages == []
    assert [e.name for e in events] == ["stampede.xwf.start", "chimbuko.anomaly", "chimbuko.anomaly",
                                        "stampede.xwf.start"]


def test_malformed_records_are_reported_as_file_line_and_skipped(tmp_path: Path) -> None:
    good = COLLECTIONS["normalexecs"][:3]
    wrong_type = {**good[1], "rid": "1"}
    missing = {k: v for k, v in good[1].items() if k != "func"}
    lines = [orjson.dumps(good[0]).decode(),
             orjson.dumps(wrong_type).decode(),
             orjson.dumps(missing).decode(),
             orjson.dumps(good[1]).decode()[:80],           # truncated JSON
             "[1, 2]",
             "",
             orjson.dumps({**good[2], "collection": "nonsense"}).decode(),
             orjson.dumps(good[2]).decode()]
    path = tmp_path / "normalexecs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    events, messages, source = replay([path])
    assert [chimbuko.record_of(e) for e in events] == [good[0], good[2]]
    assert [m.split(": ", 2)[:2] for m in messages] == [
        [f"{path}:2", "field rid"], [f"{path}:3", "missing field func"], [f"{path}:4", "invalid JSON"],
        [f"{path}:5", "not a JSON object"], [f"{path}:7", "unknown collection 'nonsense' (known"],
    ]
    assert source.stats.bad == 5


def test_malformed_records_inside_arrays_and_documents(tmp_path: Path) -> None:
    good = COLLECTIONS["metadata"][:3]
    array = tmp_path / "metadata.json"
    text = ('[\n  ' + orjson.dumps(good[0]).decode() + ',\n  {"descr": "x", "pid": 0, "rid": 0, "tid": "zero", '
            '"value": 1},\n  {"descr": oops},\n  ' + orjson.dumps(good[1]).decode() + ',\n  '
            + orjson.dumps(good[2]).decode() + '\n]\n')
    array.write_text(text)
    events, messages, _ = replay([array])
    assert [chimbuko.record_of(e) for e in events] == good
    assert [m.split(": ", 2)[:2] for m in messages] == [[f"{array}:3", "field tid"], [f"{array}:4", "invalid JSON"]]

    docs = tmp_path / "ad_model.json"
    records = COLLECTIONS["ad_model"][:2]
    body = dump_records(records, "pretty")
    docs.write_bytes(body + b'{\n  "pid": 0,\n  "fid": 3,\n  "func_name": "cut')  # the export was cut short
    events, messages, _ = replay([docs])
    assert [chimbuko.record_of(e) for e in events] == records
    cut_line = body.count(b"\n") + 1
    assert messages == [f"{docs}:{cut_line}: truncated JSON record (the file ends inside it): skipped"]


def test_scanner_cuts_records_wherever_the_bytes_are_split() -> None:
    records = [{"descr": 'braces { } [ ] and "quotes" \\ in text', "pid": 0, "rid": 1, "tid": 0,
                "value": {"nested": [1, {"a": "}"}]}}, *COLLECTIONS["metadata"][:3]]
    data = dump_records(records, "array")
    for size in (1, 7, 64, len(data)):
        scanner = _Scanner("array", 0, 0)
        found = []
        for start in range(0, len(data), size):
            found += scanner.feed(data[start:start + size])
        assert [orjson.loads(raw) for _, raw in found] == records
        starts = [line for line, _ in found]
        assert starts[0] == 2 and starts == sorted(starts)
        assert scanner.state == "array" and not scanner.pending


async def test_follow_waits_for_records_being_written(tmp_path: Path) -> None:
    path = tmp_path / "anomalies.json"
    records = COLLECTIONS["anomalies"][:4]
    docs = [orjson.dumps(r, option=orjson.OPT_INDENT_2) + b"\n" for r in records]
    path.write_bytes(docs[0] + docs[1][:50])  # the second is half written
    source = ProvenanceSource([path], follow=True, poll_interval=0.02)
    seen: list = []

    async def consume() -> None:
        async for batch in source.batches():
            seen.extend(batch.events)

    task = asyncio.create_task(consume())
    try:
        for _ in range(400):
            if seen:
                break
            await asyncio.sleep(0.01)
        assert [chimbuko.record_of(e) for e in seen] == records[:1]
        with open(path, "ab") as handle:
            handle.write(docs[1][50:] + docs[2] + docs[3][:-3])
        for _ in range(400):
            if len(seen) == 3:
                break
            await asyncio.sleep(0.01)
        assert [chimbuko.record_of(e) for e in seen] == records[:3]
        with open(path, "ab") as handle:
            handle.write(docs[3][-3:])
        for _ in range(400):
            if len(seen) == 4:
                break
            await asyncio.sleep(0.01)
        assert [chimbuko.record_of(e) for e in seen] == records
    finally:
        source.stop()
        await asyncio.wait_for(task, 5)


# ---------------------------------------------------------------- through the pipeline

async def test_file_endpoints_round_trip_and_filters(tmp_path: Path) -> None:
    paths = write_collections(tmp_path / "in", COLLECTIONS, formats={"func_stats": "array", "ad_model": "pretty"})
    outs = {name: tmp_path / name for name in ("all.jsonl", "all.bp", "anomalies.out.jsonl", "chimbuko.bp",
                                                "no-normal.jsonl")}
    specs = [EndpointSpec(url=EndpointURL.parse(f"file://{outs['all.jsonl']}")), EndpointSpec(url=EndpointURL.parse(f"file://{outs['all.bp']}")),
             EndpointSpec(url=EndpointURL.parse(f"file://{outs['anomalies.out.jsonl']}?events=chimbuko.anomaly")),
             EndpointSpec(url=EndpointURL.parse(f"file://{outs['chimbuko.bp']}?events=chimbuko.*")),
             EndpointSpec(url=EndpointURL.parse(f"file://{outs['no-normal.jsonl']}?events=!chimbuko.normalexec"))]
    result = await Run(ProvenanceSource(list(paths.values())), build_endpoints(specs), RunOptions(progress=False)).run()
    assert result.exit_code == 0 and result.events == len(ALL)
    expected = [event_of(c, r) for c, r in ALL]
    for name in ("all.jsonl", "all.bp", "chimbuko.bp"):
        back = await read_all(EventFileSource([outs[name]]))
        assert back == expected, name
        assert [chimbuko.record_of(e) for e in back] == [r for _, r in ALL]
    anomalies = await read_all(EventFileSource([outs["anomalies.out.jsonl"]]))
    assert anomalies == [e for e in expected if e.name == "chimbuko.anomaly"]
    rest = await read_all(EventFileSource([outs["no-normal.jsonl"]]))
    assert rest == [e for e in expected if e.name != "chimbuko.normalexec"]


def test_cli_load_and_tail(tmp_path: Path, python: str) -> None:
    paths = write_collections(tmp_path / "in", COLLECTIONS)
    out = tmp_path / "out.jsonl"
    run = subprocess.run([python, "-m", "streamer", "load", *map(str, paths.values()), "--dest", f"file://{out}"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"{len(ALL)} events read" in run.stderr
    assert len(out.read_text().splitlines()) == len(ALL)
    tail = subprocess.run([python, "-m", "streamer", "tail", str(paths["anomalies"]), "--from-start",
                           "--no-follow", "--color", "never"], capture_output=True, text=True, timeout=60)
    assert tail.returncode == 0, tail.stderr
    expected = [pretty_line(event_of("anomalies", r), colour=False) for r in COLLECTIONS["anomalies"]]
    assert tail.stdout.splitlines() == expected
    bad = tmp_path / "metadata.jsonl"
    bad.write_text('{"descr": "x", "pid": 0}\n{"descr": \n')
    run = subprocess.run([python, "-m", "streamer", "load", str(bad), "--dest", f"file://{tmp_path / 'x.jsonl'}"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "Traceback" not in run.stderr
    assert f"streamer: {bad}:1: missing field rid (+2 more)" in run.stderr
    assert f"streamer: {bad}:2: invalid JSON" in run.stderr
    strict = subprocess.run([python, "-m", "streamer", "load", str(bad), "--strict",
                             "--dest", f"file://{tmp_path / 'y.jsonl'}"], capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1 and f"{bad}:1: missing field rid" in strict.stderr


def _record_ends(chunks: list[bytes]) -> list[int]:
    ends, total = [], 0
    for chunk in chunks:
        total += len(chunk)
        ends.append(total)
    return ends


def test_cli_follow_kill9_then_resume_loses_and_repeats_nothing(tmp_path: Path, python: str) -> None:
    """A growing indented export followed into SQLite and a JSONL file; kill -9; resume from the checkpoint."""
    records = [r for _, r in ALL if "event_id" in r]
    docs = [orjson.dumps(r, option=orjson.OPT_INDENT_2) + b"\n" for r in records]
    ends = _record_ends(docs)
    ids = [chimbuko.event_from_record(r).id for r in records]
    source, ck, db = tmp_path / "executions.json", tmp_path / "ck.json", tmp_path / "prov.db"
    out1, out2 = tmp_path / "out1.jsonl", tmp_path / "out2.jsonl"
    half = len(docs) // 2
    source.write_bytes(b"".join(docs[:half]) + docs[half][:40])  # a record half written
    cmd = [python, "-m", "streamer", "load", str(source), "--follow", "--checkpoint", str(ck), "-q",
           "--dest", f"sqlite:///{db}?batch=7"]
    proc = subprocess.Popen(cmd + ["--dest", f"file://{out1}?batch=7"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(2000):
            if ck.exists() and json.loads(ck.read_text())["files"].get(str(source.resolve()), {}).get("offset") \
                    == ends[half - 1]:
                break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        with open(source, "ab") as handle:  # grows while it runs
            handle.write(docs[half][40:] + b"".join(docs[half + 1:half + 5]))
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    position = json.loads(ck.read_text())["files"][str(source.resolve())]
    assert position["offset"] in ends and position["state"] == "documents"
    covered = ends.index(position["offset"]) + 1
    first = [json.loads(line)["event_id"] for line in out1.read_text().splitlines()]
    assert first[:covered] == ids[:covered]
    with open(source, "ab") as handle:
        handle.write(b"".join(docs[half + 5:]))
    proc = subprocess.Popen(cmd + ["--dest", f"file://{out2}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        for _ in range(3000):
            if out2.exists() and len(out2.read_text().splitlines()) >= len(records) - covered:
                break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    second = [json.loads(line)["event_id"] for line in out2.read_text().splitlines()]
    assert second == ids[covered:]  # nothing the checkpoint covered is repeated, nothing after it lost
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = {}
    for table in ("anomalies", "normalexecs"):
        for row in conn.execute(f"SELECT * FROM chimbuko_{table}"):
            rows[row["event_id"]] = provenance_schema.record_of_row(provenance_schema.BY_EVENT[
                "chimbuko.anomaly" if table == "anomalies" else "chimbuko.normalexec"], dict(row))
    assert sorted(rows) == sorted(ids)
    assert [rows[i] for i in ids] == [{k: v for k, v in r.items() if v is not None} for r in records]


async def _collect_until(source, seen: list, count: int) -> None:
    for _ in range(800):
        if len(seen) >= count:
            return
        await asyncio.sleep(0.01)


async def test_follow_across_rotation_into_a_file_of_another_layout(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    records = COLLECTIONS["metadata"]
    path.write_bytes(dump_records(records[:3], "pretty") + b'{\n  "descr": "cut')  # rotated mid-record
    source = ProvenanceSource([path], follow=True, poll_interval=0.02, report=(messages := []).append)
    seen: list = []

    async def consume() -> None:
        async for batch in source.batches():
            seen.extend(batch.events)

    task = asyncio.create_task(consume())
    try:
        await _collect_until(source, seen, 3)
        path.rename(tmp_path / "metadata.json.1")
        path.write_bytes(dump_records(records[3:6], "array"))
        await _collect_until(source, seen, 6)
        await asyncio.sleep(0.1)
    finally:
        source.stop()
        await asyncio.wait_for(task, 5)
    assert [chimbuko.record_of(e) for e in seen] == records[:6]
    assert len(messages) == 1 and messages[0].startswith(f"{path}:")
    assert "record cut off (file rotated or truncated" in messages[0]


async def test_tail_starts_at_the_end_of_a_provenance_file(tmp_path: Path) -> None:
    from streamer.sources.provenance import end_position

    path = tmp_path / "anomalies.jsonl"
    records = COLLECTIONS["anomalies"]
    path.write_bytes(dump_records(records[:2]))
    source = ProvenanceSource([path], follow=True, poll_interval=0.02)
    source.start_at(path, end_position(path, 2))
    seen: list = []

    async def consume() -> None:
        async for batch in source.batches():
            seen.extend(batch.events)

    task = asyncio.create_task(consume())
    try:
        await asyncio.sleep(0.1)
        with open(path, "ab") as handle:
            handle.write(dump_records(records[2:4]))
        await _collect_until(source, seen, 2)
        await asyncio.sleep(0.05)
    finally:
        source.stop()
        await asyncio.wait_for(task, 5)
    assert [chimbuko.record_of(e) for e in seen] == records[2:4]


async def test_records_parked_in_an_overflow_file_come_back_unchanged(tmp_path: Path) -> None:
    """A stalled endpoint's records go to its overflow file (JSON) and return equal, nested parts included."""
    from typing import Sequence

    from streamer.core.bus import Bus, make_route
    from streamer.events.codec import JSON_LINES
    from streamer.endpoints.base import Endpoint
    from streamer.sources.base import Batch
    from streamer.util.urls import EndpointURL

    class Stalled(Endpoint):
        def __init__(self, gate: asyncio.Event) -> None:
            super().__init__(EndpointURL.parse("file:///stalled"),
                             {"buffer": 10, "batch": 5, "overflow_dir": str(tmp_path)})
            self.gate, self.received = gate, []

        async def write(self, batch: Sequence) -> None:
            await self.gate.wait()
            self.received.extend(batch)

    gate = asyncio.Event()
    endpoint = Stalled(gate)
    bus = Bus([make_route(endpoint, codec=JSON_LINES)])
    await bus.start()
    expected = [event_of(c, r) for c, r in ALL]
    for start in range(0, len(expected), 7):
        await bus.publish(Batch(expected[start:start + 7]))
    assert list(tmp_path.glob("*.overflow"))
    gate.set()
    await bus.close()
    assert endpoint.received == expected
    assert [chimbuko.record_of(e) for e in endpoint.received] == [r for _, r in ALL]


def test_event_file_lines_holding_provenance_records_are_recognised(tmp_path: Path) -> None:
    """A JSON-lines event file that is not named or started like an export still takes records by content."""
    path = tmp_path / "mixed.jsonl"
    stampede = ('{"ts": 1, "xwf_id": "ea17e8ac-02ac-4909-b5e3-16e367392556", "restart_count": 0, '
                '"event": "stampede.xwf.start"}')
    record = COLLECTIONS["counter_stats"][0]
    path.write_text("\n".join([stampede, orjson.dumps(record).decode(), '{"nothing": 1}']) + "\n")
    assert not is_provenance_file(path)
    messages: list[str] = []
    events = asyncio.run(read_all(EventFileSource([path], report=messages.append)))
    assert [e.name for e in events] == ["stampede.xwf.start", "chimbuko.counter_stats"]
    assert chimbuko.record_of(events[1]) == record
    assert messages == [f'{path}:3: no "event" key']
