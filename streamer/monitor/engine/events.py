"""Where the engine's raw records become typed `Event`s: the one place events are typed.

The engine emits `(name, fields, dagman_out, line_no)` records; the runner
types them (in its worker thread, or in the parent when the engine runs in a
child process). A record whose fields do not fit its schema is reported,
naming the dagman.out line, and left out.
"""

from __future__ import annotations

import logging
from typing import Any

from streamer.events import Event, FieldError

_log = logging.getLogger("streamer.monitor.engine")

RawEvent = tuple[str, dict[str, Any], str, int]


def type_raw(raw: list[RawEvent], warnings: list[str] | None = None) -> list[Event]:
    """Typed events of `raw`, in order; what cannot be typed goes to `warnings` (or the log)."""
    out: list[Event] = []
    build = Event.build
    for name, fields, where, line_no in raw:
        try:
            out.append(build(name, fields, owned=True))
        except FieldError as exc:
            text = f"{where}:{line_no}: cannot build {name}: {exc}"
            if warnings is None:
                _log.warning("%s", text)
            else:
                warnings.append(text)
    return out

