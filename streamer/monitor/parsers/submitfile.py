"""A job's HTCondor submit file (`.sub`): what the planner asked for.

monitord reads it when DAGMan submits the job (or starts its PRE script) for
the job's site, transformation, task id, cores, job class, the stdin/stdout/
stderr paths and, for sub-workflow jobs, the `_CONDOR_DAGMAN_LOG` to follow.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field

from streamer.util.limits import read_bounded

log = logging.getLogger(__name__)

RE_CLASSAD = re.compile(r"^\s*\+?(pegasus_\S+)\s*=\s*(.*)")
RE_RSL = re.compile(r"^\s*globusrsl\W", re.IGNORECASE)
RE_EXECUTABLE = re.compile(r"^\s*executable\s*=\s*(\S+)")
RE_ARGUMENTS = re.compile(r'^\s*arguments\s*=\s*"([^"\r\n]*)"')
RE_ENVIRONMENT = re.compile(r"^\s*environment\s*=\s*(.*)")
RE_PROPERTY = re.compile(r"([^:= \t]+)\s*[:=]?\s*(.*)")
RE_INPUT = re.compile(r"^\s*input\s*=\s*(\S+)")
RE_OUTPUT = re.compile(r"^\s*output\s*=\s*(\S+)")
RE_ERROR = re.compile(r"^\s*error\s*=\s*(\S+)")
_FIRST_CHARS = frozenset("+pgGeaio")
"""First non-blank characters the patterns above can start with."""
GOOD_RSL = ("maxcputime", "maxtime", "maxwalltime")


@dataclass
class SubmitInfo:
    """What a .sub file says about a job (None where it says nothing)."""

    classads: dict[str, str] = field(default_factory=dict)
    executable: str | None = None
    arguments: str | None = None
    input: str | None = None
    output: str | None = None
    error: str | None = None
    dagman_out: str | None = None
    max_minutes: int | None = None

    @property
    def site(self) -> str | None:
        value = self.classads.get("pegasus_site")
        return value.strip('"') if value is not None else None

    @property
    def transformation(self) -> str | None:
        value = self.classads.get("pegasus_wf_xformation")
        return value.strip('"') if value is not None else None

    @property
    def derivation(self) -> str | None:
        value = self.classads.get("pegasus_wf_dax_job_id")
        if value is None:
            return None
        value = value.strip('"')
        return None if value == "null" else value

    @property
    def cores(self) -> int | None:
        value = self.classads.get("pegasus_cores")
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    @property
    def job_class(self) -> str | None:
        return self.classads.get("pegasus_job_class")


def parse(text: str, *, want_environment: bool = False, where: str = ".sub") -> SubmitInfo:
    """Parse submit-file text; `want_environment` for pegasus-plan/subdax jobs (sub-workflows)."""
    info = SubmitInfo()
    for line in text.splitlines():
        if line.lstrip()[:1] not in _FIRST_CHARS:  # `universe`, `log`, `queue`, ...: no pattern can match
            continue
        m = RE_CLASSAD.search(line)
        if m:
            info.classads[m.group(1)] = m.group(2)
            continue
        if RE_RSL.search(line):
            info.max_minutes = _rsl_minutes(line, info.max_minutes)
        elif (m := RE_EXECUTABLE.search(line)):
            info.executable = m.group(1).strip('"')
        elif (m := RE_ARGUMENTS.search(line)):
            info.arguments = m.group(1).strip('"')
        elif (m := RE_INPUT.search(line)):
            info.input = os.path.normpath(m.group(1).strip('"'))
        elif (m := RE_OUTPUT.search(line)):
            info.output = os.path.normpath(m.group(1).strip('"'))
        elif (m := RE_ERROR.search(line)):
            info.error = os.path.normpath(m.group(1).strip('"'))
        elif want_environment and (m := RE_ENVIRONMENT.search(line)):
            info.dagman_out = dagman_log_from_environment(m.group(1))
            if info.dagman_out is None:
                log.warning("%s: no _CONDOR_DAGMAN_LOG in environment line", where)
    return info


def read(path: str, *, want_environment: bool = False) -> SubmitInfo | None:
    """Parse the .sub file at `path`; None (with a warning) when it cannot be read."""
    try:
        text = read_bounded(path).decode("utf-8", errors="replace")
    except OSError as exc:
        log.warning("cannot read submit file %s: %s", path, exc.strerror or exc)
        return None
    return parse(text, want_environment=want_environment, where=path)


def dagman_log_from_environment(value: str) -> str | None:
    """`_CONDOR_DAGMAN_LOG` from an environment value (old `a=b;c=d` or new `"a=b c=d"` form)."""
    stripped = re.sub(r'^"|"$', "", value)
    parts = stripped.split(";") if len(stripped) == len(value) else stripped.split(" ")
    for part in parts:
        part = part.strip()
        if not part:
            continue
        m = RE_PROPERTY.search(part)
        if m and m.group(1) == "_CONDOR_DAGMAN_LOG":
            return m.group(2)
    return None


def _rsl_minutes(line: str, current: int | None) -> int | None:
    """Largest time limit (minutes) in a globusrsl line (monitord crashes on this comparison)."""
    for item in re.findall(r"\(([^()]+)\)", line):
        key, _, value = item.partition("=")
        if re.sub(r"[-_]", "", key).lower() in GOOD_RSL:
            try:
                number = int(value.strip().strip('"'))
            except ValueError:
                continue
            if current is None or number > current:
                current = number
    return current
