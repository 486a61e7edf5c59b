"""BP and JSON codecs on every corpus line, and equality with monitord's golden JSON."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from streamer.events import Event, bp, format_ts, jsonenc, parse_ts
from streamer.events.event import FieldError
from tests.support.eventcompare import WALL_CLOCK_EVENTS, differences

GOLDEN_NAMES = ("process_wf_success", "process_wf_failure", "sample_wf_held", "hierarchical_wf_success")


def corpus_bp_files(shared: Path) -> list[Path]:
    files = sorted((shared / "corpus" / "bp").glob("*.bp")) + sorted((shared / "golden").glob("*.bp"))
    files += sorted((shared / "corpus" / "pegasus").glob("*/*.static.bp"))
    return files


def test_every_corpus_line_round_trips(shared: Path) -> None:
    files = corpus_bp_files(shared)
    assert len(files) >= 12
    count = 0
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            event = bp.parse_line(line)
            again = bp.parse_line(bp.format_event(event))
            assert again == event, f"{path.name}:{number}: BP round trip changed the event"
            assert again.id == event.id
            via_json = jsonenc.parse_line(jsonenc.dumps(event))
            assert via_json == event, f"{path.name}:{number}: JSON round trip changed the event"
            count += 1
    assert count > 9000


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_json_matches_golden_json(golden: Path, name: str) -> None:
    bp_lines = (golden / f"{name}.bp").read_text().splitlines()
    json_lines = (golden / f"{name}.json").read_text().splitlines()
    assert len(bp_lines) == len(json_lines)
    for number, (bp_line, json_line) in enumerate(zip(bp_lines, json_lines), 1):
        expected = json.loads(json_line)
        ours = jsonenc.to_dict(bp.parse_line(bp_line))
        assert ours.pop("event_id")
        assert list(ours)[-1] == "event"
        ignore = ("ts",) if expected["event"] in WALL_CLOCK_EVENTS else ()
        diff = differences(ours, expected, ignore=ignore)
        assert not diff, f"{name}.json line {number} ({expected['event']}): {diff}"


def test_json_keys_have_no_dots(golden: Path) -> None:
    for line in (golden / "hierarchical_wf_success.bp").read_text().splitlines():
        keys = jsonenc.to_dict(bp.parse_line(line)).keys()
        assert not [k for k in keys if "." in k]


def test_bp_types_follow_the_schema() -> None:
    line = ('ts=2023-03-04T06:23:50.000000Z event=stampede.inv.end level=Info xwf.id=f00c0056-abd4-4e8e-b793-24eb760dda1f '
            'job.id=ls_1 job_inst.id=2 inv.id=-2 start_time=1677911028 dur=2.222000 exitcode=256 '
            'transformation=dagman::post executable=/bin/x argv="a \\"b\\" c" wf.ts=1677911013 reason=None')
    event = bp.parse_line(line)
    assert event.name == "stampede.inv.end"
    assert event.fields == {
        "ts": 1677911030, "xwf.id": "f00c0056-abd4-4e8e-b793-24eb760dda1f", "job.id": "ls_1",
        "job_inst.id": 2, "inv.id": -2, "start_time": 1677911028, "dur": 2.222, "exitcode": 256,
        "transformation": "dagman::post", "executable": "/bin/x", "argv": 'a "b" c', "wf.ts": 1677911013,
        "reason": None,
    }
    assert "level" not in event.fields  # Info is the default
    text = bp.format_event(event)
    assert text.startswith("ts=2023-03-04T06:23:50.000000Z event=stampede.inv.end level=Info ")
    assert 'argv="a \\"b\\" c"' in text
    assert "reason=None" in text
    assert text.endswith(f"event.id={event.id}")


def test_error_level_is_kept_and_published() -> None:
    event = bp.parse_line("ts=1 event=stampede.xwf.end level=Error restart_count=0 status=1")
    assert event.fields["level"] == "Error"
    assert jsonenc.to_dict(event)["level"] == "Error"
    assert "level" not in jsonenc.to_dict(bp.parse_line("ts=1 event=stampede.xwf.end level=Info restart_count=0 status=0"))


def test_quoted_values_with_newlines_and_backslashes_survive() -> None:
    event = Event.build("stampede.xwf.meta", {"ts": 5, "key": "k", "value": 'line1\nline2\t"q" C:\\dir\\'})
    text = bp.format_event(event)
    assert "\n" not in text
    assert bp.parse_line(text).fields["value"] == 'line1\nline2\t"q" C:\\dir\\'


def test_monitord_backslashes_outside_escapes_are_kept() -> None:
    event = bp.parse_line(r'ts=1 event=stampede.xwf.meta key=k value="C:\path\x"')
    assert event.fields["value"] == r"C:\path\x"


def test_iso_and_epoch_timestamps() -> None:
    assert parse_ts("2023-03-04T06:23:33.000000Z") == 1677911013
    assert parse_ts("2023-03-04T07:23:33+01:00") == 1677911013
    assert parse_ts("1677911013.25") == 1677911013.25
    assert format_ts(1677911013) == "2023-03-04T06:23:33.000000Z"
    assert format_ts(1331735715.440727) == "2012-03-14T14:35:15.440727Z"
    with pytest.raises(FieldError):
        parse_ts("yesterday")


def test_composite_invocations_literal_becomes_a_list() -> None:
    line = ("ts=1 event=stampede.job_inst.composite job.id=j job_inst.id=1 sched.id=1.0 status=0 exitcode=0 "
            "site=local stdout.file=o stderr.file=e multiplier_factor=1 "
            "invocations=\"[{'transformation': 'ls', 'exitcode': 0, 'duration': 0.005}]\"")
    event = bp.parse_line(line)
    assert event.fields["invocations"] == [{"transformation": "ls", "exitcode": 0, "duration": 0.005}]
    assert orjson.loads(jsonenc.dumps(event))["invocations"][0]["transformation"] == "ls"


def test_planner_names_without_prefix_get_it() -> None:
    event = bp.parse_line("ts=3193169 event=task.info xwf.id=f00c0056-abd4-4e8e-b793-24eb760dda1f task.id=ID1 "
                          "type=1 type_desc=compute transformation=ls")
    assert event.name == "stampede.task.info"
    assert event.fields["type"] == 1


def test_stable_ids() -> None:
    a = bp.parse_line("ts=2023-03-04T06:23:33.000000Z event=stampede.xwf.start restart_count=0")
    b = Event("stampede.xwf.start", {"ts": 1677911013, "restart_count": 0})
    c = Event("stampede.xwf.start", {"ts": 1677911013.0000001, "restart_count": 0})
    d = Event("stampede.xwf.start", {"ts": 1677911014, "restart_count": 0})
    assert a.id == b.id == c.id
    assert d.id != a.id
    assert len(a.id) == 32
    # the id travels with the event through BP and JSON
    assert bp.parse_line(bp.format_event(d)).id == d.id
    assert jsonenc.parse_line(jsonenc.dumps(d)).id == d.id
    # an id an input gives must be the event's own: a changed line is refused, not believed
    custom = Event("stampede.xwf.start", {"ts": 1, "restart_count": 0}, event_id="not-a-hash")
    with pytest.raises(bp.BPError, match=r"event id 'not-a-hash' is not an event id \(32 hex digits\)"):
        bp.parse_line(bp.format_event(custom))
    with pytest.raises(jsonenc.JSONError, match=r"event id 'not-a-hash' is not an event id \(32 hex digits\)"):
        jsonenc.parse_line(jsonenc.dumps(custom))
    edited = bp.format_event(d).replace("restart_count=0", "restart_count=1")
    with pytest.raises(bp.BPError, match="is not this event's id"):
        bp.parse_line(edited)
    with pytest.raises(ValueError, match="is not this event's id"):  # typing from text says the same
        bp.Event.build("stampede.xwf.start", {"ts": "1", "restart_count": "0", "event.id": "a" * 32})


def test_distinct_corpus_events_have_distinct_ids(shared: Path) -> None:
    seen: dict[str, str] = {}
    for path in corpus_bp_files(shared):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            event = bp.parse_line(line)
            key = orjson.dumps([event.name, event.fields], option=orjson.OPT_SORT_KEYS).decode()
            assert seen.setdefault(event.id, key) == key, f"id collision in {path.name}"


@pytest.mark.parametrize("line, reason", [
    ('ts=1 event=stampede.xwf.start restart_count=0 argv="unterminated', "unterminated quoted value"),
    ("ts=1 event=stampede.xwf.start restart_count=0 stray", "expected key=value, found 'stray'"),
    ('ts=1 event=stampede.xwf.start a="x"b', "key=value"),
    ("ts=1 restart_count=0", "no event= field"),
    ("event=stampede.xwf.start restart_count=0", "no ts= field"),
    ("ts=1 event=stampede.xwf.start restart_count=zero", "field restart_count: not a number: 'zero'"),
    ("ts=tuesday event=stampede.xwf.start restart_count=0", "field ts"),
    ("=1 event=stampede.xwf.start ts=1", "expected key=value"),
])
def test_malformed_lines_say_why(line: str, reason: str) -> None:
    with pytest.raises(bp.BPError) as info:
        bp.parse_line(line)
    assert reason in str(info.value)
