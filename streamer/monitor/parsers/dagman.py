"""DAGMan's `*.dagman.out` lines -> the facts the monitor acts on: the one DAGMan grammar.

Every reader of a dagman.out reads it here: the monitor's engine (`classify`), `streamer status`
(`progress`: the node table, as pegasus-status reads it) and monitord's watch on DAGMan's pid (`Pid`,
`Finished`). What a line says is a small typed value per kind (`Event`, `JobSuccess`, ...; `Kind`),
for readers to dispatch with `match`.

Each line is classified once: a cheap substring test picks the only pattern
that can match, and that pattern runs once (monitord searches each of its
sixteen patterns twice per line). The order of the checks is monitord's
elif chain, so a line that could match two patterns means what it means to
monitord. Timestamps carry no zone: they are read in the zone given (default
the local one), with the last timestamp on the line winning (ULOG event time).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias
from datetime import datetime, timedelta, timezone, tzinfo

from streamer.monitor.zones import parse_zone

RE_TS = re.compile(r"(\d{1,2})/(\d{1,2})(?:/(\d{1,2}))?\s+(\d{1,2}):(\d{2}):(\d{2})")
RE_ISO = re.compile(
    r"^\s*(\d{4}).?(\d{2}).?(\d{2}).(\d{2}).?(\d{2}).?(\d{2})([.,]\d+)?([Zz]|[-+](\d{2}).?(\d{2}))"
)
RE_EVENT = re.compile(
    r"Event:\s+ULOG_(\S+) for (?:HT|)Condor (?:Job|Node) (\S+)\s+\((-?[0-9]+\.[0-9]+)(\.[0-9]+)?\).*"
)
RE_SUBMIT = re.compile(r"Submitting (?:HT|)Condor Node (.+) job")
RE_SCRIPT_RUNNING = re.compile(r"\d{2}\s(?:\(D_\w*\)\s)?Running (PRE|POST) script of (?:Job|Node) (.+)\.{3}")
RE_SCRIPT_DONE = re.compile(r"\d{2}\s(?:\(D_\w*\)\s)?(PRE|POST) Script of (?:Job|[nN]ode) (\S+)")
RE_SCRIPT_OK = re.compile(r"completed successfully\.$")
RE_SCRIPT_FAILED = re.compile(r"failed with status\s+(-?\d+)\.?$")
RE_JOB_FAILED = re.compile(
    r"\d{2}\s(?:\(D_\w*\)\s)?Node (\S+) job proc \(([0-9\.]+)\) failed with (status|signal)\s+(-?\d+)\.$"
)
RE_JOB_OK = re.compile(r"\d{2}\s(?:\(D_\w*\)\s)?Node (\S+) job proc \(([0-9\.]+)\) completed successfully\.$")
RE_FINISHED = re.compile(r"\(condor_DAGMAN\)[\w\s]+EXITING WITH STATUS (\d+)$")
RE_CONDOR_ID = re.compile(r"\*\* condor_scheduniv_exec\.([0-9\.]+) \(CONDOR_DAGMAN\) STARTING UP")
RE_PID = re.compile(r"\*\* PID = (\d+)$")
RE_DAG_NAME = re.compile(r"Parsing (.+) ...$")
RE_VERSION = re.compile(r"\*\* \$CondorVersion: ((\d+)\.(\d+)\.(\d+))")
RE_HOLD = re.compile(r"Hold reason:(.*)")
RECOVERY_END_TEXT = "...done with RECOVERY mode"
"""The end of DAGMan's recovery (`RecoveryEnd`): what a reader skipping the recovered lines looks for."""


RE_LEAD = re.compile(r"\d{1,2}/\d{1,2}(?:/\d{1,2})?\s+\d{1,2}:\d{2}:\d{2}\s+(?:\(D_\w*\)\s+)?")
"""DAGMan's own stamp at the start of a line (and the debug category HTCondor may write after it)."""
RE_DAG_STATUS = re.compile(r"DAG status: (-?\d+)")
RE_NODES_TOTAL = re.compile(r"Of (\d+) nodes total:")
RE_NODE_COUNTS = re.compile(r"(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)")


# ---------------------------------------------------------------- what a line says: one small type per kind

class Event(NamedTuple):
    """`Event: ULOG_<state> for HTCondor Node <job> (<sched_id>)`: an HTCondor event of a node's job."""

    state: str
    job: str
    sched_id: str


class DagmanSubmit(NamedTuple):
    """`Submitting HTCondor Node <job> job(s)...`."""

    job: str


class SubmitFailed(NamedTuple):
    """`ERROR: submit attempt failed` (of the node submitted last)."""


class ScriptStarted(NamedTuple):
    """`Running PRE|POST script of Node <job>...`."""

    which: str
    job: str


