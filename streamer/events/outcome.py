"""What an event says happened, for the terminal: a failure, a hold, a success, or nothing.

monitord marks every kickstart `inv.end` `level=Error` whatever its exit code
(a quirk the reference pins), so the level says nothing about the outcome:
the exit code and status fields do.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from streamer.events import Event
from streamer.events.tally.excerpt import stderr_excerpt

COMPACT_HIDDEN = frozenset((
    "work_dir", "stdin_file", "stdout.file", "stderr.file", "argv", "executable", "cwd", "submit_dir",
    "multiplier_factor", "js.id", "stdout.text",
))
"""Fields the compact line leaves out (`-v` / `?fields=all` shows them)."""
OUTPUT = ("stdout.text", "stderr.text")


def _nonzero(value: Any) -> bool:
    if value is None or value == "None":
        return False
    try:
        return int(float(value)) != 0
    except (TypeError, ValueError):
        return False


def outcome(event: Event) -> str | None:
    """`error`, `held`, `success` or None (an event that reports no outcome)."""
    name = event.name
    fields = event.fields
    if name == "stampede.job_inst.held.start":
        return "held"
    if name == "stampede.job_inst.abort.info":
        return "error"
    if name == "stampede.job_inst.submit.end" or name.endswith((".pre.end", ".post.end")):
        return "error" if _nonzero(fields.get("status")) else "success"
    if "exitcode" in fields or (name == "stampede.xwf.end" and "status" in fields):
        failed = _nonzero(fields.get("exitcode")) or _nonzero(fields.get("status"))
        return "error" if failed else "success"
    return None


def decode(text: str) -> str:
    """monitord's job output: `%0A` and the other %-escapes it writes, decoded."""
    return unquote(text) if "%" in text else text


def output_text(key: str, value: Any, *, whole: bool) -> Any:
    """The value to show: job output decoded (whole, or its first line; None when empty)."""
    if key not in OUTPUT or not isinstance(value, str):
        return value
    if whole:
        return decode(value)
    return stderr_excerpt(value) or None
