"""Times on screen: in the local zone (the TZ environment variable, else the machine's), with the zone said.

Every command that shows a time to a person (`tail`, `status`, `status --watch`) formats it here, so one event
shows one time everywhere: `2023-11-14 14:14:16 PST` in Los Angeles, `22:14:16 UTC` on a server in UTC. The zone
is that of the moment shown (a run that spans a daylight-saving change shows PST and PDT times). Files and
messages for machines (BP, JSON, databases) keep UTC.
"""

from __future__ import annotations

import time
from typing import Any

UNKNOWN = "--:--:--"


def shown(ts: Any, *, date: bool = True) -> str:
    """`ts` (seconds since the epoch) as `YYYY-MM-DD HH:MM:SS ZONE` (`HH:MM:SS ZONE` without `date`);
    `--:--:--` for what is no time or one the platform cannot format."""
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        return UNKNOWN
    try:
        moment = time.localtime(ts)
    except (OverflowError, OSError, ValueError):
        return UNKNOWN
    return time.strftime("%Y-%m-%d %H:%M:%S %Z" if date else "%H:%M:%S %Z", moment)


def now(*, date: bool = False) -> str:
    """The wall clock, as `shown` gives a time."""
    return shown(time.time(), date=date)
