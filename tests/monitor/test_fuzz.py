"""Every parser of untrusted text, fuzzed for a few seconds each on hostile inputs (see fuzz_targets.py).

The inputs are corpus lines and records mutated with what broke streamer or
could: nesting a hundred thousand levels deep, huge tokens, out-of-range and
malformed timestamps, NUL and invalid UTF-8, quotes, keys given twice.
`bench/fuzz.py --minutes N` runs the same targets longer (coverage-guided
with atheris when installed).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzz_targets import TARGETS, TRAVERSAL

HOSTILE = [
    b"[" * 20_000, b"{a: " * 5_000, b"- " * 20_000, b"\n" + b" " * 5_000 + b"a: 1", b"x" * 300_000,
    b"ts=1e300", b"ts=-99999999999", b"ts=nan", b"ts=inf", b"ts=10000-01-01T00:00:00Z", b"99:99:99",
    b"13/45/23", b"\x00", b"\xff\xfe", "\u00e9\u2028\U0001f600".encode(), b'"', b'\\"', b"\\", b"\n", b"\r",
    b"=", b" ", b"None", b"event=", b"event.id=0123456789abcdef0123456789abcdef", b"level=Panic", b"1" * 40,
    b"-1", b"1e309", b"0x1f", b"&amp;", b"<![CDATA[", b"]]>", b"---------------pegasus-multipart\n",
    b"- invocation: ", b'"ts": 1e300', b'"event_id": "x"', b"INTERNAL *** DAGMAN_STARTED",
    b"\xd8\x00", b"\t", b"{", b"}", "\u00b2".encode(), "\u0661\u0662".encode(), "\u00bd".encode(),
    "\uff11".encode(),  # digits Python's isdigit() takes and int() may not
    b"&a [x, x, x]\n", b"*a", b"[*a, *a, *a, *a]", b"!!python/object/apply:os.system ['true']",
    b"!!python/name:os.system", b"<<: *a",  # anchors, aliases and tags a kickstart record never holds
    *TRAVERSAL,  # what a workflow may put where streamer takes a name or a path (issue 27)
]

EXAMPLES = int(os.environ.get("STREAMER_FUZZ_EXAMPLES", "150"))
"""Examples per target: a few seconds each in the suite; raise it for a longer local run."""
EXPLORE = bool(os.environ.get("STREAMER_FUZZ_EXPLORE"))
"""The suite runs the same examples every time (a CI run must not fail on a new random input; what the
fuzzers find is fixed and kept in FOUND); STREAMER_FUZZ_EXPLORE=1 or bench/fuzz.py explore new ones."""

OPS = ("insert", "replace", "delete", "splice", "repeat")


@st.composite
def hostile(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for op, position, piece in draw(st.lists(st.tuples(
            st.sampled_from(OPS), st.integers(0, 1 << 20),
            st.one_of(st.sampled_from(HOSTILE), st.binary(max_size=24), st.sampled_from(seeds))), max_size=4)):
        at = position % (len(data) + 1)
        if op == "insert" or op == "splice":
            data[at:at] = piece
        elif op == "replace":
            data[at:at + len(piece)] = piece
        elif op == "delete":
            del data[at:at + 1 + position % 64]
        elif op == "repeat":
            data[at:at] = bytes(data[at:at + 8]) * (1 + position % 2_000)
    return bytes(data)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_survives_hostile_input(name: str) -> None:
    target = TARGETS[name]
    seeds = target.seeds()
    assert seeds

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not EXPLORE,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(hostile(seeds))
    def check(data: bytes) -> None:
        target.run(data)

    for seed in seeds[:50]:  # the unmutated inputs pass too
        target.run(seed)
    check()


ALIAS_BOMB = b"- invocation:\n    hostname: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
    b"    l%d: &%c [%s]\n" % (i, 98 + i, b", ".join([b"*%c" % (97 + i)] * 9)) for i in range(8))

FOUND = [  # what the fuzzers found, fixed and kept here so it stays fixed
    ("kickstart", ALIAS_BOMB),  # 9**9 nodes in ten lines: refused before anything walks it (issue 27)
    ("braindump", b"wf_uuid: &a [x, x]\ndag: [*a, *a]\n"),
    ("kickstart", b"- invocation: !!python/object/apply:os.system ['true']\n"),
    ("yaml_subset", ALIAS_BOMB),
    ("input_file", b"\x01"),  # a FIFO with no writer
    ("input_file", b"\x03"),  # /dev/zero
    ("jobstate_line", "\u00b2 JOB SUBMIT".encode()),  # a non-ASCII digit isdigit() takes and int() does not
    ("jobstate_line", b"1" * 5_000 + b" INTERNAL *** MONITORD_STARTED ***"),  # beyond int()'s 4,300 digits
    ("bp_split", b'v="\\\x00="'),  # an escaped NUL the compiled split took and Python refuses
    ("bp_line", b"ts=2012-03-13T12:50:26Z event=stampede.inv.start xwf.id=x job.id=j inv.id=1 job_inst.id="
                + b"14" * 60),  # an integer beyond 64 bits, written as JSON no reader takes back
    ("yaml_subset", b'- integrity_verification_attempts:\n  - lfn: "\ranalyze"\n    pfn: "analyze"\n'),  # YAML folds \r
    ("yaml_subset", "- a:\n    b: \"x\u2028y\"\n".encode()),  # so are NEL, LS and PS
    ("yaml_subset", b"- a:\n    data: |\n      [[[["),  # a block scalar ending the text without a line break
    ("bp_line", b"ts=2012-03-14T14:04:48Z event=stampede.task.edge child.task.id=ID1 [[[parent.task.id=ID2 "
                b"xwf.id=a3927dc2-0514-4e00-8e42-27c61c867648"),  # an unknown key whose dots JSON turns into _
]


@pytest.mark.parametrize("name, data", FOUND)
def test_findings_stay_fixed(name: str, data: bytes) -> None:
    TARGETS[name].run(data)


MEGABYTE = b"a." * 500_000
"""A 1 MB name or value (letters and dots: what the old password mask was quadratic on)."""


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_takes_megabyte_names_and_traversal_strings(name: str) -> None:
    """Every target, given its first seeds with a 1 MB token or a traversal string put in after each `=`,
    `:` or blank of the first line (where names and values sit), returns or refuses as documented: no other
    exception, no stall (the suite's timeout bounds it)."""
    target = TARGETS[name]
    for seed in target.seeds()[:3]:
        for piece in (MEGABYTE, b"../../../ESCAPED", b"%2e%2e%2f"):
            first = seed.split(b"\n", 1)[0]
            at = max(first.find(b"="), first.find(b":"), first.find(b" ")) + 1
            target.run(seed[:at] + piece + seed[at:])
        target.run(MEGABYTE)
