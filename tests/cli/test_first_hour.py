"""Issue 16: the first hour of a new user (items 1, 2, 4, 5, 6, 7, 8), each reproduced first."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.cli.main import main
from streamer.endpoints import create_endpoint
from streamer.events import Event, bp
from streamer.util.urls import EndpointURL




def read_bp(path: Path) -> list[Event]:
    return [bp.parse_line(line) for line in path.read_text().splitlines() if line.strip()]




# ---------------------------------------------------------------- item 1: PostgreSQL column widths

async def _load(url: str, events: list[Event]) -> list[str]:
    endpoint = create_endpoint(EndpointURL.parse(url))
    await endpoint.open()
    try:
        for start in range(0, len(events), 2000):
            await endpoint.write(events[start:start + 2000])
    finally:
        await endpoint.close()
    return endpoint.rejected  # type: ignore[attr-defined]


CORPUS_BP = ("montage-1.0.bp", "blackdiamond.bp", "output-file.bp", "output-file-old.bp")


async def test_item1_every_corpus_bp_file_loads_into_postgresql_with_nothing_refused(pg_db: str,
                                                                                    corpus: Path) -> None:
    names = sorted(p.name for p in (corpus / "bp").glob("*.bp"))
    assert names == sorted(CORPUS_BP)  # a new corpus file must be added here
    import asyncpg

    for name in names:
        rejected = await _load(pg_db, read_bp(corpus / "bp" / name))
        assert rejected == [], name  # output-file.bp too: Triana's dialect (endpoints/triana.py)
    conn = await asyncpg.connect(pg_db)
    try:  # montage's host.info total_memory in bytes: beyond INTEGER, the column is BIGINT
        assert await conn.fetchval("SELECT count(*) FROM host WHERE total_memory = 4158918656") >= 1
        assert await conn.fetchval("SELECT count(*) FROM host WHERE total_memory = 42275557376") >= 1  # 4.0
        assert await _triana_rows(lambda sql: conn.fetch(sql)) == TRIANA_ROWS
    finally:
        await conn.close()


TRIANA_WF = "ccb26ba4-4df6-4aa4-b6b9-be6bd3fd8d74"
_IN_WF = f"JOIN workflow w ON w.wf_id = j.wf_id WHERE w.wf_uuid = '{TRIANA_WF}'"
TRIANA_QUERIES = {
    "job": "SELECT j.exec_job_id, j.submit_file, j.type_desc, j.clustered, j.max_retries, j.executable, "
           f"j.task_count FROM job j {_IN_WF} ORDER BY 1",
    "job_instance": "SELECT j.exec_job_id, i.job_submit_seq, i.exitcode, i.host_id IS NOT NULL FROM job_instance i "
                    f"JOIN job j ON j.job_id = i.job_id {_IN_WF} ORDER BY 2",
    "invocation": "SELECT j.exec_job_id, v.task_submit_seq, v.exitcode, v.abs_task_id FROM invocation v "
                  "JOIN job_instance i ON i.job_instance_id = v.job_instance_id JOIN job j ON j.job_id = i.job_id "
                  f"{_IN_WF} ORDER BY 1",
    "job_edge": f"SELECT j.parent_exec_job_id, j.child_exec_job_id FROM job_edge j {_IN_WF} ORDER BY 1, 2",
    "task_edge": f"SELECT j.parent_abs_task_id, j.child_abs_task_id FROM task_edge j {_IN_WF} ORDER BY 1, 2",
    "task": "SELECT t.abs_task_id, j.exec_job_id FROM task t JOIN job j ON j.job_id = t.job_id "
            f"JOIN workflow w ON w.wf_id = t.wf_id WHERE w.wf_uuid = '{TRIANA_WF}' ORDER BY 1",
    "root": f"SELECT w.root_wf_id = w.wf_id FROM workflow w WHERE w.wf_uuid = '{TRIANA_WF}'",
}
_UNITS = ("AnnotatedStringGen", "AnnotatedStringGen1", "Concat", "StringToSystemOut")
TRIANA_ROWS = {
    # the dax job, declared from the wf.plan; the units as Triana declared them
    "job": [("helloworld.xml", "exec:helloworld.xml", "dag", 0, 1, "helloworld.xml", 0)]
           + [(f"unit:{u}", "null", "compute", 0, 1, f"common.string.{u}", 1) for u in _UNITS],
    "job_instance": [("helloworld.xml", 1, None, 0), ("unit:AnnotatedStringGen1", 2, 1, 1),
                     ("unit:StringToSystemOut", 3, 1, 1), ("unit:Concat", 4, 1, 1), ("unit:AnnotatedStringGen", 5, 1, 1)],
    "invocation": [(f"unit:{u}", 1, 1, u) for u in _UNITS],  # exitcode: their main.end's
    "job_edge": [("unit:AnnotatedStringGen", "unit:Concat"), ("unit:AnnotatedStringGen1", "unit:Concat"),
                 ("unit:Concat", "unit:StringToSystemOut")],
    "task_edge": [("task:AnnotatedStringGen", "task:Concat"), ("task:AnnotatedStringGen1", "task:Concat"),
                  ("task:Concat", "task:StringToSystemOut")],
    "task": [(f"task:{u}", f"unit:{u}") for u in _UNITS],
    "root": [(1,)],
}


async def _triana_rows(fetch) -> dict[str, list[tuple]]:
    """output-file.bp's rows, booleans as 0/1 (PostgreSQL's and SQLite's alike)."""
    out = {}
    for table, sql in TRIANA_QUERIES.items():
        rows = await fetch(sql)
        out[table] = [tuple(int(v) if isinstance(v, bool) else v for v in row) for row in rows]
    return out


