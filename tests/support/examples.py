"""Hypothesis example counts by profile: the full count in CI, a tenth locally (tests/conftest.py loads the
profile: `ci` under CI=true, `dev` otherwise, or the one HYPOTHESIS_PROFILE names)."""

from __future__ import annotations

from hypothesis import settings

FULL = 100
"""`max_examples` of the `ci` profile: a test's count is scaled by the loaded profile's count over this."""


def examples(full: int) -> int:
    """`full` examples under the `ci` profile, proportionally fewer (at least 10) under `dev`."""
    return max(10, full * settings.default.max_examples // FULL)
