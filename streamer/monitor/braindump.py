"""The planner's braindump: identity and context of one workflow run.

Pegasus 5 writes `braindump.yml`; Pegasus 4 wrote `braindump.txt` (`key value`
lines). Both give the same keys (`wf_uuid`, `dag`, `submit_dir`, ...), which the
monitor needs before it can name any event.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PATH_KEYS = ("dax", "basedir", "submit_dir", "planner", "bindir")
"""Keys Pegasus's braindump loader reads as paths: `a/./b` and `a//b` come out normalised."""


class BraindumpError(ValueError):
    """No usable braindump in a directory."""


def load(directory: str | Path) -> dict[str, str]:
    """Braindump of `directory` as text values (YAML first, then the legacy text form)."""
    directory = Path(directory)
    yml = directory / "braindump.yml"
    if yml.is_file():
        return parse_yaml(yml.read_text(encoding="utf-8", errors="replace"))
    txt = directory / "braindump.txt"
    if txt.is_file():
        return parse_text(txt.read_text(encoding="utf-8", errors="replace"))
    raise BraindumpError(f"no braindump.yml or braindump.txt in {directory}")


def parse_yaml(text: str) -> dict[str, str]:
    """braindump.yml -> dict; values as text, like the legacy form (None stays None)."""
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise BraindumpError(f"bad braindump.yml: {exc}") from None
    if not isinstance(data, dict):
        raise BraindumpError("braindump.yml is not a mapping")
    return _paths({str(k): _text(v) for k, v in data.items()})


def parse_text(text: str) -> dict[str, str]:
    """Legacy braindump.txt: one `key value` per line, the value is the rest of the line."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        out[key] = value.strip()
    return _paths(out)


def _paths(values: dict[str, str]) -> dict[str, str]:
    for key in PATH_KEYS:
        if values.get(key):
            values[key] = str(PurePosixPath(values[key]))
    return values


def _text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
