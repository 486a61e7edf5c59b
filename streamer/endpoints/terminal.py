"""Terminal endpoint: one readable line per event (`pretty`), or raw `bp` / `json`.

`pretty` shows the time (local, with its zone: `streamer/util/localtime.py`), the event name coloured by its
outcome (see `streamer/events/outcome.py`: a failure red, a hold yellow, a success green,
whatever monitord's `level=` says), the job and instance, then the remaining
fields: compact by default (no paths, working dirs, argv, null values; job
output decoded and cut to its first line), every field with `?fields=all` (`-v`).
Colour only on a TTY unless forced (`?color=always|never`).
"""

from __future__ import annotations

import sys
from typing import Any, Sequence, TextIO

from streamer.events import Event, bp, chimbuko, jsonenc
from streamer.events.chimbuko import forms as chimbuko_forms
from streamer.util.localtime import shown
from streamer.util.urls import EndpointURL
from streamer.core.options import OptionError
from streamer.endpoints import options as option_specs
from streamer.endpoints.base import Endpoint
from streamer.events.outcome import COMPACT_HIDDEN, outcome, output_text

REPEATED = frozenset(
    ("ts", "level", "xwf.id", "root.xwf.id", "dax", "dag", "wf.ts", "submit.dir",
     "submit.hostname", "pegasus.version", "wf.user", "job.id", "job_inst.id")
)
_RESET = "\x1b[0m"
_COLOURS = {
    "error": "\x1b[1;31m",
    "held": "\x1b[1;33m",
    "success": "\x1b[32m",
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
    kind = outcome(event)
    if kind is not None:
        return _COLOURS[kind]
    for prefix in ("stampede.xwf", "stampede.job_inst", "stampede.inv", "stampede.wf", "stampede.static"):
        if event.name.startswith(prefix):
            return _COLOURS[prefix]
    return _COLOURS["other"]


def _short(value: Any, whole: bool = False) -> str:
    text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    if whole:  # -v: every line of job output, indented under its event
        text = text.rstrip("\n").replace("\n", "\n    ")
        return f'"{text}"' if (" " in text or not text) else text
    text = text.replace("\n", "\\n")
    if len(text) > MAX_VALUE:
        text = text[: MAX_VALUE - 1] + "…"
    return f'"{text}"' if (" " in text or not text) else text




def _fields_text(fields: dict, verbose: bool) -> str:
    if verbose:
        return " ".join(f"{k}={_short(output_text(k, v, whole=True), True)}" for k, v in fields.items()
                        if k not in REPEATED)
    parts = []
    for key, value in fields.items():
        if key in REPEATED or key in COMPACT_HIDDEN or value is None or value == "None":
            continue
        text = output_text(key, value, whole=False)
        if text is None:
            continue
        parts.append(f"{key}={_short(text)}")
    return " ".join(parts)


def pretty_line(event: Event, *, colour: bool, verbose: bool = False) -> str:
    fields = event.fields
    if event.name.startswith(chimbuko.PREFIX):
        line = chimbuko_forms.pretty(event)
        tint = _COLOURS["error"] if event.name == "chimbuko.anomaly" else _COLOURS["other"]
        return f"{tint}{line}{_RESET}" if colour else line
    subject = fields.get("job.id", "")
    if "job_inst.id" in fields:
        subject = f"{subject}#{fields['job_inst.id']}"
    wf = str(fields.get("xwf.id") or "")[:8]
    rest = _fields_text(fields, verbose)
    name = event.name  # the full name, so a copied one works in --events
    if colour:
        return (f"{_DIM}{shown(fields.get('ts'))} {wf}{_RESET} {_colour_for(event)}{name:<33}{_RESET} "
                f"{subject} {rest}").rstrip()
    return f"{shown(fields.get('ts'))} {wf} {name:<33} {subject} {rest}".rstrip()


class TerminalEndpoint(Endpoint):
    """Writes to stdout (or a given stream): `term:` / `-` URLs and `streamer tail`."""
    declared_options = option_specs.TERMINAL

    schemes = ("term",)

    def __init__(self, url: EndpointURL, options: dict | None = None, stream: TextIO | None = None) -> None:
        super().__init__(url, options)
        self.stream = stream or sys.stdout
        self.format = str(self.option("format", "pretty")).lower()
        if self.format not in ("pretty", "bp", "json"):
            raise OptionError(f"unknown format {self.format!r} (use pretty, bp or json)")
        mode = str(self.option("color", "auto")).lower()
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.colour = mode == "always" or (mode == "auto" and isatty)
        detail = str(self.option("fields", "compact")).lower()
        if detail not in ("compact", "all"):
            raise OptionError(f"unknown fields {detail!r} (use compact or all)")
        self.verbose = detail == "all"

    @property
    def name(self) -> str:
        return "terminal"

    def render(self, event: Event) -> str:
        if self.format == "bp":
            return bp.format_event(event)
        if self.format == "json":
            return jsonenc.dumps(event).decode()
        return pretty_line(event, colour=self.colour, verbose=self.verbose)

    def _text(self, batch: Sequence[Event]) -> str:
        return "".join(self.render(e) + "\n" for e in batch)

    async def write(self, batch: Sequence[Event]) -> None:
        try:
            self.stream.write(self.encode_each(batch, self._text, "".join))
            self.stream.flush()
        except BrokenPipeError:
            raise SystemExit(0) from None
