"""An event file's lines -> Events: each line decoded by its first character and checked against the schema.

`{` is a JSON event (monitord's AMQP form, streamer's JSONL, or a Chimbuko provenance record known by its
content), anything else a BP line. A line that is no event, or an event against the schema's constraints
(`events/constraints.py`: a mandatory field missing, `clustered=2`, ...), is a `ValueError` naming the reason;
`decode_lines` hands it to the caller's `bad` with the line's number, which reports it (or raises to stop).

Compiled by mypyc (setup.py's MYPYC) with the event modules it calls, so the per-line loop of `streamer load`
runs without the interpreter; this module, interpreted, is the reference (STREAMER_PURE_PYTHON).
"""

from __future__ import annotations

from typing import Callable

import orjson

from streamer.events import bp, chimbuko, constraints, jsonenc
from streamer.events.event import Event


def decode_line(raw: bytes | str, *, json_file: bool = False) -> Event | None:
    """One line -> Event; None for a blank or `#` comment line. Raises ValueError with the reason.

    `json_file`: the line comes from a JSON-lines file, so one that is no JSON object is named so (a BP line
    there is still read)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    text = raw.strip()
    if not text or text[0] == "#":
        return None
    if text[0] == "{":
        if "\x00" in text:
            raise ValueError("NUL byte in line")
        try:
            return jsonenc.parse_line(text)
        except jsonenc.JSONError as error:
            record = orjson.loads(text) if str(error) == jsonenc.NO_EVENT else None
            if not chimbuko.looks_like_record(record):
                raise
            return chimbuko.event_from_record(record)  # a Chimbuko provenance record, known by its content
    if not json_file:
        return bp.parse_line(text)  # names a NUL byte itself
    try:
        return bp.parse_line(text)
    except ValueError:
        shown = repr(text[:40] + ("…" if len(text) > 40 else ""))
        raise ValueError(f"not a JSON object (a .jsonl file holds one JSON event per line): {shown}") from None


def texts(lines: list[bytes]) -> list[bytes] | list[str]:
    """Decode a chunk's lines in one call when it is all UTF-8 (the usual case)."""
    try:
        return b"\n".join(lines).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return lines


def decode_lines(lines: list[bytes], first: int, where: str, json_file: bool, events: list[Event],
                 bad: Callable[[int, str], None]) -> None:
    """The events of `lines` (line numbers from `first`, of file `where`) appended to `events`, each with its
    `origin`; a bad line goes to `bad(number, reason)`, which may raise to stop (the events before it are in
    `events` then)."""
    number = first
    compiled = bp.parse_compiled
    check = constraints.check
    for raw in texts(lines):
        try:
            event = compiled(raw) or decode_line(raw, json_file=json_file)  # compiled: the common lines
            if event is not None:
                check(event)
        except ValueError as exc:
            bad(number, str(exc))
        else:
            if event is not None:
                event.origin = (where, number)  # named by an endpoint that refuses the event
                events.append(event)
        number += 1
