"""Comparing event dicts with monitord's golden output, tolerant only where monitord is inconsistent.

monitord writes the same field as "0" in one event and 0 in another, and BP keeps
floats to 6 decimals: numbers and numeric strings compare by value, floats
within 1e-6 relative. Everything else must be equal.
"""

from __future__ import annotations

import math
from typing import Any

WALL_CLOCK_EVENTS = ("stampede.static.start", "stampede.static.end", "stampede.rc.pfn")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if a == b:
        return True
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        x, y = _as_number(a), _as_number(b)
        return x is not None and y is not None and math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)
    return False


def differences(ours: dict[str, Any], golden: dict[str, Any], *, ignore: tuple[str, ...] = ()) -> list[str]:
    """Human-readable differences between two event dicts (empty when equal)."""
    out = []
    for key in sorted(set(ours) | set(golden)):
        if key in ignore:
            continue
        if key not in ours:
            out.append(f"missing {key}={golden[key]!r}")
        elif key not in golden:
            out.append(f"extra {key}={ours[key]!r}")
        elif not same_value(ours[key], golden[key]):
            out.append(f"{key}: {ours[key]!r} != golden {golden[key]!r}")
    return out
