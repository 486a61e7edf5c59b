"""Typed Stampede events and their BP / JSON codecs."""

from streamer.events.event import ID_FIELD, Event, FieldError, content_id, format_ts, parse_ts
from streamer.events.schema import KNOWN_EVENTS

__all__ = ["Event", "FieldError", "ID_FIELD", "KNOWN_EVENTS", "content_id", "format_ts", "parse_ts"]
