"""Render the static files of a submit directory (braindump, .dag, .sub, static.bp, ...).

Formats follow what Pegasus 5.0 writes; values are synthetic but self-consistent:
every name, uuid and path agrees across files so monitord can join them.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from streamer.synth.spec import JOB_TYPES, Job, Plan

PEGASUS_VERSION = "5.0.5"
BIN = "/opt/pegasus/5.0.5/bin"


def sha(text: str) -> str:
    """Deterministic fake checksum of a synthetic file."""
    return hashlib.sha256(text.encode()).hexdigest()


def wf_stamp(plan: Plan) -> str:
    """Pegasus' planning timestamp (braindump `timestamp`, sub `pegasus_wf_time`)."""
    return time.strftime("%Y%m%dT%H%M%S%z", time.gmtime(plan.start - 10))


def braindump(plan: Plan, user: str) -> str:
    fields = {
        "user": user, "grid_dn": None, "submit_hostname": "synth.example.org",
        "root_wf_uuid": plan.root_uuid, "wf_uuid": plan.wf_uuid,
        "dax": f"/home/{user}/{plan.label}/workflow.yml", "dax_label": plan.label,
        "dax_index": "0", "dax_version": "5.0.4", "pegasus_wf_name": plan.dag_base,
        "timestamp": wf_stamp(plan), "basedir": f"/home/{user}/submit", "submit_dir": plan.submit_dir,
        "planner": f"{BIN}/pegasus-plan", "planner_version": PEGASUS_VERSION,
        "pegasus_build": "20230217201750Z",
        "planner_arguments": '"--dir submit --sites condorpool --output-sites local --cleanup leaf workflow.yml "',
        "jsd": "jobstate.log", "rundir": "run0001", "bindir": BIN, "vogroup": "pegasus",
        "uses_pmc": "false", "properties": "pegasus.synth.properties",
        "condor_log": f"{plan.dag_base}.log", "dag": plan.dag, "type": "dag",
        "notify": f"{plan.dag_base}.notify",
    }
    return "".join(f"{k}: null\n" if v is None else f"{k}: {json.dumps(v)}\n" for k, v in fields.items())


def dag_file(plan: Plan) -> str:
    """The .dag Pegasus writes: JOB/SCRIPT/PRIORITY/RETRY/CATEGORY/VARS, then edges."""
    head = ["#" * 70, "# PEGASUS WMS GENERATED DAG FILE", f"# DAG {plan.label}",
            "# Index = 0, Count = null", "#" * 70, "MAXJOBS registration 1", "MAXJOBS stagein 10",
            "MAXJOBS cleanup 4", "MAXJOBS stageout 10", ""]
    body: list[str] = []
    for job in plan.jobs:
        body.append(f"JOB {job.name} {job.sub}")
        if job.pre:
            body.append(f"SCRIPT PRE {job.name} {pre_command(plan, job)}")
        if job.post:
            body.append(f"SCRIPT POST {job.name} {BIN}/pegasus-exitcode  -r $RETURN "
                        f"-l {plan.dag_base}.exitcode.log -M {plan.dag_base}.cache.meta   "
                        f".//00/00/{job.name}.out")
        body += [f"PRIORITY {job.name} {10 * job.jobtype}", f"RETRY {job.name} {job.retry}",
                 f'VARS {job.name} +DAGNodeRetry="$(RETRY)"', ""]
    edges = [f"PARENT  {p} CHILD {j.name}" for j in plan.jobs for p in j.parents]
    return "\n".join(head + body + edges + ["#" * 70, "# End of DAG", "#" * 70]) + "\n"


def pre_command(plan: Plan, job: Job) -> str:
    """PRE script line; for sub-workflows the pegasus-plan call with its log option."""
    if job.subwf:
        return (f"00/00/{job.name}.pre.sh  -Dpegasus.log.*={plan.submit_dir}/{job.name}.pre.log "
                f"-Dpegasus.workflow.root.uuid={plan.root_uuid} --dir /home/synth/submit "
                f"--relative-submit-dir 00/00/./{job.subwf} --basename inner --sites condorpool "
                f"--output-sites local --cleanup none --deferred /home/synth/inner.yml")
    return f"{BIN}/pegasus-synth-pre {job.name}"


