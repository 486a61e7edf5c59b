"""All the workflows of one run (root + sub-workflows), read line by line.

The tracker owns the dagman.out readers (byte offsets of complete lines), the
`Workflow` engines and the sub-workflow discovery. It is synchronous and does
blocking file I/O: `WorkflowSource` calls `step()` in a worker thread, so the
event loop never waits on parsing. Its state (`to_state()`) is JSON and
resumes exactly: offsets count only lines already fed to an engine.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from streamer.util.limits import MAX_LINE, NotRegularFile, open_regular
from streamer.monitor.parsers import plaindag
from streamer.monitor.parsers.dagman import BadTime, LineParser
from streamer.monitor.engine.state import StateError
from streamer.monitor.engine.workflow import Workflow, WorkflowError
from streamer.monitor.engineopts import DEFAULT, EngineOptions

log = logging.getLogger(__name__)

READ_SIZE = 1 << 18
SKIP_READ = 1 << 20
STATIC_SLICE = 5000
EVENT_SLICE = 20_000
"""A step stops after the dagman.out line that brings its events to this many: one read can end thousands
of jobs (a registration job emits an rc.pfn per file), and a step's events are in memory all at once."""
"""static.bp events per step at most."""
SAME_WARNINGS = 20
"""Warnings of one kind (the same text but for its numbers) shown at most; the rest are counted and
their number said at the end, so one bad file cannot flood stderr."""
_NUMBERS = re.compile(r"\d+")


@dataclass
class Tracked:
    """One dagman.out being read and the engine it feeds (None until its braindump exists)."""

    dagman_out: str
    run_dir: str
    parent: dict[str, Any] = field(default_factory=dict)  # root_id, parent_id, parent_jobid, parent_jobseq
    offset: int = 0
    workflow: Workflow | None = None
    eof: bool = False
    broken: bool = False
    idle_polls: int = 0
    skip_to: int | None = None
    """Inside a line longer than MAX_LINE: read on from here to its end (not persisted:
    a restart finds the line again at `offset`)."""


