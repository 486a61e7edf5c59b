"""DAGMan's own `jobstate.log` (the JOBSTATE_LOG command, seed 001) -> Stampede events.

A plain HTCondor DAG has no braindump, no static.bp and no kickstart records:
all there is, is DAGMan's machine-readable history. Its five kinds of lines:

    <ts> INTERNAL *** DAGMAN_STARTED <cluster.proc> ***
    <ts> INTERNAL *** DAGMAN_FINISHED <exit code> ***
    <ts> INTERNAL *** RECOVERY_STARTED | RECOVERY_FINISHED | RECOVERY_FAILURE ***
    <ts> <node> <EVENT> <condor id | exit code | -> <job tag | -> - <sequence>

become what monitord would say of them, and nothing more:

- `stampede.wf.plan` once, before anything else: the workflow id (braindump's
  `wf_uuid` when there is one, else a UUID derived from the DAG's absolute
  path, so the same DAG always gets the same id), the DAG's name and directory;
- `stampede.job.info` once per node (from the `.dag` file when it is found: its
  submit file, RETRY count, the submit file's executable and arguments), and
  `stampede.job.edge` for every PARENT/CHILD pair of that file;
- `stampede.xwf.start` / `xwf.end` (with DAGMan's exit code and restart count);
- `stampede.job_inst.*` for every node line: DAGMan's sequence number is the
  instance number (`job_inst.id`: unique in the DAG, kept across rescue runs),
  `js.id` counts the lines of that instance, the job tag is the site, and the
  condor id is the `sched.id`; a PRE script's end is preceded by the
  `pre.term` monitord makes of it (`PRE_SCRIPT_ENDS`).

What only Pegasus's files could add (stdout/stderr files, kickstart records,
hosts, job types) is absent, not invented. The converter is a plain state
machine whose state (`to_state`) is small and JSON-serialisable, so the
source can checkpoint it with the file offset.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from streamer.monitor.submitdir import stampede_db_path
from streamer.events import Event
from streamer.monitor.parsers import plaindag
from streamer.util.limits import open_regular

RE_INTERNAL = re.compile(r"^(\d+)\s+INTERNAL\s+\*\*\*\s+([A-Z_]+)(?:\s+(\S+))?\s+\*\*\*\s*$")
RE_NODE = re.compile(r"^(\d+)\s+(\S+)\s+([A-Z_]+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
RE_JOBSTATE_LOG = re.compile(r"^\s*JOBSTATE_LOG\s+(\S+)", re.IGNORECASE)

REMEMBERED = 32
"""Lines of one instance remembered to know a repeat (an instance has about ten; the state stays small
whatever a log holds)."""
UNKNOWN_FAILURE_CODE = 2
"""Exit status given to a DAGMan run that started again without having ended (monitord's PM-723)."""

# DAGMan event name -> Stampede job_inst events (suffix, status) it implies.
NODE_EVENTS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "PRE_SCRIPT_STARTED": (("pre.start", None),),
    "PRE_SCRIPT_TERMINATED": (("pre.term", None),),  # only in a jobstate.log monitord wrote
    "PRE_SCRIPT_SUCCESS": (("pre.end", 0),),
    "PRE_SCRIPT_FAILURE": (("pre.end", -1), ("main.end", -1)),
    "SUBMIT": (("submit.start", None), ("submit.end", 0)),
    "SUBMIT_FAILURE": (("submit.start", None), ("submit.end", -1)),
    "GRID_SUBMIT": (("grid.submit.start", None), ("grid.submit.end", 0)),
    "GLOBUS_SUBMIT": (("globus.submit.start", None), ("globus.submit.end", 0)),
    "EXECUTE": (("main.start", None),),
    "IMAGE_SIZE": (("image.info", None),),
    "REMOTE_ERROR": (("remote_error", None),),
    "JOB_TERMINATED": (("main.term", 0),),
    "JOB_EVICTED": (("main.term", -1),),
    "JOB_HELD": (("held.start", None),),
    "JOB_RELEASED": (("held.end", 0),),
    "JOB_ABORTED": (("abort.info", None),),
    "JOB_SUCCESS": (("main.end", 0),),
    "JOB_FAILURE": (("main.end", -1),),
    "POST_SCRIPT_STARTED": (("post.start", None),),
    "POST_SCRIPT_TERMINATED": (("post.term", None),),
    "POST_SCRIPT_SUCCESS": (("post.end", 0),),
    "POST_SCRIPT_FAILURE": (("post.end", -1),),
}
"""Node events with no Stampede counterpart (JOB_SUSPENDED, SHADOW_EXCEPTION, ...) give no
event but still count in `js.id`, so the numbering matches the log line for line."""
PRE_SCRIPT_ENDS = frozenset(("PRE_SCRIPT_SUCCESS", "PRE_SCRIPT_FAILURE", "PRE_SCRIPT_FAILED"))
"""DAGMan writes no PRE_SCRIPT_TERMINATED line; monitord, reading dagman.out, puts one before the PRE
script's end (its own jobstate.log has it). Its `pre.term` is made here too, with a `js.id` of its own
(the lines after it count on from there, as monitord's do), unless the log has the line itself."""
# monitord writes some states under other names in the jobstate.log it keeps
NODE_EVENTS["SUBMIT_FAILED"] = NODE_EVENTS["SUBMIT_FAILURE"]
NODE_EVENTS["PRE_SCRIPT_FAILED"] = NODE_EVENTS["PRE_SCRIPT_FAILURE"]
NODE_EVENTS["POST_SCRIPT_FAILED"] = NODE_EVENTS["POST_SCRIPT_FAILURE"]


