"""The event every source emits and every endpoint consumes.

`Event` is deliberately slim (name, typed fields, stable id): the hot path of a
million-event load cannot afford a pydantic validation per event, so fields
are typed by converters compiled once per event name from the schema table
(`schema.py`, which also builds the pydantic models). `registry.model_of(event)`
gives the full pydantic model for callers that want it.
"""

from __future__ import annotations

import ast
import logging
import math
import re
from datetime import datetime, timezone
from typing import Any, Callable


from streamer.events import canonical, native, schema

log = logging.getLogger(__name__)

ID_FIELD = "event.id"
"""Field under which the stable id travels in BP (`event_id` in JSON)."""


class FieldError(ValueError):
    """A field value that cannot be converted to its schema type."""


# ---------------------------------------------------------------- timestamps

TS_MAX: float = 253402300800.0
"""Epoch seconds of 10000-01-01. The schema's `nl_ts` is an ISO-8601 time with a
four-digit year or unsigned epoch seconds; streamer takes every timestamp, ISO or
numeric, in [0, TS_MAX): 1970 to 9999, the range every codec and endpoint can
write back (JSON carries epoch seconds). The pattern's literal `\\d{1,9}` would
refuse every epoch time after 2001-09-09, so the intended range is used instead."""


def check_ts(value: float | int, text: Any = None) -> float | int:
    """`value` if it is an epoch time the schema allows, else FieldError naming `text`."""
    if not 0 <= value < TS_MAX:  # NaN fails this too
        raise FieldError(f"timestamp out of range: {text if text is not None else value!r}")
    return value


def parse_ts(text: str) -> float | int:
    """NetLogger timestamp (ISO-8601 with zone, or epoch seconds) -> epoch seconds."""
    text = text.strip()
    if not text:
        raise FieldError("empty timestamp")
    first = text[0]
    if first.isdigit() and ("T" in text or (len(text) >= 10 and text[4] == "-")):
        iso = text[:-1] + "+00:00" if text[-1] in "Zz" else text
        try:
            moment = datetime.fromisoformat(iso)
        except ValueError as exc:
            raise FieldError(f"bad timestamp {text!r}") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        try:
            return check_ts(_int_if_whole(moment.timestamp()), text)
        except (OverflowError, ValueError) as error:  # 9999-12-31T23:59-14:00 and the like
            raise FieldError(f"timestamp out of range: {text!r}") from error  # `error`: compiled, one type per name
    return check_ts(_number(text), text)


def _memoised(function: Callable[[Any], Any], size: int = 8192) -> Callable[[Any], Any]:
    """Cache a pure one-argument function; streams repeat the same timestamps many times."""
    cache: dict[Any, Any] = {}

    def cached(key: Any) -> Any:
        value = cache.get(key)
        if value is None:
            if len(cache) > size:
                cache.clear()
            value = cache[key] = function(key)
        return value

    return cached


def format_ts(ts: float | int) -> str:
    """Epoch seconds -> `2023-03-04T06:23:33.000000Z`, monitord's BP form."""
    text: str = _format_ts_cached(ts)
    return text


