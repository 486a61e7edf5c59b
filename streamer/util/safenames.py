"""The one guard for names taken from a workflow's files: they never leave their place.

A workflow's files (braindump, .dag, .sub, kickstart records, event files) are written by whoever
ran the workflow. A value read there -- a uuid, a label, a dag or node name, a user name -- may
become a path component (`{wf_uuid}` in a `serve --workflow-dest` template, `<wf_uuid>-jobstate.log`
under `--output-dir`, the dagman.out or notify file the braindump names), a part of a URL, a SQL
name or an AMQP name. Each of those places goes through this module, which refuses (UnsafeName,
a ValueError naming the value and what it was for) instead of cleaning up: a cleaned-up name could
collide with another workflow's, and the refusal is what the user needs to see.

    component(value, "wf_uuid")          # one path component, also safe inside a URL
    directory(path, "submit_dir")       # an absolute, normalised directory, also safe inside a URL
    inside(directory, name, "dag")       # directory/name, refused unless it stays in directory
    sql_identifier(name, "database")     # "name" quoted for SQL (a double quote doubled)
    amqp_short(name, "routing key")      # an AMQP short string: at most 255 bytes
    portable(name)                       # any text -> a file-name stem of safe characters only
"""

from __future__ import annotations

import os
import unicodedata

__all__ = ["UnsafeName", "component", "directory", "inside", "sql_identifier", "amqp_short", "portable", "MAX_NAME"]

MAX_NAME = 255
"""Bytes (UTF-8) of a file name on every file system we write to; also AMQP's short-string limit."""
URL_SPECIAL = frozenset("/\\?#%@:")
"""Characters that would change a URL's structure (`%` too: file URLs are unquoted, `%2e%2e%2f` is `../`)."""


class UnsafeName(ValueError):
    """A value from a workflow's files that cannot be used where it was going: it would leave its place."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:60] + "..." + value[-12:])


def _why(value: str) -> str | None:
    if not value:
        return "it is empty"
    if value in (".", ".."):
        return f"{value!r} names a directory, not a file"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME:
        return f"it is longer than {MAX_NAME} bytes"
    special = sorted({c for c in value if c in URL_SPECIAL})
    if special:
        return f"it holds {''.join(special)!r} (a path separator or URL delimiter)"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") or c.isspace() for c in value):
        return "it holds a blank, control or invisible character"
    return None


def component(value: str, what: str) -> str:
    """`value` unchanged when it is safe as one path component and inside a URL; else UnsafeName.

    Safe: 1 to 255 bytes, not `.` or `..`, no `/ \\ ? # % @ :`, no blank, control or format character."""
    why = _why(value) if isinstance(value, str) else f"it is not text ({type(value).__name__})"
    if why is not None:
        raise UnsafeName(f"{what} {_shown(str(value))} cannot be used as a name: {why}")
    return value


def directory(value: str, what: str) -> str:
    """`value` unchanged when it is an absolute, normalised path (no `.` or `..` step) that stays one path
    inside a URL (no `? # %`, no control character); else UnsafeName. Blanks are allowed: real directories
    have them."""
    why = None
    if not isinstance(value, str) or not os.path.isabs(value) or os.path.normpath(value) != value.rstrip("/") or \
            value.startswith("//"):
        why = "it is not an absolute, normalised path"
    elif any(c in "?#%\\" or unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value):
        why = "it holds '?', '#', '%', a backslash or a control character"
    if why is not None:
        raise UnsafeName(f"{what} {_shown(str(value))} cannot be used in a path: {why}")
    return value


def inside(directory: str | os.PathLike[str], name: str, what: str) -> str:
    """`directory/name` when `name` is a safe component (`component`); else UnsafeName."""
    return os.path.join(os.fspath(directory), component(name, what))


def sql_identifier(name: str, what: str = "name") -> str:
    """`name` as a double-quoted SQL identifier (ANSI; MySQL with ANSI_QUOTES): a `"` inside is doubled,
    NUL and names over 64 characters (MySQL's limit, under PostgreSQL's 63 bytes + quoting) refused."""
    if not name or "\x00" in name or len(name) > 64:
        raise UnsafeName(f"{what} {_shown(name)} cannot be used as a SQL name: empty, over 64 characters or NUL")
    return '"' + name.replace('"', '""') + '"'


def amqp_short(name: str, what: str) -> str:
    """`name` when it fits an AMQP short string (exchange, queue, routing key: at most 255 bytes)."""
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
        raise UnsafeName(f"{what} {_shown(name)} is longer than AMQP's {MAX_NAME} bytes")
    return name


def portable(name: str, limit: int = 40) -> str:
    """Any text as a stem of letters, digits, `-`, `_` and `.` (others become `_`), at most `limit`
    characters and never `.` or `..`: for file names that also carry a digest of the full text."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:limit]
    return "_" if safe.strip(".") == "" else safe
