"""The notify file and its `when` conditions, matched on Stampede events.

A notify file (`<dag>.notify`, named by the braindump's `notify:`) has lines

    WORKFLOW <wf_uuid> <condition> <action...>
    JOB|DAXJOB|DAGJOB <job id> <condition> <action...>
    INVOCATION <job id> <task index> <condition> <action...>

Conditions (seed 003): `start`, `on_error`, `on_success`, `at_end`, `all`
(start and at_end), `never`. Today's planner writes `end`, `error`, `success`:
streamer reads them as `at_end`, `on_error`, `on_success` (monitord 5.1.3 never
fires `end` at workflow level and fires `error`/`success` on the opposite
outcome of a job). `PEGASUS_EVENT` is the condition as written, `all` becoming
`start` or `at_end`, as monitord sets it.

Which events end what (as monitord):

- workflow: `xwf.start` (start), `xwf.end` (end; its status is DAGMan's exit code);
- job: `job_inst.main.start` (start: DAGMan's EXECUTE); the end is `job_inst.post.end`
  for a job with a POST script in the .dag, else `job_inst.main.end`; the status
  of a failure is the POST script's (or, without one, DAGMan's) exit code, a
  success is `0` (monitord 5.1.3 means to prefer the kickstart record's exit
  code but never finds it in a record); stdout/stderr are the rotated
  `<file>.NNN` of that attempt;
- invocation: `inv.end` of task N (N >= 1), status = the record's exit code.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from streamer.events import Event
from streamer.util.limits import iter_lines
from streamer.monitor.parsers import braindump
from streamer.monitord.files import isodate

log = logging.getLogger("streamer.monitord")

CANONICAL = {"start": "start", "at_end": "at_end", "on_error": "on_error", "on_success": "on_success",
             "all": "all", "end": "at_end", "error": "on_error", "success": "on_success"}
WATCHED = ("stampede.xwf.start,stampede.xwf.end,stampede.job_inst.main.start,stampede.job_inst.main.end,"
           "stampede.job_inst.post.end,stampede.inv.end")
"""The notifications endpoint's filter: the events that can fire a notification."""
_SCRIPT_POST = re.compile(r"^\s*SCRIPT\s+(?:DEFER\s+\S+\s+\S+\s+)?POST\s+(\S+)\s", re.IGNORECASE)


