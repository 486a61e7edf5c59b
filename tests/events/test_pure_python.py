"""Without the compiled fast paths (no C compiler, or STREAMER_PURE_PYTHON=1) streamer gives the same output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from streamer.synth import generate
from tests.events.test_codecs import corpus_bp_files


def _streamer(args: list[str], *, pure: bool, cwd: Path) -> None:
    env = dict(os.environ, TZ="UTC")
    env.pop("STREAMER_PURE_PYTHON", None)
    if pure:
        env["STREAMER_PURE_PYTHON"] = "1"
    subprocess.run([sys.executable, "-m", "streamer", *args, "-q"], check=True, env=env, cwd=cwd, timeout=300)


def test_load_writes_the_same_bytes_pure_or_compiled(shared: Path, tmp_path: Path) -> None:
    inputs = [str(p) for p in corpus_bp_files(shared)]
    for mode in ("pure", "compiled"):
        _streamer(["load", *inputs, "--dest", f"file://{tmp_path}/{mode}.jsonl",
                   "--dest", f"file://{tmp_path}/{mode}.bp"], pure=mode == "pure", cwd=tmp_path)
    for suffix in ("jsonl", "bp"):
        pure, compiled = (tmp_path / f"pure.{suffix}").read_bytes(), (tmp_path / f"compiled.{suffix}").read_bytes()
        assert pure.count(b"\n") > 9000
        assert pure == compiled, suffix


def _events_without_wall_clock(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    # static.start/end carry the replay's own clock: everything else is the workflow's
    return sorted(line for line in lines if "event=stampede.static." not in line)


def test_replay_emits_the_same_events_pure_or_compiled(tmp_path: Path) -> None:
    source = generate(tmp_path / "wf", jobs=40, scenario="clustered", seed=5)
    for mode in ("pure", "compiled"):
        run = tmp_path / mode
        subprocess.run(["cp", "-r", str(source), str(run)], check=True)
        _streamer(["replay", str(run), "--dest", f"file://{tmp_path}/{mode}.bp"], pure=mode == "pure", cwd=tmp_path)
    pure, compiled = (_events_without_wall_clock(tmp_path / f"{m}.bp") for m in ("pure", "compiled"))
    assert len(pure) > 500
    assert pure == compiled


# ---------------------------------------------------------------- the pure-Python run of CI

TESTS = Path(__file__).resolve().parents[1]
PURE_LIST = TESTS / "pure_python_modules.txt"

NOT_IN_PURE_RUN = {  # module -> why scripts/test.sh does not run it a second time in pure mode
    "tests/events/test_bpfast.py": "tests the compiled codec itself against the Python path (both run in it)",
    "tests/events/test_jsonfast.py": "tests the compiled codec itself against the Python path (both run in it)",
    "tests/events/test_pure_python.py": "runs streamer in both modes itself",
    "tests/endpoints/test_amqp.py": "server round trips: the codec paths are those of test_codecs",
    "tests/endpoints/test_amqp_fault.py": "server faults and restarts: no codec path of its own",
    "tests/endpoints/test_db.py": "server round trips: the codec paths are those of test_codecs",
    "tests/endpoints/test_db_rollback.py": "server round trips: the codec paths are those of test_codecs",
    "tests/docs/test_reference.py": "generates the reference pages from the schema: no codec path",
    "tests/endpoints/test_concurrent_writers.py": "many writers into servers: the codec paths are those of "
                                                  "test_codecs",
    "tests/endpoints/test_mysql.py": "server round trips: the codec paths are those of test_codecs",
    "tests/deploy/test_deploy_fields.py": "deployment templates against the schema: no codec path",
    "tests/deploy/test_deploy_rabbitmq.py": "a RabbitMQ deployment: no codec path of its own",
    "tests/endpoints/test_provenance_amqp.py": "server round trips of provenance records (test_provenance runs pure)",
    "tests/endpoints/test_provenance_db.py": "server round trips of provenance records (test_provenance runs pure)",
    "tests/monitord/test_monitord_live.py": "a live workflow under signals, minutes long: golden and differential "
                                            "replays run pure",
    "tests/monitord/test_monitord_options.py": "real pegasus-monitord side by side, slow: monitord_cli runs pure",
    "tests/sources/test_collector.py": "server round trips (RabbitMQ -> PostgreSQL): the codec paths are those of "
                                       "test_codecs",
    "tests/sources/test_tail_queue.py": "a RabbitMQ queue's acknowledgements: no codec path of its own",
    "tests/endpoints/test_spooling.py": "servers stopped and cut, a full filesystem: the spool's codec is the "
                                          "overflow's (events.codec.JSON_LINES), whose paths test_overflow and "
                                          "test_codecs run pure",
    "tests/endpoints/test_amqp_headers.py": "AMQP frames and headers: the body's codec paths are those of test_codecs",
    "tests/sources/test_collector_batching.py": "a queue's batches and acknowledgements: no codec path of its own",
    "tests/sources/test_collector_queue_types.py": "RabbitMQ queue types: server round trips",
    "tests/sources/test_tail_failover.py": "broker failover: server round trips",
    "tests/amqp/test_connection_brokers.py": "broker URLs and failover: no codec path",
    "tests/run/test_pipeline.py": "the run's seams (downstream, metrics): no codec path of its own",
    "tests/util/test_mask_places.py": "passwords masked where URLs are printed: no codec path of its own",
    "tests/cli/test_first_hour.py": "command-line behaviours (PostgreSQL, resume, options): codec paths of "
                                    "test_codecs and test_cli_load",
}

_CODEC_IMPORT = re.compile(r"from streamer\.events import|from streamer\.events\.(bp|jsonenc|event|canonical|native)\b"
                           r"|import streamer\.events|from streamer\.monitor")


def _pure_list() -> list[str]:
    return [line.strip() for line in PURE_LIST.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_the_pure_run_covers_every_module_through_the_codec() -> None:
    listed = _pure_list()
    assert listed == sorted(set(listed))
    root = TESTS.parent
    for entry in listed:
        assert (root / entry).is_file(), entry
    for entry in NOT_IN_PURE_RUN:
        assert (root / entry).is_file(), entry
    through_codec = {p.relative_to(root).as_posix() for p in TESTS.rglob("test_*.py")
                     if _CODEC_IMPORT.search(p.read_text())}
    assert len(through_codec) >= 30  # the modules of every tests/<package>/, not only of one directory
    assert through_codec - set(NOT_IN_PURE_RUN) <= set(listed), "add these to tests/pure_python_modules.txt"
    names = {Path(entry).name for entry in listed}
    # parse, encode, ids, monitor, golden, fuzz, load: never dropped from the pure run
    assert {"test_codecs.py", "test_ids.py", "test_monitor_golden.py", "test_monitor_parsers.py", "test_fuzz.py",
            "test_cli_load.py", "test_synth.py", "test_hostile_input.py"} <= names
    script = (root / "scripts" / "test.sh").read_text()
    assert "STREAMER_PURE_PYTHON=1" in script and "tests/pure_python_modules.txt" in script
