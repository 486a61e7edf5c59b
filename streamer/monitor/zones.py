"""The zone DAGMan's zone-less times are read in: one rule for every command that reads them.

`for_workflow(submit_dir, override)` is that rule (replay, follow, serve, the
monitord drop-in, status and a plain DAG's dagman.out all go through
`WorkflowSource`, which applies it):

1. the user's zone (`--timezone`, or `timezone` in streamer.toml / [serve]);
2. else the UTC offset the planner recorded in `braindump.yml`'s `timestamp`
   (`20230304T010100-0800`): the zone of the machine that ran DAGMan, which the
   reading machine's own zone need not be, so every machine and command reads
   the same times and gives the same event ids;
3. else (a plain DAG, no braindump timestamp) the machine's local zone.

Accepted zones: an IANA name (`America/Los_Angeles`), `UTC` / `GMT` / `Z`, or a
fixed offset east of UTC (`-08:00`, `-0800`, `+5`, `UTC-08:00` — ISO's sign, not
POSIX's). Anything else is refused in one line. A recorded offset is fixed: a run
that crosses a daylight-saving change has its times after the change read one
hour off (give the IANA name to read them by the zone's rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?$", re.IGNORECASE)
_RECORDED = re.compile(r"^\d{8}T\d{6}([+-])(\d{2}):?(\d{2})$")


class ZoneError(ValueError):
    """A --timezone that names no zone; the message says what is accepted."""


def parse_zone(name: str) -> tzinfo:
    """`name` as a tzinfo, or ZoneError."""
    text = name.strip()
    if text.upper() in ("UTC", "Z", "GMT"):
        return timezone.utc
    found = _OFFSET.match(text)
    if found:
        sign, hours, minutes = found.group(1), int(found.group(2)), int(found.group(3) or 0)
        if hours > 14 or minutes > 59:
            raise ZoneError(f"time zone offset {name!r} is out of range (-14:00 .. +14:00)")
        offset = timedelta(hours=hours, minutes=minutes)
        return timezone(-offset if sign == "-" else offset)
    try:
        if not text or text.startswith(("/", ".")) or ".." in text:
            raise ValueError
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ZoneError(f"unknown time zone {name!r}: give an IANA name (America/Los_Angeles), "
                        "UTC, or an offset (-08:00)") from None


def recorded_offset(submit_dir: str | Path) -> str | None:
    """The UTC offset (`-08:00`) in braindump's `timestamp`, None without a braindump or a readable one."""
    from streamer.monitor.parsers import braindump

    try:
        stamp = str(braindump.load(submit_dir).get("timestamp") or "")
    except Exception:  # noqa: BLE001 - no (readable) braindump: the caller falls back to the local zone
        return None
    found = _RECORDED.match(stamp.strip())
    if not found:
        return None
    sign, hours, minutes = found.groups()
    return f"{sign}{hours}:{minutes}"


def describe(name: str) -> str:
    """`-08:00` -> `UTC-08:00`, `+00:00` -> `UTC`; names as they are."""
    if name in ("+00:00", "-00:00"):
        return "UTC"
    return f"UTC{name}" if name[:1] in "+-" else name


@dataclass(frozen=True)
class Zone:
    """The zone a workflow's DAGMan times are read in, and why."""

    name: str | None
    """What the DAGMan parser takes: a zone name or offset, None for the machine's local zone."""
    why: str
    """For the user: `UTC-08:00, the offset braindump.yml records`."""


def for_workflow(submit_dir: str | Path, override: str | None = None) -> Zone:
    """The one rule: `override` (checked: ZoneError), else braindump's recorded offset, else the local zone."""
    if override:
        parse_zone(override)
        return Zone(override, f"{describe(override)} (--timezone)")
    recorded = recorded_offset(submit_dir)
    if recorded:
        return Zone(recorded, f"{describe(recorded)}, the offset braindump.yml records")
    return Zone(None, "the local zone (no braindump.yml timestamp)")
