"""Record-name filters: `stampede.xwf.*,stampede.inv.end,!stampede.inv.start`.

- `*` matches any run of characters, dots included; `?` exactly one character;
- a comma-separated list is OR-ed; `!pattern` excludes (exclusions win);
- a list of only exclusions means "everything but those";
- blanks around items are ignored; an empty filter matches nothing.
Decisions are cached per event name: there are only a few dozen names (a bounded cache: an input
of a million names does not grow it without end).
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["EventFilter", "FilterError", "unmatched"]


CACHE_MAX = 4096
"""Decisions kept at most (Stampede has about forty event names; names from input may be anything)."""


class FilterError(ValueError):
    """A filter pattern that cannot be used."""


class _Glob:
    """One glob, matched without backtracking: the literal pieces between `*`s (`?` is any one character)
    are found left to right, each at its leftmost place, which is exact for globs; a name costs time linear
    in its length (times the pattern's), whatever it holds. (As a regex, `*a*b` against a long name of
    `a`s takes quadratic time, and every further `*` multiplies by the length again.)"""

    def __init__(self, pattern: str) -> None:
        pieces = [re.compile("".join("." if c == "?" else re.escape(c) for c in piece), re.DOTALL)
                  for piece in pattern.split("*")]
        self.exact = pieces[0] if len(pieces) == 1 else None
        self.first, self.middle, self.last = pieces[0], [p for p in pieces[1:-1] if p.pattern], pieces[-1]
        self.sizes = (len(pattern.split("*")[0]), len(pattern.split("*")[-1]))
        self.pattern = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + r"\Z"
        """The same glob as a regular expression (what it means; `matches_all` reads it)."""

    def match(self, name: str) -> bool:
        if self.exact is not None:
            return self.exact.fullmatch(name) is not None
        head, tail = self.sizes
        end = len(name) - tail
        if end < head or not self.first.match(name) or not self.last.fullmatch(name, end):
            return False
        at = head
        for piece in self.middle:
            found = piece.search(name, at, end)
            if found is None:
                return False
            at = found.end()
        return True


def _compile(pattern: str) -> _Glob:
    if not pattern:
        raise FilterError("empty pattern")
    if any(c.isspace() for c in pattern):
        raise FilterError(f"blank inside pattern {pattern!r}")
    return _Glob(pattern)


class EventFilter:
    """A compiled event filter; `match(name)` says whether the event passes."""

    def __init__(self, patterns: str | Iterable[str]) -> None:
        items = patterns.split(",") if isinstance(patterns, str) else list(patterns)
        items = [item.strip() for item in items if item.strip()]
        self.text = ",".join(items)
        self._include = [_compile(p) for p in items if not p.startswith("!")]
        self._exclude = [_compile(p[1:].strip()) for p in items if p.startswith("!")]
        if self._exclude and not self._include:
            self._include = [_compile("*")]
        self._cache: dict[str, bool] = {}

    @property
    def matches_all(self) -> bool:
        return not self._exclude and any(p.pattern == r".*\Z" for p in self._include)

    def match(self, name: str) -> bool:
        decision = self._cache.get(name)
        if decision is None:
            decision = any(p.match(name) for p in self._include) and not any(
                p.match(name) for p in self._exclude
            )
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[name] = decision
        return decision

    def __repr__(self) -> str:
        return f"EventFilter({self.text!r})"


def unmatched(patterns: str, known: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The include patterns of `patterns` that match none of the `known` names, each with the nearest
    known names: first the pattern under a namespace of the known names (their first dotted part:
    `job_inst.main.end` -> `stampede.job_inst.main.end`), else the closest spellings. A filter that
    can never pass an event is almost always a typo. The caller gives the names (the core knows none)."""
    import difflib

    names = list(known)
    namespaces = list(dict.fromkeys(name.split(".", 1)[0] + "." for name in names if "." in name))
    out = []
    for item in (p.strip() for p in patterns.split(",")):
        if not item or item.startswith("!"):
            continue
        compiled = _compile(item)
        if any(compiled.match(name) for name in names):
            continue
        prefixed = [_compile(namespace + item) for namespace in namespaces]
        near = [name for name in names if any(p.match(name) for p in prefixed)][:3]
        if not near:
            near = difflib.get_close_matches(item.replace("*", "").replace("?", ""), names, n=3, cutoff=0.6)
        out.append((item, near))
    return out