@dataclass
class Rules:
    """The notifications of one workflow: condition (as written) -> actions."""

    workflow: dict[str, list[str]] = field(default_factory=dict)
    job: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    invocation: dict[str, dict[int, dict[str, list[str]]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return (sum(len(a) for a in self.workflow.values())
                + sum(len(a) for c in self.job.values() for a in c.values())
                + sum(len(a) for t in self.invocation.values() for c in t.values() for a in c.values()))


def read_notify(path: Path, wf_uuid: str | None) -> Rules:
    """Parse a notify file; a bad line is logged as `FILE:LINE: ...` and skipped."""
    try:
        return parse_notify(iter_lines(path), path, wf_uuid)
    except FileNotFoundError:
        return Rules()
    except OSError as exc:
        log.warning("%s: cannot read notify file (%s); no notifications for this workflow", path, exc)
        return Rules()


def parse_notify(lines: Iterable[tuple[int, str]], path: Any, wf_uuid: str | None) -> Rules:
    """Notify-file lines (number, text) -> Rules; a bad line is logged as `FILE:LINE: ...` and skipped."""
    rules = Rules()
    for number, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind = line.split(None, 1)[0].lower()
        parts = line.split(None, 4 if kind == "invocation" else 3)
        if len(parts) != (5 if kind == "invocation" else 4):
            log.warning("%s:%d: cannot parse notification %r; skipped", path, number, line)
            continue
        condition = parts[-2]
        if condition.lower() == "never":
            continue
        if condition.lower() not in CANONICAL:
            log.warning("%s:%d: unknown condition %r (start, end/at_end, error/on_error, success/on_success, "
                        "all, never); skipped", path, number, condition)
            continue
        action = parts[-1]
        if kind == "workflow":
            if wf_uuid is not None and parts[1] != wf_uuid:
                log.warning("%s:%d: workflow notification for %s, this workflow is %s; skipped",
                            path, number, parts[1], wf_uuid)
                continue
            rules.workflow.setdefault(condition, []).append(action)
        elif kind in ("job", "daxjob", "dagjob"):
            rules.job.setdefault(parts[1], {}).setdefault(condition, []).append(action)
        elif kind == "invocation":
            try:
                task = int(parts[2])
            except ValueError:
                log.warning("%s:%d: task index %r is not an integer; skipped", path, number, parts[2])
                continue
            rules.invocation.setdefault(parts[1], {}).setdefault(task, {}).setdefault(condition, []).append(action)
        else:
            log.warning("%s:%d: unknown notification type %r; skipped", path, number, parts[0])
    return rules


def post_jobs(dag: Path) -> set[str]:
    """Jobs with a POST script in a .dag file (their end is the POST script's end)."""
    jobs: set[str] = set()
    try:
        with open(dag, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                match = _SCRIPT_POST.match(line)
                if match:
                    jobs.add(match.group(1))
    except OSError:
        pass
    return jobs


def raw_to_regular(code: Any) -> Any:
    """A raw wait status as a plain exit code (Pegasus's `utils.raw_to_regular`)."""
    if not isinstance(code, int):
        try:
            code = int(code)
        except (TypeError, ValueError):
            return code
    if code < 0:
        return -128
    if code & 127:
        return -(code & 127)
    return code >> 8


@dataclass
class Notification:
    """One script to run: the action line and its PEGASUS_* environment."""

    action: str
    env: dict[str, str]
    cwd: str

    @property
    def label(self) -> str:
        return f"{self.env.get('PEGASUS_JOBID')} - {self.env.get('PEGASUS_EVENT')}"


@dataclass
class _Workflow:
    uuid: str
    directory: str
    submit_dir: str
    wfid: str
    dagman_out: str
    rules: Rules
    posts: set[str]


@dataclass
class _Instance:
    attempt: int = 0
    kickstart: list[int] = field(default_factory=list)
    held: list[tuple[int, object, dict[str, list[str]]]] = field(default_factory=list)
    """(task, the `inv.end`'s ts as received — `_base` reads it —, its actions)."""
    files: dict[str, str] = field(default_factory=dict)


def _end_matches(condition: str, ok: bool) -> str | None:
    """PEGASUS_EVENT for an end with outcome `ok`, or None if `condition` does not fire."""
    canonical = CANONICAL[condition.lower()]
    if canonical == "start":
        return None
    if canonical == "on_error" and ok:
        return None
    if canonical == "on_success" and not ok:
        return None
    return "at_end" if canonical == "all" else condition


class Matcher:
    """Turns Stampede events into the notifications their workflow's notify file asks for."""

    def __init__(self, root_dir: str | Path, root_dagman_out: str | None = None) -> None:
        self.root_dir = str(Path(root_dir).resolve())
        self.root_dagman_out = root_dagman_out
        self.workflows: dict[str, _Workflow | None] = {}
        self.instances: dict[tuple[str, int], _Instance] = {}
        self.attempts: dict[tuple[str, str], int] = {}
        self._dirs: dict[str, str] | None = None

    # ------------------------------------------------------------ workflows
    def _scan(self) -> dict[str, str]:
        found: dict[str, str] = {}
        root_depth = self.root_dir.count(os.sep)
        for directory, subdirs, files in os.walk(self.root_dir):
            if directory.count(os.sep) - root_depth >= 8:
                subdirs[:] = []
            if "braindump.yml" in files or "braindump.txt" in files:
                try:
                    uuid = braindump.load(directory).get("wf_uuid")
                except braindump.BraindumpError:
                    continue
                if uuid:
                    found.setdefault(uuid, directory)
        return found

    def _directory(self, uuid: str, event: Event) -> str | None:
        claimed = event.fields.get("submit.dir")
        for candidate in (self.root_dir, claimed):
            if candidate and os.path.isdir(candidate):
                try:
                    if braindump.load(candidate).get("wf_uuid") == uuid:
                        return str(candidate)
                except braindump.BraindumpError:
                    pass
        if self._dirs is None or uuid not in self._dirs:
            self._dirs = self._scan()
        return self._dirs.get(uuid)

    def workflow(self, event: Event) -> _Workflow | None:
        uuid = event.fields.get("xwf.id")
        if not isinstance(uuid, str):
            return None
        if uuid in self.workflows:
            return self.workflows[uuid]
        directory = self._directory(uuid, event)
        wf = None
        if directory is None:
            log.warning("notifications: no submit dir found for workflow %s; its notifications are skipped", uuid)
        else:
            params = braindump.load(directory)
            notify = params.get("notify")
            rules = read_notify(Path(directory) / notify, uuid) if notify else Rules()
            dag = params.get("dag") or ""
            dagman_out = os.path.join(directory, f"{dag}.dagman.out")
            if directory == self.root_dir and self.root_dagman_out:
                dagman_out = self.root_dagman_out
            wf = _Workflow(uuid=uuid, directory=directory, submit_dir=params.get("submit_dir") or directory,
                           wfid=f"{params.get('dax_label') or 'unknown'}-{params.get('dax_index') or 'unknown'}",
                           dagman_out=dagman_out, rules=rules,
                           posts=post_jobs(Path(directory) / dag) if dag and rules.job else set())
            if len(rules):
                log.info("notifications: %d from %s", len(rules), Path(directory) / (notify or ""))
        self.workflows[uuid] = wf
        return wf

    # ------------------------------------------------------------ events
    def match(self, event: Event) -> list[Notification]:
        name = event.name
        if name not in _HANDLED:
            return []
        wf = self.workflow(event)
        if wf is None or not len(wf.rules):
            return []
        return _HANDLED[name](self, wf, event)

    def _base(self, wf: _Workflow, event_name: str, ts: Any) -> dict[str, str]:
        moment = float(ts) if isinstance(ts, (int, float)) else 0.0
        return {"PEGASUS_EVENT": event_name, "PEGASUS_EVENT_TIMESTAMP": str(moment),
                "PEGASUS_EVENT_TIMESTAMP_ISO": isodate(moment), "PEGASUS_SUBMIT_DIR": wf.submit_dir,
                "PEGASUS_WFID": wf.wfid}

    @staticmethod
    def _job_actions(wf: _Workflow, event: Event) -> tuple[str, dict[str, list[str]]] | None:
        """The event's job id and that job's notification rules, if it has any."""
        job = event.fields.get("job.id")
        if not isinstance(job, str):
            return None
        actions = wf.rules.job.get(job)
        return (job, actions) if actions else None

    def _out(self, wf: _Workflow, actions: dict[str, list[str]], fire: list[tuple[str, str]],
             extra: dict[str, str], ts: Any) -> list[Notification]:
        out = []
        for condition, event_name in fire:
            for action in actions.get(condition, ()):
                env = self._base(wf, event_name, ts)
                env.update(extra)
                out.append(Notification(action, env, self.root_dir))
        return out

    def _xwf(self, wf: _Workflow, event: Event) -> list[Notification]:
        actions = wf.rules.workflow
        extra = {"PEGASUS_STDOUT": wf.dagman_out, "PEGASUS_JOBID": wf.uuid}
        if event.name == "stampede.xwf.start":
            fire = [(c, "start") for c in actions if CANONICAL[c.lower()] in ("start", "all")]
        else:
            status = event.fields.get("status")
            ok = status == 0
            fire = [(c, e) for c in actions if (e := _end_matches(c, ok)) is not None]
            extra["PEGASUS_STATUS"] = str(status)
        return self._out(wf, actions, fire, extra, event.fields.get("ts"))

    def _instance(self, wf: _Workflow, event: Event) -> _Instance:
        key = (wf.uuid, int(event.fields.get("job_inst.id") or 0))
        instance = self.instances.get(key)
        if instance is None:
            job = (wf.uuid, str(event.fields.get("job.id")))
            attempt = self.attempts.get(job, 0)
            self.attempts[job] = attempt + 1
            instance = self.instances[key] = _Instance(attempt=attempt)
        return instance

    def _files(self, wf: _Workflow, event: Event) -> dict[str, str]:
        extra = {}
        for field_name, key in (("stdout.file", "PEGASUS_STDOUT"), ("stderr.file", "PEGASUS_STDERR")):
            value = event.fields.get(field_name)
            if isinstance(value, str):
                extra[key] = os.path.join(wf.submit_dir, value)
        return extra

    def _rotated(self, wf: _Workflow, event: Event, instance: _Instance) -> dict[str, str]:
        """stdout/stderr of an ended attempt: `<file>.NNN` (the name main.end gives, or its own numbering)."""
        extra = {}
        for field_name, key in (("stdout.file", "PEGASUS_STDOUT"), ("stderr.file", "PEGASUS_STDERR")):
            value = event.fields.get(field_name)
            if not isinstance(value, str):
                continue
            if not re.search(r"\.\d{3}$", value):
                value = f"{value}.{instance.attempt:03d}"
            extra[key] = os.path.join(wf.submit_dir, value)
        return extra

    def _main_start(self, wf: _Workflow, event: Event) -> list[Notification]:
        found = self._job_actions(wf, event)
        self._instance(wf, event)
        if found is None:
            return []
        job, actions = found
        fire = [(c, "start") for c in actions if CANONICAL[c.lower()] in ("start", "all")]
        extra = {"PEGASUS_JOBID": job, **self._files(wf, event)}
        return self._out(wf, actions, fire, extra, event.fields.get("ts"))

    def _inv_end(self, wf: _Workflow, event: Event) -> list[Notification]:
        task = event.fields.get("inv.id")
        if not isinstance(task, int) or task < 1:
            return []
        instance = self._instance(wf, event)
        code = event.fields.get("exitcode")
        try:
            instance.kickstart.append(0 if code is None else int(code))
        except (TypeError, ValueError):
            instance.kickstart.append(0)
        job = event.fields.get("job.id")
        actions = wf.rules.invocation.get(job, {}).get(task) if isinstance(job, str) else None
        if actions:  # the rotated stdout/stderr names come with main.end: hold until then
            instance.held.append((task, event.fields.get("ts"), actions))
        return []

    def _invocations(self, wf: _Workflow, event: Event, instance: _Instance) -> list[Notification]:
        out: list[Notification] = []
        job = event.fields.get("job.id")
        for index, (task, ts, actions) in enumerate(instance.held):
            raw = instance.kickstart[index] if index < len(instance.kickstart) else 0
            ok = raw == 0
            fire = []
            for condition in actions:
                canonical = CANONICAL[condition.lower()]
                if canonical == "start":  # monitord fires it at the invocation's end, without a status
                    fire.append((condition, condition))
                elif (event_name := _end_matches(condition, ok)) is not None:
                    fire.append((condition, event_name))
            for condition, event_name in fire:
                extra = {"PEGASUS_JOBID": str(job), "PEGASUS_INVID": str(task),
                         **self._rotated(wf, event, instance)}
                if CANONICAL[condition.lower()] != "start":
                    extra["PEGASUS_STATUS"] = str(raw_to_regular(raw))
                out += self._out(wf, {condition: actions[condition]}, [(condition, event_name)], extra, ts)
        instance.held.clear()
        return out

    def _main_end(self, wf: _Workflow, event: Event) -> list[Notification]:
        instance = self._instance(wf, event)
        instance.files = self._rotated(wf, event, instance)
        out = self._invocations(wf, event, instance)
        job = event.fields.get("job.id")
        if job in wf.posts:
            return out  # its end is the POST script's
        self.instances.pop((wf.uuid, int(event.fields.get("job_inst.id") or 0)), None)
        ok = event.fields.get("status") == 0
        code = 0 if ok else raw_to_regular(event.fields.get("exitcode"))
        return out + self._job_end(wf, event, ok, code, instance.files)

    def _post_end(self, wf: _Workflow, event: Event) -> list[Notification]:
        instance = self.instances.pop((wf.uuid, int(event.fields.get("job_inst.id") or 0)), None)
        ok = event.fields.get("status") == 0
        code = 0 if ok else raw_to_regular(event.fields.get("exitcode"))
        return self._job_end(wf, event, ok, code, instance.files if instance else {})

    def _job_end(self, wf: _Workflow, event: Event, ok: bool, code: Any, files: dict[str, str]) -> list[Notification]:
        found = self._job_actions(wf, event)
        if found is None:
            return []
        job, actions = found
        fire = [(c, e) for c in actions if (e := _end_matches(c, ok)) is not None]
        extra = {"PEGASUS_JOBID": job, **files, "PEGASUS_STATUS": str(code)}
        return self._out(wf, actions, fire, extra, event.fields.get("ts"))


_HANDLED = {
    "stampede.xwf.start": Matcher._xwf,
    "stampede.xwf.end": Matcher._xwf,
    "stampede.job_inst.main.start": Matcher._main_start,
    "stampede.inv.end": Matcher._inv_end,
    "stampede.job_inst.main.end": Matcher._main_end,
    "stampede.job_inst.post.end": Matcher._post_end,
}
