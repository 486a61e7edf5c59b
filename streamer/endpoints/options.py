"""Endpoint options as data: name, parser, default and a one-line doc for every option of every endpoint.

An endpoint's options come from its URL's query string (`?buffer=1000`), from
its table in `streamer.toml` (`buffer = 1000`) or from streamer itself
(`replay`). Each is declared once here, typed by one of a few parsers shared by
every endpoint (one reading of `true`/`off`, of `512M`, of `30s`), so

- an unknown option (`?evnts=`, `?drain_timeot=`) is a usage error naming it and the nearest known names,
- a bad value (`?buffer=abc`, `?mode=trunc`) is a usage error naming the option and what it takes,
- `streamer COMMAND --help` lists every option from these declarations (`describe`).

Each endpoint class names its declarations in `declared_options` (a tuple of `Option`);
`BUS` (the bus's own options) and `COMMON` apply to every endpoint.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from streamer.core.options import OptionError, parse_bool, parse_count, parse_duration, parse_size

__all__ = ["Option", "OptionError", "parse_bool", "parse_size", "parse_duration", "validate", "describe"]


def parse_text(value: Any) -> str:
    return str(value)


def choice(*values: str) -> Callable[[Any], str]:
    """A parser accepting one of `values` (any case), returned in lower case."""
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in values:
            raise OptionError(f"{value!r} is not one of {', '.join(values)}")
        return text
    parse.__doc__ = "|".join(values)
    return parse


def parse_filter(value: Any) -> str:
    from streamer.core.filters import EventFilter, FilterError

    text = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
    try:
        EventFilter(text)
    except FilterError as exc:
        raise OptionError(str(exc)) from None
    return text


def _declare(value: Any) -> str:
    """true|false|passive"""
    if str(value).strip().lower() == "passive":
        return "passive"
    try:
        return "true" if parse_bool(value) else "false"
    except OptionError:
        raise OptionError(f"{value!r} is not one of true, false, passive") from None


# ---------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str

    @property
    def kind(self) -> str:
        names: dict[Callable[[Any], Any], str] = {
            parse_bool: "true|false", parse_size: "SIZE", parse_duration: "SECONDS", parse_count: "N",
            parse_text: "TEXT", parse_filter: "PATTERNS"}
        return names.get(self.parse) or (self.parse.__doc__ or "value")


BUS = (
    Option("events", parse_filter, "*", "this endpoint's filter (globs, comma-separated, !exclusions)"),
    Option("buffer", parse_count, 50_000, "events held in memory for this endpoint before it falls back on disk"),
    Option("batch", parse_count, 5_000, "events per write"),
    Option("overflow", parse_size, 1 << 30, "cap of the endpoint's overflow file (512M, 2G); off: a full buffer "
                                            "holds the source back"),
    Option("overflow_dir", parse_text, None, "directory of the overflow file (default: the system's temp dir)"),
)
"""Options of the bus, which every endpoint takes."""

COMMON = (
    Option("dead_letter", parse_text, None, "file (JSON lines) for the events this endpoint refuses for good; "
           "`streamer load FILE` re-delivers them"),
    Option("password_file", parse_text, None, "read the URL's password from the first line of this file"),
    Option("password_env", parse_text, None, "read the URL's password from this environment variable"),
    Option("replay", parse_bool, False, "start the output afresh (set by streamer replay unless --append)"),
    Option("upgrade_schema", parse_bool, False, "databases: upgrade an older Stampede schema in place "
                                                "(--upgrade-schema)"),
)
"""Options every endpoint accepts (secrets, and those streamer sets for a run)."""

_FILE = (
    Option("encoding", choice("json", "bp", "bson"), None, "json, bp or bson (default: from the suffix)"),
    Option("fsync", parse_bool, False, "fsync the file at every checkpoint"),
    Option("mode", choice("append", "truncate"), None, "append, or truncate (start the file afresh; not "
                                                       "with a checkpoint to resume from)"),
)

TERMINAL = (
    Option("format", choice("pretty", "bp", "json"), "pretty", "line format"),
    Option("color", choice("auto", "always", "never"), "auto", "colours (auto: when a terminal)"),
    Option("fields", choice("compact", "all"), "compact", "compact line, or every field with job output (-v)"),
)

_RETRY = Option("retry_for", parse_duration, 300.0, "seconds a transient fault may last before the endpoint fails")
_CONNECT = Option("connect_for", parse_duration, 30.0,
                  "seconds to keep trying a server not reached yet (a wrong host or port fails after this long; "
                  "once connected, faults are retried for retry_for)")

_WAIT_PARENTS = Option("wait_parents", parse_duration, 0.0,
                       "seconds an event may wait for its workflow/job to be loaded by another writer "
                       "(collectors sharing a queue; default 30 s when collecting from a queue, else 0)")
SPOOL = (
    Option("spool", parse_text, None, "spool directory: batches the endpoint cannot take (server away longer than "
                                      "spool_grace) wait there, fsync'd, and are replayed in order (spooling.py)"),
    Option("spool_size", parse_size, 1 << 30, "spool bound (512M, 2G)"),
    Option("spool_grace", parse_duration, 5.0, "seconds a retriable fault may last before batches go to the spool"),
    Option("drain_timeout", parse_duration, 300.0, "seconds to wait at exit for the spool to drain (unset: not for a "
                                                   "server never reached, nor one away at a signal)"),
)
"""The spooling layer's options (`spooling.py`), for the endpoints that take it."""

