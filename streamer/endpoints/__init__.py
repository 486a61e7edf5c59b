"""Endpoint registry: URL scheme -> endpoint class, computed from the classes' own `schemes`.

`CLASSES` lists every endpoint class, cheapest import first; each class
declares its URL schemes (`schemes`) and its options (`declared_options`,
data in `options.py`). A scheme is looked up by importing the classes in that
order until one claims it, so `file://` never imports the AMQP or MySQL
drivers; an unknown scheme imports them all to name the known ones.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from streamer.util.urls import EndpointURL, with_password
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.endpoints.options import OptionError, validate

CLASSES: tuple[str, ...] = (
    "streamer.endpoints.files:FileEndpoint",
    "streamer.endpoints.terminal:TerminalEndpoint",
    "streamer.endpoints.db.sqlite:SQLiteEndpoint",
    "streamer.endpoints.db.postgres:PostgresEndpoint",
    "streamer.endpoints.amqp.endpoint:AMQPEndpoint",
    "streamer.endpoints.db.mysql:MySQLEndpoint",
)
"""Every endpoint class (`module:Class`), in the order they are imported to resolve a scheme."""

HIDDEN = frozenset({"term"})
"""Schemes left out of "known: ..." lists (`term:` is written `-` on the command line)."""


class Registry:
    """Scheme -> class for a list of `module:Class` targets, imported in order as schemes are asked for."""

    def __init__(self, targets: tuple[str, ...]) -> None:
        self._lock = threading.RLock()
        self._pending = list(targets)
        self._by_scheme: dict[str, type[Endpoint]] = {}
        self.unavailable: dict[str, str] = {}
        """`module:Class` -> why it could not be imported (a driver missing)."""

    def _load(self, target: str) -> None:
        module_name, class_name = target.split(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except ModuleNotFoundError as exc:
            self.unavailable[target] = str(exc)
            return
        if not cls.schemes:
            raise TypeError(f"{target} declares no URL scheme (`schemes`)")
        for scheme in cls.schemes:
            other = self._by_scheme.get(scheme)
            if other is not None and other is not cls:
                raise TypeError(f"{scheme}:// is claimed by both {other.__name__} and {class_name}")
            self._by_scheme[scheme] = cls

    def resolve(self, scheme: str) -> type[Endpoint] | None:
        """The class of `scheme`, importing classes until one claims it."""
        with self._lock:
            while scheme not in self._by_scheme and self._pending:
                self._load(self._pending.pop(0))
            return self._by_scheme.get(scheme)

    def table(self) -> dict[str, type[Endpoint]]:
        """Every scheme and its class (imports every class)."""
        with self._lock:
            while self._pending:
                self._load(self._pending.pop(0))
            return dict(self._by_scheme)


REGISTRY = Registry(CLASSES)


def known_schemes() -> list[str]:
    """The schemes to name in messages, sorted (imports every endpoint module)."""
    return sorted(s for s in REGISTRY.table() if s not in HIDDEN)


def unknown_scheme(scheme: str, where: str = "") -> str:
    """`unknown endpoint scheme 'x'[ in WHERE] (known: ...)`, naming endpoints a missing driver left out."""
    known = known_schemes()
    missing = "".join(f"; {target.split(':')[0]} not available ({why})" for target, why in REGISTRY.unavailable.items())
    place = f" in {where}" if where else ""
    return f"unknown endpoint scheme {scheme!r}{place} (known: {', '.join(known)}){missing}"


def endpoint_class(scheme: str) -> type[Endpoint]:
    cls = REGISTRY.resolve(scheme)
    if cls is None:
        raise EndpointError(unknown_scheme(scheme))
    return cls


def create_endpoint(url: EndpointURL, options: dict[str, Any] | None = None) -> Endpoint:
    """An endpoint for `url` (query parameters and `options` become its options), in the layers its options
    ask for: `dead_letter=` (`deadletter.py`), `spool=` (`spooling.py`; AMQP spools unless `spool=off`)."""
    options = dict(options or {})
    parsed = with_password(url, options)  # password_file= / password_env=: kept off the command line
    cls = endpoint_class(parsed.scheme)
    # every option declared, typed and checked before anything opens: unknown names and bad values are usage errors
    try:
        checked = validate(cls, {**parsed.options, **options}, parsed.masked)
    except OptionError as exc:
        raise EndpointError(str(exc)) from None
    from streamer.endpoints.layers.deadletter import with_dead_letters
    from streamer.endpoints.layers.spooling import with_spool

    # the layers any endpoint takes (`layer.py`): its dead letters inside, the spool around them
    return with_spool(with_dead_letters(cls(parsed, checked)))


__all__ = ["CLASSES", "REGISTRY", "Endpoint", "EndpointError", "Registry", "create_endpoint", "endpoint_class",
           "known_schemes", "unknown_scheme"]
