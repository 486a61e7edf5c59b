"""Events <-> JSON objects as monitord publishes them (AMQP, `--encoding json`).

Keys have `.` replaced by `_` (then `__` by `_`), `event` holds the name and
comes last, values keep their types. `level` appears only when it is not
`Info`. streamer adds `event_id`, the stable id. Decoding maps underscored
keys back to the dotted schema names of that event.
"""

from __future__ import annotations

from typing import Any

import orjson

from . import legacy, schema
from .event import ID_FIELD, Event, FieldError
from .registry import note_unknown

JSON_ID_KEY = "event_id"

_renamed: dict[str, str] = {}


def json_key(key: str) -> str:
    """`job_inst.id` -> `job_inst_id` (monitord's rule, cached)."""
    out = _renamed.get(key)
    if out is None:
        out = _renamed[key] = key.replace(".", "_").replace("__", "_")
    return out


_shapes: dict[tuple[str, ...], tuple[str, ...]] = {}


def to_dict(event: Event, *, with_id: bool = True) -> dict[str, Any]:
    """The monitord JSON object of an event (plus `event_id`)."""
    fields = event.fields
    keys = tuple(fields)
    renamed = _shapes.get(keys)
    if renamed is None:  # events come in few shapes: rename each shape's keys once
        if len(_shapes) > 4096:
            _shapes.clear()
        renamed = _shapes[keys] = tuple(json_key(k) for k in keys)
    out = dict(zip(renamed, fields.values()))
    if with_id:
        out[JSON_ID_KEY] = event.id
    out["event"] = event.name
    return out


def dumps(event: Event, *, with_id: bool = True) -> bytes:
    """Event -> JSON bytes, no newline (cached on the event, shared by endpoints)."""
    if not with_id:
        return orjson.dumps(to_dict(event, with_id=False))
    data = event._json
    if data is None:
        data = event._json = orjson.dumps(to_dict(event))
    return data


class JSONError(ValueError):
    """A JSON line that is not an event."""


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


def from_dict(obj: dict[str, Any]) -> Event:
    """A monitord/streamer JSON object -> Event (raises JSONError)."""
    name = obj.get("event")
    if not isinstance(name, str) or not name:
        raise JSONError('no "event" key')
    names = _dotted_names(name)
    raw = {names.get(k, k): v for k, v in obj.items() if k != "event" and k != JSON_ID_KEY}
    if raw.get("level") == "Info":
        del raw["level"]
    if legacy.is_legacy(name):
        name, raw = legacy.translate(name, raw)
    event_id = obj.get(JSON_ID_KEY)
    try:
        event = Event.build(name, raw)
    except FieldError as exc:
        raise JSONError(str(exc)) from None
    if isinstance(event_id, str):
        event._id = event_id
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


__all__ = ["dumps", "to_dict", "from_dict", "parse_line", "json_key", "JSONError", "ID_FIELD"]
