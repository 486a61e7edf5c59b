"""Which directories are root workflows to follow, and which the master workflow DB registers.

A candidate directory (a `braindump.yml` or `*.dag.dagman.out` created, written
and closed, or renamed into place under a watched root, a directory moved in,
or a `submit_dir` of the master DB) is followed when it is a root workflow (a
sub-workflow's braindump names another `root_wf_uuid`: its parent follows it),
its braindump is complete, its dagman.out exists (DAGMan started; the file's
creation is another candidate event) and it has not finished (`monitord.done`,
or a complete streamer state). A candidate that may still become one (no or a
half-written braindump, no dagman.out yet) is looked at again every few seconds
until it does, so no order or timing of the files is missed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from streamer.monitor.parsers import braindump
from streamer.monitor.source import STATE_FILE
from streamer.util.urls import EndpointURL, mask
from streamer.serve.watch import finished_dir

log = logging.getLogger("streamer.serve")


@dataclass(frozen=True)
class Found:
    submit_dir: str
    dagman_out: str
    dag: str
    wf_uuid: str | None


def classify(directory: str) -> Found | None:
    """The root workflow in `directory` ready to follow, or None (not one, not yet, or finished)."""
    return examine(directory)[0]


def examine(directory: str) -> tuple[Found | None, bool]:
    """(the root workflow in `directory` ready to follow or None, whether a later look may find one).

    A later look may: no braindump yet or one still being written, DAGMan not started (no dagman.out). It
    will not: a sub-workflow (its parent follows it), a finished run."""
    try:
        info = braindump.load(directory)
    except braindump.BraindumpError:
        return None, os.path.isdir(directory) and not finished_dir(directory)
    wf_uuid, root = info.get("wf_uuid"), info.get("root_wf_uuid")
    if root and wf_uuid and root != wf_uuid:
        return None, False  # a sub-workflow: followed through its parent
    dag = info.get("dag")
    if not dag or not wf_uuid:
        return None, True  # written part-way: its close (or the next look) tells
    dagman_out = os.path.join(directory, f"{dag}.dagman.out")
    if finished_dir(directory):
        return None, False
    if not os.path.exists(dagman_out):
        return None, True
    if complete_state(directory):  # followed to the end by a serve killed before it wrote monitord.done
        _mark_done(directory)
        return None, False
    base = dag[:-4] if dag.endswith(".dag") else dag
    return Found(os.path.realpath(directory), dagman_out, base, wf_uuid), False


def complete_state(directory: str) -> bool:
    """streamer followed this workflow to the end already (its state says complete)."""
    try:
        with open(os.path.join(directory, STATE_FILE), "rb") as handle:
            return bool(json.loads(handle.read()).get("complete"))
    except (OSError, ValueError, AttributeError):
        return False


def _mark_done(directory: str) -> None:
    from streamer.monitor import markers

    try:
        moment = os.path.getmtime(os.path.join(directory, STATE_FILE))
        markers.write_done(Path(directory), moment, moment)
    except OSError as exc:
        log.warning("%s: cannot write monitord.done: %s", directory, exc)


class MasterDBPoller:
    """New rows of `master_workflow` (by `wf_id`, so each poll costs the new rows only) → candidates."""

    def __init__(self, url: EndpointURL, on_candidate: Callable[[str], None], interval: float = 5.0) -> None:
        self.url = url
        self.on_candidate = on_candidate
        self.interval = interval
        self.last_id = 0

    async def run(self) -> None:
        warned = False
        while True:
            try:
                rows = await self._new_rows()
                warned = False
            except Exception as exc:  # the DB may not exist yet, or be down: try again later
                if not warned:
                    log.warning("master DB %s: %s (trying again every %.0f s)", self.url.masked,
                                mask(str(exc)), self.interval)
                    warned = True
                rows = []
            for wf_id, submit_dir in rows:
                self.last_id = max(self.last_id, int(wf_id))
                if submit_dir:
                    self.on_candidate(str(submit_dir))
            await asyncio.sleep(self.interval)

    async def _new_rows(self) -> list[tuple[int, str]]:
        query = "SELECT wf_id, submit_dir FROM master_workflow WHERE wf_id > {} ORDER BY wf_id"
        if self.url.scheme == "sqlite":
            from streamer.endpoints.db.sqlite import sqlite_path

            path = sqlite_path(self.url)
            return await asyncio.to_thread(_sqlite_rows, path, query.format("?"), self.last_id)
        import asyncpg

        conn = await asyncpg.connect(self.url.pg_dsn, timeout=10)
        try:
            return [(r[0], r[1]) for r in await conn.fetch(query.format("$1"), self.last_id)]
        finally:
            await conn.close()


def _sqlite_rows(path: str, query: str, last: int) -> list[tuple[int, str]]:
    import sqlite3

    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such database (yet)")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return [(r[0], r[1]) for r in conn.execute(query, (last,))]
    finally:
        conn.close()
