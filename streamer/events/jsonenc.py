"""Events <-> JSON objects as monitord publishes them (AMQP, `--encoding json`).

Keys have `.` replaced by `_` (then `__` by `_`), `event` holds the name and
comes last, values keep their types. `level` appears only when it is not
`Info`. streamer adds `event_id`, the stable id. Decoding maps underscored
keys back to the dotted schema names of that event.
"""

from __future__ import annotations


from operator import attrgetter
from typing import Any, Sequence

import orjson

from streamer.events import legacy, native, schema
from streamer.events.canonical import wide_json
from streamer.events.event import ID_FIELD, Event, FieldError, verify_id
from streamer.events.registry import note_unknown

JSON_ID_KEY = "event_id"

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
"""Event files whose lines are JSON (any other suffix: BP), read (`sources/decode`) and written (`endpoints/files`)."""

_renamed: dict[str, str] = {}


def json_key(key: str) -> str:
    """`job_inst.id` -> `job_inst_id` (monitord's rule, cached)."""
    out = _renamed.get(key)
    if out is None:
        out = _renamed[key] = key.replace(".", "_").replace("__", "_")
    return out


_shapes: dict[tuple[str, ...], tuple[tuple[str, ...], bool]] = {}

_fast = native.CODEC


def _renamed_keys(keys: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """The JSON names of a shape's keys, and whether they map one to one (no two alike,
    neither `event` nor `event_id` among them: `to_dict` would merge those)."""
    entry = _shapes.get(keys)
    if entry is None:  # events come in few shapes: rename each shape's keys once
        if len(_shapes) > 4096:
            _shapes.clear()
        renamed = tuple(json_key(k) for k in keys)
        distinct = len(set(renamed)) == len(renamed) and not {"event", JSON_ID_KEY} & set(renamed)
        entry = _shapes[keys] = (renamed, distinct)
    return entry


def to_dict(event: Event, *, with_id: bool = True) -> dict[str, Any]:
    """The monitord JSON object of an event (plus `event_id`)."""
    fields = event.fields
    out = dict(zip(_renamed_keys(tuple(fields))[0], fields.values()))
    if with_id:
        out[JSON_ID_KEY] = event.id
    out["event"] = event.name
    return out


def dumps(event: Event, *, with_id: bool = True) -> bytes:
    """Event -> JSON bytes, no newline (cached on the event, shared by endpoints)."""
    if not with_id:
        return _orjson(to_dict(event, with_id=False))
    data = event._json
    if data is None:
        if _fast is not None:
            renamed, one_to_one = _renamed_keys(tuple(event.fields))
            if one_to_one:
                data = _fast.json_object(event.fields, renamed, event.id, event.name)
        if data is None:
            data = _orjson(to_dict(event))
        event._json = data
    return data


def prepare(events: list[Event]) -> None:
    """Encode every event now (cached on it, with its id): compiled for a whole batch when it can be."""
    if _fast is None or _fast.encode_events(events, _shapes, _renamed_keys):
        for event in events:
            if event._json is None:
                dumps(event)


def join(events: Sequence[Event]) -> bytes:
    """The JSON lines of `events`, each ended by a newline."""
    try:
        return b"\n".join(map(_cached_json, events)) + b"\n"
    except TypeError:  # some were not prepared
        return b"\n".join(map(dumps, events)) + b"\n"


_cached_json = attrgetter("_json")


def _orjson(obj: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits
        return wide_json(obj)


class JSONError(ValueError):
    """A JSON line that is not an event."""


NO_EVENT = 'no "event" key'


_dotted: dict[str, dict[str, str]] = {}


def _dotted_names(name: str) -> dict[str, str]:
    table = _dotted.get(name)
    if table is None:
        specs = schema.fields_of(name) or {**schema.BASE_EVENT, **schema.MONITORD_COMMON}
        table = {}
        for dotted in (*schema.GLOBAL_KINDS, *specs):
            table.setdefault(json_key(dotted), dotted)
        for dotted in specs:  # the event's own names win over global ones
            table[json_key(dotted)] = dotted
        for dotted in specs:  # a name that is literally underscored stays so
            if json_key(dotted) == dotted:
                table[dotted] = dotted
        _dotted[name] = table
    return table


DEAD_LETTER_KEY = "dead_letter"
"""Why an endpoint refused the event, in a dead-letter file's lines (`endpoints/deadletter.py`); not a field."""
_NOT_FIELDS = frozenset(("event", JSON_ID_KEY, DEAD_LETTER_KEY))


def from_dict(obj: dict[str, Any]) -> Event:
    """A monitord/streamer JSON object -> Event (raises JSONError)."""
    name = obj.get("event")
    if not isinstance(name, str) or not name:
        raise JSONError(NO_EVENT)
    if name.startswith(schema.PROVENANCE):  # provenance records: their own schema
        from streamer.events.chimbuko import forms, models  # on first use: the pydantic models cost start-up time

        try:
            return forms.from_json_object(obj)
        except models.RecordError as exc:
            raise JSONError(str(exc)) from None
    names = _dotted_names(name)
    raw = {names.get(k, k): v for k, v in obj.items() if k not in _NOT_FIELDS}
    if raw.get("level") == "Info":
        del raw["level"]
    if legacy.is_legacy(name):
        name, raw = legacy.translate(name, raw)
    try:
        event = Event.build(name, raw)
        if JSON_ID_KEY in obj:
            verify_id(event, obj[JSON_ID_KEY])
    except FieldError as exc:
        raise JSONError(str(exc)) from None
    if event.name.startswith("stampede."):
        note_unknown(event.name)
    return event


def parse_line(line: str | bytes) -> Event:
    """One JSON line -> Event (raises JSONError)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise JSONError(f"invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise JSONError("not a JSON object")
    return from_dict(obj)


__all__ = ["dumps", "prepare", "join", "to_dict", "from_dict", "parse_line", "json_key", "JSONError", "ID_FIELD"]
