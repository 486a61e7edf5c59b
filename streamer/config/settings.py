"""Settings from the three places users give them: CLI flags, `streamer.toml`, `pegasus.properties`.

streamer.toml:

    on_error = "stop"            # or "isolate"
    checkpoint = "/var/lib/streamer/wf.ckpt"

    [[endpoint]]
    url = "file:///var/log/streamer/all.jsonl"
    events = "*"                 # filter (globs, comma list, !exclusions)
    buffer = 50000               # events held for this endpoint before backpressure
    batch = 5000                 # events per write
    fsync = true                 # any other key is an option of the endpoint

    [[endpoint]]
    url = "amqp://user:pass@broker:5672/%2F/pegasus"
    events = "stampede.xwf.*,stampede.job_inst.*"

pegasus.properties (monitord's keys): `pegasus.catalog.workflow.url` or
`pegasus.monitord.output` (the default endpoint), `pegasus.catalog.workflow.<name>.url`
(more endpoints) with `pegasus.catalog.workflow.<name>.events` (their filter,
e.g. `pegasus.catalog.workflow.amqp.events`), `pegasus.monitord.encoding`
(bp|json for file endpoints whose URL does not say).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamer.util.urls import EndpointURL, mask


class ConfigError(ValueError):
    """A settings file or flag that cannot be used; the message names the file."""


@dataclass
class EndpointSpec:
    """One endpoint to open: URL (parsed where the user's text entered: `EndpointURL.given`), filter,
    buffer/batch sizes, other options."""

    url: EndpointURL
    events: str | None = None
    buffer: int | None = None
    batch: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.url.masked


@dataclass
class Settings:
    endpoints: list[EndpointSpec] = field(default_factory=list)
    on_error: str = "stop"
    checkpoint: str | None = None
    encoding: str | None = None
    timezone: str | None = None
    """The zone of DAGMan's zone-less times (replay, follow; `monitor/zones.py`), None: the workflow's rule."""


def load_toml(path: str | Path) -> Settings:
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    unknown = sorted(set(data) - {"on_error", "checkpoint", "timezone", "endpoint", "serve"})  # [serve]: serve's
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: on_error, checkpoint, timezone, [[endpoint]], "
                          "[serve])")
    settings = Settings(on_error=str(data.get("on_error", "stop")), checkpoint=data.get("checkpoint"),
                        timezone=_zone_text(data.get("timezone")))
    tables = data.get("endpoint", [])
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: [[endpoint]] must be an array of tables")
    for index, table in enumerate(tables, 1):
        if not isinstance(table, dict) or "url" not in table:
            raise ConfigError(f"{path}: endpoint #{index} has no url")
        options = {k: v for k, v in table.items() if k not in ("url", "events", "buffer", "batch")}
        url = _url(path, index, table["url"])
        _check_keys(path, index, url, options)
        settings.endpoints.append(EndpointSpec(
            url=url,
            events=_events_text(table.get("events")),
            buffer=_positive(path, index, "buffer", table.get("buffer")),
            batch=_positive(path, index, "batch", table.get("batch")),
            options=options,
        ))
    if settings.on_error not in ("stop", "isolate"):
        raise ConfigError(f"{path}: on_error must be 'stop' or 'isolate', not {settings.on_error!r}")
    return settings


def _zone_text(value: Any) -> str | None:
    """`timezone = "America/Los_Angeles"` (checked where it is used: `monitor/zones.py`)."""
    return None if value is None else str(value)


def _url(path: str | Path, index: int, text: Any) -> EndpointURL:
    try:
        return EndpointURL.given(str(text))
    except ValueError as exc:
        raise ConfigError(f"{path}: endpoint #{index}: {mask(str(exc))}") from None


def _check_keys(path: str | Path, index: int, url: EndpointURL, options: dict[str, Any]) -> None:
    """An option name the endpoint does not declare (`evnts = ...`) is an error naming the file and table."""
    from streamer.endpoints import EndpointError, endpoint_class
    from streamer.endpoints.options import OptionError, check_keys

    try:
        cls = endpoint_class(url.scheme)
    except EndpointError:
        return  # an unknown scheme is reported when the endpoint is built
    try:
        check_keys(cls, options, f"{path}: endpoint #{index}")
    except OptionError as exc:
        raise ConfigError(str(exc)) from None


def _events_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _positive(path: str | Path, index: int, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{path}: endpoint #{index}: {key} must be a positive integer")
    return value


def read_properties(path: str | Path) -> dict[str, str]:
    """Java-style properties: `key=value`, `key: value` or `key value`; `#`/`!` comments; `\\` continuations."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such properties file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^([^\s=:]+)\s*[=:\s]\s*(.*)$", logical)
        if match:
            props[match.group(1)] = match.group(2).strip()
        elif logical:
            props[logical] = ""
        logical = ""
    return props


_WORKFLOW_URL = re.compile(r"^pegasus\.catalog\.workflow\.([^.]+)\.url$")


def from_properties(path: str | Path) -> Settings:
    """Endpoints and encoding from monitord's properties."""
    props = read_properties(path)
    settings = Settings(encoding=props.get("pegasus.monitord.encoding"))
    default = props.get("pegasus.catalog.workflow.url") or props.get("pegasus.monitord.output")
    if default:
        settings.endpoints.append(EndpointSpec(url=_property_url(path, default),
                                               events=props.get("pegasus.catalog.workflow.events")))
    for key, value in sorted(props.items()):
        match = _WORKFLOW_URL.match(key)
        if match and value:
            name = match.group(1)
            settings.endpoints.append(EndpointSpec(
                url=_property_url(path, value), events=props.get(f"pegasus.catalog.workflow.{name}.events")))
    if settings.encoding and settings.encoding.lower() not in ("bp", "json"):
        raise ConfigError(f"{path}: pegasus.monitord.encoding must be bp or json, not {settings.encoding!r}")
    return settings


def _property_url(path: str | Path, text: str) -> EndpointURL:
    try:
        return EndpointURL.given(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: {mask(str(exc))}") from None


def describe(spec: EndpointSpec) -> str:
    """`file:///tmp/a.jsonl [stampede.xwf.*]` with the password masked."""
    shown = "terminal" if spec.url.raw == "-" else spec.url.masked
    return f"{shown} [{spec.events}]" if spec.events else shown
