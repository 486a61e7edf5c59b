"""Fuzz targets: every parser of untrusted text, and every compiled module against its Python definition.

A target takes bytes and either returns or raises the error its parser
documents; anything else (a crash, another exception, compiled and Python
disagreeing) is a finding. `tests/monitor/test_fuzz.py` runs each target for a few
seconds with hypothesis on hostile inputs (mutated corpus lines, deep nesting,
huge tokens, out-of-range timestamps); `bench/fuzz.py --minutes N` runs them
longer, coverage-guided with atheris when it is installed.
"""

from __future__ import annotations

import functools
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from streamer.events import Event, FieldError, bp, jsonenc
from streamer.events import event as event_module
from streamer.monitor.parsers import braindump, dagman, jobstate, kickstart, staticbp, submitfile, yamlguard, yamlsub

SHARED = Path(os.environ.get("STREAMER_SHARED", Path(__file__).resolve().parents[3] / "shared"))


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    """Inputs to start from (corpus lines or records, generated ones)."""


def text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _same(compiled: Any, python: Any, what: str) -> None:
    if compiled != python:
        raise AssertionError(f"{what}: compiled {compiled!r:.300} != python {python!r:.300}")


# ---------------------------------------------------------------- seeds

@functools.lru_cache(maxsize=None)
def _corpus_files(pattern: str) -> tuple[Path, ...]:
    return tuple(sorted(p for p in (SHARED / "corpus").rglob(pattern) if p.is_file()))


