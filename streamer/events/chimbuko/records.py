"""Chimbuko provenance records (seed 004) as typed events.

Chimbuko's provenance database holds six collections; each record becomes one
event named after its collection:

| collection      | database | event name               | identity (stable id)        |
|-----------------|----------|--------------------------|-----------------------------|
| `anomalies`     | main     | `chimbuko.anomaly`       | pid, rid, event label       |
| `normalexecs`   | main     | `chimbuko.normalexec`    | pid, rid, event label       |
| `metadata`      | main     | `chimbuko.metadata`      | pid, rid, tid, descr        |
| `func_stats`    | global   | `chimbuko.func_stats`    | app, fid                    |
| `counter_stats` | global   | `chimbuko.counter_stats` | app, counter                |
| `ad_model`      | global   | `chimbuko.ad_model`      | pid, fid                    |

An event's fields are the record's own keys and values (nested parts stay
nested), with two renames that keep streamer's conventions intact: the
record's `event_id` (the "rank:io_step:idx" event label) is the field
`event.label`, since `event_id` is the stable id in every JSON form, and
Sonata's `__id` is `sonata.id`. The stable id hashes the record's identity
(table above), not its content: reading the same record again, from any file
or form, gives the same id, so endpoints drop it as a duplicate.

Records are validated by the pydantic models of `models.py` (the seed's
fields, nesting and types; unknown extra keys are kept) when they enter from a
file or the network; the event keeps the record's values exactly as written.
"""


from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, TypeGuard

import orjson

from streamer.events import schema
from streamer.events.chimbuko.models import RecordError, validate

if TYPE_CHECKING:
    from streamer.events.event import Event

PREFIX = schema.PROVENANCE

COLLECTIONS: dict[str, str] = {
    "anomalies": "chimbuko.anomaly",
    "normalexecs": "chimbuko.normalexec",
    "metadata": "chimbuko.metadata",
    "func_stats": "chimbuko.func_stats",
    "counter_stats": "chimbuko.counter_stats",
    "ad_model": "chimbuko.ad_model",
}
"""Collection name -> event name."""

COLLECTION_OF = {name: collection for collection, name in COLLECTIONS.items()}
"""Event name -> collection name."""

NAMES = tuple(COLLECTIONS.values())

RENAMES = {"event_id": "event.label", "__id": "sonata.id"}
"""Record key -> event field, where the record's key would clash with streamer's."""
RECORD_KEYS = {field: key for key, field in RENAMES.items()}

IDENTITY: dict[str, tuple[str, ...]] = {
    "chimbuko.anomaly": ("pid", "rid", "event_id"),
    "chimbuko.normalexec": ("pid", "rid", "event_id"),
    "chimbuko.metadata": ("pid", "rid", "tid", "descr"),
    "chimbuko.func_stats": ("app", "fid"),
    "chimbuko.counter_stats": ("app", "counter"),
    "chimbuko.ad_model": ("pid", "fid"),
}
"""Record keys whose values identify a record (its stable id)."""

TEXT_FIELDS = frozenset(("func", "hostname", "event.label", "descr", "fname", "func_name", "counter"))
"""Fields that are always text: written bare in BP (every other value is JSON there)."""

# ---------------------------------------------------------------- recognising records

def collection_for_path(name: str) -> str | None:
    """`anomalies.jsonl`, `run1.normalexecs.json` -> the collection, or None."""
    base = name.rsplit("/", 1)[-1]
    for suffix in (".jsonl", ".ndjson", ".json"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    else:
        return None
    last = base.rsplit(".", 1)[-1]
    return last if last in COLLECTIONS else None


def classify(record: dict[str, Any], collection: str | None = None) -> str | None:
    """The event name of a record: its `collection` field, the file's collection, or its content."""
    named = record.get("collection")
    if isinstance(named, str):
        if named in COLLECTIONS:
            return COLLECTIONS[named]
        if named in COLLECTION_OF:
            return named
        raise RecordError(f"unknown collection {named!r} (known: {', '.join(COLLECTIONS)})")
    if collection is not None:
        return COLLECTIONS[collection]
    if "event" in record:
        return None  # a Stampede event in JSON form
    if "event_id" in record and "runtime_total" in record:
        stack = record.get("call_stack")
        first = stack[0] if isinstance(stack, list) and stack and isinstance(stack[0], dict) else {}
        return "chimbuko.anomaly" if first.get("is_anomaly") is True else "chimbuko.normalexec"
    if "descr" in record and "value" in record:
        return "chimbuko.metadata"
    if "fname" in record and "runtime_profile" in record:
        return "chimbuko.func_stats"
    if "counter" in record and "stats" in record:
        return "chimbuko.counter_stats"
    if "func_name" in record and "model" in record:
        return "chimbuko.ad_model"
    return None


def looks_like_record(record: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(record, dict) and "event" not in record and classify_quietly(record) is not None


def classify_quietly(record: dict[str, Any]) -> str | None:
    try:
        return classify(record)
    except RecordError:
        return None

# ---------------------------------------------------------------- record <-> event

def identity_id(name: str, fields: dict[str, Any]) -> str:
    """Stable id of a record: a BLAKE2b hash of its event name and identity values (32 hex digits)."""
    values = [fields.get(key) for key in _IDENTITY_FIELDS[name]]
    data = orjson.dumps([name, *values], default=str)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_IDENTITY_FIELDS = {name: tuple(RENAMES.get(key, key) for key in keys) for name, keys in IDENTITY.items()}


def event_from_record(record: dict[str, Any], name: str | None = None, *, check: bool = True,
                      collection: str | None = None) -> Event:
    """A provenance record -> its event (raises RecordError). The record's values are kept as they are."""
    from streamer.events.event import Event

    if name is None:
        name = classify(record, collection)
        if name is None:
            raise RecordError("not a provenance record of a known collection")
    if check:
        validate(name, record)
    keys = tuple(record)
    renamed = _renamed_shapes.get(keys)
    if renamed is None:  # records come in few shapes: rename each shape's keys once
        if len(_renamed_shapes) > 4096:
            _renamed_shapes.clear()
        renamed = _renamed_shapes[keys] = tuple(RENAMES.get(key, key) for key in keys)
    fields = dict(zip(renamed, record.values()))
    fields.pop("collection", None)
    return Event(name, fields, identity_id(name, fields))


_renamed_shapes: dict[tuple[str, ...], tuple[str, ...]] = {}


def record_of(event: Event) -> dict[str, Any]:
    """The provenance record an event carries (the inverse of `event_from_record`)."""
    return {RECORD_KEYS.get(key, key): value for key, value in event.fields.items()}
