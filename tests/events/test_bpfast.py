"""The compiled BP fast paths give exactly what the pure-Python codec gives, or decline."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events import bp
from tests.events.test_codecs import corpus_bp_files
from tests.support.fuzz_targets import python_parse
from tests.conftest import unavailable
from tests.support.examples import examples

try:
    from streamer.events import _codec as fast
except ImportError:
    unavailable("compiled fast paths not built (no C compiler)", module=True)


def python_split(line: str) -> dict[str, str] | None:
    try:
        return bp._split_python(line)
    except bp.BPError:
        return None


def test_built_wherever_a_compiler_is_there() -> None:
    headers = Path(sysconfig.get_paths()["include"], "Python.h")
    if shutil.which("cc") and headers.exists():
        assert bp.COMPILED, "a C compiler and Python.h are here, but streamer.events._codec is not in use"


def test_every_corpus_line_splits_alike(shared: Path) -> None:
    count = 0
    for path in corpus_bp_files(shared):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                got = fast.split_line(line.strip())
                assert got is not None, f"{path.name}:{number}: declined a corpus line"
                assert got == bp._split_python(line.strip()), f"{path.name}:{number}"
                count += 1
    assert count > 9000


@pytest.mark.parametrize("line, expected", [
    ('a=1 b="x y" c=""', {"a": "1", "b": "x y", "c": ""}),
    ('a="q \\" b \\\\ n\\n r\\r t\\t other\\x"', {"a": 'q " b \\ n\n r\r t\t other\\x'}),
    ("a=b=c  d=", {"a": "b=c", "d": ""}),
    ("a=1\x1cb=2", {"a": "1", "b": "2"}),  # Python's blanks include the ASCII separators
    ("", {}),
])
def test_split_examples(line: str, expected: dict[str, str]) -> None:
    assert fast.split_line(line) == expected == bp._split_python(line)


@pytest.mark.parametrize("line", [
    'a="open', 'a=b"c', '=x', 'word', 'a="x"y', 'a=1\x00', 'a=\u00e9', 'a=\\x', 'a="x\\',
    'a=1 a=2', 'a="1" b=2 a="3"',  # a key given twice: bp.py says so
    'v="\\\x00="',  # an escaped NUL (found by bench/fuzz.py): Python refuses NUL anywhere
])
def test_split_declines_what_python_must_judge(line: str) -> None:
    assert fast.split_line(line) is None


@pytest.mark.parametrize("line", ["a=1 a=2", 'a="1" b=2 a="3"', "ts=0 event=stampede.xwf.start event=x"])
def test_a_key_given_twice_is_an_error_not_the_last_value(line: str) -> None:
    with pytest.raises(bp.BPError, match="given twice"):
        bp.split_line(line)
    with pytest.raises(bp.BPError, match="given twice"):
        bp.parse_line(line)


LINE_TEXT = st.text(alphabet=st.sampled_from(list('ab=" \\\tnrt\x00\x1c\u00e9\x0b')), max_size=40)


@settings(max_examples=examples(3000), deadline=None)
@given(LINE_TEXT)
def test_split_agrees_with_python_or_declines(line: str) -> None:
    got = fast.split_line(line)
    if got is not None:
        assert got == python_split(line)


VALUES = st.one_of(
    st.text(alphabet=st.sampled_from(list('ab =\\"\n\r\t\x0b\x1c\u00e9')), max_size=12),
    st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.lists(st.integers(), max_size=2), st.lists(st.text(max_size=3), max_size=2),
    st.tuples(st.text(max_size=3)), st.dictionaries(st.text(max_size=2), st.floats(), max_size=2),
)
FIELDS = st.dictionaries(st.sampled_from(["ts", "level", "xwf.id", "job_inst.id", "argv", "k"]), VALUES)


@settings(max_examples=examples(3000), deadline=None)
@given(FIELDS)
def test_format_agrees_with_python_or_declines(fields: dict) -> None:
    got = fast.format_fields("ts=x event=e level=Info", fields)
    if got is not None:
        assert got == bp._format_python("ts=x event=e level=Info", fields)


def test_an_empty_batch_is_no_bytes() -> None:
    assert bp.join([]) == b"" == fast.join_lines([])


def test_format_examples() -> None:
    fields = {"ts": 1.5, "level": "Error", "s": "a b", "e": "", "q": 'x"\\\n', "i": 7, "big": 2**80,
              "f": 0.1, "t": True, "n": None}
    expected = 'H s="a b" e="" q="x\\"\\\\\\n" i=7 big=1208925819614629174706176 f=0.1 t=1 n=None'
    assert fast.format_fields("H", fields) == expected == bp._format_python("H", fields)
    assert fast.format_fields("H", {"k": "\u00e9"}) is None
    containers = {"k": [1, "a b"], "d": {"x": 0.5}, "t": ("a", None)}  # written as their repr, quoted
    assert fast.format_fields("H", containers) == 'H k="[1, \'a b\']" d="{\'x\': 0.5}" t="(\'a\', None)"' \
        == bp._format_python("H", containers)
    assert fast.format_fields("H", {"k": ["\u00e9"]}) is None  # a non-ASCII repr: bp.py writes it
    assert fast.format_fields("H", {"k": [bp.Event]}) == bp._format_python("H", {"k": [bp.Event]})


CONTAINERS = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
                          lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                  st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                          max_leaves=8)


@settings(max_examples=examples(2000), deadline=None)
@given(st.dictionaries(st.sampled_from(["xwf.id", "invocations", "argv", "k"]),
                       st.one_of(CONTAINERS, st.text(max_size=8)), min_size=1))
def test_an_event_with_list_or_dict_values_is_written_as_python_writes_it(fields: dict) -> None:
    """A composite's `invocations` (a list of dicts) goes through the compiled path as its repr (issue 28):
    the line is the pure-Python one, non-ASCII texts included (those the compiled path declines)."""
    event = bp.Event("stampede.job_inst.composite", {"ts": 0, **fields})
    head = "ts=1970-01-01T00:00:00.000000Z event=stampede.job_inst.composite level=Info"
    assert bp._format_fields(event) == bp._format_python(head, {"ts": 0, **fields})


def test_a_composites_invocations_are_their_repr_quoted() -> None:
    invocations = [{"transformation": "pegasus::dirmanager", "exitcode": 0, "duration": 3.84}]
    event = bp.Event("stampede.job_inst.composite", {"ts": 0, "invocations": invocations, "argv": ("a", 1)})
    assert bp._format_fields(event) == (
        "ts=1970-01-01T00:00:00.000000Z event=stampede.job_inst.composite level=Info invocations=\"[{'transformation':"
        " 'pegasus::dirmanager', 'exitcode': 0, 'duration': 3.84}]\" argv=\"('a', 1)\"")


# ---------------------------------------------------------------- parse_event

def typed(fields: dict) -> list:
    return [(key, type(value).__name__, value) for key, value in fields.items()]


def assert_same_event(got: bp.Event, expected: bp.Event, where: str) -> None:
    assert isinstance(expected, bp.Event), f"{where}: Python refused what the compiled parser took: {expected}"
    assert (got.name, typed(got.fields), got._id, got._bp, got._json) == \
        (expected.name, typed(expected.fields), expected._id, expected._bp, expected._json), where
    assert got.id == expected.id, where


def test_parse_event_is_in_use() -> None:
    assert bp._fast_parse is fast.parse_event and bp.parse_compiled is bp._compiled_verified


def test_every_corpus_line_parses_alike(shared: Path) -> None:
    count = 0
    for path in corpus_bp_files(shared):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            text = line.strip()
            if text:
                got = fast.parse_event(text)
                assert got is not None, f"{path.name}:{number}: declined a corpus line"
                assert_same_event(got, python_parse(text), f"{path.name}:{number}")
                count += 1
    assert count > 9000


def test_parse_event_examples() -> None:
    line = ("ts=2012-03-14T14:04:48.500000Z event=stampede.job_inst.main.end level=Info xwf.id=x "
            'job_inst.id=3 status=None site="a b" exitcode=-1 event.id=abc')
    event = fast.parse_event(line)
    assert event.name == "stampede.job_inst.main.end"
    assert typed(event.fields) == [("ts", "float", 1331733888.5), ("xwf.id", "str", "x"),
                                   ("job_inst.id", "int", 3), ("status", "NoneType", None),
                                   ("site", "str", "a b"), ("exitcode", "int", -1)]
    assert (event._id, event._bp, event._json) == ("abc", line, None)
    assert fast.parse_event("ts=1 event=stampede.xwf.end level=Error xwf.id=x").fields["level"] == "Error"
    short = fast.parse_event("ts=1 event=job_inst.main.end job_inst.id=3")  # planner files omit the prefix
    assert (short.name, short._bp) == ("stampede.job_inst.main.end", None)
    assert_same_event(short, python_parse("ts=1 event=job_inst.main.end job_inst.id=3"), "short name")


@pytest.mark.parametrize("line", [
    "",                                                   # nothing
    " ts=1 event=stampede.xwf.end",                       # not stripped: parse_line strips it
    "ts=1 event=stampede.xwf.end ",
    "# ts=1 event=stampede.xwf.end",                      # a comment
    '{"event": "stampede.xwf.end", "ts": 1}',             # JSON
    "ts=1 xwf.id=x",                                      # no event
    "ts=1 event=",                                        # empty event
    "event=stampede.xwf.end xwf.id=x",                    # no ts
    "ts=1 event=stampede.xwf.end job_inst.id=three",     # a value its converter refuses
    "ts=yesterday event=stampede.xwf.end",
    "ts=1 event=stampede.workflow.start wf.id=x",         # a 3.x name: translated by parse_line
    "ts=1 event=stampede.task.edge parent_abs_task.id=a",  # a 4.x name with 3.x fields
    "ts=1 event=stampede.xwf.end site=\u00e9",             # not ASCII
    "ts=1 event=stampede.xwf.end a=\x00",                  # NUL
    'ts=1 event=stampede.xwf.end a="open',                 # malformed
])
def test_parse_event_declines_what_parse_line_must_judge(line: str) -> None:
    assert fast.parse_event(line) is None


def test_a_3x_edge_is_written_with_its_4x_fields() -> None:
    event = bp.parse_line("ts=1 event=stampede.task.edge xwf.id=x parent_abs_task.id=a child_abs_task.id=b")
    assert event.fields == {"ts": 1, "xwf.id": "x", "parent.task.id": "a", "child.task.id": "b"}
    assert bp.format_event(event, with_id=False) == \
        "ts=1970-01-01T00:00:01.000000Z event=stampede.task.edge level=Info xwf.id=x parent.task.id=a child.task.id=b"


BP_KEYS = st.sampled_from(["ts", "event", "level", "xwf.id", "job_inst.id", "exitcode", "dur", "event.id",
                           "parent_abs_task.id", "k", "start_time"])
BP_VALUES = st.one_of(
    st.sampled_from(["1", "-2", "1.5", "None", "Info", "Error", "x", "", "2012-03-14T14:04:48Z", "1e3", "nan",
                     "stampede.xwf.end", "stampede.task.edge", "job_inst.main.end", "stampede.job", "stampede.zz",
                     "99999999999999999999", '"a b"', '"q\\"x"']),
    st.text(alphabet=st.sampled_from(list("ab1.-=\\\" \u00e9")), max_size=6),
)


@settings(max_examples=examples(3000), deadline=None)
@given(st.lists(st.tuples(BP_KEYS, BP_VALUES), max_size=7))
def test_parse_event_agrees_with_parse_line_or_declines(pairs: list) -> None:
    line = " ".join(f"{key}={value}" for key, value in pairs)
    try:
        got = bp.parse_compiled(line)  # the compiled parse with the id check every input gets
    except bp.BPError as exc:
        assert python_parse(line) == f"error: {exc}", line
        return
    if got is not None:
        assert_same_event(got, python_parse(line), line)


def test_plan_cache_is_bounded() -> None:
    for number in range(5000):
        fast.parse_event(f"ts=1 event=x.y{number}")
    assert len(bp._plans) <= 4096
    assert fast.parse_event("ts=1 event=stampede.xwf.end").name == "stampede.xwf.end"


def test_join_lines_writes_what_format_event_writes(shared: Path) -> None:
    lines = [line for path in corpus_bp_files(shared) for line in path.read_text().splitlines() if line.strip()]
    events = [bp.parse_line(line) for line in lines]
    expected = "".join(bp.format_event(bp.parse_line(line)) + "\n" for line in lines).encode()
    assert fast.join_lines(events) is None  # ids not computed yet, planner lines (`event=task.info`) kept no text
    assert bp.join(events) == expected  # which it caches on the events ...
    assert fast.join_lines(events) == expected  # ... for the compiled join
    own = bp.parse_line("ts=1 event=stampede.xwf.end xwf.id=x").id
    with_id = bp.parse_line(f"ts=1 event=stampede.xwf.end xwf.id=x event.id={own}")
    assert fast.join_lines([with_id]) == f"ts=1 event=stampede.xwf.end xwf.id=x event.id={own}\n".encode()  # not twice


def test_join_lines_declines_events_without_their_line() -> None:
    built = bp.Event("stampede.xwf.end", {"ts": 1, "xwf.id": "x"})
    built.id  # noqa: B018
    assert fast.join_lines([built]) is None
    assert bp.join([built]) == (bp.format_event(built) + "\n").encode()
    assert fast.join_lines([]) == b""
    with pytest.raises(TypeError):
        fast.join_lines((built,))


@pytest.mark.parametrize("digits", [309, 400, 4000])
def test_a_number_beyond_a_double_is_a_field_error_not_a_crash(digits: int) -> None:
    """Found by the fuzz harness: `dur=` with 400 digits raised OverflowError from float() on both paths."""
    line = ("ts=2012-03-15T16:43:47.264595Z event=stampede.inv.end xwf.id=ccb26ba4-4df6-4aa4-b6b9-be6bd3fd8d74 "
            f"job_inst.id=1 job.id=a inv.id=1 dur={'9' * digits}")
    with pytest.raises(bp.BPError, match=r"field dur: not a finite number: '9{60}'"):
        bp.parse_line(line)
    assert python_parse(line) == f"error: field dur: not a finite number: '{'9' * 60}'"