async def test_item1_every_corpus_bp_file_loads_into_sqlite_with_nothing_refused(tmp_path: Path,
                                                                                corpus: Path) -> None:
    import sqlite3

    db = tmp_path / "corpus.db"
    for name in sorted(p.name for p in (corpus / "bp").glob("*.bp")):
        assert await _load(f"sqlite:///{db}", read_bp(corpus / "bp" / name)) == [], name
    conn = sqlite3.connect(db)

    async def fetch(sql: str) -> list[tuple]:
        return conn.execute(sql).fetchall()
    try:
        assert await _triana_rows(fetch) == TRIANA_ROWS
    finally:
        conn.close()
    # loaded in two runs, stopped between an inv.end and its main.end (and between the dax job's submit.start
    # and .end): the second run re-reads what the first wrote (ids, the invocations waiting for an exitcode)
    events = read_bp(corpus / "bp" / "output-file.bp")
    cut = next(i for i, e in enumerate(events) if e.name == "stampede.inv.end") + 1
    assert events[cut - 1].fields["job_inst.id"] == 2
    assert "stampede.job_inst.main.end" in [e.name for e in events[cut:]]
    split = tmp_path / "split.db"
    for part in (events[:cut], events[cut:]):
        assert await _load(f"sqlite:///{split}", part) == []
    conn = sqlite3.connect(split)
    try:
        assert await _triana_rows(fetch) == TRIANA_ROWS
    finally:
        conn.close()


async def test_item1_triana_rules_leave_a_pegasus_stream_alone(tmp_path: Path) -> None:
    """Outside Triana's naming nothing changes: a job instance of an undeclared job, or of the dax file of a
    workflow whose root.xwf.id is a uuid (Pegasus's), is refused as before."""
    plan = Event("stampede.wf.plan", {"xwf.id": TRIANA_WF, "root.xwf.id": TRIANA_WF, "dax.file": "wf.dax",
                                      "dag.file.name": "wf.dag", "submit.hostname": "h", "ts": 1.0})
    job = Event("stampede.job.info", {"xwf.id": TRIANA_WF, "job.id": "ls", "type_desc": "compute", "clustered": 0,
                                      "max_retries": 1, "task_count": 1, "executable": "/bin/ls",
                                      "submit_file": "ls.sub", "ts": 1.0})
    starts = [Event("stampede.job_inst.submit.start", {"xwf.id": TRIANA_WF, "job.id": name, "job_inst.id": 1,
                                                       "sched.id": name, "ts": 2.0})
              for name in ("unit:ls", "wf.dax")]
    rejected = await _load(f"sqlite:///{tmp_path / 'x.db'}", [plan, job, *starts])
    assert [m.split(": ", 1)[1] for m in rejected] == [
        "unknown job unit:ls (no stampede.job.info loaded for it)",
        "unknown job wf.dax (no stampede.job.info loaded for it)"]


