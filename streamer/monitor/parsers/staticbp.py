"""The planner's `<dag>.static.bp`: the workflow's static description.

Task, job, edge, map and meta events as NetLogger lines without the
`stampede.` prefix; the monitor forwards them between `static.start` and
`static.end` on a workflow's first run, adding the common fields.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Generator

from streamer.events.bp import split_line
from streamer.events.event import FieldError, parse_ts
from streamer.util.limits import iter_lines

log = logging.getLogger(__name__)


def read(path: str | Path) -> Generator[tuple[str, dict[str, Any]], None, None]:
    """(event name, raw fields with `ts` as epoch) per line; bad lines are logged and skipped."""
    for number, line in iter_lines(path):
        parsed = parse_line(line, f"{path}:{number}")
        if parsed is not None:
            yield parsed


def parse_line(line: str, where: str = "static.bp") -> tuple[str, dict[str, object]] | None:
    """One static.bp line -> (name, fields), or None for blank/bad lines."""
    line = line.strip()
    if not line:
        return None
    try:
        fields: dict[str, object] = dict(split_line(line))
    except Exception as exc:  # noqa: BLE001 - any malformed line is skipped with a warning
        log.warning("%s: bad static.bp line (%s), skipped", where, exc)
        return None
    name = fields.pop("event", None)
    if not isinstance(name, str) or not name:
        log.warning("%s: static.bp line without event, skipped", where)
        return None
    if fields.get("level") == "Info":
        del fields["level"]
    ts = fields.get("ts")
    if isinstance(ts, str):
        try:
            fields["ts"] = int(parse_ts(ts))  # whole seconds, as monitord
        except FieldError:
            log.warning("%s: bad ts %r, kept as text", where, ts)
    return name, fields
