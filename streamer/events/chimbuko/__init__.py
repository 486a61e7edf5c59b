"""Chimbuko provenance records as typed events: `records.py` reads records into events (and back),
`models.py` holds their schema and checks, `forms.py` their JSON, BP and terminal forms.

The records' reading is this package's public face: `chimbuko.event_from_record(...)`,
`chimbuko.COLLECTIONS`; the models are reached through `chimbuko.models`.
"""

from streamer.events.chimbuko.models import RecordError
from streamer.events.chimbuko.records import (COLLECTIONS, IDENTITY, NAMES, PREFIX, RECORD_KEYS, TEXT_FIELDS,
                                              classify, collection_for_path, event_from_record, identity_id,
                                              looks_like_record, record_of)

__all__ = ["COLLECTIONS", "IDENTITY", "NAMES", "PREFIX", "RECORD_KEYS", "TEXT_FIELDS", "RecordError", "classify",
           "collection_for_path", "event_from_record", "identity_id", "looks_like_record", "record_of"]
