"""The one checkpoint module: one policy for a damaged or foreign state file, whoever keeps it.

Said once with the file and the reason; kept aside as `.bad` and started clean, unless the run writes a file
endpoint (its exactly-once marks were in the lost file): then refused, the file left where it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path

import pytest

from streamer.monitor.plain.jobstate import JobstateSource
from streamer.synth import generate
from streamer.util import checkpoint
from tests.support.commands import streamer
from tests.support.dagjobstate import write_plain_dag

ACCEPT_V1 = {"what": "checkpoint (version 1)", "accept": lambda data: data.get("version") == 1}


def test_written_atomically_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "ck.json"
    checkpoint.write(path, {"version": 1, "files": {"a": {"offset": 3}}})
    assert checkpoint.read(path, refuse=True, **ACCEPT_V1) == {"version": 1, "files": {"a": {"offset": 3}}}
    assert [p.name for p in path.parent.iterdir()] == ["ck.json"]  # no temp file left
    assert checkpoint.read(tmp_path / "none.json", refuse=True, **ACCEPT_V1) is None


@pytest.mark.parametrize("text, reason", [("{not json", "not JSON: "), ('{"version": 7}', "written by another"),
                                          ("[1, 2]", "written by another")])
def test_damaged_is_said_once_kept_aside_and_started_clean(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                           text: str, reason: str) -> None:
    path = tmp_path / "ck.json"
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger="streamer.checkpoint"):
        assert checkpoint.read(path, refuse=False, **ACCEPT_V1) is None
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"{path}: unreadable checkpoint (version 1) ({reason}")
    assert said.endswith("; kept as ck.json.bad, starting from the beginning")
    assert not path.exists() and (tmp_path / "ck.json.bad").read_text() == text


def test_damaged_is_refused_when_a_file_endpoint_would_get_every_event_again(tmp_path: Path) -> None:
    path = tmp_path / "ck.json"
    path.write_text("{not json")
    assert checkpoint.writes_files(["sqlite:///x.db events=*", "file:///tmp/o.jsonl events=*"])
    assert not checkpoint.writes_files(["sqlite:///x.db events=*", "amqp://h/v events=*", "-"])
    with pytest.raises(checkpoint.CheckpointError, match=r"ck.json: unreadable checkpoint \(version 1\) \(not JSON"):
        checkpoint.read(path, refuse=True, **ACCEPT_V1)
    assert path.read_text() == "{not json"


def _one_event_file(tmp_path: Path) -> Path:
    generated = generate(tmp_path / "wf", jobs=2, seed=3)
    events = tmp_path / "in.jsonl"
    streamer("replay", str(generated), "--no-jobstate", "--dest", str(events), check=True)
    return events


def test_load_into_a_database_starts_clean_over_a_damaged_checkpoint(tmp_path: Path) -> None:
    """The copy in `sources/eventfile.py` refused (exit 2) whatever the endpoints."""
    events = _one_event_file(tmp_path)
    ck, db = tmp_path / "ck.json", tmp_path / "o.db"
    ck.write_text("{not json")
    run = streamer("load", str(events), "--dest", f"sqlite:///{db}", "--checkpoint", str(ck), "--quiet")
    assert run.returncode == 0, run.stderr
    assert f"{ck}: unreadable checkpoint (version 1) (not JSON: " in run.stderr
    assert (tmp_path / "ck.json.bad").read_text() == "{not json"
    assert json.loads(ck.read_text())["version"] == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from job").fetchone()[0] > 0


def test_replay_into_a_file_refuses_a_damaged_monitor_state(tmp_path: Path) -> None:
    """The copy in `monitor/source.py` warned and started over, appending every event again to the file."""
    submit = generate(tmp_path / "wf", jobs=2, seed=3)
    out = tmp_path / "o.jsonl"
    state = submit / "streamer.state.json"
    state.write_text('{"version": 1, "workflows": [')
    run = streamer("replay", str(submit), "--resume", "--dest", str(out))
    assert run.returncode == 2
    error = run.stderr.splitlines()[-1]
    assert error.startswith(f"streamer: error: {state}: unreadable state (version 1) (not JSON: unexpected end")
    assert error.endswith("); not starting from the beginning, which would write every event again to the file "
                          "endpoints: move it away to start over")
    assert run.stderr.count("unreadable state") == 1
    assert state.read_text() == '{"version": 1, "workflows": ['
    assert not out.exists()


def test_jobstate_state_into_a_database_starts_clean(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The copy in `monitor/plain/jobstate.py` raised SourceError whatever the endpoints."""
    path = write_plain_dag(tmp_path / "dag")
    state = tmp_path / "state.json"
    state.write_text('{"version": 1, "kind": "something else"}')

    async def run() -> int:
        source = JobstateSource(path, state_path=state, destinations=[f"sqlite:///{tmp_path}/o.db events=*"])
        count = 0
        async for batch in source.batches():
            count += len(batch.events)
            await source.commit(batch.position)
        return count

    with caplog.at_level(logging.WARNING, logger="streamer.checkpoint"):
        assert asyncio.run(run()) > 0
    assert [r.getMessage() for r in caplog.records] == [
        f"{state}: unreadable jobstate.log state (version 1) (written by another program or version); "
        "kept as state.json.bad, starting from the beginning"]
    assert json.loads(state.read_text())["kind"] == "dagman-jobstate"


def test_replay_into_a_database_over_a_state_of_another_engine_version_starts_clean(tmp_path: Path) -> None:
    """`engine/state.py` refused such a state with a StateError (exit 2) once the engines started."""
    submit = generate(tmp_path / "wf", jobs=2, seed=3)
    db = tmp_path / "o.db"
    streamer("follow", str(submit), "--dest", f"sqlite:///{db}", "--quiet", check=True)
    state = submit / "streamer.state.json"
    saved = json.loads(state.read_text())
    for item in saved["workflows"]:
        item["engine"]["version"] = 2
    state.write_text(json.dumps(saved))
    run = streamer("follow", str(submit), "--dest", f"sqlite:///{db}", "--quiet")
    assert run.returncode == 0, run.stderr
    assert (f"{state}: unreadable state (version 1) (written by another program or version); kept as "
            "streamer.state.json.bad, starting from the beginning") in run.stderr
    assert json.loads((tmp_path / "wf" / "streamer.state.json.bad").read_text()) == saved


def test_a_damaged_stream_offset_file_follows_the_one_policy(tmp_path: Path) -> None:
    """`sources/amqp/stream.py` raised ValueError (remove it to start) whatever the destinations."""
    from streamer.sources.amqp.stream import StreamOffset

    path = tmp_path / "q.json"
    path.write_text('{"next": "x"}')
    with pytest.raises(checkpoint.CheckpointError, match="q.json: unreadable stream offset file"):
        StreamOffset(path, refuse=True)
    assert StreamOffset(path).next is None
    assert (tmp_path / "q.json.bad").read_text() == '{"next": "x"}'
    StreamOffset(path).save(41)
    assert StreamOffset(path).next == 42
