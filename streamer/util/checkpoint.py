"""Checkpoint and state files: read and written here only, with one policy for a damaged or foreign one.

Every file streamer keeps to resume or to remember (`streamer load --checkpoint`, the monitor's
`streamer.state.json` and replay states, a jobstate.log's `.streamer.json`, `streamer serve`'s registry)
is one JSON object written atomically (`atomic.py`: the old file or the new one, never a mix).

A file that cannot be read as the object its reader expects (not JSON, cut short, another program's,
another version's) is said once, naming the file and the reason, and then:

- kept aside as `FILE.bad` and the run starts clean, when starting clean only repeats what the endpoints
  drop themselves (databases insert on natural keys, AMQP consumers by `message_id`, a terminal is best effort);
- **refused** (`CheckpointError`, the file left where it is) when the run writes a file endpoint: its
  exactly-once marks were in that file, so starting clean would append every event again to a file that cannot
  tell them apart. Moving the file away is the user's choice (`docs/operations/delivery.md`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

from streamer.util.atomic import write_atomically

log = logging.getLogger("streamer.checkpoint")

BAD_SUFFIX = ".bad"


class CheckpointError(ValueError):
    """A damaged or foreign checkpoint that a run refuses to start clean over (the message says why)."""


def writes_files(destinations: Iterable[str] | None) -> bool:
    """Does a run to these destinations (URLs, masked or not, with or without ` events=`) write a file endpoint:
    one that keeps exactly-once marks in the checkpoint and cannot drop a repeated event?"""
    return any(url.split(":", 1)[0].lower() == "file" for url in destinations or ())


def read(path: Path, *, what: str, accept: Callable[[dict[str, Any]], bool], refuse: bool,
         clean: str = "starting from the beginning") -> dict[str, Any] | None:
    """The object saved at `path`; None when there is none, or when it was damaged or foreign and kept aside.

    `what` names the file in messages (`checkpoint`, `state`, …) with the version it must be; `accept` tells
    this reader's object from another's; `refuse` (`writes_files`): raise CheckpointError rather than start clean;
    `clean` says what starting clean means for this file.
    """
    try:
        value = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as exc:
        reason = f"not JSON: {exc}"
    except OSError as exc:
        reason = str(exc.strerror or exc)
    else:
        if isinstance(value, dict) and accept(value):
            return value
        reason = "written by another program or version"
    _damaged(path, what, reason, refuse, clean)
    return None


def _damaged(path: Path, what: str, reason: str, refuse: bool, clean: str) -> None:
    if refuse:
        raise CheckpointError(f"{path}: unreadable {what} ({reason}); not starting from the beginning, which "
                              "would write every event again to the file endpoints: move it away to start over")
    bad = path.with_name(path.name + BAD_SUFFIX)
    try:
        os.replace(path, bad)
    except OSError as exc:
        log.warning("%s: unreadable %s (%s), and it cannot be kept aside as %s (%s); %s", path, what, reason,
                    bad.name, exc.strerror or exc, clean)
        return
    log.warning("%s: unreadable %s (%s); kept as %s, %s", path, what, reason, bad.name, clean)


def write(path: Path, value: dict[str, Any], *, indent: bool = False) -> None:
    """Save `value` at `path` atomically (a crash leaves the old file or the new one)."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    write_atomically(path, orjson.dumps(value, option=option))
