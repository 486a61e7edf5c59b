"""Terminal endpoint: one readable line per event (`pretty`), or raw `bp` / `json`.

`pretty` shows the time, the event name coloured by kind (errors red), the
job and instance, then the remaining fields, leaving out what monitord
repeats on every event (dax, dag, submit dir, ...). Colour only on a TTY
unless forced (`?color=always|never`).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Any, Sequence, TextIO

from ..events import Event, bp, chimbuko, chimbuko_forms, jsonenc
from ..urls import EndpointURL
from . import options as option_specs
from .base import Endpoint

REPEATED = frozenset(
    ("ts", "level", "xwf.id", "root.xwf.id", "dax", "dag", "wf.ts", "submit.dir",
     "submit.hostname", "pegasus.version", "wf.user", "job.id", "job_inst.id")
)
_RESET = "\x1b[0m"
_COLOURS = {
    "error": "\x1b[1;31m",
    "stampede.xwf": "\x1b[1;35m",
    "stampede.job_inst": "\x1b[36m",
    "stampede.inv": "\x1b[32m",
    "stampede.wf": "\x1b[34m",
    "stampede.static": "\x1b[2m",
    "other": "\x1b[33m",
}
_DIM = "\x1b[2m"
MAX_VALUE = 60


def _colour_for(event: Event) -> str:
    if event.fields.get("level") == "Error":
        return _COLOURS["error"]
    for prefix in ("stampede.xwf", "stampede.job_inst", "stampede.inv", "stampede.wf", "stampede.static"):
        if event.name.startswith(prefix):
            return _COLOURS[prefix]
    return _COLOURS["other"]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    text = text.replace("\n", "\\n")
    if len(text) > MAX_VALUE:
        text = text[: MAX_VALUE - 1] + "…"
    return f'"{text}"' if (" " in text or not text) else text


def _clock(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "--:--:--"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def pretty_line(event: Event, *, colour: bool) -> str:
    fields = event.fields
    if event.name.startswith(chimbuko.PREFIX):
        line = chimbuko_forms.pretty(event)
        tint = _COLOURS["error"] if event.name == "chimbuko.anomaly" else _COLOURS["other"]
        return f"{tint}{line}{_RESET}" if colour else line
    subject = fields.get("job.id", "")
    if "job_inst.id" in fields:
        subject = f"{subject}#{fields['job_inst.id']}"
    wf = str(fields.get("xwf.id") or "")[:8]
    rest = " ".join(f"{k}={_short(v)}" for k, v in fields.items() if k not in REPEATED)
    name = event.name  # the full name, so a copied one works in --events
    if colour:
        return f"{_DIM}{_clock(fields.get('ts'))} {wf}{_RESET} {_colour_for(event)}{name:<33}{_RESET} {subject} {rest}".rstrip()
    return f"{_clock(fields.get('ts'))} {wf} {name:<33} {subject} {rest}".rstrip()


class TerminalEndpoint(Endpoint):
    """Writes to stdout (or a given stream): `term:` / `-` URLs and `streamer tail`."""
    declared_options = option_specs.TERMINAL

    schemes = ("term",)

    def __init__(self, url: EndpointURL, options: dict | None = None, stream: TextIO | None = None) -> None:
        super().__init__(url, options)
        self.stream = stream or sys.stdout
        self.format = str(self.option("format", "pretty")).lower()
        if self.format not in ("pretty", "bp", "json"):
            raise ValueError(f"unknown format {self.format!r} (use pretty, bp or json)")
        mode = str(self.option("color", "auto")).lower()
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.colour = mode == "always" or (mode == "auto" and isatty)

    @property
    def name(self) -> str:
        return "terminal"

    def render(self, event: Event) -> str:
        if self.format == "bp":
            return bp.format_event(event)
        if self.format == "json":
            return jsonenc.dumps(event).decode()
        return pretty_line(event, colour=self.colour)

    def _text(self, batch: Sequence[Event]) -> str:
        return "".join(self.render(e) + "\n" for e in batch)

    async def write(self, batch: Sequence[Event]) -> None:
        try:
            self.stream.write(self.encode_each(batch, self._text, "".join))
            self.stream.flush()
        except BrokenPipeError:
            raise SystemExit(0) from None