def _format_ts(ts: float | int) -> str:
    micros = round(ts * 1_000_000)
    seconds, micro = divmod(micros, 1_000_000)
    moment = datetime.fromtimestamp(seconds, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{micro:06d}Z"


def _int_if_whole(value: float) -> float | int:
    return int(value) if value.is_integer() else value


_format_ts_cached = _memoised(_format_ts)
_parse_ts_cached = _memoised(parse_ts)


# ---------------------------------------------------------------- converters

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
"""Integers are 64-bit signed: what JSON readers, SQLite and PostgreSQL's bigint all hold."""


def _number(text: Any) -> int | float:
    if isinstance(text, float) or (isinstance(text, int) and not isinstance(text, bool) and
                                   INT_MIN <= text <= INT_MAX):
        return text
    try:
        value = int(text)
    except (TypeError, ValueError):
        pass
    else:  # a number beyond 64 bits is kept as the float it is (JSON could not read it back)
        return value if INT_MIN <= value <= INT_MAX else _finite(value, text)
    try:
        number = float(text)
    except (TypeError, ValueError) as exc:
        raise FieldError(f"not a number: {text!r}") from exc
    if math.isnan(number) or math.isinf(number):
        raise FieldError(f"not a finite number: {text!r}")
    return number


def _finite(value: int, text: Any) -> float:
    try:
        number = float(value)
    except OverflowError:  # beyond a double's range (~1.8e308)
        number = math.inf
    if math.isinf(number):
        raise FieldError(f"not a finite number: {str(text)[:60]!r}")
    return number


def _integer(text: Any) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        try:
            value = int(text)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
            # "1.0" or 1.0: an integer written as a decimal.
            number = _number(text)
            if not (isinstance(number, float) and number.is_integer()):
                raise FieldError(f"not an integer: {str(text)[:60]!r}") from None
            value = int(number)
    if not INT_MIN <= value <= INT_MAX:
        raise FieldError(f"integer out of range (64 bits): {str(text)[:60]!r}")
    return value


def _timestamp(text: Any) -> int | float:
    if isinstance(text, str):
        seconds: int | float = _parse_ts_cached(text)
        return seconds
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return check_ts(text)
    raise FieldError(f"not a timestamp: {text!r}")


def _num_or_ts(text: Any) -> int | float:
    """`start_time` and `cluster.start` are nl_ts in the schema, epoch in practice."""
    if isinstance(text, str) and ("T" in text or text[4:5] == "-"):
        return parse_ts(text)
    return _number(text)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _listing(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        try:
            parsed = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise FieldError(f"not a list literal: {value[:60]!r}") from exc
        if isinstance(parsed, (list, tuple)):
            return list(parsed)
    raise FieldError(f"not a list: {str(value)[:60]!r}")


def _level(value: Any) -> str:
    """The schema's level enumeration (monitord writes only these two)."""
    if isinstance(value, str) and value in schema.LEVELS:
        return value
    raise FieldError(f"not a level of the schema ({', '.join(schema.LEVELS)}): {str(value)[:40]!r}")


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "str": _text,
    "uuid": _text,
    "int": _integer,
    "num": _num_or_ts,
    "ts": _timestamp,
    "list": _listing,
}


def _compile(name: str) -> dict[str, Callable[[Any], Any]]:
    table = schema.fields_of(name) or {**schema.BASE_EVENT, **schema.MONITORD_COMMON}
    kinds = {**schema.GLOBAL_KINDS, **{f: spec[0] for f, spec in table.items()}}
    converters = {f: CONVERTERS[k] for f, k in kinds.items() if k != "str" and k != "uuid"}
    if name.startswith("stampede."):  # the schema's enumeration binds its own events only
        converters["level"] = _level
    return converters


_converters: dict[str, dict[str, Callable[[Any], Any]]] = {}


def converters_for(name: str) -> dict[str, Callable[[Any], Any]]:
    """Field -> converter for the non-text fields of event `name` (cached)."""
    table = _converters.get(name)
    if table is None:
        table = _converters[name] = _compile(name)
    return table


_native = native.CODEC

FAST_CONVERTERS = (_integer, _num_or_ts, _timestamp, _parse_ts_cached)
"""The converters whose common texts the compiled codec reads itself (integer, number, timestamp), and the
cached timestamp parser it calls: the same values (tests/events/test_bpfast.py checks them against these)."""

_TYPED_INTS: dict[Callable[[Any], Any], tuple[int, int]] = {
    _integer: (INT_MIN, INT_MAX), _num_or_ts: (INT_MIN, INT_MAX), _timestamp: (0, int(TS_MAX) - 1)}
"""Converter -> the range of `int`s it returns unchanged (most values the monitor emits are ints already)."""

Todo = list[tuple[str, Callable[[Any], Any], int, int]]
"""(field, converter, low, high): an int in [low, high] is already typed (low > high: none is)."""
_shape_converters: dict[tuple[str, tuple[str, ...]], Todo] = {}
_FULL_NAMES = {short: schema.full_name(short) for short in schema.EVENT_FIELDS}
"""A schema event's short name (`job_inst.main.end`, as planner files write it) -> its full name."""


def coerce_fields(name: str, raw: dict[str, Any], *, in_place: bool = False) -> dict[str, Any]:
    """Type the values of `raw` (text from a file, or already typed) by the schema.

    Values written `None` stay None (monitord writes Python's None that way).
    Raises FieldError naming the field on a value that does not fit.
    """
    out = raw if in_place else dict(raw)
    shape = (name, tuple(out))
    todo = _shape_converters.get(shape)
    if todo is None:  # events come in few shapes: find each shape's typed fields once
        if len(_shape_converters) > 4096:
            _shape_converters.clear()
        table = converters_for(name)
        todo = _shape_converters[shape] = [(k, table[k], *_TYPED_INTS.get(table[k], (1, 0)))
                                           for k in shape[1] if k in table]
    _coerce(out, todo)
    return out


def _coerce(out: dict[str, Any], todo: Todo) -> None:
    """Types `out` in place: the text None becomes None, then each field of `todo` by its converter."""
    if "None" in out.values():
        for key, value in out.items():
            if value == "None":
                out[key] = None
    for key, convert, low, high in todo:
        value = out[key]
        if value is None or (type(value) is int and low <= value <= high):  # what the converter returns
            continue
        try:
            out[key] = convert(value)
        except FieldError as exc:
            raise FieldError(f"field {key}: {exc}") from None


# ---------------------------------------------------------------- the event

class Event:
    """One Stampede event: NetLogger name, typed fields (dotted names), stable id.

    `fields` holds everything but `event` itself, `ts` included. The id is
    computed from the content on first use, so the same event read from BP,
    JSON or built by the monitor gets the same id on every run. Events are
    immutable once built: the codecs cache their encodings on the event, so
    several endpoints of one format share one encoding (`replace` makes a
    changed copy).
    """

    __slots__ = ("name", "fields", "_id", "_bp", "_json", "origin")

    def __init__(self, name: str, fields: dict[str, Any], event_id: str | None = None,
                 bp: str | None = None) -> None:
        self.name = name
        self.fields = fields
        self._id = event_id
        self._bp = bp                    # BP text, cached by the codec (the line it was read from)
        self._json: bytes | None = None  # JSON bytes, cached by the codec
        self.origin: tuple[str, int] | None = None
        """(file, line) the event was read from, when a file source read it (messages name it); not part
        of the event's identity, equality or encodings."""

    @classmethod
    def build(cls, name: str, raw: dict[str, Any], *, owned: bool = False) -> "Event":
        """Typed event from text or loosely typed values (raises FieldError).

        `owned=True` lets the event keep (and type in place) the dict given.
        """
        name = _FULL_NAMES.get(name, name)
        fields = coerce_fields(name, raw, in_place=owned)
        event = cls(name, fields)
        claimed = fields.pop(ID_FIELD, None)
        if claimed is not None:
            verify_id(event, claimed)
        return event

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = content_id(self.name, self.fields)
        return self._id

    def replace(self, **changes: Any) -> "Event":
        """A copy with fields changed (dotted names via a dict: `replace(**{"job.id": "x"})`)."""
        return Event(self.name, {**self.fields, **changes})

    @property
    def ts(self) -> float | int | None:
        return self.fields.get("ts")

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Event)
            and self.name == other.name
            and self.fields == other.fields
            and self.id == other.id
        )

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {self.fields!r}, id={self.id[:12]})"