def sub_file(plan: Plan, job: Job) -> str:
    """HTCondor submit file with the pegasus_* classads monitord reads."""
    sd = plan.submit_dir
    universe = "scheduler" if job.subwf else ("vanilla" if job.jobtype == 1 else "local")
    env = (f"LANG=en_US.UTF-8 CONDOR_JOBID=$(cluster).$(process) PEGASUS_WF_UUID={plan.wf_uuid} "
           f"PEGASUS_WF_LABEL={plan.label} PEGASUS_DAG_JOB_ID={job.name} PEGASUS_SITE={job.site}")
    if job.subwf:
        env = f"_CONDOR_DAGMAN_LOG={sd}/00/00/./{job.subwf}/inner.dag.dagman.out _CONDOR_MAX_DAGMAN_LOG=0 " + env
        exe, args = "/usr/bin/condor_dagman", (" -p 0  -f -l . -Notification never -Lockfile inner.dag.lock "
                                               "-Dag inner.dag -AutoRescue 1 -DoRescueFrom 0 ")
    elif job.jobtype == 1:
        exe, args = f"{sd}/00/00/{job.name}.sh", ""
    else:
        exe = "/opt/pegasus/5.0.5/share/pegasus/sh/pegasus-lite-local.sh"
        args = f"pegasus-kickstart  -n {job.xform} -N null -i - -R local  -L {plan.label} pegasus-transfer "
    lines = ["#" * 70, "# PEGASUS WMS GENERATED SUBMIT FILE", f"# DAG : {plan.label}, Index = 0, Count = null",
             f"# SUBMIT FILE NAME : {job.name}.sub", "#" * 70,
             "stream_error  = false", "stream_output = false", f'environment = "{env}"']
    if args:
        lines.append(f'arguments = "{args}"')
    lines += [f"error = {sd}//00/00/{job.name}.err", f"executable = {exe}"]
    if job.jobtype not in (1, 10):
        lines.append(f"input = {sd}//00/00/{job.name}.in")
    lines += [f"log = {sd}/{plan.dag_base}.log", "notification = NEVER",
              f"output = {sd}//00/00/{job.name}.out", "periodic_release = False",
              f"priority = {10 * job.jobtype}", f"submit_event_user_notes = pool:{job.site}",
              f"universe = {universe}", '+pegasus_generator = "Pegasus"',
              f'+pegasus_root_wf_uuid = "{plan.root_uuid}"', f'+pegasus_wf_uuid = "{plan.wf_uuid}"',
              f'+pegasus_version = "{PEGASUS_VERSION}"', f'+pegasus_wf_name = "{plan.dag_base}"',
              f'+pegasus_wf_time = "{wf_stamp(plan)}"', f'+pegasus_wf_xformation = "{job.xform}"',
              f'+pegasus_wf_dax_job_id = "{job.task_id}"', f'+pegasus_wf_dag_job_id = "{job.name}"',
              f"+pegasus_job_class = {job.jobtype}", f'+pegasus_site = "{job.site}"',
              "+pegasus_job_runtime = 0", "+pegasus_cores = 1", "+pegasus_gpus = 1",
              "+pegasus_cluster_size = 1", "queue", "#" * 70, "# END OF SUBMIT FILE", "#" * 70]
    return "\n".join(lines) + "\n"


def condor_dag_sub(plan: Plan) -> str:
    """<dag>.condor.sub: how pegasus-run submitted DAGMan."""
    return "\n".join([
        f"# Filename: {plan.dag}.condor.sub", f"# Generated by condor_submit_dag {plan.dag}",
        "universe\t= scheduler", "executable\t= /usr/bin/condor_dagman", "getenv\t\t= True",
        f"output\t\t= {plan.dag}.lib.out", f"error\t\t= {plan.dag}.lib.err", f"log\t\t= {plan.dag}.dagman.log",
        "remove_kill_sig\t= SIGUSR1",
        f'arguments\t= "-p 0 -f -l . -Lockfile {plan.dag}.lock -AutoRescue 1 -DoRescueFrom 0 -Dag {plan.dag} '
        '-MaxPost 20"',
        f'environment\t= "_CONDOR_MAX_DAGMAN_LOG=0 _CONDOR_DAGMAN_LOG={plan.dag}.dagman.out PEGASUS_METRICS=true "',
        f'+pegasus_wf_uuid="{plan.wf_uuid}"', f'+pegasus_root_wf_uuid="{plan.root_uuid}"',
        f'+pegasus_wf_name="{plan.dag_base}"', f'+pegasus_version="{PEGASUS_VERSION}"',
        "+pegasus_job_class=11", '+pegasus_wf_xformation="pegasus::dagman"', "queue", ""])


