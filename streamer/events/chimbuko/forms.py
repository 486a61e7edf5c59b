"""Chimbuko provenance events in streamer's other forms: JSON objects, BP lines, terminal lines.

The codecs (`jsonenc`, `bp`) and the terminal endpoint call these for `chimbuko.*` names;
the records' identity is in `records.py`, their schema and checks in `models.py`.

- JSON: the record's keys, `event_label` for its `event_id`, `sonata_id` for Sonata's
  `__id`, plus `event` (the name) and `event_id` (the stable id), as for Stampede events.
- BP: text fields bare, every other value as JSON text; `ts` is derived (`bp_ts`) and not
  a field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from streamer.util.localtime import shown
from streamer.events.chimbuko.models import MODELS, RecordError
from streamer.events.chimbuko.records import NAMES, PREFIX, RECORD_KEYS, TEXT_FIELDS, event_from_record

if TYPE_CHECKING:
    from streamer.events.event import Event

def from_json_object(obj: dict[str, Any]) -> Event:
    """A chimbuko event in streamer's JSON form (`event`, `event_id`, `event_label`, ...) -> Event."""
    name = obj["event"]
    if name not in MODELS:
        raise RecordError(f"unknown chimbuko event {name!r} (known: {', '.join(NAMES)})")
    record: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "event" or key == "event_id":
            continue
        record[_JSON_TO_RECORD.get(key, key)] = value
    event = event_from_record(record, name)
    given = obj.get("event_id")
    if isinstance(given, str) and given:
        event._id = given
    return event


_JSON_TO_RECORD = {"event_label": "event_id", "sonata_id": "__id"}


def bp_ts(event: Event) -> float | int:
    """The `ts` a BP line of a record shows: a function execution's entry (µs -> s), else 0."""
    entry = event.fields.get("entry")
    if isinstance(entry, (int, float)) and not isinstance(entry, bool) and "event.label" in event.fields:
        return entry / 1_000_000 if entry > 1e11 else entry
    return 0


def bp_value(key: str, value: Any) -> str:
    """A field's BP text before quoting: text fields bare, everything else as JSON."""
    if key in TEXT_FIELDS and isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def from_bp_pairs(name: str, pairs: dict[str, str]) -> Event:
    """The key -> text pairs of a chimbuko BP line (without `event`, `ts`, `level`) -> Event."""
    if name not in MODELS:
        raise RecordError(f"unknown chimbuko event {name!r} (known: {', '.join(NAMES)})")
    given = pairs.pop("event.id", None)
    record: dict[str, Any] = {}
    for key, text in pairs.items():
        if key in TEXT_FIELDS:
            value: Any = text
        else:
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise RecordError(f"field {key}: not a JSON value: {text[:60]!r}") from None
        record[RECORD_KEYS.get(key, key)] = value
    event = event_from_record(record, name)
    if given:
        event._id = given
    return event


# ---------------------------------------------------------------- terminal

def _time(micros: Any) -> str:
    if not isinstance(micros, (int, float)) or isinstance(micros, bool) or micros <= 0:
        return "--:--:--"
    return shown(micros / 1_000_000 if micros > 1e11 else micros)


def pretty(event: Event) -> str:
    """One readable line: time, kind, function, rank, step, runtime, score."""
    f = event.fields
    kind = event.name.removeprefix(PREFIX)
    if kind in ("anomaly", "normalexec"):
        score = f.get("outlier_score")
        score_text = f" score={score:.3g}" if isinstance(score, (int, float)) else ""
        severity = f.get("outlier_severity")
        severity_text = f" severity={severity:.3g}" if isinstance(severity, (int, float)) else ""
        gpu = " gpu" if f.get("is_gpu_event") else ""
        return (f"{_time(f.get('entry'))} {kind:<13} {f.get('func')} rank={f.get('rid')} "
                f"step={f.get('io_step')} runtime={f.get('runtime_total')}us{score_text}{severity_text}"
                f" [{f.get('event.label')}]{gpu}")
    if kind == "metadata":
        return f"{_time(None)} {kind:<13} rank={f.get('rid')} tid={f.get('tid')} {f.get('descr')}={f.get('value')!r}"
    if kind == "func_stats":
        metrics = f.get("anomaly_metrics") or {}
        count = (metrics.get("anomaly_count") or {}).get("accumulate") if isinstance(metrics, dict) else None
        profile = (f.get("runtime_profile") or {}).get("inclusive_runtime") or {}
        return (f"{_time(None)} {kind:<13} {f.get('fname')} app={f.get('app')} fid={f.get('fid')} "
                f"calls={profile.get('count')} mean={profile.get('mean')}us anomalies={count or 0}")
    if kind == "counter_stats":
        stats = f.get("stats") or {}
        return (f"{_time(None)} {kind:<13} {f.get('counter')} app={f.get('app')} count={stats.get('count')} "
                f"mean={stats.get('mean')}")
    return f"{_time(None)} {kind:<13} {f.get('func_name')} pid={f.get('pid')} fid={f.get('fid')}"