class ScriptDone(NamedTuple):
    """`PRE|POST Script of Node <job> completed successfully.` (status 0) or `failed with status N`; status None
    when the line says neither."""

    which: str
    job: str
    status: int | None


class JobFailure(NamedTuple):
    """`Node <job> job proc (<sched_id>) failed with status|signal N.`."""

    job: str
    sched_id: str
    status: int


class JobSuccess(NamedTuple):
    """`Node <job> job proc (<sched_id>) completed successfully.`."""

    job: str
    sched_id: str


class Finished(NamedTuple):
    """`**** condor_scheduniv_exec.1.0 (condor_DAGMAN) pid N EXITING WITH STATUS <rc>`: DAGMan's last line."""

    rc: int


class CondorId(NamedTuple):
    """`** condor_scheduniv_exec.<condor_id> (CONDOR_DAGMAN) STARTING UP`."""

    condor_id: str


class Pid(NamedTuple):
    """`** PID = <pid>`: DAGMan's process."""

    pid: int


class DagStart(NamedTuple):
    """`Parsing <dag> ...`: DAGMan (re)starts on its .dag file."""

    dag: str


class Version(NamedTuple):
    """`** $CondorVersion: <major>.<minor>.<patch> ...`."""

    major: int
    minor: int
    patch: int


class RecoveryStart(NamedTuple):
    """`Running in RECOVERY mode...`."""


class RecoveryEnd(NamedTuple):
    """`...done with RECOVERY mode`."""


class Aborted(NamedTuple):
    """`Received SIGUSR1`: DAGMan was told to abort."""


class HeldReason(NamedTuple):
    """`Hold reason: <reason>` (of the job known last)."""

    reason: str


class Other(NamedTuple):
    """A timestamped line that says nothing the monitor acts on."""


class DagStatus(NamedTuple):
    """`DAG status: <status> (DAG_STATUS_OK)`, before each node table (0: no failure so far)."""

    status: int


class NodesTotal(NamedTuple):
    """`Of <total> nodes total:`, the node table's title."""

    total: int


class NodeCounts(NamedTuple):
    """The node table's row of counts (the eighth, futile, is not read)."""

    done: int
    pre: int
    queued: int
    post: int
    ready: int
    unready: int
    failed: int


Kind: TypeAlias = (Event | DagmanSubmit | SubmitFailed | ScriptStarted | ScriptDone | JobFailure | JobSuccess
                   | Finished | CondorId | Pid | DagStart | Version | RecoveryStart | RecoveryEnd | Aborted
                   | HeldReason | Other)
"""What `classify` says of a timestamped line: monitord's meaning of it."""
Progress: TypeAlias = DagStatus | NodesTotal | NodeCounts | Finished
"""What `progress` says of a line: the node table pegasus-status reads, and DAGMan's exit."""

SUBMIT_FAILED, RECOVERY_START, RECOVERY_END, ABORTED, OTHER = (
    SubmitFailed(), RecoveryStart(), RecoveryEnd(), Aborted(), Other())


@dataclass(slots=True)
class Line:
    """One understood dagman.out line: its time and what it says."""

    ts: float
    kind: Kind

def zone(name: str | None) -> tzinfo | None:
    """The zone to read DAGMan times in: a tz name, `UTC`, an offset (`-08:00`), or None for the local zone."""
    if name is None or name == "":
        return None
    return parse_zone(name)


class LineParser:
    """Classifies dagman.out lines; remembers the zone and caches timestamp conversions."""

    def __init__(self, tz: str | tzinfo | None = None, adjust: float = 0) -> None:
        self.tz = zone(tz) if isinstance(tz, str) or tz is None else tz
        self.adjust = adjust
        self._cache: dict[tuple, float] = {}
        self._year = time.localtime().tm_year

    def timestamp(self, line: str) -> float | None:
        """Epoch seconds of the line's last DAGMan timestamp (or ISO stamp), None without one.

        Raises BadTime for a stamp that is no time (`99:99:99`, `02/30/23`).
        """
        try:
            return self._timestamp(line)
        except (ValueError, OverflowError) as exc:
            raise BadTime(f"not a valid time ({exc})") from None

    def _timestamp(self, line: str) -> float | None:
        first = RE_TS.match(line)
        key: tuple | None = None
        if first is not None and line.find("/", first.end()) < 0:
            # DAGMan's own stamp at the start and no `/` after it: no later stamp can follow (each has a
            # `/`), so this is findall's only (and last) one, with its groups as findall gives them
            key = first.groups("")
        else:
            found = RE_TS.findall(line)
            if found:
                key = found[-1]  # the last one: an event's own time, after DAGMan's log time
        if key is not None:
            value = self._cache.get(key)
            if value is None:
                if len(self._cache) > 4096:
                    self._cache.clear()
                value = self._cache[key] = self._epoch(key)
            return value + self.adjust
        iso = RE_ISO.search(line)
        if iso is None:
            return None
        year, month, day, hour, minute, second = (int(iso.group(i)) for i in range(1, 7))
        moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
        tz = iso.group(8)
        if tz.upper() != "Z":
            offset = timedelta(hours=int(iso.group(9)), minutes=int(iso.group(10)))
            moment = moment + offset if tz[0] == "-" else moment - offset
        return int(moment.timestamp()) + self.adjust

    def _epoch(self, key: tuple) -> float:
        month, day, year, hour, minute, second = key
        full_year = int(year) + 2000 if year else self._year
        moment = datetime(full_year, int(month), int(day), int(hour), int(minute), int(second))
        if self.tz is None:
            return time.mktime(moment.timetuple())
        return moment.replace(tzinfo=self.tz).timestamp()

    def parse(self, line: str) -> Line | None:
        """The line's meaning, or None when it has no timestamp (monitord ignores those)."""
        line = line.rstrip()
        ts = self.timestamp(line)
        if ts is None:
            return None
        return Line(ts, classify(line))


