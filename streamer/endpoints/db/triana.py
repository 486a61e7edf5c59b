"""The Triana dialect of Stampede streams, resolved where the loader looks up job ids.

Triana (`output-file.bp` of the corpus) writes Stampede events with its own naming, which no other
producer uses; each rule applies only when the name an event gives is not declared in its workflow and
the Triana form is, so a stream of Pegasus (any version) loads exactly as before (docs/guide/load.md, "Triana streams"):

- jobs declared as `unit:X` (`job.info`) and named `X` by `job_inst.*`, `inv.*`, `job.edge`: `unit:X`;
- tasks declared as `task:X` and named `X` by `task.edge`: `task:X`;
- `wf.map.task_job task.id=task:X job.id=unit:common.string.X` (the task's transformation): job `unit:X`;
- `wf.plan root.xwf.id=F dax.file=F` (not a workflow uuid): the workflow is its own root, and a job instance
  naming `F` that no `job.info` declares gets a job row from the `wf.plan` (`dax_job_row`);
- `inv.end` without `exitcode`: its job instance's `main.end` exitcode (written after it; -1 until then).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from streamer.events import Event

UNIT = "unit:"
UNKNOWN_EXITCODE = -1
"""A Triana invocation's exitcode until its job instance's main.end gives it (the column is NOT NULL)."""
TASK = "task:"


def unit_job(name: Any, jobs: Mapping[str, int]) -> str | None:
    """`X` when only `unit:X` is declared -> `unit:X`; else None."""
    return _declared(name, jobs, UNIT)


def task_of(name: Any, tasks: Mapping[str, int]) -> str | None:
    """`X` (a `task.edge` end) when only `task:X` is declared -> `task:X`; else None."""
    return _declared(name, tasks, TASK)


def _declared(name: Any, declared: Mapping[str, int], prefix: str) -> str | None:
    if isinstance(name, str) and name not in declared and prefix + name in declared:
        return prefix + name
    return None


def mapped_job(task_id: Any, jobs: Mapping[str, int]) -> str | None:
    """The job of a `wf.map.task_job` naming an undeclared job for task `task:X`: `unit:X` if declared."""
    if isinstance(task_id, str) and task_id.startswith(TASK) and UNIT + task_id[len(TASK):] in jobs:
        return UNIT + task_id[len(TASK):]
    return None


def names_itself(fields: Mapping[str, Any]) -> bool:
    """A `wf.plan` whose `root.xwf.id` is its own `dax.file` (not a workflow uuid): it is the root."""
    dax = fields.get("dax.file")
    return dax is not None and fields.get("root.xwf.id") == dax and fields.get("xwf.id") != dax


def is_triana(jobs: Mapping[str, int]) -> bool:
    """A workflow read from the database (no wf.plan event at hand) is Triana's when it has `unit:` jobs."""
    return any(name.startswith(UNIT) for name in jobs)


def dax_job_row(name: str, dax_file: str, dag_file_name: Any) -> dict[str, Any]:
    """The `job` row (without its ids) of a job instance naming the workflow's own dax file."""
    return {"exec_job_id": name, "submit_file": dag_file_name, "executable": dax_file, "type_desc": "dag",
            "clustered": False, "max_retries": 1, "task_count": 0, "argv": None}


_STARTS = ("stampede.job_inst.submit.start", "stampede.job_inst.pre.start")


def dax_jobs(events: Iterable[Event], daxes: dict[Any, str]) -> int:
    """At most how many dax job rows these events declare (ids to reserve); `daxes`: uuid -> dax.file of the
    Triana workflows known so far (this batch's wf.plans are added)."""
    count = 0
    for event in events:
        f = event.fields
        if event.name == "stampede.wf.plan" and names_itself(f):
            daxes[f.get("xwf.id")] = f["dax.file"]
        elif event.name in _STARTS and f.get("job.id") == daxes.get(f.get("xwf.id")):
            count += 1
    return count


def waiting_invocations(dialect: Any, wf_ids: list[int]) -> tuple[str, list[Any]]:
    """SQL and parameters: (job_instance_id, invocation_id) of the invocations of these (Triana) workflows still
    waiting for their job instance's main.end to give their exitcode."""
    cond, params = dialect.any_of("v.wf_id", wf_ids)
    return (f"SELECT v.job_instance_id, v.invocation_id FROM invocation v WHERE {cond} "
            f"AND v.exitcode = {UNKNOWN_EXITCODE}", params)
