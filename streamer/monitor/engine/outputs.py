"""A finished job's files -> events: its kickstart record(s) (through
`invocations`), .err and .out files (PegasusLite exit code and host, monitoring
payloads), integrity metrics (int.metric, job_inst.tag), registrations (rc.pfn),
output metadata (rc.meta) and the job_inst.composite event."""

from __future__ import annotations

import os
import re
import socket
from typing import Any

from streamer.monitor.parsers import kickstart
from streamer.monitor.engine.context import Context, Emit
from streamer.monitor.engine.dagfile import DagFile
from streamer.monitor.engine.invocations import Invocations
from streamer.monitor.engine.job import MAX_OUTPUT_LENGTH, REQUEST_KEYS, Job, job_fields, read_text

LEFT_OUT = (": its invocation is made from the .sub file and DAGMan's times; host, file and integrity events "
            "are left out")
RE_LITE_EXIT = re.compile(r"^PegasusLite: exitcode (\d+).*$", re.MULTILINE)
RE_LITE_HOST = re.compile(r"^.*Executing on host\s*(\S+)(?:\s*IP=(\S+))*.*$", re.MULTILINE)


class Outputs:
    """Reads a finished job's files and emits what they tell."""

    def __init__(self, ctx: Context, dag: DagFile, emit: Emit) -> None:
        self.ctx = ctx
        self.dag = dag
        self.emit = emit
        self.wf_uuid = ctx.identity.wf_uuid
        self.inv = Invocations(ctx, dag, emit)

    def composite(self, job: Job, fields: dict[str, Any]) -> dict[str, Any]:
        fields["int_error_count"] = sum(metric[4] for metric in job.integrity)
        if job.host_id:
            fields["hostname"] = job.host_id
        fields["jobtype"] = job.jobtype_desc()
        if job.cpu_attribs:
            fields.update(job.cpu_attribs)
        for key, value in job.classads.items():
            if key in REQUEST_KEYS:
                fields[REQUEST_KEYS[key]] = value
        for event in job.monitoring_events:
            if event.get("monitoring_event") == "metadata":
                for item in event.get("payload") or []:
                    if isinstance(item, dict) and "name" in item and "value" in item:
                        fields["metadata__" + str(item["name"])] = item["value"]
        for event in job.multipart_events:
            for name, given in event.items():  # not `key, value`: compiled, those are `str` (the classads above)
                if name == "multipart":
                    continue
                existing = fields.get(name)
                if existing is None:
                    fields[name] = given
                elif isinstance(existing, list) and isinstance(given, list):
                    existing.extend(given)
        fields["invocations"] = list(job.invocations)
        if self.ctx.identity.app:
            fields["app"] = self.ctx.identity.app
        if self.ctx.identity.label:
            fields["wf"] = self.ctx.identity.label
        return fields

    def parse_job_output(self, job: Job) -> None:
        """Kickstart record(s), .err file, registrations: inv.*, host.info, rc.*, int.metric events."""
        if self.ctx.identity.plain:
            return  # a plain DAG's job output is the job's own: no kickstart record to read
        info = self.dag.jobs.get(job.name)
        parse_kickstart = not (info is not None and info.is_subdag)
        records: list[dict[str, Any]] = []
        if parse_kickstart:
            path = os.path.join(job.submit_dir, job.name) + ".out"
            if self.dag.has_post(job.name) or self.dag.is_pmc:
                path += f".{job.output_counter:03d}"
                job.rotated = True
            records = self._kickstart_records(job, path)
        lite_path, lite_text = self._lite_error_file(job)
        m = RE_LITE_EXIT.search(lite_text) if lite_text is not None else None
        if m:
            job.exitcode = m.group(1)
        self._read_err_file(job, lite_path, lite_text)
        task_id = 1
        if records:
            found = self.inv.fold_records(job, records)
            if found:
                for record in records:
                    if "invocation" not in record:
                        continue
                    self.inv.task_start(job, "MAIN_JOB", task_id, record)
                    self.inv.task_end(job, "MAIN_JOB", task_id, record)
                    if job.monitoring_events:
                        self._monitoring_events(job, task_id)
                    outputs = record.get("outputs")
                    if outputs is not None:
                        self._output_metadata(job, outputs)
                    task_id += 1
                    self.inv.host_info(job, record)
            else:
                self.inv.clustered_tasks(job, records)
        else:
            self.inv.task_start(job, "MAIN_JOB", task_id)
            self.inv.task_end(job, "MAIN_JOB", task_id)
            if self.ctx.options.store_stdout:  # --skip-stdout: monitord leaves the .out unread
                self.read_out_file(job)
            if job.name.startswith("subdax_") or not parse_kickstart:
                fqdn = socket.getfqdn()
                try:
                    address = socket.gethostbyname(fqdn)
                except OSError:
                    address = "unknown"
                self.inv.host_info(job, {"hostname": fqdn, "hostaddr": address, "resource": job.site})
        self._integrity_events(job)
        self._register_files(job)

    def _kickstart_records(self, job: Job, path: str) -> list[dict[str, Any]]:
        """The records of a job's kickstart output; what is left out is said, naming file and job, and counted."""
        expected = not job.name.startswith("noop_") and job.dagman_out is None  # a sub-workflow's: DAGMan's
        problems: list[str] = []
        text = read_text(path, problems)
        if text is None:
            if expected:
                reason = "special_file" if problems else "kickstart_missing"
                why = problems[0] if problems else f"cannot read kickstart output {path}"
                self.ctx.warn(f"{why}: job {job.name}{LEFT_OUT}", reason=reason)
            return []
        records = kickstart.parse(text, path, problems)
        for problem in problems:
            self.ctx.warn(f"{problem}: job {job.name}{LEFT_OUT if not records else ''}", reason="kickstart_record")
        if not records and not problems and expected:
            what = "empty" if not text.strip() else "holds no kickstart record"
            self.ctx.warn(f"{path}: kickstart output {what}: job {job.name}{LEFT_OUT}", reason="kickstart_empty")
        return records

    def _output_metadata(self, job: Job, outputs: dict[str, dict[str, str]]) -> None:
        count, duration = 0, 0.0
        for meta in outputs.values():
            if "checksum.timing" in meta:
                count += 1
                duration += float(meta["checksum.timing"])
        if count > 0:
            job.add_integrity("compute", "output", count=count, duration=duration)
        for lfn, meta in outputs.items():
            for key, value in meta.items():
                self.emit("rc.meta", {"ts": self.ctx.current_ts, "xwf.id": self.wf_uuid,
                                      "lfn.id": lfn, "key": key, "value": value})

    def _monitoring_events(self, job: Job, task_id: int) -> None:
        for event in job.monitoring_events:
            base = job_fields(self.wf_uuid, job)
            if job.sched_id is not None:
                base["sched.id"] = job.sched_id
            base["monitoring_event"] = event.get("monitoring_event", "monitoring.additional")
            base["ts"] = event.get("ts", self.ctx.current_ts)
            for item in event.get("payload") or []:
                fields = dict(base)
                if isinstance(item, dict):
                    fields.update(item)
                self.emit("task.monitoring", fields)

    def _integrity_events(self, job: Job) -> None:
        for kind, file_type, count, succeeded, failed, duration in job.integrity:
            fields = job_fields(self.wf_uuid, job)
            fields.update({"type": kind, "file_type": file_type,
                           "count": count if count > 0 else succeeded + failed,
                           "duration": duration, "ts": self.ctx.current_ts})
            tag = dict(fields)
            self.emit("int.metric", fields)
            if failed > 0:
                for key in ("duration", "type", "file_type"):
                    tag.pop(key)
                tag["name"] = "int.error"
                tag["count"] = failed
                self.emit("job_inst.tag", tag)

    def _register_files(self, job: Job) -> None:
        """rc.pfn per line of a successful registration job's .in file."""
        if not job.name.startswith("register_") or job.exitcode != 0:
            return
        path = os.path.join(job.submit_dir, f"{job.name}.in")
        text = read_text(path)
        if text is None:
            self.ctx.warn(f"cannot read registration input {path}")
            return
        for number, line in enumerate(text.splitlines(), 1):
            entry = line.split()
            if len(entry) < 2:
                if entry:
                    self.ctx.warn(f"{path}:{number}: not `lfn pfn site=...`; skipped")
                continue
            site = None
            for pair in entry[2:]:
                key, _, value = pair.partition("=")
                if key == "site":
                    site = value.strip('"')
                    break
            # monitord stamps these with the wall clock; the job's time keeps ids stable
            self.emit("rc.pfn", {"ts": self.ctx.current_ts, "xwf.id": self.wf_uuid,
                                 "lfn.id": entry[0], "pfn": entry[1], "site": site})

    def _lite_error_file(self, job: Job) -> tuple[str | None, str | None]:
        """(path, text) of the .sub file's `error` file, where PegasusLite writes its exit code."""
        if job.error_file is None:
            return None, None
        name = job.error_file + (f".{job.output_counter:03d}" if job.rotated else "")
        path = os.path.join(self.ctx.run_dir, name)
        return path, read_text(path)

    def _read_err_file(self, job: Job, read_path: str | None, read: str | None) -> None:
        """The job's `.err` file; `read` is the text just read from `read_path` (the same file, as a
        rule: the .sub file's `error` path; read once then, as a string compare of the paths says)."""
        if job.error_file is None:
            job.stderr_text = None
            return
        name = job.name + ".err" + (f".{job.output_counter:03d}" if job.rotated else "")
        path = os.path.join(job.submit_dir, name)
        text = read if path == read_path else read_text(path)
        if text is None:
            job.stderr_text = None
            return
        split = kickstart.split_monitoring(text)
        job.stderr_text = kickstart.quote(split.text[:MAX_OUTPUT_LENGTH - 2000])
        job.add_monitoring_events(split.events)
        m = RE_LITE_HOST.search(split.text)
        if m:
            job.host_id, job.host_ip = m.group(1), m.group(2)

    def read_out_file(self, job: Job, out_file: str | None = None) -> None:
        if out_file is None:
            name = job.name + ".out" + (f".{job.output_counter:03d}" if job.rotated else "")
            out_file = os.path.join(job.submit_dir, name)
        elif not os.path.isabs(out_file):
            out_file = os.path.join(self.ctx.run_dir, out_file)
        text = read_text(out_file)
        if text is None:
            job.stdout_text = None
            return
        split = kickstart.split_monitoring(text)
        job.stdout_text = kickstart.quote("#@ 1 stdout\n" + split.text[:MAX_OUTPUT_LENGTH - 2000])
        job.add_monitoring_events(split.events)
