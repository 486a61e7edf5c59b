"""Event name -> model, and the one-warning-per-unknown-name rule."""

from __future__ import annotations

import logging

from . import schema
from .models import MODELS, GenericEvent, StampedeEvent, model_for

log = logging.getLogger("streamer.events")

_warned: set[str] = set()


def is_known(name: str) -> bool:
    return name in MODELS


def note_unknown(name: str) -> None:
    """Warn once per process about a `stampede.*` name the schema does not list."""
    if name not in MODELS and name not in _warned:
        _warned.add(name)
        log.warning("unknown event name %s: passed through as a generic event", name)


__all__ = ["MODELS", "GenericEvent", "StampedeEvent", "model_for", "is_known", "note_unknown", "schema"]
