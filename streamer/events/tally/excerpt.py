"""The failure excerpt: what explains a failed job, from its stderr, in one line on screen.

The end summary of `replay`/`follow`, `status` (and `--watch`) and `streamer tail` show it for a failed job.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

_BANNER = re.compile(r"PegasusLite: version|Executing on host|^#++\s*+(\[Pegasus Lite\].*)?#*+$")
"""Possessive runs: a line of 64 KiB of `#` and one other character is one pass, not a quadratic backtrack."""
_LITE_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?: ")
"""A line PegasusLite itself logged (its time stamp first); any other line is the task's or a tool's own."""
_LITE_EXIT = re.compile(r"^PegasusLite: exitcode -?\d+$")
_FAILED = re.compile(r"fail|error|abort|denied|not found|no such|cannot|can't|unable|killed|exceeded|timed? ?out",
                     re.IGNORECASE)
EXCERPT_PARTS = 3
EXCERPT_WIDTH = 200
"""The excerpt: at most this many lines, each cut to this many characters."""


def _cut(line: str) -> str:
    return line if len(line) <= EXCERPT_WIDTH else line[:EXCERPT_WIDTH] + "…"


def stderr_excerpt(text: Any) -> str | None:
    """What explains a failure, from a job's (monitord URL-quoted) stderr text, for one line on screen.

    A PegasusLite job's stderr is mostly the wrapper's log (banner, sections, `Setting up workdir`): the excerpt
    is the lines the task or a tool wrote (`tar: write error`; those that say what failed when there are many,
    else the last ones) and the wrapper's own lines that say what failed (`User task failed with exitcode 2`),
    joined with ` · `. Any other stderr: its first line. None when nothing is left to show."""
    if not isinstance(text, str) or not text:
        return None
    lines = [line.strip() for line in unquote(text).splitlines()]
    lines = [line for line in lines if line]
    if not any(_BANNER.search(line) for line in lines[:3]):  # not PegasusLite: the first line, as it is
        return _cut(lines[0]) if lines else None
    own: list[tuple[int, str]] = []
    wrapper: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        if _BANNER.search(line) or _LITE_EXIT.match(line) or line.startswith("###"):  # and its section titles
            continue
        logged = _LITE_LOG.match(line)
        if logged is None:
            own.append((index, line))
        elif _FAILED.search(line, logged.end()):
            wrapper.append((index, line[logged.end():]))
    telling = [item for item in own if _FAILED.search(item[1])] or own[-(EXCERPT_PARTS - 1):]
    picked = sorted(telling[:EXCERPT_PARTS - 1] + wrapper[:1])
    return " · ".join(_cut(line) for _, line in picked) or None