async def test_item1_a_value_no_column_holds_rejects_that_event_only(pg_db: str, corpus: Path) -> None:
    events = read_bp(corpus / "bp" / "montage-1.0.bp")
    index = next(i for i, e in enumerate(events) if e.name == "stampede.job_inst.main.end")
    bad = events[index]
    events[index] = Event(bad.name, {**bad.fields, "exitcode": 2**40})
    rejected = await _load(pg_db, events)
    assert len(rejected) == 1
    assert rejected[0].startswith("rejected event stampede.job_inst.main.end")
    assert "job_instance.exitcode = 1099511627776 does not fit the column (INTEGER, 32 bits)" in rejected[0]


def test_item1_the_refusal_names_the_source_line(pg_db: str, corpus: Path, tmp_path: Path) -> None:
    """`streamer load FILE --dest postgresql://…`: a value no column holds is refused for that event alone,
    the message naming the event, FILE:LINE where it was read, the column and the value."""
    lines = (corpus / "bp" / "montage-1.0.bp").read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if "event=stampede.job_inst.main.end " in line)
    lines[number - 1] = re.sub(r"exitcode=\S+", "exitcode=1099511627776", lines[number - 1])
    data = tmp_path / "big-exitcode.bp"
    data.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "streamer", "load", str(data), "--dest", pg_db],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    refused = [line for line in done.stderr.splitlines() if "rejected event" in line]
    assert len(refused) == 1, done.stderr
    assert "rejected event stampede.job_inst.main.end (id " in refused[0]
    assert f", {data}:{number}): job_instance.exitcode = 1099511627776 does not fit the column" in refused[0]


# ---------------------------------------------------------------- item 2: resume state tied to the endpoints

def _events_of(path: Path) -> list[str]:
    return [line.split(" event=", 1)[1].split(" ", 1)[0] for line in path.read_text().splitlines()]


async def _interrupted_replay(submit: Path, state: Path, destinations: list[str] | None) -> int:
    """A replay stopped after a checkpoint part-way into its dagman.out: what an interrupted one leaves."""
    from streamer.monitor.source import WorkflowSource

    kwargs = {} if destinations is None else {"destinations": destinations}
    source = WorkflowSource(submit, timezone="UTC", state_path=state, **kwargs)
    source.read_size = 2048  # many small steps: stop after the first one that carries a position
    sent = 0
    try:
        async for batch in source.batches():
            sent += len(batch.events)
            if batch.position is not None and batch.position["workflows"][0]["offset"] > 0:
                await source.commit(batch.position)  # past the static events, into the dagman.out
                break
    finally:
        source.stop()
        await source.close()
    return sent


def test_item2_a_replay_to_other_endpoints_after_an_interrupted_one_gets_every_event(
        tmp_path: Path, capsys) -> None:
    from streamer.synth import generate

    submit = generate(tmp_path / "wf", jobs=6, seed=3)
    reference = tmp_path / "ref.bp"
    assert main(["replay", str(submit), "--timezone", "UTC", "--state", str(tmp_path / "ref.state"),
                 "--dest", str(reference), "-q", "--no-jobstate"]) == 0
    state = tmp_path / "run.state"
    sent = asyncio.run(_interrupted_replay(submit, state, None))
    assert 0 < sent < len(_events_of(reference))
    capsys.readouterr()
    other = tmp_path / "B.bp"
    assert main(["replay", str(submit), "--timezone", "UTC", "--state", str(state), "--dest", str(other),
                 "--no-jobstate"]) == 0
    err = capsys.readouterr().err
    assert _events_of(other) == _events_of(reference)  # wf.plan, xwf.start and all: started clean
    assert "an earlier run stopped part-way; starting from the beginning (--resume goes on" in err


