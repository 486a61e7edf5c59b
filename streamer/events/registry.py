"""Event name -> model, and the one-warning-per-unknown-name rule.

The pydantic models load on first use (`MODELS`, `model_for`, ...): the hot
paths (codecs, the monitor's worker process) only need the names, and
building 45 models costs a third of a second at start-up.
"""

from __future__ import annotations

import logging
from typing import Any

from streamer.events import schema

log = logging.getLogger("streamer.events")

_warned: set[str] = set()
_KNOWN = frozenset(schema.KNOWN_EVENTS)


def is_known(name: str) -> bool:
    return name in _KNOWN


def note_unknown(name: str) -> None:
    """Warn once per process about a `stampede.*` name the schema does not list."""
    if name not in _KNOWN and name not in _warned:
        _warned.add(name)
        log.warning("unknown event name %s: passed through as a generic event", name)


def model_of(event: Any) -> Any:
    """The validated pydantic model of `event` (raises pydantic.ValidationError): a provenance record's own
    model for `chimbuko.*`, the Stampede model of its name otherwise."""
    if event.name.startswith("chimbuko."):
        from streamer.events.chimbuko.models import model
        from streamer.events.chimbuko.records import record_of

        return model(event.name, record_of(event))
    from streamer.events.models import model_for

    return model_for(event.name).model_validate(event.fields)


def __getattr__(attribute: str) -> Any:
    if attribute in ("MODELS", "GenericEvent", "StampedeEvent", "model_for"):
        from streamer.events import models

        return getattr(models, attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


__all__ = ["MODELS", "GenericEvent", "StampedeEvent", "model_for", "model_of", "is_known", "note_unknown", "schema"]
