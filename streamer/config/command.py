"""The settings a command's options give: its endpoints (`--config`, `--conf`, `--dest`, `--events`, `--on-error`,
`-v`, `--upgrade-schema`) and the `--metrics` address, read the same way by every command (load, replay, follow,
serve)."""

from __future__ import annotations

import argparse
import sys

from streamer.config.settings import ConfigError, EndpointSpec, Settings, from_properties, load_toml
from streamer.core.filters import EventFilter
from streamer.util.urls import EndpointURL, URLError, mask


class MetricsError(ValueError):
    """A bad `--metrics` address (usage error)."""


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `:PORT` (all interfaces) or `[::1]:PORT`."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise MetricsError(f"--metrics {text!r}: expected HOST:PORT (e.g. 127.0.0.1:9464)")
    return host.strip("[]") or "0.0.0.0", int(port)


def report(message: str) -> None:
    """A note for the user on stderr, as every command says them: `streamer: MESSAGE`."""
    sys.stderr.write(f"streamer: {message}\n")


def warn_unmatched(patterns: str | None) -> None:
    """Warn about filter patterns no known event name matches, with the nearest names."""
    if not patterns:  # (before the imports: the provenance models cost ~0.1 s to load)
        return
    from streamer.core.filters import unmatched
    from streamer.events.chimbuko import NAMES
    from streamer.events.schema import KNOWN_EVENTS

    for item, near in unmatched(patterns, KNOWN_EVENTS + NAMES):
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        report(f"warning: filter {item!r} matches no known event name{hint}")


def dest_url(text: str) -> EndpointURL:
    """A `--dest` (or another command-line URL) as the typed value everything below takes."""
    try:
        return EndpointURL.given(text)
    except URLError as exc:
        raise ConfigError(str(exc)) from None
    except ValueError as exc:  # urlsplit's own (`Invalid IPv6 URL`)
        raise ConfigError(f"{mask(text)}: {exc}") from None


def collect_endpoints(args: argparse.Namespace, defaults: list[str] | None = None) -> Settings:
    """Endpoints from --config, --conf and --dest (in that order); `defaults` if none."""
    settings = Settings()
    if getattr(args, "metrics", None):
        parse_address(args.metrics)  # a usage error before anything starts
    if getattr(args, "config", None):
        settings = load_toml(args.config)
    if getattr(args, "conf", None):
        props = from_properties(args.conf)
        settings.endpoints.extend(props.endpoints)
        settings.encoding = props.encoding
    for url in getattr(args, "dest", []) or []:
        settings.endpoints.append(EndpointSpec(url=dest_url(url)))
    if not settings.endpoints and defaults:
        settings.endpoints = [EndpointSpec(url=EndpointURL.parse(u)) for u in defaults]
    default_filter = getattr(args, "events", None)
    for spec in settings.endpoints:
        if "events" in spec.url.options:
            continue
        spec.events = spec.events or default_filter
    if getattr(args, "on_error", None):
        settings.on_error = args.on_error
    if getattr(args, "verbose", 0):  # -v: the terminal shows every field
        for spec in settings.endpoints:
            if spec.url.scheme == "term":
                spec.options.setdefault("fields", "all")
    if getattr(args, "upgrade_schema", False):
        for spec in settings.endpoints:
            spec.options.setdefault("upgrade_schema", True)
    for spec in settings.endpoints:
        if spec.events:
            EventFilter(spec.events)  # raise FilterError early, naming the pattern
        warn_unmatched(spec.events or spec.url.options.get("events"))
        if settings.encoding and spec.url.scheme == "file" and "encoding" not in spec.url.options:
            spec.options.setdefault("encoding", settings.encoding.lower())
    return settings
