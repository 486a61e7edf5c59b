"""generate(): plan a workflow, simulate DAGMan, write a complete submit directory."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from streamer.synth import files
from streamer.synth.dagman import Attempt, Run, Simulator
from streamer.synth.kickstart import (Record, cluster_summary_line, cluster_task_line, iso, multipart_integrity,
                        xml_record, yaml_record)
from streamer.synth.spec import HELD_ABORT, OK, Job, Plan, build_plan

USER = "synth"
START = 1700000000.0  # 2023-11-14T22:13:20Z; a fixed origin keeps output reproducible


def generate(out_dir: str | os.PathLike[str], *, jobs: int = 10, scenario: str | list[str] = "success",
             seed: int = 0, label: str = "synth", start: float = START) -> Path:
    """Write a self-consistent Pegasus 5 submit directory to `out_dir` and return its path.

    The same (jobs, scenario, seed) always yields byte-identical files, whatever the
    local time zone (times are rendered in UTC). `out_dir` must be absent or empty.
    """
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: stale files would mix with the generated ones")
    plan = build_plan(jobs=jobs, scenario=scenario, seed=seed, label=label, start=start + seed * 86400)
    _write_workflow(out, plan, random.Random(seed), first_cluster=10 + seed % 50)
    return out


def _write_workflow(out: Path, plan: Plan, rng: random.Random, first_cluster: int) -> float:
    """Write one (sub-)workflow; returns the time its DAGMan exited."""
    out.mkdir(parents=True, exist_ok=True)

    def spawn(job: Job, start: float, cid: int) -> float:
        return _write_subworkflow(out, plan, job, start, cid)

    sim = Simulator(plan, plan.start, first_cluster, spawn)
    kinds = {j.name: j.attempts for j in plan.jobs}
    runs = [sim.run(kinds, set(), None, first_cluster, 100000 + rng.randrange(899999))]
    if "rescue" in plan.scenarios and runs[0].exit_status:
        files.write(out / f"{plan.dag}.rescue001", _rescue_file(plan, runs[0]))
        sim.now += 120
        sim.state = {}
        retry = {j.name: (j.rescue_attempts or [OK]) for j in plan.jobs}
        dag_cluster = sim.cluster + 1
        sim.cluster += 1
        runs.append(sim.run(retry, set(runs[0].done), f"{plan.dag}.rescue001", dag_cluster,
                            100000 + rng.randrange(899999)))
    elif runs[0].exit_status:
        files.write(out / f"{plan.dag}.rescue001", _rescue_file(plan, runs[0]))
    files.write(out / f"{plan.dag}.dagman.out", "".join(line + "\n" for r in runs for line in r.lines))
    _write_static(out, plan)
    for att in sim.attempts:
        _write_attempt(out, plan, plan.job(att.job), att)
    return runs[-1].end


def _write_subworkflow(out: Path, parent: Plan, job: Job, start: float, cid: int) -> float:
    """Plan the sub-workflow into 00/00/<subwf>.000 with a symlink, like pegasus-plan does."""
    assert job.subwf
    base = out / "00" / "00"
    sub_submit = f"{parent.submit_dir}/00/00/./{job.subwf}"
    plan = build_plan(jobs=3, scenario="success", seed=parent.seed + 1, label="inner",
                      root_uuid=parent.root_uuid, start=start + 3, submit_dir=sub_submit,
                      dag_base="inner")
    end = _write_workflow(base / f"{job.subwf}.000", plan, random.Random(parent.seed + 1), cid)
    link = base / job.subwf
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(f"{job.subwf}.000")
    files.write(base / f"{job.name}.pre.sh", "#!/bin/bash\nset -e\nexec pegasus-plan \"$@\"\n")
    files.write(out / f"{job.name}.pre.log.000",
                f"{time.strftime('%Y.%m.%d %H:%M:%S', time.gmtime(start - 8))}.312 UTC: [INFO]  "
                f"Planner invoked for sub-workflow {job.subwf}\n")
    files.write(out / f"{job.name}.pre.err.000", "PegasusLite: exitcode 0\n")
    files.write(base / f"{job.name}.err", "")
    return end


def _rescue_file(plan: Plan, run: Run) -> str:
    head = ["# Rescue DAG file, created after running", f"#   the {plan.dag} DAG file",
            f"# Total number of Nodes: {len(plan.jobs)}", f"# Nodes premarked DONE: {len(run.done)}",
            f"# Nodes that failed: {len(run.failed)}", f"#   {','.join(run.failed)},<ENDLIST>", ""]
    return "\n".join(head + [f"DONE {n}" for n in run.done]) + "\n"


def _write_static(out: Path, plan: Plan) -> None:
    w = files.write
    w(out / "braindump.yml", files.braindump(plan, USER))
    w(out / plan.dag, files.dag_file(plan))
    w(out / f"{plan.dag}.condor.sub", files.condor_dag_sub(plan))
    w(out / f"{plan.dag_base}.static.bp", files.static_bp(plan))
    w(out / f"{plan.dag_base}.notify", "")
    w(out / "workflow.yml", files.workflow_yml(plan))
    w(out / "pegasus.synth.properties", "pegasus.metrics.app = synth\n")
    for job in plan.jobs:
        w(out / job.sub, files.sub_file(plan, job))
        # monitord logs "sub file modified" when a .sub is newer than its submission
        os.utime(out / job.sub, (plan.start - 5, plan.start - 5))
        text = files.in_file(plan, job)
        if text is not None:
            w(out / "00" / "00" / f"{job.name}.in", text)
        if job.jobtype == 1:
            w(out / "00" / "00" / f"{job.name}.sh", "#!/bin/bash\nset -e\n. pegasus-lite-common.sh\n")


def _write_attempt(out: Path, plan: Plan, job: Job, att: Attempt) -> None:
    """.out.NNN (kickstart), .err.NNN (PegasusLite log) and .meta for one execution."""
    d = out / "00" / "00"
    if job.subwf:
        return  # a DAGMan job: its output is the sub-workflow itself
    host, addr = "worker-%02d.synth.example.org" % (int(att.condor_id.split(".")[0]) % 17), "10.0.0.%d" % (
        int(att.condor_id.split(".")[0]) % 250 + 1)
    lfn = f"f.{job.task_id}" if job.jobtype == 1 else None
    records = []
    step = (att.end - att.start - 0.2) / max(job.records, 1)
    for i in range(job.records):
        records.append(Record(
            xform=job.xform, task_id=job.task_id, site=job.site, label=plan.label,
            start=att.start + 0.1 + i * step, duration=round(step * 0.8, 3), exitcode=att.exitcode,
            executable=f"/usr/bin/{job.xform.split(':')[-1]}", argv=["-i", "f.in", "-o", lfn or "-"],
            hostname=host, hostaddr=addr, user=USER, cwd=f"/var/lib/condor/execute/dir_{att.condor_id}",
            condor_id=att.condor_id, output_lfn=lfn if i == job.records - 1 else None,
            sha256=files.sha(lfn or job.name), size=1779))
    if att.kind == HELD_ABORT:
        body = ""
    elif job.xml:
        body = "".join(xml_record(r) for r in records)
    elif job.records > 1:
        body = "".join(yaml_record(r) + cluster_task_line(i + 1, r) for i, r in enumerate(records))
        body += cluster_summary_line(records)
    else:
        body = yaml_record(records[0])
        if job.jobtype == 1:
            body += multipart_integrity(["f.in", job.xform], files.sha(job.xform))
    files.write(d / f"{job.name}.out.{att.suffix:03d}", body)
    t = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(att.start))
    err = (f"{t}: PegasusLite: version 5.0.5\n{t}: Executing on host {host} IP={addr}\n\n"
           "######################[Pegasus Lite] Executing the user task ######################\n")
    if att.exitcode:
        err += f"{t}: User task failed with exitcode {att.exitcode}\n"
    if att.kind != HELD_ABORT:
        err += f"PegasusLite: exitcode {att.exitcode}\n"
    files.write(d / f"{job.name}.err.{att.suffix:03d}", err if job.jobtype == 1 else "")
    if lfn and att.exitcode == 0 and att.kind != HELD_ABORT:
        files.write(d / f"{job.name}.meta", files.meta_file(lfn, USER, iso(att.end, ms=False)))
    elif job.jobtype != 1:
        files.write(d / f"{job.name}.meta", "[]\n")


__all__ = ["generate"]