def verify_id(event: Event, claimed: Any) -> None:
    """Take the id an input gives for `event` only if it is the event's own (raises FieldError).

    The id is a contract endpoints rely on (database deduplication, the
    Elasticsearch document id, the AMQP message_id): an input cannot choose
    it. The content id is computed (and cached on the event) and compared.
    An event with fields the schema does not know cannot always be re-hashed
    from its text (a list the monitor built is text once read back from BP; a
    JSON key loses its dots): there a well-formed id (32 hex digits) is kept.
    """
    event._id = None
    if claimed == event.id:
        return
    if not isinstance(claimed, str) or not _HEX_ID.fullmatch(claimed):
        raise FieldError(f"event id {str(claimed)[:40]!r} is not an event id (32 hex digits)")
    if _all_typed(event):
        raise FieldError(f"event id {claimed!r} is not this event's id ({event.id}): "
                         "the line was changed after it was written")
    event._id = claimed


_HEX_ID = re.compile(r"[0-9a-f]{32}")


def _all_typed(event: Event) -> bool:
    """Every field of `event` is one the schema names for it: its text gives back the value the id hashed."""
    known = schema.fields_of(event.name)
    if known is None:
        return False
    return all(key in known or key in schema.BASE_EVENT or key in schema.MONITORD_COMMON
               or key in schema.GLOBAL_KINDS for key in event.fields)


def ensure_ids(events: list[Event]) -> None:
    """Compute (and cache) the stable id of every event now; compiled when it can be."""
    if _native is None or _native.ensure_ids(events):
        for event in events:
            event.id  # noqa: B018 - computes and caches it


def content_id(name: str, fields: dict[str, Any]) -> str:
    """Stable id: a hash of the event name and its typed fields.

    Timestamps are rounded to the microsecond (what BP keeps), so an event and
    its BP or JSON round trip hash alike. Two byte-identical events share an
    id on purpose: a duplicate carries nothing new.
    """
    if _native is not None:
        text = _native.event_id(name, fields)
        if text is not None:
            return text
    return _content_id_python(name, fields)


def _content_id_python(name: str, fields: dict[str, Any]) -> str:
    """`content_id` in Python: decides every event the compiled `canonical` declines."""
    return canonical.event_id(name, fields)
