"""Endpoint registry: URL scheme -> endpoint class (imported lazily)."""

from __future__ import annotations

import importlib
from typing import Any

from ..urls import EndpointURL, with_password
from .base import Endpoint, EndpointError
from .options import OptionError, validate

# scheme -> "module:Class"; modules are imported only when a URL uses them, so a
# missing optional driver never breaks the other endpoints.
REGISTRY: dict[str, str] = {
    "file": "streamer.endpoints.files:FileEndpoint",
    "term": "streamer.endpoints.terminal:TerminalEndpoint",
    "amqp": "streamer.endpoints.amqp:AMQPEndpoint",
    "amqps": "streamer.endpoints.amqp:AMQPEndpoint",
    "postgresql": "streamer.endpoints.postgres:PostgresEndpoint",
    "postgres": "streamer.endpoints.postgres:PostgresEndpoint",
    "sqlite": "streamer.endpoints.sqlite:SQLiteEndpoint",
    "mysql": "streamer.endpoints.mysql:MySQLEndpoint",
    "mariadb": "streamer.endpoints.mysql:MySQLEndpoint",
    "mysql+pymysql": "streamer.endpoints.mysql:MySQLEndpoint",
    "mysql+mysqldb": "streamer.endpoints.mysql:MySQLEndpoint",
    "mysql+asyncmy": "streamer.endpoints.mysql:MySQLEndpoint",
    "mariadb+pymysql": "streamer.endpoints.mysql:MySQLEndpoint",
}


def endpoint_class(scheme: str) -> type[Endpoint]:
    target = REGISTRY.get(scheme)
    if target is None:
        known = ", ".join(sorted(s for s in REGISTRY if s != "term"))
        raise EndpointError(f"unknown endpoint scheme {scheme!r} (known: {known})")
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise EndpointError(f"endpoint {scheme}:// is not available: {exc}") from None
    return getattr(module, class_name)


def create_endpoint(url: str | EndpointURL, options: dict[str, Any] | None = None) -> Endpoint:
    """An endpoint for `url` (query parameters and `options` become its options), in the layers its options
    ask for: `dead_letter=` (`deadletter.py`), `spool=` (`spooling.py`; AMQP spools unless `spool=off`)."""
    parsed = url if isinstance(url, EndpointURL) else EndpointURL.parse(url)
    options = dict(options or {})
    parsed = with_password(parsed, options)  # password_file= / password_env=: kept off the command line
    cls = endpoint_class(parsed.scheme)
    # every option declared, typed and checked before anything opens: unknown names and bad values are usage errors
    try:
        checked = validate(cls, {**parsed.options, **options}, parsed.masked)
    except OptionError as exc:
        raise EndpointError(str(exc)) from None
    from .deadletter import with_dead_letters
    from .spooling import with_spool

    # the layers any endpoint takes (`layer.py`): its dead letters inside, the spool around them
    return with_spool(with_dead_letters(cls(parsed, checked)))


__all__ = ["Endpoint", "EndpointError", "REGISTRY", "create_endpoint", "endpoint_class"]
