"""A plain HTCondor DAG (no Pegasus): its identity and its jobs, from the `.dag` file alone.

Without a braindump there is no `wf_uuid`: the workflow is named by a UUID
(v5) of the `.dag` file's absolute path, so the same DAG gets the same id on
every run (and the same id whether it is read from its dagman.out or from its
jobstate.log). The `.dag` file gives what the Stampede `job` table holds: the
submit file, RETRY count and the submit file's executable and arguments of
each JOB (or SUBDAG EXTERNAL) node, and the PARENT/CHILD edges. What only
Pegasus's files give (job types, kickstart records, static.bp) is absent.
"""

from __future__ import annotations

import glob
import os
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamer.monitor.parsers import braindump
from streamer.util.limits import read_bounded

TYPE_NUMBERS = {name: number for number, name in enumerate((
    "unknown", "compute", "stage-in-tx", "stage-out-tx", "registration", "inter-site-tx",
    "create-dir", "staged-compute", "cleanup", "chmod", "dax", "dag"))}


@dataclass
class DagInfo:
    """What a `.dag` file says of its nodes (the parts Stampede has columns for)."""

    path: str
    jobs: dict[str, dict[str, Any]]
    edges: list[tuple[str, str]]


def dag_uuid(path: str | Path) -> str:
    """A stable workflow id for a DAG without braindump: a UUID of its absolute path."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "file://" + str(Path(path).resolve())))


def _submit_description(path: Path) -> dict[str, str]:
    """`executable` and `arguments` of an HTCondor submit file."""
    out: dict[str, str] = {}
    try:
        text = read_bounded(path).decode("utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip().lower()
        if key in ("executable", "arguments") and key not in out:
            out[key] = value.strip().strip('"')
    return out


def read_dag(dag: Path) -> DagInfo:
    """JOB (and SUBDAG EXTERNAL) nodes with their submit file, RETRY counts, PARENT/CHILD edges."""
    jobs: dict[str, dict[str, Any]] = {}
    edges: list[tuple[str, str]] = []
    try:
        lines = read_bounded(dag).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return DagInfo(str(dag), jobs, edges)
    for line in lines:
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        if not words:
            continue
        keyword = words[0].upper()
        if keyword == "JOB" and len(words) >= 3:
            info: dict[str, Any] = {"submit_file": words[2], "max_retries": 0, "type_desc": "unknown"}
            info.update(_submit_description(dag.parent / words[2]))
            jobs[words[1]] = info
        elif keyword == "SUBDAG" and len(words) >= 4 and words[1].upper() == "EXTERNAL":
            jobs[words[2]] = {"submit_file": words[3], "max_retries": 0, "type_desc": "dag", "executable": words[3]}
        elif keyword == "RETRY" and len(words) >= 3 and words[1] in jobs:
            try:
                jobs[words[1]]["max_retries"] = int(words[2])
            except ValueError:
                pass
        elif keyword == "PARENT":
            upper = [w.upper() for w in words]
            if "CHILD" in upper:
                at = upper.index("CHILD")
                edges.extend((parent, child) for parent in words[1:at] for child in words[at + 1:])
    return DagInfo(str(dag), jobs, edges)


def static_events(dag: DagInfo, ts: Any) -> list[tuple[str, dict[str, Any]]]:
    """`job.info` of every node and `job.edge` of every edge (names without the `stampede.` prefix)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for node, info in dag.jobs.items():
        kind = info.get("type_desc", "unknown")
        fields: dict[str, Any] = {
            "ts": ts, "job.id": node, "submit_file": info.get("submit_file", ""), "type_desc": kind,
            "type": TYPE_NUMBERS[kind], "clustered": 0, "max_retries": info.get("max_retries", 0),
            "task_count": 0, "executable": info.get("executable", "")}
        if info.get("arguments") is not None:
            fields["argv"] = info["arguments"]
        out.append(("job.info", fields))
    out.extend(("job.edge", {"ts": ts, "parent.job.id": p, "child.job.id": c}) for p, c in dag.edges)
    return out


def dag_of(dagman_out: str | Path) -> Path:
    """`x.dag.dagman.out` -> `x.dag`."""
    text = str(dagman_out)
    return Path(text[:-len(".dagman.out")] if text.endswith(".dagman.out") else text)


def has_braindump(directory: str | Path) -> bool:
    directory = Path(directory)
    return (directory / "braindump.yml").is_file() or (directory / "braindump.txt").is_file()


def load_params(directory: str | Path, dagman_out: str | Path | None = None) -> tuple[dict[str, Any], bool]:
    """(braindump parameters, is_plain): the braindump's, or for a plain DAG the ones the monitor needs
    (`wf_uuid` from the DAG's path, `dag`, `submit_dir`). Raises BraindumpError when neither applies."""
    if has_braindump(directory):
        return braindump.load(directory), False
    if dagman_out is None:
        found = sorted(glob.glob(os.path.join(str(directory), "*.dagman.out")))
        if len(found) != 1:
            raise braindump.BraindumpError(f"no braindump.yml or braindump.txt in {directory}")
        dagman_out = found[0]
    dag = dag_of(dagman_out)
    if not dag.is_file():
        raise braindump.BraindumpError(
            f"no braindump.yml or braindump.txt in {directory}, and no DAG file {dag} for a plain DAGMan workflow")
    return {"wf_uuid": dag_uuid(dag), "dag": dag.name, "submit_dir": str(Path(directory).resolve())}, True
