"""Where streamer keeps state of its own: `$STREAMER_STATE_DIR`, else `$XDG_STATE_HOME/streamer` or
`~/.local/state/streamer`; and where a replay that writes nothing into its submit directory keeps its resume state.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable


def user_state_dir() -> Path:
    base = os.environ.get("STREAMER_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "streamer")
    return Path(base)


def replay_state_path(submit_dir: str | Path) -> Path:
    """A stable state file per submit directory under the user's state dir (created on demand)."""
    directory = Path(submit_dir).resolve()
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in directory.name)[:40]
    path = user_state_dir() / "replay" / f"{safe}-{digest}.state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def writes_submit_dir(source: Any, specs: Iterable[Any]) -> bool:
    """Does this run write into the workflow's submit dir (jobstate.log or monitord's default database)?"""
    default_db = source.default_db_url()
    return bool(source.write_jobstate) or any(spec.url == default_db for spec in specs)
