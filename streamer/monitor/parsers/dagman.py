"""DAGMan's `*.dagman.out` lines -> the facts the monitor acts on.

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


@dataclass(slots=True)
class Line:
    """One understood dagman.out line: its time, what it says, and its arguments.

    kinds: `event` (state, job, sched_id), `dagman_submit` (job), `submit_failed`,
    `script_started` (PRE|POST, job), `script_done` (PRE|POST, job, status|None
    when neither success nor failure), `job_failure` (job, sched_id, status),
    `job_success` (job, sched_id), `finished` (rc), `condor_id` (id), `pid` (pid),
    `dag_start` (dag), `version` (major, minor, patch), `recovery_start`,
    `recovery_end`, `aborted`, `held_reason` (reason), `other` (timestamped but
    not understood).
    """

    ts: float
    kind: str
    args: tuple = ()


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
        found = RE_TS.findall(line)
        if found:
            key = found[-1]  # the last one: an event's own time, after DAGMan's log time
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
        kind, args = classify(line)
        return Line(ts, kind, args)


class BadTime(ValueError):
    """A line whose timestamp has the form of a time but is none."""


def classify(line: str) -> tuple[str, tuple]:
    """(kind, args) of a timestamped line, in monitord's order of checks."""
    if "ULOG_" in line:
        m = RE_EVENT.search(line)
        if m:
            return "event", (m.group(1), m.group(2), m.group(3))
    if "Condor Node" in line and "Submitting" in line:
        m = RE_SUBMIT.search(line)
        if m:
            return "dagman_submit", (m.group(1),)
    if "ERROR: submit attempt failed" in line:
        return "submit_failed", ()
    if "script of" in line:
        m = RE_SCRIPT_RUNNING.search(line)
        if m:
            return "script_started", (m.group(1).upper(), m.group(2))
    if "Script of" in line:
        m = RE_SCRIPT_DONE.search(line)
        if m:
            status: int | None | str
            if RE_SCRIPT_OK.search(line):
                status = 0
            else:
                failed = RE_SCRIPT_FAILED.search(line)
                status = int(failed.group(1)) if failed else "unknown"
            return "script_done", (m.group(1).upper(), m.group(2), status)
    if "job proc" in line:
        m = RE_JOB_FAILED.search(line)
        if m:
            return "job_failure", (m.group(1), m.group(2), int(m.group(4)))
        m = RE_JOB_OK.search(line)
        if m:
            return "job_success", (m.group(1), m.group(2))
    if "EXITING WITH STATUS" in line:
        m = RE_FINISHED.search(line)
        if m:
            return "finished", (int(m.group(1)),)
    if "STARTING UP" in line:
        m = RE_CONDOR_ID.search(line)
        if m:
            return "condor_id", (m.group(1),)
    if "PID =" in line:
        m = RE_PID.search(line)
        if m:
            return "pid", (int(m.group(1)),)
    start = line.find("Parsing ")
    if start != -1:  # from the first "Parsing " only: a later one cannot match where the first did not (linear)
        m = RE_DAG_NAME.match(line, start)
        if m:
            return "dag_start", (m.group(1),)
    if "$CondorVersion:" in line:
        m = RE_VERSION.search(line)
        if m:
            return "version", (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    if "Running in RECOVERY mode..." in line:
        return "recovery_start", ()
    if "...done with RECOVERY mode" in line:
        return "recovery_end", ()
    if "Received SIGUSR1" in line:
        return "aborted", ()
    if "Hold reason:" in line:
        m = RE_HOLD.search(line)
        if m:
            return "held_reason", (m.group(1),)
    return "other", ()
