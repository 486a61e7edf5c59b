"""The compiled BP fast paths give exactly what the pure-Python codec gives, or decline."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events import bp

from test_codecs import corpus_bp_files

fast = pytest.importorskip("streamer.events._bpfast", reason="compiled fast paths not built (no C compiler)")


def python_split(line: str) -> dict[str, str] | None:
    try:
        return bp._split_python(line)
    except bp.BPError:
        return None


def test_built_wherever_a_compiler_is_there() -> None:
    headers = Path(sysconfig.get_paths()["include"], "Python.h")
    if shutil.which("cc") and headers.exists():
        assert bp.COMPILED, "a C compiler and Python.h are here, but streamer.events._bpfast is not in use"


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
    ("a=1 a=2", {"a": "2"}),
    ("a=1\x1cb=2", {"a": "1", "b": "2"}),  # Python's blanks include the ASCII separators
    ("", {}),
])
def test_split_examples(line: str, expected: dict[str, str]) -> None:
    assert fast.split_line(line) == expected == bp._split_python(line)


@pytest.mark.parametrize("line", [
    'a="open', 'a=b"c', '=x', 'word', 'a="x"y', 'a=1\x00', 'a=\u00e9', 'a=\\x', 'a="x\\',
])
def test_split_declines_what_python_must_judge(line: str) -> None:
    assert fast.split_line(line) is None


LINE_TEXT = st.text(alphabet=st.sampled_from(list('ab=" \\\tnrt\x00\x1c\u00e9\x0b')), max_size=40)


@settings(max_examples=3000, deadline=None)
@given(LINE_TEXT)
def test_split_agrees_with_python_or_declines(line: str) -> None:
    got = fast.split_line(line)
    if got is not None:
        assert got == python_split(line)


VALUES = st.one_of(
    st.text(alphabet=st.sampled_from(list('ab =\\"\n\r\t\x0b\x1c\u00e9')), max_size=12),
    st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.lists(st.integers(), max_size=2),
)
FIELDS = st.dictionaries(st.sampled_from(["ts", "level", "xwf.id", "job_inst.id", "argv", "k"]), VALUES)


@settings(max_examples=3000, deadline=None)
@given(FIELDS)
def test_format_agrees_with_python_or_declines(fields: dict) -> None:
    got = fast.format_fields("ts=x event=e level=Info", fields)
    if got is not None:
        assert got == bp._format_python("ts=x event=e level=Info", fields)


def test_format_examples() -> None:
    fields = {"ts": 1.5, "level": "Error", "s": "a b", "e": "", "q": 'x"\\\n', "i": 7, "big": 2**80,
              "f": 0.1, "t": True, "n": None}
    expected = 'H s="a b" e="" q="x\\"\\\\\\n" i=7 big=1208925819614629174706176 f=0.1 t=1 n=None'
    assert fast.format_fields("H", fields) == expected == bp._format_python("H", fields)
    assert fast.format_fields("H", {"k": "\u00e9"}) is None
    assert fast.format_fields("H", {"k": [1]}) is None