FILE = (*_FILE, *SPOOL)
_POSTGRES = (_RETRY, _CONNECT, _WAIT_PARENTS)
POSTGRES = (*_POSTGRES, *SPOOL)
MYSQL = (_RETRY, _CONNECT, *SPOOL)
SQLITE = (
    _RETRY,
    Option("busy_timeout", parse_duration, 30.0, "seconds to wait for another writer's lock"),
    Option("synchronous", choice("full", "normal", "off", "extra"), "full", "PRAGMA synchronous"),
)

AMQP = (
    Option("exchange_type", choice("topic", "direct", "fanout", "headers"), "topic", "type used when declaring "
                                                                                   "the exchange"),
    Option("durable", parse_bool, True, "durable exchange"),
    Option("declare", _declare, "true",
           "true: declare the exchange; passive: it must exist; false: do not declare"),
    Option("routing_key", choice("event", "underscore"), "event", "routing key: the event name, or with _ for ."),
    Option("mandatory", parse_bool, True, "report unroutable messages"),
    Option("heartbeat", parse_duration, 60.0, "AMQP heartbeat (seconds)"),
    Option("connect_timeout", parse_duration, 10.0, "seconds per connection attempt"),
    Option("confirm_timeout", parse_duration, 30.0, "seconds to wait for a batch's confirms"),
    Option("drain_timeout", parse_duration, 300.0, "seconds to wait at exit for the spool to drain (unset: not for a "
                                                   "server never reached, nor one away at a signal)"),
    Option("retry_max", parse_duration, 30.0, "cap of the reconnect backoff (seconds)"),
    Option("window", parse_count, 2000, "messages per socket write"),
    Option("spool", parse_text, None, "spool directory, or off (default: one per destination)"),
    Option("spool_size", parse_size, 1 << 30, "spool bound (512M, 2G)"),
    Option("cafile", parse_text, None, "amqps: CA bundle"),
    Option("certfile", parse_text, None, "amqps: client certificate"),
    Option("keyfile", parse_text, None, "amqps: client key"),
    Option("verify", parse_bool, True, "amqps: false skips certificate and host-name checks"),
)

def declared(cls: type) -> tuple[Option, ...]:
    """Every option an endpoint class takes: the bus's, the common ones and its own (`declared_options`)."""
    return BUS + COMMON + tuple(getattr(cls, "declared_options", None) or ())


def validate(cls: type, options: dict[str, Any], where: str) -> dict[str, Any]:
    """`options` parsed by their declarations; OptionError naming `where` and the option otherwise."""
    table = {o.name: o for o in declared(cls)}
    out: dict[str, Any] = {}
    for key, value in options.items():
        option = table.get(key)
        if option is None:
            raise OptionError(f"{where}: unknown option {key!r}{_nearest(key, table)}")
        if value is None:
            out[key] = None
            continue
        try:
            out[key] = option.parse(value)
        except OptionError as exc:
            raise OptionError(f"{where}: option {key}: {exc}") from None
    return out


def check_keys(cls: type, keys: Iterable[str], where: str) -> None:
    """Refuse unknown option names (for settings files, before any value is used)."""
    table = {o.name for o in declared(cls)}
    for key in keys:
        if key not in table:
            raise OptionError(f"{where}: unknown option {key!r}{_nearest(key, table)}")


def _nearest(key: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(names), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else f" (known: {', '.join(sorted(names))})"


def describe(groups: Iterable[tuple[str, tuple[Option, ...]]]) -> str:
    """Help text listing options: `  name=KIND  doc (default D)` per option, under a heading per group."""
    lines = []
    for heading, opts in groups:
        lines.append(f"{heading}:")
        for option in opts:
            default = "" if option.default in (None, False) and option.parse is not parse_bool else \
                f" (default {_show(option.default)})"
            lines.append(f"  {option.name + '=' + option.kind:<30} {option.doc}{default}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 30}G" if value % (1 << 30) == 0 else f"{value >> 20}M"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def help_text() -> str:
    """Every URL option of every endpoint, for `--help`."""
    return describe((
        ("URL options of every endpoint (?name=value, or keys of its [[endpoint]] table)", BUS),
        ("file:// options", _FILE), ("term: / - options", TERMINAL), ("amqp:// options", AMQP),
        ("postgresql:// and mysql:// options", _POSTGRES), ("sqlite:// options", SQLITE),
        ("postgresql://, mysql:// and file:// spooling (while the server is away; spooling.py)", SPOOL),
    ))