class Tracker:
    """Feeds every tracked dagman.out to its engine; discovers sub-workflows on SUBMIT."""

    subwf_idle_polls = 20

    def __init__(self, dagman_out: str, *, recursive: bool = True, tz: str | None = None,
                 write_jobstate: bool = True, state: dict[str, Any] | None = None,
                 engine: EngineOptions = DEFAULT) -> None:
        self.parser = LineParser(tz, adjust=engine.adjust)
        self.engine = engine
        self.recursive = recursive
        self.write_jobstate = write_jobstate
        self.warnings: list[str] = []
        self.quiet = False
        """Warnings are collected, not logged (a resumed run reading its workflow's past again)."""
        self.limits: dict[str, int] | None = None
        """dagman.out -> the offset not to read beyond (a file not named is not read); None: no limit."""
        self.dropped: dict[str, int] = {}
        """Inputs that gave fewer events than they should, by reason, since the last step taken."""
        self._kinds: dict[str, int] = {}
        self.tracked: list[Tracked] = []
        self.by_path: dict[str, Tracked] = {}
        if state:
            self._restore(state)
        else:
            self._track(os.path.abspath(dagman_out), {})

    # ------------------------------------------------------------ tracking
    def _track(self, dagman_out: str, parent: dict[str, Any]) -> Tracked:
        entry = Tracked(dagman_out, os.path.dirname(dagman_out), parent)
        self.tracked.append(entry)
        self.by_path[dagman_out] = entry
        return entry

    def _warn(self, text: str, reason: str | None = None) -> None:
        """Say `text` (at most SAME_WARNINGS times per kind); `reason`: an input was left out, counted."""
        if reason is not None:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
        kind = _NUMBERS.sub("#", text[:200])
        seen = self._kinds[kind] = self._kinds.get(kind, 0) + 1
        if seen > SAME_WARNINGS:
            return
        if seen == SAME_WARNINGS:
            text += " (more like this are counted, not shown)"
        if not self.quiet:
            log.warning("%s", text)
        self.warnings.append(text)

    def _said_suppressed(self) -> None:
        """How many warnings of each kind were not shown (once, at the end)."""
        for kind, seen in self._kinds.items():
            if seen > SAME_WARNINGS:
                text = f"{seen - SAME_WARNINGS:,} more warnings like: {kind}"
                log.warning("%s", text)
                self.warnings.append(text)
        self._kinds = {}

    def _engine(self, entry: Tracked, state: dict[str, Any] | None = None) -> Workflow | None:
        """Create the entry's engine once its braindump is there (a sub-workflow may not be planned yet)."""
        if entry.workflow is not None or entry.broken:
            return entry.workflow
        if not plaindag.has_braindump(entry.run_dir) and (
                entry.parent or not plaindag.dag_of(entry.dagman_out).is_file()):
            return None  # a sub-workflow not planned yet (a root without braindump is a plain DAG)
        try:
            entry.workflow = Workflow(
                entry.run_dir, entry.dagman_out, parser=self.parser,
                root_id=entry.parent.get("root_id"), parent_id=entry.parent.get("parent_id"),
                parent_jobid=entry.parent.get("parent_jobid"), parent_jobseq=entry.parent.get("parent_jobseq"),
                write_jobstate=self.write_jobstate, first_run=state is None,
                jobstate_length=state.get("jobstate_length") if state else None,
                started_at=state.get("started_at") if state else None, on_warning=self._warn,
                options=self.engine)
        except (WorkflowError, OSError, ValueError) as exc:
            self._warn(f"{entry.run_dir}: cannot monitor this workflow: {exc}")
            entry.broken = True
            return None
        if state is not None:
            entry.workflow.restore(state)
        return entry.workflow

    # ------------------------------------------------------------ reading
    def step(self, *, final: bool = False, max_bytes: int = READ_SIZE) -> list[Any]:
        """Read what is new in every tracked dagman.out; raw events (`engine.events.RawEvent`) in order
        per workflow.

        `final` (replay) feeds a last line without newline too, at end of file.
        """
        events: list[Any] = []
        index = 0
        while index < len(self.tracked):  # sub-workflows found on the way are read in this pass too
            entry = self.tracked[index]
            index += 1
            if entry.broken:  # said once why it cannot go on (unreadable, a FIFO, cut short): never read again
                continue
            engine = self._engine(entry)
            if engine is None:
                entry.idle_polls += 1
                if final and not entry.broken:
                    self._warn(f"{entry.run_dir}: no braindump; sub-workflow not monitored")
                    entry.broken = True
                continue
            if engine.static_pending:  # its dagman.out waits until the static events are out
                engine.drain_static(STATIC_SLICE)
                events.extend(engine.take())
                continue
            events.extend(engine.take())
            self._read(entry, engine, final, max_bytes, events)
        return events

    def static_pending(self) -> bool:
        return any(e.workflow is not None and e.workflow.static_pending for e in self.tracked)

    def _read(self, entry: Tracked, engine: Workflow, final: bool, max_bytes: int,
              events: list[Any]) -> None:
        if self.limits is not None:
            max_bytes = min(max_bytes, self.limits.get(entry.dagman_out, 0) - entry.offset)
            if max_bytes <= 0:
                entry.eof = True
                return
        try:
            with open_regular(entry.dagman_out) as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < entry.offset:
                    self._warn(f"{entry.dagman_out}: file shrank below offset {entry.offset} (truncated or replaced); "
                               "stopped following it")
                    entry.broken = entry.eof = True
                    return
                if entry.skip_to is not None:
                    self._skip_long_line(entry, engine, handle, size, final)
                    return
                handle.seek(entry.offset)
                # what the file holds past the offset (a read of n bytes allocates n first)
                data = handle.read(min(max_bytes, max(size - entry.offset, 1)))
                if b"\n" not in data and len(data) == max_bytes:
                    long_line = self._long_line(entry, handle, data)
                    if long_line is None:
                        return
                    data = long_line
        except FileNotFoundError:
            entry.eof = True
            entry.idle_polls += 1
            return
        except NotRegularFile as exc:  # a FIFO blocks for ever, /dev/zero never ends: neither is a log
            self._warn(f"{exc}: skipped, not followed", reason="special_file")
            entry.broken = entry.eof = True
            return
        except OSError as exc:
            self._warn(f"{entry.dagman_out}: cannot read: {exc.strerror or exc}; not followed",
                       reason="unreadable_file")
            entry.broken = entry.eof = True
            return
        cut = data.rfind(b"\n") + 1
        at_end = entry.offset + len(data) >= size
        if final and at_end and cut < len(data):
            cut = len(data)
        if cut == 0:
            entry.eof = at_end
            entry.idle_polls += 1
            return
        entry.idle_polls = 0
        lines = data[:cut].split(b"\n")
        if data[:cut].endswith(b"\n"):
            lines.pop()
        consumed = 0
        for raw in lines:
            consumed += len(raw) + 1
            if len(engine.out) >= EVENT_SLICE:  # the rest in the next step
                consumed -= len(raw) + 1
                break
            line = raw.decode("utf-8", errors="replace")  # no UTF-8 sequence holds a \n: as decoding all at once
            try:
                found = engine.feed(line)
            except BadTime as exc:
                self._warn(f"{entry.dagman_out}:{engine.line_no}: line ignored: {exc}", reason="bad_line")
                continue
            except Exception as exc:  # noqa: BLE001 - one bad input must not end the monitoring
                log.debug("internal error on %s:%d", entry.dagman_out, engine.line_no, exc_info=True)
                self._warn(f"{entry.dagman_out}:{engine.line_no}: line not processed ({type(exc).__name__}: {exc})",
                           reason="bad_line")
                continue
            if found is not None:
                self._subworkflow(engine, *found)
            if self.engine.line_delay:
                time.sleep(self.engine.line_delay)
        entry.offset += min(consumed, cut)
        entry.eof = entry.offset >= size
        events.extend(engine.take())

    @staticmethod
    def _long_line(entry: Tracked, handle: Any, data: bytes) -> bytes | None:
        """The first line at `entry.offset` when it is longer than one read but at most MAX_LINE bytes.

        None when it is longer than that: the entry then skips it (`skip_to`)
        without holding it in memory.
        """
        parts = [data]
        length = len(data)
        while length <= MAX_LINE:
            more = handle.read(READ_SIZE)
            if not more:
                break
            parts.append(more)
            length += len(more)
            if b"\n" in more:
                break
        data = b"".join(parts)
        newline = data.find(b"\n")
        if (newline == -1 and length > MAX_LINE) or newline > MAX_LINE:
            entry.skip_to = entry.offset + length
            return None
        return data

    def _skip_long_line(self, entry: Tracked, engine: Workflow, handle: Any, size: int, final: bool) -> None:
        """Read on past an overlong line until its newline (or, in replay, the end of the file)."""
        assert entry.skip_to is not None, "only an entry skipping an overlong line comes here"
        handle.seek(entry.skip_to)
        while True:
            data = handle.read(SKIP_READ)
            newline = data.find(b"\n")
            if newline != -1:
                end = entry.skip_to + newline + 1
                break
            entry.skip_to += len(data)
            if not data or entry.skip_to >= size:
                if not final:
                    entry.eof = True  # the rest of the line is not written yet
                    return
                end = entry.skip_to
                break
        engine.feed("")  # counts the line: later messages keep their line numbers
        self._warn(f"{entry.dagman_out}:{engine.line_no}: line longer than {MAX_LINE} bytes "
                   f"({end - entry.offset} bytes): skipped", reason="line_too_long")
        entry.offset, entry.skip_to, entry.idle_polls = end, None, 0
        entry.eof = entry.offset >= size

    def _subworkflow(self, parent: Workflow, dagman_out: str, jobid: str, jobseq: int) -> None:
        if not self.recursive:
            return
        dagman_out = os.path.abspath(dagman_out)
        known = self.by_path.get(dagman_out)
        if known is not None:
            if known.workflow is not None:
                parent.send_subwf_link(known.workflow.wf_uuid, parent.wf_uuid, jobid, jobseq, known.workflow.wf_ts)
            return
        self._track(dagman_out, {"root_id": parent.root_id, "parent_id": parent.wf_uuid,
                                 "parent_jobid": jobid, "parent_jobseq": jobseq})

    # ------------------------------------------------------------ status
    def all_at_eof(self) -> bool:
        return not self.static_pending() and all(entry.eof or entry.broken for entry in self.tracked)

    def dagman_finished(self) -> bool:
        """The root's DAGMan has exited and every sub-workflow has ended or gone quiet.

        A sub-workflow whose dagman.out never appears or stops without an end
        (its planning failed, its DAGMan was killed) no longer holds the run once
        it has been idle for `subwf_idle_polls` polls (monitord gives up too).
        """
        for index, entry in enumerate(self.tracked):
            if entry.broken:
                continue
            engine = entry.workflow
            ended = engine is not None and engine.last_wf_state == "end" and entry.eof
            if ended:
                continue
            if index == 0 or entry.idle_polls < self.subwf_idle_polls:
                return False
        return True

    def progress(self) -> tuple[int, int]:
        done = total = 0
        for entry in self.tracked:
            if entry.workflow is not None:
                done += entry.workflow.jobs_done
                total += entry.workflow.total_jobs
        return done, total

    def finish(self, rc: int = 0) -> list[Any]:
        """MONITORD_FINISHED in every workflow's jobstate.log; the last buffered events."""
        events: list[Any] = []
        now = int(time.time())
        self._said_suppressed()
        for entry in self.tracked:
            if entry.workflow is not None:
                entry.workflow.finish(rc, now)
                entry.workflow.flush(sync=True)
                events.extend(entry.workflow.take())
        return events

    def close(self) -> None:
        for entry in self.tracked:
            if entry.workflow is not None:
                entry.workflow.close()

    # ------------------------------------------------------------ checkpoints
    def to_state(self) -> dict[str, Any]:
        return {"version": 1, "workflows": [
            {"dagman_out": e.dagman_out, "parent": e.parent, "offset": e.offset, "broken": e.broken,
             "engine": e.workflow.to_state() if e.workflow is not None else None,
             "jobstate": str(e.workflow.jobstate.path) if e.workflow and e.workflow.jobstate else None}
            for e in self.tracked]}

    def _restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != 1:
            raise StateError(f"unknown monitor state version {state.get('version')!r}")
        for item in state["workflows"]:
            entry = self._track(item["dagman_out"], item.get("parent") or {})
            entry.offset = int(item.get("offset", 0))
            entry.broken = bool(item.get("broken"))
            if item.get("engine") is not None:
                self._engine(entry, item["engine"])
