"""The planner's braindump: identity and context of one workflow run.

Pegasus 5 writes `braindump.yml`; Pegasus 4 wrote `braindump.txt` (`key value`
lines). Both give the same keys (`wf_uuid`, `dag`, `submit_dir`, ...), which the
monitor needs before it can name any event.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from streamer.util import safenames
from streamer.monitor.parsers import yamlguard
from streamer.util.limits import read_bounded

log = logging.getLogger(__name__)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
"""The schema's uuid type."""
UUID_KEYS = ("wf_uuid", "root_wf_uuid")
FILE_KEYS = ("dag", "notify", "properties")
"""Keys naming a file of the submit directory itself: one path component each (`safenames.component`)."""
PATH_KEYS = ("dax", "basedir", "submit_dir", "planner", "bindir")
"""Keys Pegasus's braindump loader reads as paths: `a/./b` and `a//b` come out normalised."""


class BraindumpError(ValueError):
    """No usable braindump in a directory."""


def load(directory: str | Path) -> dict[str, str]:
    """Braindump of `directory` as text values (YAML first, then the legacy text form)."""
    directory = Path(directory)
    yml = directory / "braindump.yml"
    if yml.is_file():
        text = read_bounded(yml).decode("utf-8", errors="replace")
        try:
            return check_names(parse_yaml(text), text)
        except BraindumpError as exc:
            raise BraindumpError(f"{yml}:{exc}") from None
    txt = directory / "braindump.txt"
    if txt.is_file():
        try:
            return check_names(parse_text(read_bounded(txt).decode("utf-8", errors="replace")))
        except BraindumpError as exc:
            raise BraindumpError(f"{txt}: {str(exc).split(': ', 1)[1]}") from None
    raise BraindumpError(f"no braindump.yml or braindump.txt in {directory}")


def check_names(values: dict[str, str], yaml_text: str | None = None) -> dict[str, str]:
    """`values`, when each file it names in the submit directory stays there (`dag: ../../x` does not):
    else BraindumpError (`LINE: dag '../x' cannot be used as a name: ...`; line 1 without `yaml_text`)."""
    for key in FILE_KEYS:
        value = values.get(key)
        if value is not None:
            try:
                safenames.component(value, key)
            except safenames.UnsafeName as exc:
                line = _line_of(yaml_text, key) if yaml_text is not None else 1
                raise BraindumpError(f"{line}: {exc}") from None
    return values


def parse_yaml(text: str) -> dict[str, str]:
    """braindump.yml -> dict; values as text, like the legacy form (None stays None)."""
    try:
        yamlguard.check(text)
        data = yaml.load(text, Loader=_Loader)
    except (yaml.YAMLError, yamlguard.Refused) as exc:
        where = getattr(exc, "problem_mark", None)
        raise BraindumpError(f"{where.line + 1 if where else 1}: not readable YAML: {exc}") from None
    if not isinstance(data, dict):
        raise BraindumpError("1: not a mapping of keys to values")
    for key, value in data.items():
        if isinstance(value, (list, dict)):
            kind = "a list" if isinstance(value, list) else "a mapping"
            raise BraindumpError(f"{_line_of(text, key)}: {key}: expected a single value, found {kind}")
    values = _paths({str(k): _text(v) for k, v in data.items()})
    for key in UUID_KEYS:  # monitord takes any text; the schema wants a UUID: say so, once
        if values.get(key) is not None and not UUID.fullmatch(values[key]):
            log.warning("braindump.yml:%d: %s %.60r is not a UUID (the schema's type for xwf.id); used as given",
                        _line_of(text, key), key, values[key])
    return values


def _line_of(text: str, key: Any) -> int:
    """Line (1-based) of the top-level `key` in a YAML mapping, 1 when it cannot be found."""
    node = yaml.compose(text, Loader=_Loader)
    for key_node, _value in getattr(node, "value", ()):
        if getattr(key_node, "value", None) == str(key):
            return key_node.start_mark.line + 1
    return 1


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
