"""NetLogger BP lines <-> events.

A line is `key=value` pairs separated by blanks; a value with blanks, quotes
or nothing in it is double-quoted, with `\\"` for a quote inside (what
monitord's NetLogger writer and parser agree on). We also write `\\\\`, `\\n`,
`\\r` and `\\t` inside quotes so that any text survives one line; on reading,
any other backslash is kept as it is, so monitord's lines read unchanged.
`ts` is ISO-8601 (any zone) or epoch seconds; `level=Info` is the default and
is not stored on the event.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from streamer.events import legacy, native, schema
from streamer.events.event import FAST_CONVERTERS, ID_FIELD, Event, FieldError, converters_for, format_ts, verify_id
from streamer.events.registry import note_unknown

# Quoted values use the unrolled-loop form, fast on long texts; the last
# alternative catches anything that is not a pair, so one pass both splits
# and validates the line.
_TOKENS = re.compile(r'([^\s="]+)=(?:"([^"\\]*(?:\\.[^"\\]*)*)"|([^\s"]*))(?=\s|$)|(\S+)')
_ESCAPES = re.compile(r'\\(["\\nrt])')
_UNESCAPE = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_NEEDS_QUOTES = re.compile(r'[\s"\\]')

_fast = native.CODEC
_fast_split = _fast.split_line if _fast is not None else None
_fast_format = _fast.format_fields if _fast is not None else None

Plan = tuple[str, dict[str, Callable[[Any], Any]], dict[str, str] | None, bool]


def _plan_for(name: str) -> Plan | None:
    """What the compiled `parse_event` needs for lines of event `name` (as written).

    (full name, field -> converter of its typed fields, 3.x field names to leave to `parse_line`, whether
    the line is a faithful BP form of the event); None: `parse_line` does it all.
    """
    renames = None
    if name.startswith(schema.PROVENANCE):  # provenance records: parse_line types them
        return None
    if name in legacy.LEGACY:
        new_name, renames, fixed = legacy.LEGACY[name]
        if new_name != name or fixed:
            return None
    full = schema.full_name(name) if name in schema.EVENT_FIELDS else name
    if full.startswith("stampede."):
        note_unknown(full)
    return full, converters_for(full), renames or None, full == name


_plans: dict[str, Plan | None] = {}
if _fast is not None:  # the codec builds this Event class, with these plans and converters
    _fast.configure(Event, _plans, _plan_for, *FAST_CONVERTERS)
_fast_parse = _fast.parse_event if _fast is not None else None

COMPILED = _fast is not None
"""True when the compiled fast paths are in use (False: pure Python, same results)."""


class BPError(ValueError):
    """A line that is not a BP event; the message says why."""


def split_line(line: str) -> dict[str, str]:
    """The raw key -> text pairs of one BP line (raises BPError)."""
    if _fast_split is not None:
        pairs = _fast_split(line)
        if pairs is not None:
            return pairs
    return _split_python(line)


def _split_python(line: str) -> dict[str, str]:
    """`split_line` in Python: decides every line the compiled path declines."""
    if "\x00" in line:
        raise BPError("NUL byte in line")
    if '"' not in line and "\\" not in line:
        return _split_plain(line)
    pairs: dict[str, str] = {}
    for key, quoted, bare, junk in _TOKENS.findall(line):
        if junk:
            raise BPError(_why_malformed(line))
        if key in pairs:
            raise BPError(f"key {key!r} given twice")
        if quoted:
            pairs[key] = _ESCAPES.sub(_unescape, quoted) if "\\" in quoted else quoted
        else:
            pairs[key] = bare
    return pairs


def _split_plain(line: str) -> dict[str, str]:
    """Fast path for lines without quotes: blanks separate `key=value` words."""
    pairs: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise BPError(_why_malformed(line))
        if key in pairs:
            raise BPError(f"key {key!r} given twice")
        pairs[key] = value
    return pairs


def _unescape(match: re.Match[str]) -> str:
    return _UNESCAPE[match.group(1)]


def _why_malformed(line: str) -> str:
    if "\x00" in line:
        return "NUL byte in line"
    if line.count('"') % 2:
        return "unterminated quoted value"
    for word in line.split():
        if word.startswith("="):
            return f"expected key=value, found an empty key in {word[:40]!r}"
        if "=" not in word and '"' not in word:
            return f"expected key=value, found {word[:40]!r}"
    return "not a key=value line"


def _declined(line: Any) -> None:
    return None


def _compiled_verified(line: Any) -> Event | None:
    event: Event | None = _fast_parse(line)  # type: ignore[misc]
    if event is not None and event._id is not None:  # an id the line gives must be the event's own
        try:
            verify_id(event, event._id)
        except FieldError as exc:
            raise BPError(str(exc)) from None
    return event


parse_compiled: Callable[[Any], Event | None] = _compiled_verified if _fast_parse is not None else _declined
"""The compiled parse of a stripped BP line: its Event, or None when `parse_line` must decide
(the line is not the common well-formed case, or nothing is compiled)."""


def parse_line(line: str) -> Event:
    """One BP line -> Event (raises BPError naming what is wrong)."""
    if _fast_parse is not None:
        event = _compiled_verified(line)
        if event is not None:
            return event
    pairs = split_line(line)
    name = written = pairs.pop("event", None)
    if not name:
        raise BPError("no event= field")
    if "ts" not in pairs:
        raise BPError("no ts= field")
    if pairs.get("level") == "Info":
        del pairs["level"]
    if name.startswith(schema.PROVENANCE):  # provenance record: `ts` is derived, values are JSON
        from streamer.events.chimbuko import forms, models  # on first use: the pydantic models cost start-up time

        del pairs["ts"]
        try:
            return forms.from_bp_pairs(name, pairs)
        except models.RecordError as exc:
            raise BPError(str(exc)) from None
    faithful = True  # the line is a BP form of the event: no 3.x name or field translated
    if name in legacy.LEGACY:
        name, translated = legacy.translate(name, pairs)
        faithful, pairs = translated == pairs, translated  # type: ignore[assignment]
    try:
        event = Event.build(name, pairs, owned=True)
    except FieldError as error:  # not `exc`: compiled code keeps one type per name (RecordError above)
        raise BPError(str(error)) from None
    if event.name.startswith("stampede."):
        note_unknown(event.name)
    if event.name == written and faithful:
        event._bp = line.strip()
    return event


_quoted: dict[str, str] = {}
"""Text value -> its BP form: ids, names and hosts repeat from event to event."""


def _text(value: Any) -> str:
    kind = type(value)
    if kind is str:
        if len(value) > 200:  # long texts (task stdout) rarely repeat: not worth keeping
            return _quote(value)
        out = _quoted.get(value)
        if out is None:
            if len(_quoted) >= 20_000:
                _quoted.clear()
            out = _quoted[value] = _quote(value)
        return out
    if kind is int or kind is float:
        return repr(value)
    return _text_other(value)


def _quote(value: str) -> str:
    if not value or _NEEDS_QUOTES.search(value):
        escaped = (
            value.replace("\\", "\\\\").replace('"', '\\"')
            .replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        )
        return f'"{escaped}"'
    return value


def _text_other(value: Any) -> str:
    if isinstance(value, str):
        return _quote(value)
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    return _text(repr(value))


def format_event(event: Event, *, with_id: bool = True) -> str:
    """Event -> one BP line (no newline): `ts`, `event`, `level` first, then the fields.

    An event read from a BP line is written as that line (plus its id).
    """
    text = event._bp
    if text is None:
        text = event._bp = _format_fields(event)
    if not with_id or " event.id=" in text:
        return text
    return f"{text} {ID_FIELD}={event.id}"


def join(events: list[Event]) -> bytes:
    """The BP lines of `events` (`format_event`), each ended by a newline, in UTF-8."""
    if not events:
        return b""  # no line, no newline (both paths)
    if _fast is not None:
        data = _fast.join_lines(events)  # events read from BP, ids computed: their lines joined in C
        if data is None:  # some lack their BP text or id: cache them, then join again
            for event in events:
                format_event(event)
            data = _fast.join_lines(events)
        if data is not None:
            return data
    return ("\n".join(map(format_event, events)) + "\n").encode()


def _format_fields(event: Event) -> str:
    fields = event.fields
    if event.name.startswith(schema.PROVENANCE):
        return _format_record(event)
    ts = fields.get("ts")
    head = (f"ts={format_ts(ts) if isinstance(ts, (int, float)) else _ts_now()} event={event.name}"
            f" level={fields.get('level') or 'Info'}")
    if _fast_format is not None:
        line = _fast_format(head, fields)  # a list, dict or tuple value too: its repr, quoted (`_text_other`)
        if line is not None:
            return line
    return _format_python(head, fields)


def _format_python(head: str, fields: dict[str, Any]) -> str:
    """The fields after `head` in Python: decides every event the compiled path declines."""
    text = _text
    parts = [head]
    parts += [f"{key}={text(value)}" for key, value in fields.items() if key != "ts" and key != "level"]
    return " ".join(parts)


def _format_record(event: Event) -> str:
    """A provenance record's BP line: `ts` derived (see chimbuko/forms.bp_ts), nested values as JSON text."""
    from streamer.events.chimbuko import forms

    parts = [f"ts={format_ts(forms.bp_ts(event))} event={event.name} level=Info"]
    value_text = forms.bp_value
    parts += [f"{key}={_quote(value_text(key, value))}" for key, value in event.fields.items()]
    return " ".join(parts)


def _ts_now() -> str:
    import time

    return format_ts(time.time())