def _lines(pattern: str, limit: int = 400) -> list[bytes]:
    out: list[bytes] = []
    for path in _corpus_files(pattern):
        out.extend(line for line in path.read_bytes().splitlines() if line.strip())
    step = max(1, len(out) // limit)
    return out[::step][:limit] or [b"x"]


def _records() -> list[bytes]:
    out = []
    for path in _corpus_files("*.out*"):
        for _kind, chunk in kickstart.split_records(path.read_text(errors="replace")):
            out.append(chunk.encode())
    return out[:60] or [b"- invocation: {}\n"]


def _whole(pattern: str, limit: int = 20) -> list[bytes]:
    return [p.read_bytes() for p in _corpus_files(pattern)[:limit]] or [b""]


# ---------------------------------------------------------------- event codecs

def python_parse(line: str) -> Event | str:
    """parse_line with the compiled parser off: the Event, or the error message."""
    saved, bp._fast_parse = bp._fast_parse, None
    try:
        return bp.parse_line(line)
    except bp.BPError as exc:
        return f"error: {exc}"
    finally:
        bp._fast_parse = saved


def _event_key(event: Event | str) -> Any:
    if isinstance(event, str):
        return event
    return (event.name, [(k, type(v).__name__, v) for k, v in event.fields.items()], event.id)


def run_bp_line(data: bytes) -> None:
    line = text(data).strip()
    try:
        got: Event | str = bp.parse_line(line)
    except bp.BPError as exc:
        got = f"error: {exc}"
    _same(_event_key(got), _event_key(python_parse(line)), "bp.parse_line")
    if isinstance(got, Event):  # what was read is written and read back as the same event
        again = bp.parse_line(bp.format_event(got))
        _same(_event_key(again), _event_key(got), "BP round trip")
        back = jsonenc.parse_line(jsonenc.dumps(got))
        _same(back.id, got.id, "JSON round trip id")


def run_bp_split(data: bytes) -> None:
    line = text(data)
    fast = bp._fast_split
    compiled = fast(line) if fast is not None else None
    try:
        python: Any = bp._split_python(line)
    except bp.BPError as exc:
        python = f"error: {exc}"
    if compiled is not None:
        _same(compiled, python, "split_line")


def run_encoders(data: bytes) -> None:
    """The compiled writers (JSON object, batch of BP lines) give what the Python definitions give."""
    try:
        event = bp.parse_line(text(data).strip())
    except bp.BPError:
        return
    fresh = Event(event.name, dict(event.fields))
    compiled = jsonenc.dumps(fresh)
    python = jsonenc._orjson(jsonenc.to_dict(Event(event.name, dict(event.fields))))
    _same(compiled, python, "JSON object (orjson's exact bytes)")
    _same(bp.join([event, fresh]), (bp.format_event(event) + "\n" + bp.format_event(fresh) + "\n").encode(),
          "BP join")


def run_json_line(data: bytes) -> None:
    try:
        event = jsonenc.parse_line(data)
    except jsonenc.JSONError:
        return
    _same(jsonenc.parse_line(jsonenc.dumps(event)).id, event.id, "JSON round trip")


def run_content_id(data: bytes) -> None:
    """The compiled canonical form (when it takes the event) hashes as the Python definition."""
    try:
        event = jsonenc.parse_line(data)
    except jsonenc.JSONError:
        return
    _same(event_module.content_id(event.name, event.fields),
          event_module._content_id_python(event.name, event.fields), "content id")


def run_typing(data: bytes) -> None:
    """Typing loose values (JSON) is idempotent: typed values type to themselves (the codec relies on it)."""
    import orjson

    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return
    name = obj.pop("event")
    fields = {str(k).replace("_", "."): v for k, v in obj.items()}
    try:
        once = event_module.coerce_fields(name, fields)
    except FieldError:
        return
    _same(repr(event_module.coerce_fields(name, once)), repr(once), "coerce_fields twice")


# ---------------------------------------------------------------- monitor inputs

def run_dagman_line(data: bytes) -> None:
    parser = dagman.LineParser("UTC")
    try:
        parser.parse(text(data))
    except dagman.BadTime:
        pass


def run_kickstart(data: bytes) -> None:
    records = kickstart.parse(text(data), "fuzz.out")  # never raises: bad records are reported, left out
    assert isinstance(records, list)


def run_yaml_subset(data: bytes) -> None:
    """yamlsub gives PyYAML's document or steps aside."""
    source = text(data)
    try:
        yamlguard.check(source)
        reference = yaml.load(source, Loader=yamlguard.Loader)
    except (yaml.YAMLError, yamlguard.TooDeep, ValueError, TypeError, RecursionError):
        return
    try:
        ours = yamlsub.load(source, True, kickstart._yaml_scalar)
    except (yamlsub.Unsupported, yaml.YAMLError):
        return
    _same(repr(ours), repr(reference), "yamlsub")


def run_xml_record(data: bytes) -> None:
    try:
        kickstart.from_xml(text(data))
    except ET.ParseError:
        pass


def run_submit_file(data: bytes) -> None:
    submitfile.parse(text(data), want_environment=True, where="fuzz.sub")


def run_braindump(data: bytes) -> None:
    try:
        braindump.parse_yaml(text(data))
    except braindump.BraindumpError:
        pass
    braindump.parse_text(text(data))


def run_static_bp(data: bytes) -> None:
    staticbp.parse_line(text(data), "fuzz.static.bp")


def run_jobstate_line(data: bytes) -> None:
    jobstate.parse_line(text(data))


# ---------------------------------------------------------------- workflow files that are no files

SPECIAL = ("regular", "fifo", "symlink loop", "dev zero", "dev null", "directory", "dangling")
"""What a workflow's file may be instead of a regular file (`run_input_file`'s first byte picks one)."""


def run_input_file(data: bytes) -> None:
    """The one opener of workflow files (`limits`): a regular file's bytes, or NotRegularFile/FileNotFoundError
    for the others, at once (a FIFO with no writer, /dev/zero, a link loop never stall it)."""
    import tempfile

    from streamer.util import limits

    kind = SPECIAL[data[0] % len(SPECIAL)] if data else "regular"
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "job.out.000"
        if kind == "regular":
            path.write_bytes(data)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "symlink loop":
            path.symlink_to(path.with_name("other"))
            path.with_name("other").symlink_to(path)
        elif kind in ("dev zero", "dev null"):
            path.symlink_to("/dev/zero" if kind == "dev zero" else "/dev/null")
        elif kind == "directory":
            path.mkdir()
        else:
            path.symlink_to(path.with_name("nowhere"))
        for read in (lambda: limits.read_bounded(path, max_bytes=1 << 16),
                     lambda: b"".join(line.encode() for _n, line in limits.iter_lines(path, max_line=1 << 12))):
            try:
                got = read()
            except limits.NotRegularFile as exc:
                assert kind not in ("regular", "dangling") and str(exc).startswith(f"{path}: "), (kind, exc)
                continue
            except FileNotFoundError:
                assert kind == "dangling", kind
                continue
            assert kind == "regular", f"{kind} was read as a file"
            assert len(got) <= len(data)


def _input_file_seeds() -> list[bytes]:
    return [bytes([i]) + b"- invocation: True\n  hostname: h\n" for i in range(len(SPECIAL))]


# ---------------------------------------------------------------- Chimbuko provenance records

def _provenance_seeds() -> list[bytes]:
    import orjson

    from streamer.synth import provenance as synth

    collections = synth.generate(ranks=2, steps=2, per_step=2, seed=3)
    return [orjson.dumps(record) for records in collections.values() for record in records][:80]


def run_provenance_record(data: bytes) -> None:
    """A record is an event or a RecordError; what it becomes goes through JSON unchanged."""
    import orjson

    from streamer.events import chimbuko

    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    if not isinstance(record, dict):
        return
    try:
        event = chimbuko.event_from_record(record)
    except chimbuko.RecordError:
        return
    _same(jsonenc.parse_line(jsonenc.dumps(event)).id, event.id, "provenance JSON round trip")


def run_provenance_scanner(data: bytes) -> None:
    """The array/document cutter: whatever bytes come, records or reasons, never an exception."""
    from streamer.sources import provenance

    for state in (provenance.ARRAY, provenance.DOCUMENTS):
        scanner = provenance._Scanner(state, 0, 0)
        for cut in (len(data) // 3, len(data)):
            for line, piece in scanner.feed(data[:cut] if cut < len(data) else data[len(data) // 3:]):
                assert line >= 1


# ---------------------------------------------------------------- notify files

def run_notify(data: bytes) -> None:
    """A notify file's lines: rules or FILE:LINE warnings, never an exception."""
    from streamer.monitord import notify

    lines = list(enumerate(text(data).splitlines(), 1))
    rules = notify.parse_notify(lines, "fuzz.notify", None)
    actions = [*rules.workflow.values(), *(a for job in rules.job.values() for a in job.values()),
               *(a for inv in rules.invocation.values() for task in inv.values() for a in task.values())]
    written = {line.strip() for _, line in lines}
    # every action kept is a non-empty command taken from a line of the file, never made up
    assert all(action and any(action in line for line in written) for each in actions for action in each)


def _notify_seeds() -> list[bytes]:
    return [
        b"WORKFLOW 7a53210c-eb8a-4986-8c14-80e6e523598f on_error /bin/notify -m error\n"
        b"JOB ls_ID0000001 at_end /usr/bin/pegasus-email --to me@example.org\n"
        b"INVOCATION ls_ID0000001 1 on_success /bin/true\nDAXJOB sub end /bin/x\n# comment\n",
        b"JOB a never /x\nWORKFLOW x start /y\nINVOCATION j x all /z\n",
    ]


# ---------------------------------------------------------------- names that reach a path or a name

TRAVERSAL = [b"../../../ESCAPED", b"..", b".", b"/etc/passwd", b"..\\..\\x", b"%2e%2e%2fx", b"a/../../b",
             b"x?events=*", b"x#y", b"u@h:1", b"a\x00b", b"a\nb", "\u202e\u2028x".encode(), b"x" * 256, b""]
"""Values a workflow's files may hold where streamer takes a name: uuids, dag and notify names, labels."""


def run_safe_names(data: bytes) -> None:
    """The guard accepts a value only when, joined to a directory, it stays one step inside it; a braindump
    naming such files is refused (BraindumpError), never anything else."""
    from streamer.util import safenames

    value = text(data)
    try:
        safenames.component(value, "fuzz")
    except safenames.UnsafeName:
        pass
    else:
        assert os.path.dirname(os.path.normpath(os.path.join("/d", value))) == "/d", value
        assert "?" not in value and "#" not in value and "%" not in value
    try:
        braindump.check_names({"dag": value, "notify": value})
    except braindump.BraindumpError:
        pass
    try:
        safenames.sql_identifier(value)
    except safenames.UnsafeName:
        pass


# ---------------------------------------------------------------- the table

TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("bp_line", run_bp_line, lambda: _lines("*.bp")),
    Target("bp_split", run_bp_split, lambda: _lines("*.bp")),
    Target("encoders", run_encoders, lambda: _lines("*.bp")),
    Target("json_line", run_json_line, lambda: _lines("*.json*") + [jsonenc.dumps(bp.parse_line(text(x)))
                                                                   for x in _lines("*.bp", 50)]),
    Target("content_id", run_content_id, lambda: [jsonenc.dumps(bp.parse_line(text(x))) for x in _lines("*.bp", 200)]),
    Target("typing", run_typing, lambda: [jsonenc.dumps(bp.parse_line(text(x))) for x in _lines("*.bp", 200)]),
    Target("dagman_line", run_dagman_line, lambda: _lines("*.dagman.out")),
    Target("kickstart", run_kickstart, _records),
    Target("yaml_subset", run_yaml_subset, _records),
    Target("xml_record", run_xml_record, lambda: [b'<invocation version="2.1" start="2023-03-04T06:23:33Z">'
                                                  b'<mainjob start="x" duration="1.5"><usage utime="1"/>'
                                                  b'<status raw="0"><regular exitcode="0"/></status>'
                                                  b'</mainjob></invocation>']),
    Target("submit_file", run_submit_file, lambda: _whole("*.sub")),
    Target("braindump", run_braindump, lambda: _whole("braindump.yml")),
    Target("static_bp", run_static_bp, lambda: _lines("*.static.bp")),
    Target("jobstate_line", run_jobstate_line, lambda: _lines("jobstate.log")),
    Target("notify", run_notify, _notify_seeds),
    Target("input_file", run_input_file, _input_file_seeds),
    Target("safe_names", run_safe_names, lambda: list(TRAVERSAL)),
    Target("provenance_record", run_provenance_record, _provenance_seeds),
    Target("provenance_scanner", run_provenance_scanner, lambda: [b"[" + b",\n".join(_provenance_seeds()) + b"]"]),
]}
