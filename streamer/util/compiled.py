"""Which compiled code is in use: the C codec and the modules mypyc compiled (both built by setup.py when
they can be, both optional).

Both accelerate pure-Python modules that stay the definition of the behaviour and
are tested against them. `STREAMER_PURE_PYTHON=1` turns both off (same results, slower).

- The C codec (`streamer.events._codec`): `fast_module` imports it when allowed
  (streamer/events/native.py chooses it once).
- The mypyc modules: built into `streamer/_compiled/` beside (not over) the .py files,
  with a manifest of their sources' hashes. Nothing uses them until `activate()` (the
  entry point's first call, and the test suite's conftest) puts a finder first on
  `sys.meta_path` that loads those modules from there; it does so only when every
  source still has the hash it was compiled from (an edited module is never shadowed
  by an old build), the build is for this Python, and neither pure-Python mode nor
  `STREAMER_NO_MYPYC=1` (the mypyc modules off, the C codec on) is set. Importing
  streamer does none of this.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

PURE_ENV = "STREAMER_PURE_PYTHON"
NO_MYPYC_ENV = "STREAMER_NO_MYPYC"  # the mypyc modules only (not built by setup.py, not used): the C codec stays
PACKAGE = Path(__file__).resolve().parents[1]  # streamer/
BUILD = PACKAGE / "_compiled"
MANIFEST = BUILD / "manifest.json"


def pure() -> bool:
    """True when STREAMER_PURE_PYTHON asks for the interpreted modules only."""
    return bool(os.environ.get(PURE_ENV))


def fast_module(name: str) -> ModuleType | None:
    """The compiled module `name`, or None when it is not built or turned off."""
    if pure():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules mypyc compiled (and their shared library) in BUILD, nothing else."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        where = self.paths.get(fullname)
        if where is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(where))
        return importlib.machinery.ModuleSpec(fullname, loader, origin=str(where))


_state: dict[str, Any] = {"finder": None, "why": None}


def _paths(manifest: dict[str, Any], build: Path = BUILD) -> dict[str, Path] | str:
    """Module name -> its .so in `build`, or the reason the build cannot be used."""
    suffix = manifest.get("suffix")
    if suffix not in importlib.machinery.EXTENSION_SUFFIXES:
        return f"built for another Python ({suffix})"
    changed = [name for name, digest in manifest["modules"].items()
               if hashlib.sha256(_source(name).read_bytes()).hexdigest() != digest]
    if changed:
        return f"source changed since the build: {', '.join(sorted(changed))} (reinstall to rebuild)"
    paths = {name: build.joinpath(*name.split(".")).with_name(name.rsplit(".", 1)[-1] + suffix)
             for name in [*manifest["modules"], manifest["group"]]}
    missing = [name for name, path in paths.items() if not path.is_file()]
    return f"incomplete build: {', '.join(missing)} missing" if missing else paths


def _source(name: str) -> Path:
    return PACKAGE.parent.joinpath(*name.split(".")).with_suffix(".py")


def activate() -> bool:
    """Use the mypyc-compiled modules from now on, when built, current and allowed (True if they are in use).

    Call before anything imports them (the entry point's first line). Modules already
    imported stay as they are; calling again changes nothing.
    """
    if _state["finder"] is not None:
        return True
    for variable in (PURE_ENV, NO_MYPYC_ENV):
        if os.environ.get(variable):
            _state["why"] = f"{variable} is set"
            return False
    try:
        manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
        paths = _paths(manifest)
    except FileNotFoundError:
        paths = "not built (no mypyc or C compiler at install)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        paths = f"unreadable build manifest: {exc}"
    if isinstance(paths, str):
        _state["why"] = paths
        return False
    loaded = sorted(name for name in paths if name in sys.modules)
    if loaded:
        _state["why"] = f"imported before activate(): {', '.join(loaded)}"
        return False
    finder = _state["finder"] = _Finder(paths)
    sys.meta_path.insert(0, finder)
    return True


def active() -> bool:
    """True when activate() put the compiled modules in use."""
    return _state["finder"] is not None


def compiled_modules() -> list[str]:
    """The modules the mypyc build in use covers (empty when interpreted)."""
    finder = _state["finder"]
    return [] if finder is None else sorted(name for name in finder.paths if not name.endswith("__mypyc"))


def describe() -> str:
    """One line for `streamer --version` and the debug log: which code runs and, if interpreted, why."""
    codec = "C codec" if fast_module("streamer.events._codec") is not None else "no C codec"
    if active():
        return f"mypyc-compiled ({len(compiled_modules())} modules), {codec}"
    return f"interpreted ({_state['why'] or 'activate() not called'}), {codec}"
