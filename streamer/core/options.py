"""Option values as typed data: one parser per kind, shared by the bus, the endpoints and the sources.

Booleans (`true`/`off`/`1`...), sizes (`512M`, `2G`, `off`), durations (`500ms`,
`30s`, `5m`) and counts (`5000`, `50k`) read the same wherever an option is
given, so `overflow=1G` reads as `spool_size=1G` does. The declarations of
which option takes which kind are in `streamer/endpoints/options.py`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["OptionError", "parse_bool", "parse_size", "parse_duration", "parse_count", "is_true", "is_off",
           "size_or_off"]


class OptionError(ValueError):
    """An option that is unknown or has a value its parser refuses (a usage error)."""


_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("0", "false", "no", "off"))


def parse_bool(value: Any) -> bool:
    """`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0` (any case), or a TOML boolean."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionError(f"{value!r} is not a boolean (true or false)")


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$", re.I)
_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any) -> int:
    """Bytes: `1073741824`, `100k`, `512M`, `2G`, `1GiB`, `1.5G`; `off` (or false/no/0) is 0."""
    if isinstance(value, bool):
        raise OptionError(f"{value!r} is not a size (bytes, or 512M, 2G, or off)")
    if isinstance(value, int):
        if value < 0:
            raise OptionError(f"{value} is not a size (negative)")
        return value
    text = str(value).strip()
    if text.lower() in _FALSE:
        return 0
    match = _SIZE.match(text)
    if not match:
        raise OptionError(f"{value!r} is not a size (bytes, or 512M, 2G, or off)")
    return int(float(match[1]) * _SCALE[match[2].lower()])


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$", re.I)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Seconds: `30`, `2.5`, `500ms`, `30s`, `5m`, `1h`."""
    if isinstance(value, bool):
        raise OptionError(f"{value!r} is not a duration (seconds, or 500ms, 30s, 5m, 1h)")
    if isinstance(value, (int, float)):
        if value < 0:
            raise OptionError(f"{value} is not a duration (negative)")
        return float(value)
    match = _DURATION.match(str(value).strip())
    if not match:
        raise OptionError(f"{value!r} is not a duration (seconds, or 500ms, 30s, 5m, 1h)")
    return float(match[1]) * _SECONDS[match[2].lower() if match[2] else None]


def parse_count(value: Any) -> int:
    """A positive integer (`5000`; `50k` too)."""
    if isinstance(value, bool):
        raise OptionError(f"{value!r} is not a positive integer")
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip().lower()
        scale = 1000 if text.endswith("k") else 1
        try:
            number = int(text.removesuffix("k")) * scale
        except ValueError:
            raise OptionError(f"{value!r} is not a positive integer") from None
    if number <= 0:
        raise OptionError(f"{value!r} is not a positive integer")
    return number



def is_true(value: Any) -> bool:
    """A switch that is on (`1`, `true`, `yes`, `on`, or True); anything else is off."""
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


def is_off(value: Any) -> bool:
    """A value that switches a feature off (`0`, `false`, `no`, `off`, or False)."""
    return value is False if isinstance(value, bool) else str(value).strip().lower() in _FALSE


def size_or_off(value: Any) -> int:
    """A byte cap, or 0 when the value switches the feature off (`overflow=off`)."""
    return parse_size(value)