class BadTime(ValueError):
    """A line whose timestamp has the form of a time but is none."""


def classify(line: str) -> Kind:
    """What a timestamped line says, in monitord's order of checks."""
    if "ULOG_" in line:
        m = RE_EVENT.search(line)
        if m:
            return Event(m.group(1), m.group(2), m.group(3))
    if "Condor Node" in line and "Submitting" in line:
        m = RE_SUBMIT.search(line)
        if m:
            return DagmanSubmit(m.group(1))
    if "ERROR: submit attempt failed" in line:
        return SUBMIT_FAILED
    if "script of" in line:
        m = RE_SCRIPT_RUNNING.search(line)
        if m:
            return ScriptStarted(m.group(1).upper(), m.group(2))
    if "Script of" in line:
        m = RE_SCRIPT_DONE.search(line)
        if m:
            status: int | None
            if RE_SCRIPT_OK.search(line):
                status = 0
            else:
                failed = RE_SCRIPT_FAILED.search(line)
                status = int(failed.group(1)) if failed else None
            return ScriptDone(m.group(1).upper(), m.group(2), status)
    if "job proc" in line:
        m = RE_JOB_FAILED.search(line)
        if m:
            return JobFailure(m.group(1), m.group(2), int(m.group(4)))
        m = RE_JOB_OK.search(line)
        if m:
            return JobSuccess(m.group(1), m.group(2))
    if "EXITING WITH STATUS" in line:
        m = RE_FINISHED.search(line)
        if m:
            return Finished(int(m.group(1)))
    if "STARTING UP" in line:
        m = RE_CONDOR_ID.search(line)
        if m:
            return CondorId(m.group(1))
    if "PID =" in line:
        m = RE_PID.search(line)
        if m:
            return Pid(int(m.group(1)))
    start = line.find("Parsing ")
    if start != -1:  # from the first "Parsing " only: a later one cannot match where the first did not (linear)
        m = RE_DAG_NAME.match(line, start)
        if m:
            return DagStart(m.group(1))
    if "$CondorVersion:" in line:
        m = RE_VERSION.search(line)
        if m:
            return Version(int(m.group(2)), int(m.group(3)), int(m.group(4)))
    if "Running in RECOVERY mode..." in line:
        return RECOVERY_START
    if RECOVERY_END_TEXT in line:
        return RECOVERY_END
    if "Received SIGUSR1" in line:
        return ABORTED
    if "Hold reason:" in line:
        m = RE_HOLD.search(line)
        if m:
            return HeldReason(m.group(1))
    return OTHER


def progress(line: str) -> Progress | None:
    """What a line says of the DAG's progress, as pegasus-status reads a dagman.out: the node table DAGMan
    writes under its stamp (`DAG status: 0 (...)`, `Of 8 nodes total:`, the row of counts) and its exit line
    (as `classify` reads it); None for every other line."""
    lead = RE_LEAD.match(line)
    if lead is None:
        return None
    if "EXITING WITH STATUS" in line:
        kind = classify(line.rstrip())
        return kind if isinstance(kind, Finished) else None
    at = lead.end()
    if line.startswith("DAG status", at):
        m = RE_DAG_STATUS.match(line, at)
        return DagStatus(int(m.group(1)) if m else 0)
    if line.startswith("Of ", at):
        m = RE_NODES_TOTAL.match(line, at)
        return NodesTotal(int(m.group(1))) if m else None
    m = RE_NODE_COUNTS.match(line, at)
    if m:
        return NodeCounts(*(int(value) for value in m.groups()))
    return None