def test_item2_resume_is_asked_for_said_and_tied_to_the_same_endpoints(tmp_path: Path, capsys) -> None:
    from streamer.synth import generate
    from streamer.util.urls import mask

    submit = generate(tmp_path / "wf", jobs=6, seed=3)
    reference = tmp_path / "ref.bp"
    assert main(["replay", str(submit), "--timezone", "UTC", "--state", str(tmp_path / "ref.state"),
                 "--dest", str(reference), "-q", "--no-jobstate"]) == 0
    first = tmp_path / "A.bp"
    state = tmp_path / "run.state"
    asyncio.run(_interrupted_replay(submit, state, [f"{mask('file://' + str(first))} events=*"]))
    capsys.readouterr()
    # another endpoint set: the state is not theirs, they get everything
    other = tmp_path / "B.bp"
    assert main(["replay", str(submit), "--timezone", "UTC", "--state", str(state), "--dest", str(other),
                 "--resume", "--no-jobstate"]) == 0
    err = capsys.readouterr().err
    assert f"saved for other endpoints (file://{first} events=*); starting from the beginning" in err
    assert _events_of(other) == _events_of(reference)
    # the same endpoints with --resume: goes on, and says from where
    asyncio.run(_interrupted_replay(submit, state, [f"file://{first} events=*"]))
    assert main(["replay", str(submit), "--timezone", "UTC", "--state", str(state), "--dest", str(first),
                 "--resume", "--no-jobstate"]) == 0
    err = capsys.readouterr().err
    assert f"resuming {submit}/" in err and ".dagman.out from line " in err
    line = int(err.split(" from line ", 1)[1].split(" ", 1)[0])
    assert line > 0
    assert "stampede.wf.plan" not in _events_of(first)  # resumed: the first events went to A before


def test_item2_a_dagman_jobstate_log_resumes_like_a_submit_dir(tmp_path: Path, capsys) -> None:
    """`streamer replay PATH/jobstate.log`: its resume state is tied to the endpoints it was delivered to,
    a replay starts clean unless --resume, and a resume says from which line."""
    from streamer.monitor.plain.jobstate import JobstateSource
    from tests.support.dagjobstate import write_plain_dag

    log = write_plain_dag(tmp_path)
    lines = log.read_text().splitlines(keepends=True)
    reference = tmp_path / "ref.bp"
    assert main(["replay", str(log), "--state", str(tmp_path / "ref.state"), "--dest", str(reference), "-q"]) == 0
    half = len(lines) // 2

    def interrupted(state: Path) -> None:
        """A run to A.bp checkpointed half-way (DAGMan had written that much), then stopped."""
        async def run() -> None:
            source = JobstateSource(log, state_path=state, destinations=[f"file://{first} events=*"])
            async for batch in source.batches():
                await source.commit(batch.position)
                break
        first.write_text("")
        log.write_text("".join(lines[:half]))
        asyncio.run(run())
        log.write_text("".join(lines))

    first, state = tmp_path / "A.bp", tmp_path / "run.state"
    interrupted(state)
    capsys.readouterr()
    other = tmp_path / "B.bp"  # a replay without --resume: from the start
    assert main(["replay", str(log), "--state", str(state), "--dest", str(other)]) == 0
    assert "an earlier run stopped part-way; starting from the beginning (--resume goes on" in capsys.readouterr().err
    assert _events_of(other) == _events_of(reference)
    interrupted(state)  # another endpoint set with --resume: not theirs, they get everything
    other.unlink()
    assert main(["replay", str(log), "--state", str(state), "--dest", str(other), "--resume"]) == 0
    assert f"saved for other endpoints (file://{first} events=*); starting from the beginning" in \
        capsys.readouterr().err
    assert _events_of(other) == _events_of(reference)
    interrupted(state)  # the same endpoints with --resume: goes on from line `half`, and says so
    assert main(["replay", str(log), "--state", str(state), "--dest", str(first), "--resume"]) == 0
    assert f"resuming {log} from line {half} (state {state})" in capsys.readouterr().err
    assert 0 < len(_events_of(first)) < len(_events_of(reference))
    assert _events_of(first)[0] != "stampede.wf.plan"  # those went to A before


