"""A loader for the block-YAML subset kickstart writes, many times faster than PyYAML.

Kickstart records are regular: 2-space indented block mappings and sequences,
one `key: value` per line, plain or quoted scalars, `|` literal blocks for file
data. PyYAML spends most of a replay building Python objects for nodes the
monitor never reads; this loader walks the lines once, skips the subtrees a
*keep* spec leaves out, and resolves scalars as PyYAML's SafeLoader does
(its own implicit resolvers: `True`/`yes` booleans, `~` null, ints,
floats; timestamps stay text, as the monitor's PyYAML loader keeps them).

Anything outside the subset (flow style, anchors, tags, folded blocks,
multi-line plain scalars, comments after values, escapes it cannot be sure
of) raises `Unsupported`, and the caller parses the text with PyYAML: the
fast path never guesses. The equivalence is tested record by record against
PyYAML on the corpus and on every synthetic scenario.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import yaml

Keep = Any
"""`True` keeps a whole subtree; a dict maps keys (or `"*"`) to the spec of their value."""


class Unsupported(ValueError):
    """Text outside the subset: parse it with PyYAML instead."""


_BOOLS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?\Z")
# PyYAML's own implicit resolvers (first character -> [(tag, pattern)]): a plain
# scalar gets exactly the type SafeLoader would give it
_RESOLVERS: dict[str, list[tuple[str, re.Pattern[str]]]] = {
    first: list(entries)
    for first, entries in yaml.resolver.Resolver.yaml_implicit_resolvers.items() if first
}
_INDICATORS = frozenset("{[&*!|>%@`#?")


def load(text: str, keep: Keep = True, scalar_fallback: Callable[[str], Any] | None = None) -> Any:
    """The document in `text`, with subtrees outside `keep` left out (raises Unsupported).

    `scalar_fallback` resolves the rare scalar forms the loader does not
    handle itself (PyYAML on the scalar alone); without one they raise.
    """
    if "\r" in text or (not text.isascii() and _OTHER_BREAKS.search(text)):
        raise Unsupported("a line break other than \\n")  # YAML folds them: PyYAML decides (found by fuzzing)
    if text and not text.endswith("\n"):
        raise Unsupported("no line break at the end")  # a block scalar's last line keeps none (found by fuzzing)
    parser = _Parser(text, scalar_fallback)
    if not parser.lines:
        return None
    value = parser.node(0, parser.lines[0][0], keep)
    if parser.pos != len(parser.lines):
        raise Unsupported(f"unexpected indentation at line {parser.number(parser.pos) + 1}")
    return value


_OTHER_BREAKS = re.compile("[\x85\u2028\u2029]")
"""Line breaks of YAML besides \\n and \\r (kickstart files are read with universal newlines)."""
_NOT_PLAIN_KEY = frozenset("\"'#\t-") | _INDICATORS
_MISSING = object()
MAX_DEPTH = 200
"""Deepest nesting the walk takes (the compiled walk's MAX_DEPTH too); deeper steps aside (Unsupported)."""
_resolved: dict[str, Any] = {}
"""Scalar text -> value: keys and many values repeat from record to record."""
_RESOLVED_MAX = 20_000
_splits: dict[str, tuple[Any, str]] = {}
"""A mapping line's content -> (key, value text): the same lines come back in every record."""


class _Parser:
    def __init__(self, text: str, scalar_fallback: Callable[[str], Any] | None) -> None:
        self.raw = raw = text.split("\n")
        self.lines: list[tuple[int, str]]  # (indent, content) of the lines with content
        self.numbers: list[int] | None  # their raw line numbers (None: every raw line is one of them)
        if ("\t" in text or " \n" in text or "\n\n" in text or "\n---" in text or "\n..." in text
                or text.startswith(("\n", "---", "..."))):
            self.lines, self.numbers = _careful_lines(raw)
        else:  # no tab, blank line, trailing blank or document marker (kickstart's records): only split
            cache = _split_lines  # typed: the compiled lookup is a direct dict access, not a bound method call
            lines: list[tuple[int, str]] = []
            for i in range(len(raw) - 1):  # raw[-1]: after the last \n
                line = raw[i]
                split = cache.get(line)
                lines.append(split if split is not None else _split_line(line))
            self.lines = lines
            self.numbers = None
        self.pos = 0
        self.depth = 0
        self.scalar_fallback = scalar_fallback

    def number(self, pos: int) -> int:
        """The raw line number of `lines[pos]`."""
        return pos if self.numbers is None else self.numbers[pos]

    # ------------------------------------------------------------ nodes
    def node(self, pos: int, indent: int, keep: Keep) -> Any:
        if self.depth >= MAX_DEPTH:  # the walk recurses per level: hostile nesting steps aside
            raise Unsupported(f"nesting too deep at line {self.number(pos) + 1}")
        self.depth += 1
        self.pos = pos
        content = self.lines[pos][1]
        try:
            if content == "-" or content.startswith("- "):
                return self.sequence(indent, keep)
            return self.mapping(indent, keep)
        finally:
            self.depth -= 1

    def sequence(self, indent: int, keep: Keep) -> list[Any]:
        items: list[Any] = []
        lines = self.lines
        while self.pos < len(lines):
            line_indent, content = lines[self.pos]
            number = self.number(self.pos)
            if line_indent != indent or not (content == "-" or content.startswith("- ")):
                if line_indent > indent:
                    raise Unsupported(f"unexpected indentation at line {number + 1}")
                break
            rest = content[2:].lstrip(" ")
            if rest[:1] in ("#", "\t"):
                raise Unsupported(f"comment or tab at line {number + 1}")
            if not rest:
                self.pos += 1
                items.append(self.child(indent, keep, allow_same_indent=False))
                continue
            inner = indent + len(content) - len(rest)
            if rest.startswith("- ") or rest == "-":
                raise Unsupported(f"nested compact sequence at line {number + 1}")
            if _key_colon(rest) >= 0:  # `- key: value`: a mapping whose first line starts after the dash
                lines[self.pos] = (inner, rest)
                items.append(self.mapping(inner, keep))
            else:
                items.append(self.scalar(rest, number))
                self.pos += 1
        return items

    def mapping(self, indent: int, keep: Keep) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        lines = self.lines
        count = len(lines)
        keep_all = keep is True
        keep_map = keep if isinstance(keep, dict) else None
        other = keep_map.get("*") if keep_map is not None else None
        resolved = _resolved
        splits = _splits
        numbers = self.numbers
        pos = self.pos  # kept in a local: self.pos is written back around the calls that move it
        while pos < count:  # the hot loop of a replay: the common line is handled inline
            line_indent, content = lines[pos]
            number = pos if numbers is None else numbers[pos]
            if line_indent != indent:
                if line_indent > indent:
                    raise Unsupported(f"unexpected indentation at line {number + 1}")
                break
            split = splits.get(content)
            if split is not None:  # a line seen before (most lines of a record repeat from record to record)
                key, value_text = split
            else:
                first = content[0]
                if first == "-" and (len(content) == 1 or content[1] == " "):
                    break
                colon = content.find(": ") if first not in _NOT_PLAIN_KEY else -1
                if colon > 0:
                    key_text, value_text = content[:colon].rstrip(" "), content[colon + 2:].lstrip(" ")
                elif first not in _NOT_PLAIN_KEY and content[-1] == ":" and len(content) > 1:
                    key_text, value_text = content[:-1].rstrip(" "), ""  # `a :` is the key `a` (test_yamlsub)
                else:
                    if first in "#\t":
                        raise Unsupported(f"comment or tab at line {number + 1}")
                    colon = _key_colon(content)
                    if colon < 0:
                        raise Unsupported(f"not a `key: value` line at line {number + 1}")
                    key_text, value_text = content[:colon].rstrip(" "), content[colon + 1:].lstrip(" ")
                key = resolved.get(key_text, _MISSING)
                if key is _MISSING:
                    key = self.scalar(key_text, number)
                if len(splits) >= _RESOLVED_MAX:
                    splits.clear()
                splits[content] = (key, value_text)
            spec = True if keep_all else keep_map.get(key, other) if keep_map is not None else None
            pos += 1
            if spec is None:
                if value_text and value_text[0] != "|" and value_text[0] != ">":  # a scalar: its deeper lines
                    while pos < count and lines[pos][0] > indent:
                        pos += 1
                else:
                    self.pos = pos
                    self.skip(indent, value_text)
                    pos = self.pos
                continue
            if not value_text:
                self.pos = pos
                out[key] = self.child(indent, spec, allow_same_indent=True)
                pos = self.pos
            elif value_text[0] == "|":
                self.pos = pos
                out[key] = self.literal(indent, value_text, number)
                pos = self.pos
            else:
                value = resolved.get(value_text, _MISSING)
                out[key] = value if value is not _MISSING else self.scalar(value_text, number)
                if pos < count and lines[pos][0] > indent:
                    raise Unsupported(f"multi-line scalar at line {number + 1}")
        self.pos = pos
        return out

    def child(self, indent: int, keep: Keep, *, allow_same_indent: bool) -> Any:
        """The block node under a key or dash with nothing after it (null if none)."""
        if self.pos >= len(self.lines):
            return None
        child_indent, content = self.lines[self.pos]
        if child_indent > indent:
            return self.node(self.pos, child_indent, keep)
        if allow_same_indent and child_indent == indent and (content == "-" or content.startswith("- ")):
            return self.sequence(indent, keep)  # YAML's compact form: a sequence at its key's indent
        return None

    def skip(self, indent: int, value_text: str) -> None:
        """Step over a value nobody reads: deeper lines, and a sequence at the key's own indent."""
        lines = self.lines
        if value_text[:1] == "|" or value_text[:1] == ">":
            self.pos = self.block_end(indent)
            return
        while self.pos < len(lines):
            line_indent, content = lines[self.pos]
            if line_indent > indent or (not value_text and line_indent == indent
                                        and (content == "-" or content.startswith("- "))):
                self.pos += 1
                continue
            break

    # ------------------------------------------------------------ block scalars
    def block_end(self, indent: int) -> int:
        """Index in `lines` after a block scalar whose key is at `indent`."""
        pos = self.pos
        while pos < len(self.lines) and self.lines[pos][0] > indent:
            pos += 1
        return pos

    def literal(self, indent: int, header: str, number: int) -> str:
        if header not in ("|", "|-"):
            raise Unsupported(f"block scalar header {header!r} at line {number + 1}")
        end = self.block_end(indent)
        last = self.number(end - 1) if end > self.pos else number
        if end < len(self.lines):
            stop = self.number(end)
        else:
            stop = len(self.raw)
        # every raw line up to the next node, blank lines included (they belong to the block)
        body = self.raw[number + 1:stop]
        self.pos = end
        texts = body[: last - number]
        content_indent = None
        for line in texts:
            if line.strip(" "):
                content_indent = len(line) - len(line.lstrip(" "))
                break
        if content_indent is None:
            return ""
        if content_indent <= indent:
            raise Unsupported(f"block scalar indentation at line {number + 1}")
        out = []
        for line in texts:
            if line[:content_indent].strip(" "):
                if line.strip(" "):
                    raise Unsupported(f"block scalar indentation at line {number + 1}")
            if "\t" in line[:content_indent] or line.endswith("\r"):
                raise Unsupported(f"tab or CR in block scalar at line {number + 1}")
            out.append(line[content_indent:])
        if header == "|-":
            return "\n".join(out).rstrip("\n")
        return "\n".join(out).rstrip("\n") + "\n"

    # ------------------------------------------------------------ scalars
    def scalar(self, text: str, number: int) -> Any:
        value = _resolved.get(text, _MISSING)
        if value is not _MISSING:
            return value
        value = self.resolve(text, number)
        if len(_resolved) >= _RESOLVED_MAX:
            _resolved.clear()
        _resolved[text] = value
        return value

    def resolve(self, text: str, number: int) -> Any:
        first = text[0] if text else ""
        if first == '"':
            if len(text) < 2 or text[-1] != '"' or "\\" in text or '"' in text[1:-1]:
                return self.fallback(text, number)
            return text[1:-1]
        if first == "'":
            inner = text[1:-1]
            if len(text) < 2 or text[-1] != "'" or "'" in inner.replace("''", ""):
                return self.fallback(text, number)
            return inner.replace("''", "'")
        if first in _INDICATORS or " #" in text or "\t#" in text or ": " in text or text.endswith(":"):
            raise Unsupported(f"YAML syntax outside the kickstart subset at line {number + 1}")
        for tag, pattern in _RESOLVERS.get(first, ()):
            if pattern.match(text):
                return self.typed(tag, text, number)
        return text

    def typed(self, tag: str, text: str, number: int) -> Any:
        kind = tag.rpartition(":")[2]
        if kind == "null":
            return None
        if kind == "bool":
            return _BOOLS[text]
        if kind == "timestamp":
            return text  # kept as text, as the monitor's PyYAML loader does
        if kind == "int" and _DECIMAL.match(text):
            return int(text)
        if kind == "float" and _FLOAT.match(text):
            return float(text)
        return self.fallback(text, number)  # octal, hex, sexagesimal, .inf, merge keys...

    def fallback(self, text: str, number: int) -> Any:
        if self.scalar_fallback is None:
            raise Unsupported(f"scalar {text[:40]!r} at line {number + 1}")
        return self.scalar_fallback(text)


def _careful_lines(raw: list[str]) -> tuple[list[tuple[int, str]], list[int]]:
    """(indent, content) of the lines with content, trailing blanks cut, and their raw line numbers;
    raises on a document marker or a blank line holding a tab."""
    lines: list[tuple[int, str]] = []
    numbers: list[int] = []
    for number, line in enumerate(raw):
        content = line.lstrip(" ")
        if not content:
            continue
        indent = len(line) - len(content)
        if content[-1] in " \r\t":
            content = content.rstrip("\r \t")
            if not content:
                if "\t" in line:  # PyYAML refuses or folds these (found by test_yamlsub)
                    raise Unsupported(f"a blank line with a tab at line {number + 1}")
                continue
        if indent == 0 and content[0] in "-." and (content.startswith("---") or content.startswith("...")):
            raise Unsupported("document marker")
        lines.append((indent, content))
        numbers.append(number)
    return lines, numbers


_split_lines: dict[str, tuple[int, str]] = {}
"""A raw line -> (indent, content): the lines of kickstart records repeat from record to record."""
_SPLIT_LINES_MAX = 20_000
"""Lines kept (~250 bytes each with their parts: 5 MiB at most)."""


def _split_line(line: str) -> tuple[int, str]:
    content = line.lstrip(" ")
    if len(_split_lines) >= _SPLIT_LINES_MAX:
        _split_lines.clear()
    split = _split_lines[line] = (len(line) - len(content), content)
    return split


def _key_colon(content: str) -> int:
    """Index of the colon ending the key of a `key: value` line, or -1."""
    first = content[0]
    if first == '"' or first == "'":
        close = content.find(first, 1)
        while first == "'" and close >= 0 and content[close + 1:close + 2] == "'":
            close = content.find(first, close + 2)
        if close < 0 or content[close + 1:close + 2] != ":":
            return -1
        colon = close + 1
    else:
        if first in _INDICATORS:
            return -1
        colon = content.find(": ")
        if colon < 0:
            colon = len(content) - 1 if content.endswith(":") else -1
        if colon <= 0:
            return -1
    return colon if content[colon + 1:colon + 2] in (" ", "") else -1
