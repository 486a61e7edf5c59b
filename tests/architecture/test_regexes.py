"""Every regular expression of the package, fed its own worst case: none may cost more than linear time.

A workflow's files are written by someone else: a 64 KiB (or 1 MB) line of whatever a pattern
is most sensitive to must not stall streamer (issue 27: the old password mask took 4 s on 64 KiB
of letters and dots, a 1 MB BP event name never finished). The patterns are found by reading the
source (every `re.compile/match/search/...` call with a literal pattern) so a new one is checked
without being listed; a pattern built at run time (event filters) is checked through its builder.

The inputs are built from each pattern: runs of each character it names (literals, class members,
characters outside its negated classes), of each literal piece it contains (`Submitting Condor
Node ` repeated), of pairs of those, each with and without a character that makes the match fail
at the end. Each runs through `search` (every start position: a quadratic scan shows) and
`fullmatch` (backtracking shows), and its CPU time is compared with a linear baseline over the same
text, with a generous factor: a linear pattern stays within it by far, a quadratic one exceeds it
by thousands.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path
from typing import Any
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "streamer"
SIZE = 64 * 1024
FACTOR = 300
"""CPU of one call over SIZE characters, at most FACTOR x a linear scan of them (plus FLOOR)."""
FLOOR = 0.02
CALLS = {"compile", "match", "search", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
FLAGS = {"IGNORECASE": re.IGNORECASE, "I": re.IGNORECASE, "MULTILINE": re.MULTILINE, "M": re.MULTILINE,
         "DOTALL": re.DOTALL, "S": re.DOTALL, "VERBOSE": re.VERBOSE, "X": re.VERBOSE, "ASCII": re.ASCII}


def _flags(node: ast.expr | None) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and node.attr in FLAGS:
        return FLAGS[node.attr]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    return 0


NOT_INPUT = {"streamer/docs/": "our own documentation's link checker: it reads docs/, never a workflow's files"}
"""Directories whose patterns never see input (each with why); everything else is checked."""
SEARCHING = {"search", "findall", "finditer", "sub", "subn", "split"}
"""Calls that try every start position: their worst case is `search`'s."""


def _methods(called: set[str]) -> tuple[str, ...]:
    """What to time for a pattern the code calls with `called` (all three when the calls are not seen)."""
    out = {"search" if m in SEARCHING else m for m in called if m in SEARCHING | {"match", "fullmatch"}}
    return tuple(sorted(out)) or ("fullmatch", "match", "search")


def source_patterns() -> list[tuple[str, re.Pattern, tuple[str, ...]]]:
    """(file:line, compiled pattern, methods the code calls on it) of every `re.<call>(literal, ...)` in the
    package; a pattern assigned to a name is timed with the methods called on that name anywhere."""
    found = []
    texts = {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}
    for path, source in texts.items():
        if any(str(path.relative_to(ROOT)).startswith(prefix) for prefix in NOT_INPUT):
            continue
        tree = ast.parse(source)
        names = {id(node.value): node.targets[0].id for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in CALLS and node.args):
                continue
            literal = node.args[0]
            if not isinstance(literal, ast.Constant) or not isinstance(literal.value, (str, bytes)):
                continue
            flags_node = next((k.value for k in node.keywords if k.arg == "flags"), None)
            position = {"compile": 1, "match": 2, "search": 2, "fullmatch": 2, "findall": 2, "finditer": 2,
                        "split": 3, "sub": 4, "subn": 4}[node.func.attr]
            if flags_node is None and len(node.args) > position:
                flags_node = node.args[position]
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if node.func.attr != "compile":
                called = {node.func.attr}
            elif id(node) in names:
                called = {m for text in texts.values()
                          for m in re.findall(rf"\b{names[id(node)]}\.(\w+)\(", text)}
            else:
                called = set()
            found.append((where, re.compile(literal.value, _flags(flags_node)), _methods(called)))
    return found


class _GlobCase:
    """A glob of the event filters, timed through its matcher (the regex it stands for gives the alphabet)."""

    def __init__(self, glob: str) -> None:
        from streamer.core import filters

        self.glob = filters._compile(glob)
        self.regex = re.compile(self.glob.pattern)
        self.pattern, self.flags = self.regex.pattern, self.regex.flags

    def match(self, text: str) -> bool:
        return self.glob.match(text)


def built_patterns() -> list[tuple[str, Any, tuple[str, ...]]]:
    """Patterns built at run time from configuration, applied to names read from input (event filters)."""
    return [(f"core/filters.py {glob!r}", _GlobCase(glob), ("match",))
            for glob in ("*", "stampede.*", "*a*b", "*.*.*.x", "a?*?b*c", "*inv*end*", "?*?*?*?*?*!")]


