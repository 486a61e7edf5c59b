"""The compiled JSON writer gives orjson's text for the same object, and the compiled canonical
form the same stable id as event.py, or they decline."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Iterator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events import bp, jsonenc
from streamer.events.event import Event, content_id
from streamer.events.event import _content_id_python as content_id_python
from tests.events.test_codecs import corpus_bp_files
from tests.conftest import unavailable
from tests.support.examples import examples

try:
    from streamer.events import _codec as fast
except ImportError:
    unavailable("compiled fast paths not built (no C compiler)", module=True)


def reference(event: Event) -> bytes:
    return jsonenc._orjson(jsonenc.to_dict(event))


def corpus_events_at(shared: Path) -> Iterator[tuple[str, Event]]:
    """(FILE:LINE, event) of every corpus line."""
    for path in corpus_bp_files(shared):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                yield f"{path.name}:{number}", bp.parse_line(line)


def test_every_corpus_event_is_written_as_orjson_writes_it(shared: Path) -> None:
    count = 0
    for where, event in corpus_events_at(shared):
        renamed, one_to_one = jsonenc._renamed_keys(tuple(event.fields))
        assert one_to_one
        got = fast.json_object(event.fields, renamed, event.id, event.name)
        if got is None:  # declined: only events carrying a list (composite job usage)
            assert any(isinstance(v, list) for v in event.fields.values()), where
            continue
        assert got == reference(event), where
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


@settings(max_examples=examples(3000), deadline=None)
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


# ---------------------------------------------------------------- canonical (the stable id's input)

def compiled_id(name: str, fields: dict) -> str | None:
    data = fast.canonical(name, fields)
    return None if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


def test_every_corpus_event_gets_the_same_id_from_the_compiled_canonical_form(shared: Path) -> None:
    count = 0
    for where, event in corpus_events_at(shared):
        got = compiled_id(event.name, event.fields)
        if got is None:  # declined: only events carrying a list (composite job usage)
            assert any(isinstance(v, list) for v in event.fields.values()), where
            continue
        assert got == content_id_python(event.name, event.fields), where
        count += 1
    assert count > 9000


TS_VALUES = st.one_of(
    st.floats(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-(2**31) * 10**6, max_value=2**31 * 10**6).map(lambda micro: micro / 1e6),
    st.builds(lambda seconds, digits: round(seconds, digits), st.floats(0.5, 3e9), st.integers(0, 9)),
)


@settings(max_examples=examples(3000), deadline=None)
@given(st.dictionaries(st.sampled_from(["ts", "xwf.id", "a.b", "B", "a", "é", "k\n\"", ""]),
                       st.one_of(VALUES, TS_VALUES)), st.sampled_from(["stampede.x", "é"]))
def test_compiled_canonical_form_hashes_as_python_or_declines(fields: dict, name: str) -> None:
    got = compiled_id(name, fields)
    if got is not None:
        assert got == content_id_python(name, fields)
    assert content_id(name, fields) == content_id_python(name, fields)


@pytest.mark.parametrize("fields, text", [
    ({"ts": 1331733888.121505, "b": 1, "a": "x"}, b'{"a":"x","b":1,"ts":1331733888.121505}'),
    ({"ts": 1331733888.0}, b'{"ts":1331733888}'),            # whole: an integer
    ({"ts": 2.0000004}, b'{"ts":2}'),                         # rounded to the microsecond
    ({"ts": 1.0000005, "x": 1.0000005}, b'{"ts":1.000001,"x":1.0000005}'),  # only ts is rounded
    ({"ts": float("nan")}, b'{"ts":null}'),
    ({"ab": 1, "a": 2, "b": 3, "B": 4}, b'{"B":4,"a":2,"ab":1,"b":3}'),  # orjson's order: code points
])
def test_canonical_examples(fields: dict, text: bytes) -> None:
    assert fast.canonical("n", fields) == b"n\x00" + text
    assert compiled_id("n", fields) == content_id_python("n", fields)


@pytest.mark.parametrize("fields", [
    {"x": 1e-7}, {"x": 1.5e20}, {"ts": 1e300},   # Python writes an exponent, orjson does not
    {"x": 2**63}, {"x": [1]}, {"é": 1}, {1: 1},   # beyond 64 bits, lists, non-ASCII or non-str keys
    {"x": "\ud800"},                              # no UTF-8 form
])
def test_canonical_declines_what_orjson_might_spell_otherwise(fields: dict) -> None:
    assert fast.canonical("n", fields) is None


def test_canonical_declines_a_name_without_utf8_form() -> None:
    assert fast.canonical("\ud800", {}) is None


# ---------------------------------------------------------------- number and string spelling

@settings(max_examples=examples(5000), deadline=None)
@given(st.one_of(
    st.integers(min_value=-(2**31) * 10**6, max_value=2**31 * 10**6).map(lambda micro: micro / 1e6),
    st.builds(lambda seconds, digits: round(seconds, digits), st.floats(-3e9, 3e9), st.integers(0, 8)),
    st.floats(allow_nan=False, allow_infinity=False),
))
def test_floats_are_spelled_as_repr(number: float) -> None:
    got = fast.json_object({"f": number}, ("f",), "i", "n")
    assert got == b'{"f":' + repr(number).encode() + b',"event_id":"i","event":"n"}'


@pytest.mark.parametrize("special", ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "é"])
def test_strings_escape_at_every_position(special: str) -> None:
    for size in range(0, 20):
        for at in range(size + 1):
            text = "a" * at + special + "b" * (size - at)
            assert fast.json_object({"s": text}, ("s",), "i", "n") == orjson.dumps(
                {"s": text, "event_id": "i", "event": "n"})


# ---------------------------------------------------------------- whole batches

def corpus_events(shared: Path) -> list[Event]:
    return [event for _, event in corpus_events_at(shared)]


def fresh(events: list[Event]) -> list[Event]:
    """The same events with nothing cached (no id, no JSON, no BP text)."""
    return [Event(e.name, dict(e.fields)) for e in events]


def test_batch_ids_and_json_equal_event_by_event_encoding(shared: Path) -> None:
    events = corpus_events(shared)
    batch, single = fresh(events), fresh(events)
    assert fast.ensure_ids(batch[:100]) == 0
    left = fast.encode_events(batch, jsonenc._shapes, jsonenc._renamed_keys)
    assert left == sum(any(isinstance(v, list) for v in e.fields.values()) for e in events)  # composite usage lists
    for got, expected in zip(batch, single):
        if got._json is not None:
            assert (got.id, got._json) == (content_id_python(expected.name, expected.fields), reference(expected))
    jsonenc.prepare(batch)  # the Python loop does the ones left
    assert [e._json for e in batch] == [jsonenc.dumps(e) for e in single]
    assert jsonenc.join(batch) == b"".join(jsonenc.dumps(e) + b"\n" for e in single)


def test_batch_functions_leave_what_they_cannot_do_to_python() -> None:
    class Other:  # not an Event: left alone
        _json = None
    merged = Event("stampede.x", {"a.b": 1, "a_b": 2, "ts": 1})    # JSON names that merge: to_dict decides
    listed = Event("stampede.x", {"l": [1], "ts": 1})               # a list: orjson writes it
    kept = Event("stampede.x", {"ts": 1}, event_id="given")         # an id read with the event is kept
    done = Event("stampede.x", {"ts": 1})
    done._json = b"cached"
    assert fast.encode_events([merged, listed, kept, done, Other()], jsonenc._shapes, jsonenc._renamed_keys) == 3
    assert (merged._json, listed._json, done._json) == (None, None, b"cached")
    assert listed._id is None and merged._id is not None  # the id of `listed` is left to event.py
    assert kept._json == b'{"ts":1,"event_id":"given","event":"stampede.x"}'
    assert fast.ensure_ids([listed, Other()]) == 2
    jsonenc.prepare([merged, listed])
    assert merged._json == jsonenc._orjson(jsonenc.to_dict(merged)) and listed.id == content_id_python(
        listed.name, listed.fields)
    with pytest.raises(TypeError):
        fast.encode_events((merged,), jsonenc._shapes, jsonenc._renamed_keys)


def test_encode_events_survives_a_cleared_shape_cache() -> None:
    events = [Event("stampede.x", {f"k{n}": n, "ts": 1}) for n in range(5000)]  # more shapes than the cache keeps
    left = fast.encode_events(events, jsonenc._shapes, jsonenc._renamed_keys)
    jsonenc.prepare(events)
    assert left <= 1 and [e._json for e in events] == [reference(Event(e.name, e.fields, e.id)) for e in events]


def test_canonical_leaves_a_float_subclass_timestamp_to_python() -> None:
    class Seconds(float):
        pass
    assert fast.canonical("n", {"ts": Seconds(1.5)}) is None
    assert content_id("n", {"ts": Seconds(1.5)}) == content_id_python("n", {"ts": Seconds(1.5)})
