"""Option values as typed data: sizes (`512M`, `2G`), switches (`on`/`off`/`true`/`0`...).

One parser per kind, shared by the bus and the endpoints, so `overflow=1G`
reads as `spool_size=1G` does."""

from __future__ import annotations

from typing import Any

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})
_SCALE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class OptionError(ValueError):
    """An option value that does not read as its kind (the message names the value and the form)."""


def parse_size(value: Any) -> int:
    """`1073741824`, `512M`, `2G`, `100k`, `1GiB` -> bytes."""
    text = str(value).strip().upper().removesuffix("B").removesuffix("I")
    scale = _SCALE.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    try:
        size = int(float(number) * scale)
    except ValueError:
        raise OptionError(f"bad size {value!r} (e.g. 1073741824, 512M, 2G)") from None
    if size < 0:
        raise OptionError(f"bad size {value!r}: negative")
    return size


def is_true(value: Any) -> bool:
    """A switch that is on (`1`, `true`, `yes`, `on`, or True); anything else is off."""
    return value if isinstance(value, bool) else str(value).strip().lower() in TRUE


def is_off(value: Any) -> bool:
    """A value that switches a feature off (`0`, `false`, `no`, `off`, or False)."""
    return value is False if isinstance(value, bool) else str(value).strip().lower() in FALSE


def size_or_off(value: Any) -> int:
    """A byte cap, or 0 when the value switches the feature off (`overflow=off`)."""
    return 0 if is_off(value) else parse_size(value)
