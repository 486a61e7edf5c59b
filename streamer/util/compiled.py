"""Whether the optional compiled codec is in use (the C extension setup.py builds when a compiler is there).

It accelerates pure-Python modules that stay the definition of the behaviour
and is tested against them (streamer/events/native.py chooses it once).
`STREAMER_PURE_PYTHON=1` turns it off (same results, slower).
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
