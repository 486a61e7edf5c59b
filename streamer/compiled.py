"""The optional compiled fast paths (C extensions setup.py builds when a compiler is there).

Each one mirrors a pure-Python module that stays the definition of the
behaviour and is tested against it. `STREAMER_PURE_PYTHON=1` turns them all
off (same results, slower).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def fast_module(name: str) -> ModuleType | None:
    """The compiled module `name`, or None when it is not built or turned off."""
    if os.environ.get("STREAMER_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
