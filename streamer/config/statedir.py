"""Where streamer keeps state of its own: `$STREAMER_STATE_DIR`, else `$XDG_STATE_HOME/streamer` or
`~/.local/state/streamer`; and where a replay that writes nothing into its submit directory keeps its resume state.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable

from streamer.util import safenames


def user_state_dir() -> Path:
    base = os.environ.get("STREAMER_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "streamer")
    return Path(base)


def replay_state_path(submit_dir: str | Path) -> Path:
    """A stable state file per submit directory under the user's state dir (created on demand)."""
    directory = Path(submit_dir).resolve()
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    safe = safenames.portable(directory.name)
    path = user_state_dir() / "replay" / f"{safe}-{digest}.state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def writes_submit_dir(source: Any, specs: Iterable[Any]) -> bool:
    """Does this run write into the workflow's submit dir (jobstate.log or monitord's default database)?"""
    default_db = source.default_db_url()
    return bool(source.write_jobstate) or any(spec.url.raw == default_db for spec in specs)


def destinations_of(specs: Iterable[Any]) -> list[str]:
    """The endpoint set a resume state is tied to: masked URLs with their filters, sorted."""
    return sorted(f"{spec.url.masked} events={spec.events or '*'}" for spec in specs)


def resume_refusal(state_path: Path, bound: Any, *, resume: bool, destinations: list[str] | None,
                   started: bool) -> tuple[bool, str | None]:
    """Whether a saved state is resumed from, and what to tell the user when it is not (None: nothing).

    `bound`: the endpoint set the state was saved for; `started`: it records a position (not only the file
    endpoints' marks of a run stopped before its first checkpoint). Without `resume` (`streamer replay` without
    --resume) a run starts clean; a state of another endpoint set is never resumed, since those endpoints never
    got the events before its position."""
    if not resume:
        return False, (f"{state_path}: an earlier run stopped part-way; starting from the beginning (--resume goes "
                       "on from where it stopped)" if started else None)
    if destinations is not None and bound != destinations:
        which = f"for other endpoints ({', '.join(bound)})" if bound else "without its endpoints"
        return False, f"{state_path}: saved {which}; starting from the beginning, so these endpoints get every event"
    return True, None


def refuse_read_only(source: Any, specs: Iterable[Any], *, state_given: bool) -> None:
    """A replay of a read-only (archived) submit dir that would write there, or a --state in a read-only
    directory, stops before reading anything with what would be written and how not to (ConfigError).
    `os.access` sees a read-only mount even for root, which ignores permission bits."""
    from streamer.config.settings import ConfigError

    submit_dir = str(source.submit_dir)
    if not source.plain and writes_submit_dir(source, specs) and not os.access(submit_dir, os.W_OK):
        default_db = source.default_db_url()
        what = [name for name, used in (
            ("jobstate.log", source.write_jobstate),
            (default_db.rsplit("/", 1)[-1], any(spec.url.raw == default_db for spec in specs)),
            ("monitord.started/done", True),
            (Path(source.state_path).name, not state_given)) if used]
        raise ConfigError(f"{submit_dir} is read-only, and this run would write {', '.join(what)} there: replay "
                          "an archived submit dir with --no-jobstate and --dest URL (its resume state then goes to "
                          f"{user_state_dir() / 'replay'}, or --state FILE)")
    parent = Path(source.state_path).parent
    if state_given and not os.access(parent, os.W_OK):
        raise ConfigError(f"--state {source.state_path}: {parent} is read-only; give a state file in a "
                          "writable directory")
