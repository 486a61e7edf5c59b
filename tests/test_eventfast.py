"""The compiled typing path gives exactly what event.py's converters give, errors included."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events import event as ev
from streamer.events.event import FieldError

fast = pytest.importorskip("streamer.events._eventfast", reason="compiled fast paths not built (no C compiler)")

TODO = [("i", 1, ev._integer), ("t", 2, ev._timestamp), ("n", 3, ev._num_or_ts), ("l", 0, ev._listing)]


def python_typed(fields: dict) -> dict | str:
    out = dict(fields)
    try:
        ev._coerce_python(out, TODO)
    except FieldError as exc:
        return f"error: {exc}"
    return out


def compiled_typed(fields: dict) -> dict | str:
    out = dict(fields)
    try:
        fast.coerce(out, TODO, ev._parse_ts_cached)
    except FieldError:
        try:  # what coerce_fields does next: the Python loop names the field
            ev._coerce_python(out, TODO)
        except FieldError as exc:
            return f"error: {exc}"
        raise AssertionError("the compiled path failed where Python does not")
    return out


def same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


TEXTS = st.one_of(
    st.from_regex(r"[+-]?[0-9]{1,25}(\.[0-9]{0,8})?", fullmatch=True),
    st.text(alphabet=st.sampled_from(list("0123456789.+-eE_ TZ:None\u0663x[]")), max_size=24),
    st.sampled_from(["None", "2023-11-14T22:13:25.009+00:00", "2023-03-04T06:23:33Z", "1699999999.5", "nan",
                     "inf", "1e5", "1_000", " 12 ", "007", "-0", "+5", "[1, 2]", "", "2023-13-45T99:00Z"]),
)
VALUES = st.one_of(TEXTS, st.integers(), st.floats(), st.booleans(), st.none(), st.lists(st.integers(), max_size=2))


@settings(max_examples=4000, deadline=None)
@given(st.fixed_dictionaries({}, optional={"i": VALUES, "t": VALUES, "n": VALUES, "l": VALUES, "s": TEXTS}))
def test_compiled_typing_agrees_with_python(fields: dict) -> None:
    if any(k not in fields for k, _, _ in TODO):
        fields = {**{k: "1" for k, _, _ in TODO}, **fields}
    assert same(compiled_typed(fields), python_typed(fields))


def test_examples() -> None:
    fields = {"i": "-42", "t": "2023-03-04T06:23:33.5Z", "n": "12.25", "l": "[1]", "s": "None"}
    fast.coerce(fields, TODO, ev._parse_ts_cached)
    assert fields == {"i": -42, "t": 1677911013.5, "n": 12.25, "l": [1], "s": None}
    with pytest.raises(FieldError):
        fast.coerce({"i": "x", "t": 1, "n": 1, "l": []}, TODO, ev._parse_ts_cached)
    with pytest.raises(FieldError, match="field job_inst.id: not a number: 'x'"):
        ev.coerce_fields("stampede.job_inst.main.start", {"ts": "1", "job_inst.id": "x"})
