"""The compiled JSON writer gives orjson's text for the same object, or declines."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events import bp, jsonenc
from streamer.events.event import Event

from test_codecs import corpus_bp_files

fast = pytest.importorskip("streamer.events._jsonfast", reason="compiled fast paths not built (no C compiler)")


def reference(event: Event) -> bytes:
    return jsonenc._orjson(jsonenc.to_dict(event))


def test_every_corpus_event_is_written_as_orjson_writes_it(shared: Path) -> None:
    count = 0
    for path in corpus_bp_files(shared):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                event = bp.parse_line(line)
                renamed, one_to_one = jsonenc._renamed_keys(tuple(event.fields))
                assert one_to_one
                got = fast.json_object(event.fields, renamed, event.id, event.name)
                if got is None:  # declined: only events carrying a list (composite job usage)
                    assert any(isinstance(v, list) for v in event.fields.values()), f"{path.name}:{number}"
                    continue
                assert got == reference(event), f"{path.name}:{number}"
                count += 1
    assert count > 9000


def same_json(a: bytes, b: bytes) -> bool:
    def norm(value: object) -> object:
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, float) and math.isnan(value):
            return "nan"
        return value
    return norm(orjson.loads(a)) == norm(orjson.loads(b)) and list(orjson.loads(a)) == list(orjson.loads(b))


VALUES = st.one_of(
    st.text(max_size=12), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(),
    st.booleans(), st.none(), st.lists(st.integers(), max_size=2), st.integers(min_value=2**64, max_value=2**70),
)


@settings(max_examples=3000, deadline=None)
@given(st.dictionaries(st.sampled_from(["ts", "xwf.id", "job_inst.id", "a_b", "a.b", "event", "event_id", "é\n"]),
                       VALUES))
def test_compiled_json_agrees_with_orjson_or_declines(fields: dict) -> None:
    event = Event("stampede.x", fields)
    renamed, one_to_one = jsonenc._renamed_keys(tuple(fields))
    expected = reference(event)
    got = fast.json_object(fields, renamed, event.id, event.name) if one_to_one else None
    if got is not None:
        assert same_json(got, expected)
        if not any(isinstance(v, float) and "e" in repr(v) for v in fields.values()):  # orjson spells those otherwise
            assert got == expected
    assert same_json(jsonenc.dumps(event), expected)


def test_declines_and_merges() -> None:
    assert fast.json_object({"k": [1]}, ("k",), "id", "n") is None
    assert fast.json_object({"k": 2**64}, ("k",), "id", "n") is None
    assert fast.json_object({"k": "\ud800"}, ("k",), "id", "n") is None
    assert fast.json_object({}, (), "id", "n") == b'{"event_id":"id","event":"n"}'
    assert fast.json_object({"t": float("nan"), "s": 'q"\\\x01'}, ("t", "s"), "i", "n") == \
        b'{"t":null,"s":"q\\"\\\\\\u0001","event_id":"i","event":"n"}'
    assert jsonenc._renamed_keys(("a.b", "a_b")) == (("a_b", "a_b"), False)  # to_dict keeps one: orjson writes it


def test_integers_beyond_64_bits_are_written_not_a_crash() -> None:
    event = Event("stampede.x", {"big": 2**70, "ts": 1})
    assert orjson.loads(jsonenc.dumps(event)) == {"big": 2**70, "ts": 1, "event_id": event.id, "event": "stampede.x"}
    assert len(event.id) == 32
