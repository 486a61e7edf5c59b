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

from streamer.util.limits import MAX_LINE, NotRegularFile
from streamer.util.tail import READ_SIZE, OnChange, Tail
from streamer.monitor.parsers import plaindag
from streamer.monitor.parsers.dagman import BadTime, LineParser
from streamer.monitor.engine.state import StateError
from streamer.monitor.engine.workflow import Workflow, WorkflowError
from streamer.monitor.engineopts import DEFAULT, EngineOptions

log = logging.getLogger(__name__)

STATIC_SLICE = 5000
"""static.bp events per step at most."""
EVENT_SLICE = 5000
"""Events of one dagman.out per step, about: a step stops after the line that reaches this many (the next
step goes on from the line after it), so a read that ends thousands of jobs at once (a workflow's last
lines) never holds all their events at once."""
SAME_WARNINGS = 20
"""Warnings of one kind (the same text but for its numbers) shown at most; the rest are counted and
their number said at the end, so one bad file cannot flood stderr."""
_NUMBERS = re.compile(r"\d+")


@dataclass
class Tracked:
    """One dagman.out being read and the engine it feeds (None until its braindump exists)."""

    dagman_out: str
    run_dir: str
    tail: Tail
    """Where its dagman.out is read up to: the offset counts only lines already fed to the engine (an overlong
    line being skipped is not persisted: a restart finds it again at the offset)."""
    parent: dict[str, Any] = field(default_factory=dict)  # root_id, parent_id, parent_jobid, parent_jobseq
    workflow: Workflow | None = None
    eof: bool = False
    broken: bool = False
    idle_polls: int = 0

    @property
    def offset(self) -> int:
        return self.tail.offset


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
        entry = Tracked(dagman_out, os.path.dirname(dagman_out), Tail(dagman_out, on_change=OnChange.STOP,
                                                                     say=self._warn, max_line=MAX_LINE), parent)
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
        tail = entry.tail
        try:
            found = tail.read(max_bytes, final=final)
        except FileNotFoundError:
            entry.eof = True
            entry.idle_polls += 1
            return
        except NotRegularFile as exc:  # a FIFO blocks for ever, /dev/zero never ends: neither is a log
            self._warn(f"{exc}: skipped, not followed", reason="special_file")
            entry.broken = entry.eof = True
            return
        except OSError as error:  # not `exc`: compiled code keeps one type per name (NotRegularFile above)
            self._warn(f"{entry.dagman_out}: cannot read: {error.strerror or error}; not followed",
                       reason="unreadable_file")
            entry.broken = entry.eof = True
            return
        if tail.stopped:  # shrank or replaced: said once by the tail
            entry.broken = entry.eof = True
            return
        if found.skipped:
            engine.feed("")  # counts the line: later messages keep their line numbers
            self._warn(f"{entry.dagman_out}:{engine.line_no}: line longer than {MAX_LINE} bytes "
                       f"({found.skipped} bytes): skipped", reason="line_too_long")
            entry.idle_polls = 0
            entry.eof = found.at_end
            return
        if tail.skip_to is not None:  # inside an overlong line whose end is not written yet
            entry.eof = True
            return
        if not found.data:
            entry.eof = found.seen_to_end
            entry.idle_polls += 1
            return
        entry.idle_polls = 0
        text = found.data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        for fed, line in enumerate(lines, 1):
            if len(engine.out) >= EVENT_SLICE and fed > 1:  # the rest of the read is the next step's
                tail.offset = found.start + _line_end(found.data, fed - 1)
                entry.eof = False
                events.extend(engine.take())
                return
            try:
                found_subwf = engine.feed(line)
            except BadTime as exc:
                self._warn(f"{entry.dagman_out}:{engine.line_no}: line ignored: {exc}", reason="bad_line")
                continue
            except Exception as error:  # noqa: BLE001 - one bad input must not end the monitoring (not `exc`:
                # compiled code keeps one type per name, BadTime above)
                log.debug("internal error on %s:%d", entry.dagman_out, engine.line_no, exc_info=True)
                self._warn(f"{entry.dagman_out}:{engine.line_no}: line not processed ({type(error).__name__}: {error})",
                           reason="bad_line")
                continue
            if found_subwf is not None:
                self._subworkflow(engine, *found_subwf)
            if self.engine.line_delay:
                time.sleep(self.engine.line_delay)
        entry.eof = found.at_end
        events.extend(engine.take())

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
            entry.tail.offset = int(item.get("offset", 0))
            entry.broken = bool(item.get("broken"))
            if item.get("engine") is not None:
                self._engine(entry, item["engine"])


def _line_end(data: bytes, lines: int) -> int:
    """The offset in `data` after its first `lines` lines (each ended by a newline)."""
    end = 0
    for _ in range(lines):
        end = data.index(b"\n", end) + 1
    return end
