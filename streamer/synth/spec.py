"""Workflow shape and scenarios of a synthetic submit directory.

The generator first decides *what happens* (jobs, edges, attempts) as plain data,
then renders files from it. Keeping the plan separate lets tests reason about the
expected outcome without parsing what was written.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

SCENARIOS: tuple[str, ...] = (
    "success", "retry", "held", "held_abort", "evicted", "pre_failure", "post_failure",
    "submit_failure", "rescue", "clustered", "xml_kickstart", "hierarchical",
)

# Outcomes of one attempt of a job (one DAGMan node try).
OK, FAIL, HELD, HELD_ABORT, EVICTED, SUBMIT_FAIL, PRE_FAIL, POST_FAIL = (
    "ok", "fail", "held", "held_abort", "evicted", "submit_fail", "pre_fail", "post_fail")

# Pegasus job classes (pegasus_job_class / static.bp type) and their descriptions.
JOB_TYPES = {1: "compute", 2: "stage-in-tx", 3: "stage-out-tx", 4: "registration",
             6: "create-dir", 8: "cleanup", 10: "dax"}

STAGE_OUT_CHUNK = 1000  # compute jobs per stage_out/register pair


@dataclass
class Job:
    """One DAG node as Pegasus plans it."""

    name: str
    jobtype: int
    xform: str
    task_id: str = "null"
    site: str = "local"
    parents: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=lambda: [OK])
    retry: int = 1
    pre: bool = False
    post: bool = True
    records: int = 1          # kickstart records per .out (clustered > 1)
    xml: bool = False         # Pegasus 4 XML kickstart record
    subwf: str | None = None  # sub-workflow directory name (hierarchical)
    rescue_attempts: list[str] = field(default_factory=list)  # attempts in the rescue run

    @property
    def sub(self) -> str:
        return f"00/00/{self.name}.sub"


@dataclass
class Plan:
    """Everything the writers need: identity, jobs in DAG order, scenario flags."""

    label: str
    wf_uuid: str
    root_uuid: str
    jobs: list[Job]
    scenarios: frozenset[str]
    seed: int
    start: float  # epoch seconds (rendered as naive local DAGMan time)
    submit_dir: str
    dag_base: str  # e.g. "synth-0" -> synth-0.dag
    _index: dict[str, Job] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def dag(self) -> str:
        return f"{self.dag_base}.dag"

    def job(self, name: str) -> Job:
        """Job by node name (indexed: the simulator asks for every node, every cycle)."""
        if len(self._index) != len(self.jobs) or name not in self._index:
            self._index = {j.name: j for j in self.jobs}
        return self._index[name]


def parse_scenarios(scenario: str | list[str] | tuple[str, ...]) -> frozenset[str]:
    """Accept "retry,held" or a list; reject unknown names early (typos in tests)."""
    names = scenario.split(",") if isinstance(scenario, str) else list(scenario)
    clean = frozenset(n.strip() for n in names if n.strip()) or frozenset({"success"})
    unknown = clean - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenario(s) {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    return clean


def stable_uuid(rng: random.Random) -> str:
    """A uuid4-shaped id drawn from the seeded generator, so reruns match."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def build_plan(*, jobs: int, scenario: str | list[str], seed: int, label: str = "synth",
               root_uuid: str | None = None, start: float = 1700000000.0,
               submit_dir: str | None = None, dag_base: str | None = None) -> Plan:
    """Lay out create_dir, stage_in, N compute jobs, stage_out/register chunks, cleanup."""
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    scenarios = parse_scenarios(scenario)
    rng = random.Random(seed)
    wf_uuid = stable_uuid(rng)
    dag_base = dag_base or f"{label}-0"
    submit_dir = submit_dir or f"/home/synth/submit/synth/pegasus/{label}/run0001"
    create = Job(f"create_dir_{label}_0_local", 6, "pegasus::dirmanager")
    stage_in = Job("stage_in_local_local_0_0", 2, "pegasus::transfer", parents=[create.name])
    computes = [Job(f"{_xform(i)}_ID{i:07d}", 1, _xform(i), task_id=f"ID{i:07d}",
                    site="condorpool", parents=[stage_in.name]) for i in range(1, jobs + 1)]
    plan_jobs = [create, stage_in, *computes]
    outs = []
    for k in range(0, jobs, STAGE_OUT_CHUNK):
        so = Job(f"stage_out_local_local_{k // STAGE_OUT_CHUNK}_0", 3, "pegasus::transfer",
                 parents=[c.name for c in computes[k:k + STAGE_OUT_CHUNK]])
        reg = Job(f"register_local_{k // STAGE_OUT_CHUNK}_0", 4, "pegasus::rc-client",
                  parents=[so.name])
        outs.append(so)
        plan_jobs += [so, reg]
    plan_jobs.append(Job(f"cleanup_{label}_0_local", 8, "pegasus::cleanup",
                         parents=[o.name for o in outs]))
    plan = Plan(label, wf_uuid, root_uuid or wf_uuid, plan_jobs, scenarios, seed, start,
                submit_dir, dag_base)
    _apply_scenarios(plan, computes)
    return plan


def _xform(i: int) -> str:
    return ("preprocess", "findrange", "analyze")[i % 3]


def _apply_scenarios(plan: Plan, computes: list[Job]) -> None:
    """Each scenario touches its own compute job (cycling when N is small), so they compose."""
    s = plan.scenarios
    slots = iter(range(10**9))

    def pick() -> Job:
        return computes[next(slots) % len(computes)]

    if "retry" in s:
        pick().attempts = [FAIL, OK]
    if "held" in s:
        pick().attempts = [HELD]
    if "evicted" in s:
        pick().attempts = [EVICTED]
    if "submit_failure" in s:
        pick().attempts = [SUBMIT_FAIL, OK]
    if "pre_failure" in s:
        j = pick()
        j.pre, j.attempts = True, [PRE_FAIL, OK]
    if "clustered" in s:
        pick().records = 3
    if "xml_kickstart" in s:
        pick().xml = True
    if "held_abort" in s:
        j = pick()
        j.attempts, j.retry = [HELD_ABORT], 0
    if "post_failure" in s:
        j = pick()
        j.attempts, j.retry = [POST_FAIL], 0
    if "rescue" in s:
        j = pick()
        j.attempts, j.retry, j.rescue_attempts = [FAIL, FAIL], 1, [OK]
    if "hierarchical" in s:
        j = pick()
        j.name, j.xform, j.jobtype, j.task_id = ("pegasus-plan_inner_subworkflow",
                                                 "condor::dagman", 10, "inner_subworkflow")
        j.site, j.pre, j.post, j.subwf = "local", True, False, "inner_subworkflow"
        for other in plan.jobs:
            other.parents = [j.name if p == f"{_old_name(computes, j)}" else p for p in other.parents]


def _old_name(computes: list[Job], job: Job) -> str:
    """Name the renamed hierarchical job had, to fix up its children's parent lists."""
    idx = computes.index(job) + 1
    return f"{_xform(idx)}_ID{idx:07d}"
