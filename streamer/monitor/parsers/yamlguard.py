"""Bounded YAML: no text reaches a YAML loader nested deeper than `MAX_DEPTH`.

Kickstart records are written by user jobs on remote hosts, so their text is
hostile until read. PyYAML's C loader builds nested collections by recursion
in C: `- invocation: [[[[...` or `- - - - ...` a few ten thousand levels deep
overflows the C stack and kills the process (SIGSEGV), with no Python
exception to catch. The pure-Python loader recurses too (RecursionError).

`check(text)` decides before any loader runs. A cheap count of the characters
that can open a level (`[`, `{`, `- `, deep indentation) lets ordinary records
through at once; only a text that could be deep is measured exactly, from
libyaml's event stream, which is produced iteratively (no recursion, bounded
stack) and counted here without building anything.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 100
"""Deepest nesting of collections taken (kickstart records nest fewer than 10 levels)."""

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DEEP_INDENT = "\n" + " " * MAX_DEPTH
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_ALIAS = yaml.AliasEvent
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


class Refused(ValueError):
    """A YAML text no loader is given: too deep, or with aliases."""


class TooDeep(Refused):
    """A YAML text nested deeper than `MAX_DEPTH`: refused before any loader sees it."""


class Aliased(Refused):
    """A YAML text with an alias (`*name`): kickstart and the planner never write one, and a few
    lines of them (`&a [x,x]`, `&b [*a,*a]`, ...) stand for a document of billions of nodes that
    whatever walks or encodes the result would expand."""


def could_be_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """False when `text` cannot hold `limit` nested collections (the common case, decided by counting)."""
    return (text.count("[") + text.count("{") + text.count("- ") >= limit
            or _DEEP_INDENT in text)


def could_alias(text: str) -> bool:
    """False when `text` cannot hold an anchor and an alias (the common case, decided by looking)."""
    return "&" in text and "*" in text


def depth(text: str, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of `text`'s collections, counting stops past `limit`.

    Raises yaml.YAMLError for text that is not YAML: no loader may then walk
    it (the subset loaders take only what PyYAML takes, so nothing is lost),
    and Aliased at the first alias.
    """
    level = deepest = 0
    for event in yaml.parse(text, Loader=_Parser):
        if isinstance(event, _ALIAS):
            raise Aliased(f"YAML alias *{event.anchor[:40]} refused (kickstart writes none; aliases can expand "
                          "a record without bound)")
        if isinstance(event, _OPEN):
            level += 1
            if level > deepest:
                deepest = level
                if deepest > limit:
                    break
        elif isinstance(event, _CLOSE):
            level -= 1
    return deepest


def check(text: str, limit: int = MAX_DEPTH) -> None:
    """Raise TooDeep when `text` nests collections deeper than `limit`, Aliased when it uses an alias.

    Text that could be deep or aliased and is not YAML at all raises yaml.YAMLError.
    """
    if not (could_be_deep(text, limit) or could_alias(text)):
        return
    try:
        deep = depth(text, limit)
    except yaml.YAMLError as exc:  # libyaml 0.2.6 stops at 1,000 flow levels by itself: the same refusal
        if "maximum nesting depth" not in str(exc):
            raise
        deep = limit + 1
    if deep > limit:
        raise TooDeep(f"YAML nested deeper than {limit} levels")


class Loader(_Parser):  # type: ignore[misc,valid-type]
    """PyYAML's C loader, keeping timestamps as text (monitord converts them itself). Here, not in
    kickstart.py, which mypyc compiles: a class deriving from a base PyYAML picks at run time is not
    compilable (it crashed once compiled)."""


Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.constructor.SafeConstructor.construct_yaml_str)


def load(text: str) -> Any:
    """PyYAML's reading of a kickstart record `text`, once its nesting is known to be bounded (`check`)."""
    check(text)
    return yaml.load(text, Loader=Loader)