class DagmanLogError(ValueError):
    """A line that is not one of DAGMan's jobstate.log forms."""


class RepeatedLine(Exception):
    """An exact repeat of a line already read: it gives no events (see `DagmanJobstate.feed`)."""


def is_dagman_jobstate_line(line: str) -> bool:
    """True for a line of DAGMan's (or monitord's) jobstate.log."""
    return bool(RE_INTERNAL.match(line) or RE_NODE.match(line))


def sniff(path: str | Path) -> bool:
    """Does the file start with jobstate.log lines (first non-blank line)?"""
    try:
        with open_regular(path) as handle:
            head = handle.read(4096)
    except OSError:
        return False
    for raw in head.split(b"\n"):
        text = raw.decode("utf-8", "replace").strip()
        if text:
            return is_dagman_jobstate_line(text) and not text.startswith(("ts=", "{"))
    return Path(path).name.endswith("jobstate.log")


# ---------------------------------------------------------------- the DAG file

def find_dag(jobstate_log: Path) -> Path | None:
    """The `.dag` file next to `jobstate_log` whose JOBSTATE_LOG command names it."""
    directory = jobstate_log.parent
    target = jobstate_log.resolve()
    for dag in sorted(directory.glob("*.dag")):
        try:
            with open(dag, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    match = RE_JOBSTATE_LOG.match(line)
                    if match and (directory / match[1]).resolve() == target:
                        return dag
        except OSError:
            continue
    return None


def workflow_uuid(dag_or_log: Path) -> str:
    """A stable id for a DAG without braindump (the same as its dagman.out gets)."""
    return plaindag.dag_uuid(dag_or_log)


# ---------------------------------------------------------------- the converter

class DagmanJobstate:
    """Lines of one DAGMan jobstate.log in order -> Stampede events."""

    def __init__(self, log_path: str | Path, *, wf_uuid: str | None = None, dag: Path | None = None,
                 dag_name: str | None = None) -> None:
        self.log_path = Path(log_path)
        self.from_braindump = wf_uuid is not None
        """The workflow id is a Pegasus braindump's (the directory is a Pegasus submit dir)."""
        self.dag = plaindag.read_dag(dag) if dag is not None else None
        self.xwf_id = wf_uuid or workflow_uuid(dag if dag is not None else self.log_path)
        self.dag_name = dag_name or (dag.name if dag is not None else self.log_path.name)
        self.submit_dir = str(self.log_path.resolve().parent)
        # state (to_state / restore)
        self.planned = False
        self.starts = 0           # DAGMAN_STARTED lines seen
        self.running = False      # a start without its end yet
        self.recovery: str | None = None  # None, "started", "finished", "failure"
        self.known: set[str] = set()      # nodes whose job.info went out
        self.nodes: dict[str, list[Any]] = {}
        """node -> [seq, js, sched_id, site, execute_ts, terminated_ts, lines read of this instance,
        PRE script terminated (`PRE_SCRIPT_ENDS`)]."""
        self.ended: dict[str, list[Any]] = {}
        """node -> [seq, lines read] of its last instance that ended (a repeat of one of them is known)."""
        self.last_internal: list[Any] | None = None
        self.unmapped = 0

    # -- state ---------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {"xwf_id": self.xwf_id, "planned": self.planned, "starts": self.starts, "running": self.running,
                "recovery": self.recovery, "known": sorted(self.known), "nodes": self.nodes,
                "ended": self.ended, "last_internal": self.last_internal, "unmapped": self.unmapped}

    def restore(self, state: dict[str, Any]) -> None:
        self.xwf_id = state.get("xwf_id", self.xwf_id)
        self.planned = bool(state.get("planned"))
        self.starts = int(state.get("starts", 0))
        self.running = bool(state.get("running"))
        self.recovery = state.get("recovery")
        self.known = set(state.get("known", ()))
        self.nodes = {k: list(v) + [[], False][max(0, len(v) - 6):] for k, v in state.get("nodes", {}).items()}
        self.ended = {k: list(v) for k, v in state.get("ended", {}).items()}
        self.last_internal = state.get("last_internal")
        self.unmapped = int(state.get("unmapped", 0))

    # -- lines ---------------------------------------------------------------
    def feed(self, line: str) -> list[Event]:
        """One line -> its events (blank lines give none). Raises DagmanLogError for other text, and
        RepeatedLine for an exact repeat of a line already read.

        A repeat is a node line with the same time, node, state, condor id (or exit code), job tag and
        sequence number as one of the last REMEMBERED lines of the same instance (the instance in progress,
        or the last one of that node that ended), or an INTERNAL line identical to the INTERNAL line before it. DAGMan
        writes each of its events once (in recovery it skips those already in the log), so a repeat says
        the file was copied onto itself or concatenated: its events are already out.
        """
        text = line.strip()
        if not text:
            return []
        out: list[Event] = []
        match = RE_INTERNAL.match(text)
        if match:
            ts = int(match[1])
            said = [ts, match[2], match[3]]
            if said == self.last_internal:
                raise RepeatedLine(text)
            self.last_internal = said
            self._plan(ts, out)
            self._internal(ts, match[2], match[3], out)
            return out
        match = RE_NODE.match(text)
        if not match:
            raise DagmanLogError("not a DAGMan jobstate.log line "
                                 "(<ts> <node> <EVENT> <condor id> <tag> - <seq>, or <ts> INTERNAL *** ... ***)")
        ts_text, node, event, condor, tag, _unused, seq_text = match.groups()
        try:
            seq = int(seq_text)
        except ValueError:
            raise DagmanLogError(f"sequence number {seq_text!r} is not an integer") from None
        ts = int(ts_text)
        self._plan(ts, out)
        self._node(ts, node, event, condor, tag, seq, out)
        return out

    def _emit(self, out: list[Event], name: str, fields: dict[str, Any]) -> None:
        fields["xwf.id"] = self.xwf_id
        out.append(Event.build("stampede." + name, {k: v for k, v in fields.items() if v is not None}, owned=True))

    def _plan(self, ts: int, out: list[Event]) -> None:
        if self.planned:
            return
        self.planned = True
        self._emit(out, "wf.plan", {"ts": ts, "root.xwf.id": self.xwf_id, "dag.file.name": self.dag_name,
                                    "submit.dir": self.submit_dir})
        if self.dag is not None:
            for node in self.dag.jobs:
                self._job_info(ts, node, out)
            for parent, child in self.dag.edges:
                self._emit(out, "job.edge", {"ts": ts, "parent.job.id": parent, "child.job.id": child})

    def _job_info(self, ts: int, node: str, out: list[Event]) -> None:
        if node in self.known:
            return
        self.known.add(node)
        info = self.dag.jobs.get(node, {}) if self.dag is not None else {}
        for name, fields in plaindag.static_events(plaindag.DagInfo("", {node: info}, []), ts):
            self._emit(out, name, fields)

    def _internal(self, ts: int, what: str, arg: str | None, out: list[Event]) -> None:
        if what == "DAGMAN_STARTED":
            if self.running:  # started again without an end: close the previous run first
                self._emit(out, "xwf.end", {"ts": ts - 1, "restart_count": self.starts - 1,
                                            "status": UNKNOWN_FAILURE_CODE, "level": "Error",
                                            "reason": "DAGMan started again without DAGMAN_FINISHED"})
            self._emit(out, "xwf.start", {"ts": ts, "restart_count": self.starts})
            self.starts += 1
            self.running = True
            self.recovery = None
        elif what == "DAGMAN_FINISHED":
            try:
                status = int(arg) if arg is not None else UNKNOWN_FAILURE_CODE
            except ValueError:
                raise DagmanLogError(f"DAGMAN_FINISHED exit code {arg!r} is not an integer") from None
            reason = "DAGMan recovery failed" if self.recovery == "failure" else None
            fields: dict[str, Any] = {"ts": ts, "restart_count": max(self.starts - 1, 0), "status": status,
                                      "reason": reason}
            if status != 0:
                fields["level"] = "Error"
            self._emit(out, "xwf.end", fields)
            self.running = False
        elif what == "RECOVERY_STARTED":
            self.recovery = "started"
        elif what == "RECOVERY_FINISHED":
            self.recovery = "finished"
        elif what == "RECOVERY_FAILURE":
            self.recovery = "failure"
        elif what in ("MONITORD_STARTED", "MONITORD_FINISHED"):
            pass  # monitord's own markers (a jobstate.log monitord wrote): not DAGMan's
        else:
            raise DagmanLogError(f"unknown INTERNAL line {what!r}")

    def _node(self, ts: int, node: str, event: str, condor: str, tag: str, seq: int, out: list[Event]) -> None:
        said = [ts, event, condor, tag]
        inst = self.nodes.get(node)
        if inst is None or inst[0] != seq:
            ended = self.ended.get(node)
            if ended is not None and ended[0] == seq and said in ended[1]:
                raise RepeatedLine(f"{node} {event} {seq}")
            inst = [seq, 0, None, None, None, None, [], False]
            self.nodes[node] = inst
        elif said in inst[6]:
            raise RepeatedLine(f"{node} {event} {seq}")
        inst[6].append(said)
        del inst[6][:-REMEMBERED]
        self._job_info(ts, node, out)
        if event in PRE_SCRIPT_ENDS and not inst[7]:
            inst[1] += 1
            self._emit(out, "job_inst.pre.term", {"ts": ts, "job.id": node, "job_inst.id": seq, "js.id": inst[1],
                                                  "sched.id": inst[2]})
        elif event == "PRE_SCRIPT_TERMINATED":
            inst[7] = True
        inst[1] += 1
        if re.fullmatch(r"-?\d+\.\d+", condor):
            inst[2] = condor
        if tag != "-":
            inst[3] = tag
        if event == "EXECUTE":
            inst[4] = ts
        elif event == "JOB_TERMINATED":
            inst[5] = ts
        implied = NODE_EVENTS.get(event)
        if implied is None:
            self.unmapped += 1
            return
        for suffix, status in implied:
            fields: dict[str, Any] = {"ts": ts, "job.id": node, "job_inst.id": seq, "js.id": inst[1],
                                      "sched.id": inst[2]}
            if status is not None:
                fields["status"] = status
                if status != 0:
                    fields["level"] = "Error"
            if suffix in ("submit.start", "grid.submit.start", "globus.submit.start"):
                fields["site"] = inst[3]
            elif suffix == "main.end":
                fields["site"] = inst[3] if inst[3] is not None else ""
                if event in ("JOB_SUCCESS", "JOB_FAILURE") and re.fullmatch(r"-?\d+", condor):
                    fields["exitcode"] = int(condor)
                if inst[4] is not None and inst[5] is not None:
                    fields["local.dur"] = inst[5] - inst[4]
            elif suffix == "pre.end" and status == 0:
                fields["exitcode"] = 0
            elif suffix == "post.end" and status == 0:
                fields["exitcode"] = 0
            self._emit(out, "job_inst." + suffix, fields)
        if event in ("POST_SCRIPT_SUCCESS", "POST_SCRIPT_FAILURE", "POST_SCRIPT_FAILED"):
            del self.nodes[node]  # the last line of an instance: memory follows live nodes
            self.ended[node] = [seq, inst[6]]


def converter_for(log_path: Path) -> DagmanJobstate:
    """A converter with the workflow's identity: braindump when there is one, else the DAG's path."""
    wf_uuid = dag_name = None
    if plaindag.has_braindump(log_path.parent):
        try:
            from streamer.monitor.parsers import braindump

            params = braindump.load(log_path.parent)
            wf_uuid, dag_name = params.get("wf_uuid"), params.get("dag")
        except (braindump.BraindumpError, OSError, ValueError):  # unreadable: the DAG's path names it
            pass
    dag = find_dag(log_path)
    return DagmanJobstate(log_path, wf_uuid=wf_uuid, dag=dag, dag_name=dag_name)


def default_db_path(log_path: Path, dag: Path | None) -> str:
    """monitord's default database name for a DAG: `<dag basename>.stampede.db` next to it."""
    base = dag.name if dag is not None else log_path.name
    base = os.path.splitext(base)[0] if base.endswith(".dag") else base
    return stampede_db_path(log_path.resolve().parent, base)
