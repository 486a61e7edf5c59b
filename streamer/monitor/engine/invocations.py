"""A job's invocations: inv.start/inv.end of its PRE and POST scripts and of each
kickstart record (or clustered task), job_inst.host.info, and the folding of the
kickstart records into the job (site, user, cwd, stdout/stderr texts, cpu)."""

from __future__ import annotations

import os
from typing import Any

from streamer.monitor.parsers import kickstart
from streamer.monitor.engine.context import Context, Emit
from streamer.monitor.engine.dagfile import DagFile, DagJob
from streamer.monitor.engine.job import MAX_OUTPUT_LENGTH, Job, job_fields, read_text

PRESCRIPT_ID = -1
POSTSCRIPT_ID = -2


class Invocations:
    """inv.* and host.info events of one workflow's jobs."""

    def __init__(self, ctx: Context, dag: DagFile, emit: Emit) -> None:
        self.ctx = ctx
        self.dag = dag
        self.emit = emit
        self.wf_uuid = ctx.identity.wf_uuid

    def task_start(self, job: Job, kind: str, task_id: int | None = None,
                    record: dict[str, Any] | None = None) -> None:
        record = record or {}
        fields = job_fields(self.wf_uuid, job)
        if kind == "PRE_SCRIPT":
            fields["inv.id"] = PRESCRIPT_ID
            fields["ts"] = job.pre_start
        elif kind == "POST_SCRIPT":
            fields["inv.id"] = POSTSCRIPT_ID
            fields["ts"] = job.post_start
        else:
            fields["inv.id"] = task_id
            start = kickstart.epochdate(record["start"]) if "start" in record else None
            if start is None:
                start = job.main_start if job.main_start is not None else job.main_done
            if start is not None:
                fields["ts"] = start
        if fields.get("ts") is None:
            fields["ts"] = self.ctx.current_ts  # monitord leaves it to the wall clock
        self.emit("inv.start", fields)

    def task_end(self, job: Job, kind: str, task_id: int | None = None,
                  record: dict[str, Any] | None = None) -> None:
        record = record or {}
        fields = job_fields(self.wf_uuid, job)
        info = self.dag.jobs.get(job.name)
        if kind in ("PRE_SCRIPT", "POST_SCRIPT"):
            pre = kind == "PRE_SCRIPT"
            start, done = (job.pre_start, job.pre_done) if pre else (job.post_start, job.post_done)
            fields["inv.id"] = PRESCRIPT_ID if pre else POSTSCRIPT_ID
            fields["transformation"] = "dagman::pre" if pre else "dagman::post"
            fields["start_time"] = start if start is not None else done
            if start is not None and done is not None:
                fields["dur"] = done - start
                fields["remote_cpu_time"] = done - start
            else:
                fields["dur"] = 0
            fields["exitcode"] = str(job.pre_exitcode if pre else job.post_exitcode)
            if info is not None:
                executable, argv = (info.pre_exec, info.pre_args) if pre else (info.post_exec, info.post_args)
                fields["executable"] = executable if executable is not None else ""
                if argv is not None:
                    fields["argv"] = argv
            else:
                fields["executable"] = ""
            fields["ts"] = done
        else:
            self._main_task_end(job, task_id, record, fields, info)
        exitcode = fields.get("exitcode")
        if exitcode != "0":  # monitord compares with the text "0": a kickstart int always reads as an error
            fields["level"] = "Error"
        if fields.get("ts") is None:
            fields["ts"] = self.ctx.current_ts
        self.emit("inv.end", fields)

    def _main_task_end(self, job: Job, task_id: int | None, record: dict[str, Any],
                       fields: dict[str, Any], info: DagJob | None) -> None:
        is_subdag = info is not None and info.is_subdag
        fields["inv.id"] = task_id
        if "transformation" in record:
            fields["transformation"] = record["transformation"]
        elif job.transformation is not None:
            fields["transformation"] = job.transformation
        elif is_subdag:
            fields["transformation"] = "condor::dagman"
        if "derivation" in record:
            if record["derivation"] != "null":
                fields["task.id"] = record["derivation"]
        elif job.derivation is not None:
            fields["task.id"] = job.derivation
        start = kickstart.epochdate(record["start"]) if "start" in record else None
        if start is None:
            start = job.main_start if job.main_start is not None else job.main_done
        if start is not None:
            fields["start_time"] = start
        if "duration" in record:
            fields["dur"] = record["duration"]
        elif job.main_start is not None and job.main_done is not None:
            fields["dur"] = int(job.main_done) - int(job.main_start)
        elif job.main_done is not None:
            fields["dur"] = 0
        if "utime" in record and "stime" in record:
            try:
                cpu = float(record["utime"]) + float(record["stime"])
                fields["remote_cpu_time"] = cpu
                duration = float(fields.get("dur", 0))
                if duration != 0.0:
                    fields["avg_cpu"] = cpu / duration
            except (TypeError, ValueError):
                pass
        if "maxrss" in record:
            fields["maxrss"] = record["maxrss"]
        if start is not None and "duration" in record:
            try:
                fields["ts"] = int(start + float(record["duration"]))
            except (TypeError, ValueError):
                fields["ts"] = job.main_done
        else:
            fields["ts"] = job.main_done
        if "raw" in record:
            fields["exitcode"] = record["raw"]
        elif job.exitcode is not None:
            fields["exitcode"] = str(job.exitcode)
        if "name" in record:
            fields["executable"] = record["name"]
        elif job.executable is not None:
            fields["executable"] = job.executable
        else:
            fields["executable"] = "condor_dagman" if is_subdag else ""
        if "argument-vector" in record:
            if record["argument-vector"]:
                fields["argv"] = record["argument-vector"]
        elif job.arguments:
            fields["argv"] = job.arguments

    def host_info(self, job: Job, record: dict[str, Any]) -> None:
        fields = job_fields(self.wf_uuid, job)
        fields["hostname"] = record.get("hostname", "unknown")
        fields["ip"] = record.get("hostaddr", "unknown")
        fields["site"] = record.get("resource", "unknown")
        if "total" in record:  # XML records: monitord's own key
            fields["total_memory"] = record["total"]
        elif "ram" in record:
            fields["total_memory"] = record["ram"]  # YAML: monitord looks up `total`, which its parser never sets
        if "system" in record and "release" in record and "machine" in record:
            fields["uname"] = f"{record['system']}-{record['release']}-{record['machine']}"
        fields["ts"] = self.ctx.current_ts
        self.emit("job_inst.host.info", fields)


    def fold_records(self, job: Job, records: list[dict[str, Any]]) -> bool:
        """Fold the kickstart records into the job (site, user, cwd, texts, cpu, invocations)."""
        job.kickstart_parsed = True
        found = False
        number = 0
        parts: list[str] = []
        size = 0
        for record in records:
            if "multipart" in record:
                summary = record.get("integrity_summary")
                if isinstance(summary, dict):
                    job.add_integrity("check", "input", succeeded=summary.get("succeeded", 0),
                                      failed=summary.get("failed", 0), duration=summary.get("duration", 0.0))
                elif "integrity_summary" not in record:
                    job.multipart_events.append(record)
                continue
            if "invocation" not in record:
                continue
            number += 1
            if not found:
                if "resource" in record:
                    job.site = record["resource"]
                if "user" in record:
                    job.remote_user = record["user"]
                if "cwd" in record:
                    job.remote_dir = record["cwd"]
                found = True
            if "hostname" in record:
                if job.host_id is None:
                    job.host_id = record["hostname"]
                elif job.host_id != record["hostname"]:
                    if job.host_ip is not None:
                        record["hostaddr"] = job.host_ip
                    record["hostname"] = job.host_id
            signal = " "
            signalled = record.get("signalled")  # XML records only, as in monitord
            if isinstance(signalled, dict):
                signal = "Job was " + str(signalled.get("action", ""))
                if "signal" in signalled:
                    signal += f" with signal {signalled['signal']}"
            if "stdout" in record:
                out = kickstart.split_monitoring(str(record["stdout"] or ""))
                job.add_monitoring_events(out.events)
                snippet = _snippet(out.text, size)
                if snippet is not None:
                    parts.append(kickstart.quote(f"#@ {number:d} stdout\n") + kickstart.quote(snippet) + "%0A")
                    size += len(snippet) + 20
            if "stderr" in record:
                err = kickstart.split_monitoring(str(record["stderr"] or ""))
                job.add_monitoring_events(err.events)
                snippet = _snippet(signal + err.text, size)
                if snippet is not None:
                    parts.append(kickstart.quote(f"#@ {number:d} stderr\n") + kickstart.quote(snippet) + "%0A")
                    size += len(snippet) + 20
            if "cpu" in record:  # XML records carry their cpu attributes ready-made
                job.cpu_attribs = dict(record["cpu"])
            elif job.cpu_attribs is None:
                job.cpu_attribs = {key: record[key] for key in
                                   ("cpu_count", "cpu_speed", "cpu_vendor", "cpu_model",
                                    "ram", "system", "release", "machine") if key in record}
            job.invocations.append({key: record[key] for key in
                                    ("transformation", "exitcode", "duration", "user", "hostname",
                                     "hostaddr", "maxrss", "tot_ip_size_mb", "tot_op_size_mb") if key in record})
        job.stdout_text = "".join(parts) if parts else ""
        for record in records:
            if "clustered" in record:
                if "duration" in record:
                    job.cluster_dur = record["duration"]
                if "start" in record:
                    start = kickstart.epochdate(record["start"])
                    if start is not None:
                        job.cluster_start = start
                break
        return found

    def clustered_tasks(self, job: Job, records: list[dict[str, Any]]) -> None:
        """Task records without kickstart: the .in file names their transformations."""
        tasks: dict[int, dict[str, Any]] = {}
        for record in records:
            if "task" in record and "id" in record:
                try:
                    tasks[int(record["id"])] = record
                except ValueError:
                    self.ctx.warn(f"job {job.name}: task id {record['id']!r} is not a number")
        if not tasks or not self._read_in_file(job, tasks):
            return
        task_id = 1
        for number in sorted(tasks):
            record = tasks[number]
            if "status" in record:
                record["exitcode"] = record["raw"] = record["status"]
            if not all(k in record for k in ("transformation", "derivation", "start", "duration",
                                              "name", "argument-vector")):
                continue
            self.task_start(job, "MAIN_JOB", task_id, record)
            self.task_end(job, "MAIN_JOB", task_id, record)
            task_id += 1

    def _read_in_file(self, job: Job, tasks: dict[int, dict[str, Any]]) -> bool:
        text = read_text(os.path.join(job.submit_dir, job.name) + ".in")
        if text is None:
            return False
        found = 0
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("#@"):
                try:
                    ident, xform, derivation = line[2:].strip().split(None, 2)
                    task = tasks[int(ident)]
                except (ValueError, KeyError):
                    continue
                task["transformation"], task["derivation"] = xform, derivation
            elif line.startswith("#") or line.startswith("EDGE"):
                continue
            else:
                parts = line.split(None, 1)
                found += 1
                listed = tasks.get(found)
                if listed is None:
                    continue
                listed["name"] = parts[0]
                listed["argument-vector"] = parts[1] if len(parts) == 2 else None
        return True

    # ------------------------------------------------------------ checkpoints


def _snippet(text: str, used: int) -> str | None:
    """What still fits of a task's output in the 64 KB stdout budget (monitord's arithmetic)."""
    remaining = MAX_OUTPUT_LENGTH - used - 20
    if len(text) <= remaining:
        return text
    return text[:remaining] if remaining > 0 else None