def _bp_ts(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int((ts % 1) * 1e6):06d}Z"


def static_bp(plan: Plan) -> str:
    """The planner's static.bp: tasks, metadata, jobs, task-job map, job edges."""
    t = plan.start - 10.0
    x = f"xwf.id={plan.wf_uuid}"
    out: list[str] = []

    def add(event: str, rest: str) -> None:
        nonlocal t
        t += 0.000123
        out.append(f"ts={_bp_ts(t)} event={event} {x}{(' ' + rest) if rest else ''}")

    tasks = [j for j in plan.jobs if j.jobtype in (1, 10)]
    for j in tasks:
        add("task.info", f'task.id="{j.task_id}" type="{j.jobtype}" type_desc="{JOB_TYPES[j.jobtype]}" '
                         f'transformation="{j.xform}" argv="-i f.in -o f.{j.task_id}"')
    add("static.meta.start", "")
    add("xwf.meta", 'key="wf.api" value="python"')
    add("static.meta.end", "")
    for j in plan.jobs:
        add("job.info", f'job.id="{j.name}" submit_file="{j.sub}" type="{j.jobtype}" '
                        f'type_desc="{JOB_TYPES[j.jobtype]}" clustered="{1 if j.records > 1 else 0}" '
                        f'max_retries="{j.retry}" executable="/usr/bin/{j.xform.split(":")[-1]}" '
                        f'task_count="{j.records if j.jobtype == 1 else 0}"')
    for j in tasks:
        add("wf.map.task_job", f'job.id="{j.name}" task.id="{j.task_id}"')
    for j in plan.jobs:
        for p in j.parents:
            add("job.edge", f'parent.job.id="{p}" child.job.id="{j.name}"')
    return "\n".join(out) + "\n"


def workflow_yml(plan: Plan) -> str:
    """The abstract workflow the planner read (informational only)."""
    lines = ["x-pegasus: {apiLang: python, createdBy: synth}", "pegasus: 5.0.4", f"name: {plan.label}", "jobs:"]
    for j in plan.jobs:
        if j.jobtype == 1:
            lines += ["- type: job", f"  name: {j.xform}", f"  id: {j.task_id}",
                      f"  arguments: [-i, f.in, -o, f.{j.task_id}]",
                      f"  uses:\n  - {{lfn: f.{j.task_id}, type: output, stageOut: true, registerReplica: true}}"]
    return "\n".join(lines + ["jobDependencies: []"]) + "\n"


def in_file(plan: Plan, job: Job) -> str | None:
    """stdin of auxiliary jobs: transfer/mkdir JSON, or replica lines for register jobs."""
    outputs = _outputs_of(plan, job)
    if job.jobtype == 6:
        return ('[\n  {\n    "id": 1,\n    "type": "mkdir",\n    "target": { "site_label": "local", '
                f'"url": "file:///scratch/{plan.label}/run0001" }} }}\n]\n')
    if job.jobtype == 4:
        return "".join(f'{lfn} file:///output/{lfn} site="local"\n' for lfn in outputs)
    if job.jobtype in (2, 3, 8):
        items = [{"type": "transfer", "linkage": "output", "lfn": lfn, "id": i + 1,
                  "src_urls": [{"site_label": "local", "url": f"file:///scratch/{lfn}"}],
                  "dest_urls": [{"site_label": "local", "url": f"file:///output/{lfn}"}]}
                 for i, lfn in enumerate(outputs[:50])]
        return json.dumps(items, indent=1) + "\n"
    return None


def _outputs_of(plan: Plan, job: Job) -> list[str]:
    """Files a stage_out/register job handles: the outputs of its compute ancestors."""
    if job.jobtype == 3:
        return [f"f.{plan.job(p).task_id}" for p in job.parents]
    if job.jobtype == 4:
        return _outputs_of(plan, plan.job(job.parents[0]))
    return []


def meta_file(lfn: str, user: str, ctime: str) -> str:
    """The .meta JSON pegasus-exitcode writes for a job's outputs."""
    return json.dumps([{"_id": lfn, "_type": "file", "_attributes": {
        "user": user, "size": "1779", "ctime": ctime, "checksum.type": "sha256",
        "checksum.value": sha(lfn), "checksum.timing": "0.0"}}], indent=2) + "\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