def _alphabet(pattern: Any) -> tuple[list[str], list[str]]:
    """(characters, literal pieces) the pattern names: what its worst case is made of."""
    chars: dict[str, None] = {}
    pieces: list[str] = []

    def add(code: int) -> None:
        chars.setdefault(chr(code), None)

    def walk(items: list) -> None:
        run: list[str] = []
        for op, av in items:
            if op is C.LITERAL:
                add(av)
                run.append(chr(av))
                continue
            if len(run) > 1:
                pieces.append("".join(run))
            run = []
            if op is C.NOT_LITERAL:
                add(av)
                add(ord("a") if av != ord("a") else ord("b"))
            elif op is C.IN:
                for kind, value in av:
                    if kind is C.LITERAL:
                        add(value)
                    elif kind is C.RANGE:
                        add(value[0])
                        add(value[1])
                    elif kind is C.CATEGORY:
                        for char in {"DIGIT": "0", "SPACE": " ", "WORD": "a"}.get(str(value).rsplit("_", 1)[-1],
                                                                                 "a "):
                            add(ord(char))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                walk(list(av[2]))
            elif op is C.SUBPATTERN:
                walk(list(av[-1]))
            elif op is C.BRANCH:
                for branch in av[1]:
                    walk(list(branch))
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(list(av[1]))
        if len(run) > 1:
            pieces.append("".join(run))

    text = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    walk(list(sre_parse.parse(text, pattern.flags & ~re.UNICODE & ~re.ASCII if isinstance(pattern.pattern, bytes)
                              else pattern.flags)))
    for default in "a0 .\t\n=\"":
        chars.setdefault(default, None)
    return list(chars), pieces


def worst_cases(pattern: Any) -> list[str]:
    chars, pieces = _alphabet(pattern)
    units = [*chars, *pieces, *(p + c for p in pieces for c in chars[:12]),
             *(a + b for a in chars[:12] for b in chars[:12] if a != b)]
    return list(dict.fromkeys(units))


def _cpu(call, text) -> float:
    started = time.process_time()
    call(text)
    return time.process_time() - started


_LINEAR = re.compile(r"[^\x01]*\x01")
_LINEAR_BYTES = re.compile(rb"[^\x01]*\x01")
"""The baseline: one pass over the text and one back (`match`, anchored at the start)."""


def offenders(where: str, pattern: Any, methods: tuple[str, ...] = ("fullmatch", "match", "search"),
              size: int = SIZE) -> list[str]:
    found = []
    binary = isinstance(pattern.pattern, bytes)
    for unit in worst_cases(pattern):
        for tail in ("", "\x00"):
            text: str | bytes = unit * (size // len(unit)) + tail
            if binary:
                text = text.encode("utf-8")
            baseline = _cpu((_LINEAR_BYTES if binary else _LINEAR).match, text)
            for method in (getattr(pattern, name) for name in methods):
                spent = _cpu(method, text)
                if FACTOR * baseline + FLOOR < spent < 10 * (FACTOR * baseline + FLOOR):
                    spent = min(spent, _cpu(method, text))  # once more: a busy neighbour, not the pattern?
                if spent > FACTOR * baseline + FLOOR:
                    found.append(f"{where} {pattern.pattern!r}.{method.__name__}({unit!r} * {size // len(unit)}"
                                 f" + {tail!r}): {spent:.2f} s CPU, a linear scan {baseline * 1000:.1f} ms")
                    return found
    return found


ALL = source_patterns() + built_patterns()


def test_the_patterns_are_found() -> None:
    """The harness sees the patterns it must (a refactor that hides them from it fails here)."""
    sources = {where.split(":")[0] for where, _, _ in ALL}
    assert {"streamer/monitor/parsers/dagman.py", "streamer/events/bp.py", "streamer/util/urls.py"} <= sources or \
        {"streamer/monitor/parsers/dagman.py", "streamer/events/bp.py"} <= sources
    assert len(ALL) >= 60


@pytest.mark.parametrize("where,pattern,methods", ALL, ids=[w for w, _, _ in ALL])
def test_no_pattern_is_superlinear_on_its_worst_case(where: str, pattern: Any, methods: tuple[str, ...]) -> None:
    assert offenders(where, pattern, methods) == []


def test_the_harness_catches_a_quadratic_pattern() -> None:
    """The old password mask: 64 KiB of letters and dots cost seconds in `search`; the old event filters'
    `*a*b` as a regex, quadratic in `fullmatch`."""
    old = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]*)@")
    assert offenders("old urls._USERINFO", old, ("search",), size=16 * 1024)
    assert offenders("old filters", re.compile(r".*a.*b\Z"), ("match",), size=16 * 1024)