# ---------------------------------------------------------------- item 4: ?mode=truncate with a checkpoint

def test_item4_truncate_cannot_resume_from_a_checkpoint(tmp_path: Path, corpus: Path, capsys) -> None:
    source = tmp_path / "in.bp"
    lines = (corpus / "bp" / "blackdiamond.bp").read_text().splitlines(keepends=True)
    source.write_text("".join(lines[:100]))
    out = tmp_path / "out.bp"
    ckpt = tmp_path / "run.ckpt"
    argv = ["load", str(source), "--checkpoint", str(ckpt), "--dest", f"file://{out}?mode=truncate", "-q"]
    assert main(argv) == 0
    with source.open("a") as handle:
        handle.write("".join(lines[100:]))
    before = out.read_text()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "?mode=truncate cannot resume from a checkpoint (the events before it would be lost)" in err
    assert out.read_text() == before  # untouched: the first 100 events are still there


# ---------------------------------------------------------------- item 5: the same input twice

def test_item5_the_same_file_twice_or_through_a_link_is_read_once(tmp_path: Path, corpus: Path, capsys) -> None:
    source = corpus / "bp" / "blackdiamond.bp"
    link = tmp_path / "link.bp"
    link.symlink_to(source)
    out = tmp_path / "out.bp"
    assert main(["load", str(source), str(source), str(link), "--dest", str(out), "-q"]) == 0
    err = capsys.readouterr().err
    assert out.read_text().count("\n") == 230
    assert f"{source}: the same file as {source}: read once" in err
    assert f"{link}: the same file as {source}: read once" in err


# ---------------------------------------------------------------- item 6: --on-error isolate exits 1

def test_item6_isolate_completes_the_others_and_exits_1(tmp_path: Path, corpus: Path, capsys) -> None:
    good = tmp_path / "good.bp"
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where a directory should be\n")
    code = main(["load", str(corpus / "bp" / "blackdiamond.bp"), "--on-error", "isolate", "--dest", str(good),
                 "--dest", f"sqlite:///{blocked}/x.db"])
    err = capsys.readouterr().err
    assert code == 1
    assert good.read_text().count("\n") == 230  # the healthy endpoint got everything
    assert "(isolated; the other endpoints continue)" in err


# ---------------------------------------------------------------- item 7: --dest and monitord's database

def test_item7_a_dest_says_once_that_the_default_database_is_not_written(tmp_path: Path, capsys) -> None:
    from streamer.synth import generate

    submit = generate(tmp_path / "wf", jobs=2, seed=1)
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(submit), "--timezone", "UTC", "--dest", str(out), "--no-jobstate"]) == 0
    err = capsys.readouterr().err
    db = next(submit.glob("*.dag")).name.rsplit(".", 1)[0] + ".stampede.db"
    assert not (submit / db).exists()
    assert err.count(f"note: {db} is not written") == 1
    assert f"add --dest sqlite:///{submit}/{db} to keep monitord's database" in err
    # naming it keeps it, and the note goes
    assert main(["replay", str(submit), "--timezone", "UTC", "--dest", str(out), "--no-jobstate",
                 "--dest", f"sqlite:///{submit}/{db}"]) == 0
    assert "is not written" not in capsys.readouterr().err
    assert (submit / db).exists()
    # -q: the note is not printed either (a quiet run prints warnings and errors only)
    assert main(["replay", str(submit), "--timezone", "UTC", "--dest", str(out), "--no-jobstate", "-q"]) == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- item 8: options checked up front

