"""Notify files for synthetic workflows, and a recorder script to put in them.

`write_notify(run_dir, action)` fills the `<dag>.notify` of the workflow in
`run_dir` and of every sub-workflow below it with WORKFLOW and JOB lines for
each condition (monitord's spellings `start at_end on_error on_success all`, or
today's planner's `start end error success all` with `spelling="planner"`), each
calling `action` with the entity and the condition as arguments. The recorder
(`write_recorder`) writes its argv, working directory and environment as one
JSON file per call, so a test can compare what two monitors ran.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from streamer.monitor.parsers import braindump

MONITORD = ("start", "at_end", "on_error", "on_success", "all")
PLANNER = ("start", "end", "error", "success", "all")
_JOB = re.compile(r"^\s*JOB\s+(\S+)\s", re.IGNORECASE)

RECORDER = """#!{python}
# records one notification: argv, cwd and environment, as one JSON file
import json, os, sys, time, uuid
out = {out!r}
record = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "time": time.time(),
          "env": {{k: v for k, v in os.environ.items() if k.startswith("PEGASUS_")}}}}
tmp = os.path.join(out, "." + uuid.uuid4().hex)
with open(tmp, "w") as handle:
    json.dump(record, handle)
os.rename(tmp, os.path.join(out, uuid.uuid4().hex + ".json"))
"""


def write_recorder(path: str | Path, out_dir: str | Path, python: str) -> Path:
    """An executable script at `path` that records each call as `out_dir/<random>.json`."""
    path, out_dir = Path(path), Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(RECORDER.format(python=python, out=str(out_dir)))
    path.chmod(0o755)
    return path


def workflow_dirs(run_dir: str | Path) -> list[Path]:
    """`run_dir` and every sub-workflow directory below it (each has a braindump)."""
    found = []
    for directory, subdirs, names in os.walk(run_dir):
        subdirs.sort()
        if "braindump.yml" in names or "braindump.txt" in names:
            found.append(Path(directory))
    return found


def notify_text(run_dir: Path, action: str, conditions: tuple[str, ...], jobs: bool = True,
                invocations: int = 0) -> str:
    """WORKFLOW lines, JOB lines for every job of the .dag, and INVOCATION lines for its tasks 1..`invocations`."""
    params = braindump.load(run_dir)
    lines = [f"WORKFLOW {params['wf_uuid']} {c} {action} workflow {c}" for c in conditions]
    dag = (run_dir / params["dag"]).read_text()
    for line in dag.splitlines():
        match = _JOB.match(line)
        if not match:
            continue
        job = match.group(1)
        if jobs:
            lines += [f"JOB {job} {c} {action} {job} {c}" for c in conditions]
        for task in range(1, invocations + 1):
            lines += [f"INVOCATION {job} {task} {c} {action} {job} task{task} {c}" for c in conditions]
    return "\n".join(lines) + "\n"


def write_notify(run_dir: str | Path, action: str, *, spelling: str = "monitord", jobs: bool = True,
                 invocations: int = 0) -> list[Path]:
    """Fill the notify files of `run_dir`'s workflow and sub-workflows; returns the files written."""
    conditions = PLANNER if spelling == "planner" else MONITORD
    written = []
    for directory in workflow_dirs(run_dir):
        params = braindump.load(directory)
        target = directory / (params.get("notify") or f"{Path(params['dag']).stem}.notify")
        target.write_text(notify_text(directory, action, conditions, jobs, invocations))
        written.append(target)
    return written
