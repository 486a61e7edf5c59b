"""`streamer load` and `streamer tail` as users run them: outputs, settings files, signals, secrets."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

import pytest

from streamer.core.bus import Bus, BusError, make_route
from streamer.events.codec import JSON_LINES
from streamer.cli.main import main
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.events import Event, bp, jsonenc
from streamer.util.runtime import setup_logging
from streamer.sources.base import Batch
from streamer.util.urls import EndpointURL, mask
from tests.conftest import unavailable
from tests.support.commands import streamer

MONTAGE_EVENTS = 3588




@pytest.fixture
def montage(corpus: Path) -> Path:
    path = corpus / "bp" / "montage-1.0.bp"
    if not path.is_file():
        unavailable(f"{path} missing")
    return path


def parse_bp_file(path: Path) -> list[Event]:
    return [bp.parse_line(line) for line in path.read_text().splitlines() if line.strip()]


def parse_jsonl_file(path: Path) -> list[Event]:
    return [jsonenc.parse_line(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- acceptance

def test_load_fans_out_to_three_file_endpoints(python: str, montage: Path, tmp_path: Path) -> None:
    a_jsonl, a_bp, x_jsonl = tmp_path / "a.jsonl", tmp_path / "a.bp", tmp_path / "x.jsonl"
    run = streamer("load", str(montage), "--dest", f"file://{a_jsonl}", "--dest", f"file://{a_bp}",
                   "--dest", f"file://{x_jsonl}?events=stampede.xwf.*")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    expected = parse_bp_file(montage)
    assert len(expected) == MONTAGE_EVENTS
    assert parse_bp_file(a_bp) == expected                  # Event equality includes the stable id
    assert parse_jsonl_file(a_jsonl) == expected
    assert parse_jsonl_file(x_jsonl) == [e for e in expected if e.name.startswith("stampede.xwf.")]
    assert [e.name for e in parse_jsonl_file(x_jsonl)] == ["stampede.xwf.start", "stampede.xwf.end"]
    for line in a_jsonl.read_text().splitlines():
        record = json.loads(line)
        assert not [k for k in record if "." in k], record
        assert list(record)[-1] == "event" and "event_id" in record
    assert all("event.id=" in line for line in a_bp.read_text().splitlines())
    assert "3,588 events read" in run.stderr
    assert f"3,588 -> file://{a_jsonl}  ok" in run.stderr
    assert f"3,588 -> file://{a_bp}  ok" in run.stderr
    assert f"2 -> file://{x_jsonl}?events=stampede.xwf.*  ok" in run.stderr


def test_load_in_process_appends_and_its_bp_output_loads_back(montage: Path, tmp_path: Path, capsys) -> None:
    """An output of streamer is valid input of streamer (ids kept through BP)."""
    first, second = tmp_path / "first.bp", tmp_path / "second.jsonl"
    assert main(["load", str(montage), "--dest", str(first), "-q"]) == 0
    assert main(["load", str(first), "--dest", f"file://{second}", "-q"]) == 0
    assert parse_jsonl_file(second) == parse_bp_file(montage)
    assert main(["load", str(montage), "--dest", str(first), "-q"]) == 0  # appends by default
    assert len(parse_bp_file(first)) == 2 * MONTAGE_EVENTS
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_load_events_flag_applies_to_endpoints_without_a_filter(montage: Path, tmp_path: Path) -> None:
    plain, own = tmp_path / "plain.jsonl", tmp_path / "own.jsonl"
    code = main(["load", str(montage), "-q", "--events", "stampede.xwf.*", "--dest", str(plain),
                 "--dest", f"file://{own}?events=stampede.wf.plan"])
    assert code == 0
    assert [e.name for e in parse_jsonl_file(plain)] == ["stampede.xwf.start", "stampede.xwf.end"]
    assert [e.name for e in parse_jsonl_file(own)] == ["stampede.wf.plan"]


def test_tail_prints_exactly_the_xwf_events(python: str, montage: Path) -> None:
    run = streamer("tail", str(montage), "--no-follow", "--from-start", "--format", "json",
                   "--events", "stampede.xwf.*")
    assert run.returncode == 0, run.stderr
    expected = [e for e in parse_bp_file(montage) if e.name.startswith("stampede.xwf.")]
    assert run.stdout.splitlines() == [jsonenc.dumps(e).decode() for e in expected]
    assert len(expected) == 2
    assert "Traceback" not in run.stderr


def test_tail_bp_and_pretty_formats(montage: Path, capsys) -> None:
    assert main(["tail", str(montage), "--no-follow", "--from-start", "--format", "bp",
                 "--events", "stampede.xwf.end"]) == 0
    out = capsys.readouterr().out.splitlines()
    expected = [e for e in parse_bp_file(montage) if e.name == "stampede.xwf.end"]
    assert [bp.parse_line(line) for line in out] == expected
    assert main(["tail", str(montage), "--no-follow", "--from-start", "--color", "never",
                 "--events", "stampede.xwf.start"]) == 0
    pretty = capsys.readouterr().out.splitlines()
    assert len(pretty) == 1 and " stampede.xwf.start " in pretty[0] and "\x1b[" not in pretty[0]
    assert pretty[0].startswith("2012-03-14 ")


def test_conf_pegasus_properties_names_a_filtered_file_endpoint(montage: Path, tmp_path: Path) -> None:
    out = tmp_path / "props.jsonl"
    props = tmp_path / "pegasus.properties"
    props.write_text("# monitord settings\n"
                     f"pegasus.catalog.workflow.file.url = file://{out}\n"
                     "pegasus.catalog.workflow.file.events = stampede.xwf.*\n")
    assert main(["load", str(montage), "--conf", str(props), "-q"]) == 0
    assert [e.name for e in parse_jsonl_file(out)] == ["stampede.xwf.start", "stampede.xwf.end"]


def test_conf_encoding_applies_to_file_urls_without_one(montage: Path, tmp_path: Path) -> None:
    out = tmp_path / "events.out"  # suffix says nothing: the property decides
    props = tmp_path / "pegasus.properties"
    props.write_text(f"pegasus.catalog.workflow.url=file://{out}\npegasus.monitord.encoding=json\n")
    assert main(["load", str(montage), "--conf", str(props), "-q"]) == 0
    assert parse_jsonl_file(out) == parse_bp_file(montage)


def test_config_toml_with_two_endpoints(montage: Path, tmp_path: Path) -> None:
    everything, inv = tmp_path / "all.bp", tmp_path / "inv.jsonl"
    config = tmp_path / "streamer.toml"
    config.write_text(f'''
on_error = "stop"

[[endpoint]]
url = "file://{everything}"
batch = 100
buffer = 1000

[[endpoint]]
url = "file://{inv}"
events = ["stampede.inv.*", "!stampede.inv.start"]
''')
    assert main(["load", str(montage), "--config", str(config), "-q"]) == 0
    expected = parse_bp_file(montage)
    assert parse_bp_file(everything) == expected
    assert parse_jsonl_file(inv) == [e for e in expected if e.name == "stampede.inv.end"]
    assert len(parse_jsonl_file(inv)) > 0


def test_config_errors_name_the_file_and_exit_2(python: str, montage: Path, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[[endpoint]]\nevents = '*'\n")
    run = streamer("load", str(montage), "--config", str(config))
    assert run.returncode == 2
    assert run.stderr == f"streamer: error: {config}: endpoint #1 has no url\n"
    run = streamer("load", str(montage))
    assert run.returncode == 2 and "no endpoint: give --dest URL" in run.stderr
    run = streamer("load", str(montage), "--dest", str(tmp_path / "o.bp"), "--events", "a b")
    assert run.returncode == 2 and "blank inside pattern" in run.stderr and "Traceback" not in run.stderr


# ---------------------------------------------------------------- secrets

SECRET = "s3cretPassw0rd"


def test_amqp_password_never_printed(python: str, corpus: Path, tmp_path: Path) -> None:
    # port 1: nothing listens; the spool stays in tmp_path and the endpoint gives up after 0.5 s
    url = (f"amqp://alice:{SECRET}@127.0.0.1:1/%2F/pegasus"
           f"?spool={tmp_path}/spool&drain_timeout=0.5&retry_max=0.2&confirm_timeout=1")
    events = corpus / "bp" / "blackdiamond.bp"
    run = streamer("load", str(events), "--dest", url, "--dest", str(tmp_path / "ok.bp"), timeout=60)
    output = run.stdout + run.stderr
    assert SECRET not in output
    assert run.returncode != 0 and "Traceback" not in output
    if importlib.util.find_spec("streamer.endpoints.amqp.endpoint") is not None:
        assert run.returncode == 1
        assert "endpoint amqp://alice:***@127.0.0.1:1/%2F/pegasus" in run.stderr
        assert len(parse_bp_file(tmp_path / "ok.bp")) == len(parse_bp_file(events))  # the other one went on
    else:  # endpoint module not written yet: the registry's message, still without the secret
        assert run.returncode == 2 and "endpoint amqp:// is not available" in run.stderr


class Broken(Endpoint):
    async def write(self, batch: Sequence[Event]) -> None:
        raise EndpointError("connection refused")


async def test_a_failing_endpoint_is_named_with_its_password_masked(caplog) -> None:
    url = EndpointURL.parse(f"amqp://alice:{SECRET}@127.0.0.1:1/%2F/pegasus")
    bus = Bus([make_route(Broken(url), codec=JSON_LINES)])
    await bus.start()
    with pytest.raises(BusError) as raised:
        for n in range(100):
            await bus.publish(Batch([Event("stampede.xwf.meta", {"ts": 1, "n": n})], position=n))
            await asyncio.sleep(0.001)
    await bus.close()
    assert str(raised.value) == "endpoint amqp://alice:***@127.0.0.1:1/%2F/pegasus failed: connection refused"
    assert SECRET not in caplog.text and "alice:***@" in caplog.text
    assert SECRET not in repr(bus.summary())


def test_masking_formatter_and_config_error_path(tmp_path: Path, capsys) -> None:
    """What the CLI prints for a config error goes through mask()."""
    config = tmp_path / "s.toml"
    config.write_text(f'on_error = "amqp://bob:{SECRET}@host/x"\n[[endpoint]]\nurl = "file:///tmp/x.bp"\n')
    assert main(["load", str(tmp_path / "in.bp"), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert SECRET not in err and "bob:***@host" in err
    assert mask(f"amqp://bob:{SECRET}@host:5672/%2F/x") == "amqp://bob:***@host:5672/%2F/x"
    setup_logging(0)  # the autouse fixture restores the root handlers afterwards
    handler = logging.getLogger().handlers[0]
    record = logging.LogRecord("streamer", logging.ERROR, __file__, 1,
                               "cannot reach %s", (f"amqps://bob:{SECRET}@h/",), None)
    assert handler.format(record) == "streamer: ERROR: cannot reach amqps://bob:***@h/"


# ---------------------------------------------------------------- SIGTERM flush

def big_bp(corpus: Path, path: Path, reps: int) -> list[str]:
    """Montage repeated `reps` times, each line made distinct with `rep=R seq=N`."""
    lines = (corpus / "bp" / "montage-1.0.bp").read_text().splitlines()
    out = [f"{line} rep={r} seq={n}" for r in range(reps) for n, line in enumerate(lines)]
    path.write_text("\n".join(out) + "\n")
    return out


def start_and_signal(python: str, args: list[str], out: Path) -> tuple[int, str]:
    proc = subprocess.Popen([python, "-m", "streamer", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(2000):
            if out.exists() and out.stat().st_size > 0:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.002)
        assert proc.poll() is None, f"ended before the signal: {proc.returncode} {proc.stderr.read()}"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stderr


def acknowledged_lines(checkpoint: Path, source: Path) -> int:
    data = json.loads(checkpoint.read_text())
    assert data["version"] == 1
    return data["files"][str(source.resolve())]["line"]


def test_sigterm_in_follow_mode_flushes_and_exits_0(python: str, corpus: Path, tmp_path: Path) -> None:
    source, out, ck = tmp_path / "big.bp", tmp_path / "out.jsonl", tmp_path / "ck.json"
    lines = big_bp(corpus, source, 14)
    assert len(lines) == 14 * MONTAGE_EVENTS  # 50,232 events
    code, stderr = start_and_signal(python, ["load", str(source), "--dest", f"file://{out}", "--follow",
                                             "--checkpoint", str(ck)], out)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "SIGTERM: flushing buffered events, then exiting" in stderr
    done = acknowledged_lines(ck, source)
    got = [e.id for e in parse_jsonl_file(out)]
    assert got == [bp.parse_line(line).id for line in lines[:done]]
    assert len(set(got)) == done > 0


def test_sigterm_during_a_replay_load_exits_143_with_nothing_accepted_lost(python: str, corpus: Path,
                                                                           tmp_path: Path) -> None:
    source, out, ck = tmp_path / "big.bp", tmp_path / "out.jsonl", tmp_path / "ck.json"
    lines = big_bp(corpus, source, 56)  # ~200,000 events: several seconds of work, stopped early
    code, stderr = start_and_signal(python, ["load", str(source), "--dest", f"file://{out}",
                                             "--checkpoint", str(ck)], out)
    assert code == 143, stderr
    assert "Traceback" not in stderr
    done = acknowledged_lines(ck, source)
    assert 0 < done < len(lines)
    got = [e.id for e in parse_jsonl_file(out)]
    assert got == [bp.parse_line(line).id for line in lines[:done]]
    summary = f"{done:,} events read"
    assert summary in stderr


def test_a_load_that_resumes_from_its_checkpoint_says_so(corpus: Path, tmp_path: Path, capsys) -> None:
    """`load --checkpoint` (with or without --follow) announces where it resumes, as replay and follow do."""
    source, out, ck = tmp_path / "run.bp", tmp_path / "out.jsonl", tmp_path / "ck.json"
    lines = (corpus / "bp" / "blackdiamond.bp").read_text().splitlines(keepends=True)
    source.write_text("".join(lines[:20]))
    assert main(["load", str(source), "--dest", f"file://{out}", "--checkpoint", str(ck)]) == 0
    assert "resuming" not in capsys.readouterr().err
    with source.open("a") as handle:
        handle.write("".join(lines[20:]))
    assert main(["load", str(source), "--dest", f"file://{out}", "--checkpoint", str(ck)]) == 0
    assert f"streamer: resuming {source} from line 20 (checkpoint {ck})\n" in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == len(lines)