@pytest.mark.parametrize("dest, message", [
    ("file://{tmp}/o.bp?evnts=stampede.xwf.*", "unknown option 'evnts' (did you mean events?)"),
    ("file://{tmp}/o.bp?mode=trunc", "option mode: 'trunc' is not one of append, truncate"),
    ("file://{tmp}/o.bp?buffer=abc", "option buffer: 'abc' is not a positive integer"),
    ("file://{tmp}/o.bp?fsync=maybe", "option fsync: 'maybe' is not a boolean (true or false)"),
    ("amqp://guest:guest@127.0.0.1:1/%2F/x?drain_timeot=5", "unknown option 'drain_timeot' (did you mean "
                                                             "drain_timeout?)"),
    ("amqp://guest:guest@127.0.0.1:1/%2F/x?drain_timeout=soon", "option drain_timeout: 'soon' is not a duration"),
])
def test_item8_unknown_options_and_bad_values_are_usage_errors(tmp_path: Path, corpus: Path, capsys,
                                                               dest: str, message: str) -> None:
    code = main(["load", str(corpus / "bp" / "blackdiamond.bp"), "--dest", dest.format(tmp=tmp_path), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err and not (tmp_path / "o.bp").exists()


def test_item8_unknown_toml_keys_and_a_repeated_events_flag(tmp_path: Path, corpus: Path, capsys) -> None:
    config = tmp_path / "streamer.toml"
    config.write_text(f'[[endpoint]]\nurl = "file://{tmp_path}/o.bp"\nevnts = "stampede.xwf.*"\n')
    bp_file = str(corpus / "bp" / "blackdiamond.bp")
    assert main(["load", bp_file, "--config", str(config)]) == 2
    assert (f"{config}: endpoint #1: unknown option 'evnts' (did you mean events?)"
            in capsys.readouterr().err)
    config.write_text(f'on_eror = "isolate"\n[[endpoint]]\nurl = "file://{tmp_path}/o.bp"\n')
    assert main(["load", bp_file, "--config", str(config)]) == 2
    assert f"{config}: unknown key 'on_eror'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["load", bp_file, "--dest", f"{tmp_path}/o.bp", "--events", "stampede.xwf.*", "--events",
              "stampede.inv.end"])
    assert exit_info.value.code == 2
    assert "--events given twice" in capsys.readouterr().err


def test_item8_overflow_takes_a_size_like_spool_size(tmp_path: Path, corpus: Path) -> None:
    out = tmp_path / "o.bp"
    assert main(["load", str(corpus / "bp" / "blackdiamond.bp"), "--dest", f"file://{out}?overflow=1G&buffer=10",
                 "-q"]) == 0
    assert out.read_text().count("\n") == 230


def test_item8_a_filter_matching_no_event_warns_with_the_nearest_names(tmp_path: Path, corpus: Path,
                                                                       capsys) -> None:
    out = tmp_path / "o.bp"
    assert main(["load", str(corpus / "bp" / "blackdiamond.bp"), "--dest", str(out), "--events",
                 "job_inst.main.end,stampede.xwf.*", "-q"]) == 0
    err = capsys.readouterr().err
    assert ("warning: filter 'job_inst.main.end' matches no known event name; did you mean "
            "stampede.job_inst.main.end?") in err
    assert "stampede.xwf" not in err  # a pattern that matches is not warned about
    assert main(["tail", str(corpus / "bp" / "blackdiamond.bp"), "--from-start", "--no-follow", "--color", "never",
                 "--events", "stampede.xwf.start"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(" stampede.xwf.start " in line for line in lines)  # full names: copying one works


def test_item8_help_lists_every_url_option_from_the_declarations(capsys) -> None:
    from streamer.endpoints.options import AMQP, BUS, FILE, SQLITE, TERMINAL

    with pytest.raises(SystemExit):
        main(["load", "--help"])
    out = capsys.readouterr().out
    for option in BUS + FILE + TERMINAL + AMQP + SQLITE:
        assert f"  {option.name}=" in out, option.name
