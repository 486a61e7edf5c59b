"""Stampede events -> Stampede rows, shared by the SQLite, PostgreSQL and MySQL endpoints.

The loader reproduces what monitord's `workflow_loader` writes (which event
fills which table, `root_wf_id` / `parent_wf_id`, the host of each job
instance, sub-workflow links, the jobstate names derived from event and
status, integrity, tag, replica-catalog and metadata rows) but is built for
batches: it turns a whole batch into a `Plan` of rows per table, entirely in
memory, and the backend writes the plan in one transaction. The ids the rows
point at come from its `IdCache` (`idcache.py`: why they live in memory, and
how a restart or a failed transaction re-reads them).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from streamer.events import Event
from streamer.endpoints.db.idcache import CachedWorkflow, IdCache
from streamer.endpoints.db.ids import ID_TABLES, IdSource
from streamer.endpoints.db.plan import Plan, SQLDialect
from streamer.endpoints.db.rows import COLUMNS, JOBSTATES, NOOP, Rejected, describe, need, sanitize_argv, undot
from streamer.endpoints.db import triana

log = logging.getLogger("streamer.endpoints.db")

NAME_COLUMN = {"job": "exec_job_id", "task": "abs_task_id"}
"""The column of a job's or task's name in its workflow (`job.id`, `task.id` of the events)."""


class Loader(IdCache):
    """Turns batches of events into Plans; remembers ids between batches (`IdCache`)."""

    def __init__(self, dialect: SQLDialect, ids: IdSource, *, replay: bool = False) -> None:
        super().__init__(dialect, ids)
        self.replay = replay
        self.links_wait = False
        """Refuse (as an orphan the endpoint holds: `dbcommon`) a workflow whose root or parent, or a
        sub-workflow link whose sub-workflow, is not loaded yet, instead of leaving the link empty:
        set with `wait_parents`, when other writers may still be loading them."""
        self._handlers: dict[str, Callable[[Plan, Event], None]] = {
            "stampede.wf.plan": self._workflow,
            "stampede.xwf.start": self._workflowstate,
            "stampede.xwf.end": self._workflowstate,
            "stampede.xwf.meta": self._meta,
            "stampede.job.info": self._declaration,
            "stampede.job.edge": self._edge,
            "stampede.task.info": self._declaration,
            "stampede.task.edge": self._edge,
            "stampede.task.meta": self._meta,
            "stampede.wf.map.task_job": self._task_map,
            "stampede.xwf.map.subwf_job": self._subwf_map,
            "stampede.job_inst.submit.start": self._job_instance_start,
            "stampede.job_inst.pre.start": self._job_instance_start,
            "stampede.job_inst.main.end": self._job_instance_end,
            "stampede.job_inst.post.end": self._job_instance_end,
            "stampede.job_inst.host.info": self._host,
            "stampede.job_inst.tag": self._tag,
            "stampede.inv.end": self._invocation,
            "stampede.int.metric": self._integrity,
            "stampede.rc.meta": self._rc_meta,
            "stampede.rc.pfn": self._rc_pfn,
            "stampede.wf.map.file": self._wf_file,
        }

    # -- planning ---------------------------------------------------------

    def plan(self, events: Sequence[Event]) -> Plan:
        """The rows of `events`; call `seed` for `unknown_uuids(events)` first."""
        plan = Plan(events=len(events), strict=self.dialect.name != "sqlite")
        for event in events:
            handler = self._handlers.get(event.name)
            if handler is None:
                if event.name in NOOP:
                    continue
                if event.name.startswith("stampede.job_inst."):
                    handler = self._jobstate
                else:
                    plan.rejected.append(f"{describe(event)}: no Stampede table takes this event")
                    plan.refused.append((event, "no Stampede table takes this event"))
                    continue
            try:
                handler(plan, event)
            except Rejected as exc:
                plan.rejected.append(f"{describe(event)}: {exc}")
                plan.refused.append((event, str(exc)))
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                plan.rejected.append(f"{describe(event)}: malformed ({type(exc).__name__}: {exc})")
                plan.refused.append((event, f"malformed ({type(exc).__name__}: {exc})"))
        return plan

    def committed(self) -> None:
        """The last plan is in the database."""
        self.replaced |= self._pending_replaced
        self._pending_replaced = set()

    # -- lookups ----------------------------------------------------------

    def _wf(self, uuid: Any) -> CachedWorkflow:
        wf = self.wfs.get(uuid) if isinstance(uuid, str) else None
        if wf is None:
            raise Rejected(f"unknown workflow {uuid} (no stampede.wf.plan loaded for it)")
        return wf

    def _job_id(self, wf: CachedWorkflow, event: Event, plan: Plan | None = None) -> int:
        exec_id = need(event, "job.id")
        job_id = wf.jobs.get(exec_id)
        if job_id is None:
            job_id = wf.jobs.get(triana.unit_job(exec_id, wf.jobs) or "")
        if job_id is None and plan is not None and wf.dax is not None and exec_id == wf.dax[0]:
            job_id = self.ids.next("job")
            row = triana.dax_job_row(exec_id, *wf.dax)
            row.update(job_id=job_id, wf_id=wf.wf_id)
            plan.insert("job", job_id, row)
            wf.jobs[exec_id] = job_id
        if job_id is None:
            raise Rejected(f"unknown job {exec_id} (no stampede.job.info loaded for it)")
        return job_id

    def _inst_id(self, event: Event) -> tuple[CachedWorkflow, int]:
        wf = self._wf(event.fields.get("xwf.id"))
        job_id = self._job_id(wf, event)
        seq = need(event, "job_inst.id")
        inst = self.insts.get(job_id, {}).get(seq)
        if inst is None:
            raise Rejected(f"unknown job instance {event.fields.get('job.id')}#{seq} (no submit/pre.start loaded)")
        return wf, inst

    # -- handlers ---------------------------------------------------------

    def _workflow(self, plan: Plan, event: Event) -> None:
        f = event.fields
        uuid = need(event, "xwf.id")
        existing = self.wfs.get(uuid)
        if existing is not None:
            if not self.replay or uuid in self.replaced or uuid in self._pending_replaced or uuid in self.joined:
                return  # already loaded (a re-sent event, a resumed run, or another writer loading it now)
            plan.expunge.append(uuid)
            self._forget(existing)
        if self.links_wait:
            for key in ("root.xwf.id", "parent.xwf.id"):
                other = f.get(key)
                if isinstance(other, str) and other != uuid and self.wfs.get(other) is None:
                    raise Rejected(f"unknown workflow {other} ({key} of {uuid}; no stampede.wf.plan loaded for it)")
        self._pending_replaced.add(uuid)
        row = undot(f, "workflow")
        wf_id = self.ids.next("workflow")
        root_uuid = f.get("root.xwf.id")
        parent_uuid = f.get("parent.xwf.id")
        parent = self.wfs.get(parent_uuid) if parent_uuid else None
        if root_uuid is None or root_uuid == uuid or triana.names_itself(f):
            root_id: int | None = wf_id
        else:
            root = self.wfs.get(root_uuid)
            root_id = root.wf_id if root else None
        row.update(wf_id=wf_id, wf_uuid=uuid, timestamp=f.get("ts"),
                   planner_arguments=None if f.get("argv") is None else sanitize_argv(f["argv"]),
                   parent_wf_id=parent.wf_id if parent else None, root_wf_id=root_id)
        plan.insert("workflow", wf_id, row)
        self.wfs[uuid] = CachedWorkflow(wf_id, root_id, row["parent_wf_id"],
                             dax=(f["dax.file"], f.get("dag.file.name")) if triana.names_itself(f) else None)

    def _workflowstate(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        state = "WORKFLOW_STARTED" if event.name == "stampede.xwf.start" else "WORKFLOW_TERMINATED"
        f = event.fields
        ts = need(event, "ts")
        row = {"wf_id": wf.wf_id, "state": state, "timestamp": ts,
               "restart_count": need(event, "restart_count"), "status": f.get("status"), "reason": f.get("reason")}
        plan.insert("workflowstate", (wf.wf_id, state, ts), row)

    def _declaration(self, plan: Plan, event: Event) -> None:
        """`job.info`, `task.info`: the row of a job or task once, its id remembered by its name in the workflow."""
        kind = "job" if event.name == "stampede.job.info" else "task"
        wf = self._wf(event.fields.get("xwf.id"))
        known = wf.jobs if kind == "job" else wf.tasks
        name = need(event, f"{kind}.id")
        if name in known:
            return
        row = undot(event.fields, kind)
        row_id = self.ids.next(kind)
        row.update({ID_TABLES[kind]: row_id, "wf_id": wf.wf_id, NAME_COLUMN[kind]: name})
        if kind == "job":
            row["clustered"] = bool(row.get("clustered"))
        plan.insert(kind, row_id, row)
        known[name] = row_id

    def _edge(self, plan: Plan, event: Event) -> None:
        """`job.edge`, `task.edge`: parent and child by name (Triana's by the `unit:`/`task:` names declared)."""
        kind = "job" if event.name == "stampede.job.edge" else "task"
        wf = self._wf(event.fields.get("xwf.id"))
        known, declared = (wf.jobs, triana.unit_job) if kind == "job" else (wf.tasks, triana.task_of)
        parent, child = need(event, f"parent.{kind}.id"), need(event, f"child.{kind}.id")
        key = (wf.wf_id, declared(parent, known) or parent, declared(child, known) or child)
        plan.insert(f"{kind}_edge", key, dict(zip(COLUMNS[f"{kind}_edge"], key)))

    def _meta(self, plan: Plan, event: Event) -> None:
        """`xwf.meta`, `task.meta`: a key and its value, of the workflow or of one of its tasks."""
        wf = self._wf(event.fields.get("xwf.id"))
        if event.name == "stampede.xwf.meta":
            table, owner, owner_id = "workflow_meta", "wf_id", wf.wf_id
        else:
            table, owner, owner_id = "task_meta", "task_id", self._task_id(wf, event)
        key = need(event, "key")
        plan.insert(table, (owner_id, key), {owner: owner_id, "key": key, "value": need(event, "value")})

    def _task_id(self, wf: CachedWorkflow, event: Event) -> int:
        abs_id = need(event, "task.id")
        task_id = wf.tasks.get(abs_id)
        if task_id is None:
            raise Rejected(f"unknown task {abs_id} (no stampede.task.info loaded for it)")
        return task_id

    def _task_map(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        alias = None if event.fields.get("job.id") in wf.jobs else triana.mapped_job(event.fields.get("task.id"),
                                                                                     wf.jobs)
        job_id = wf.jobs[alias] if alias else self._job_id(wf, event)
        plan.update("task", self._task_id(wf, event), {"job_id": job_id})

    def _subwf_map(self, plan: Plan, event: Event) -> None:
        _, inst = self._inst_id(event)
        sub_uuid = event.fields.get("subwf.id")
        sub = self.wfs.get(sub_uuid) if isinstance(sub_uuid, str) else None
        if sub is None and self.links_wait and isinstance(sub_uuid, str):
            raise Rejected(f"unknown workflow {sub_uuid} (sub-workflow of job instance {inst}; "
                           "no stampede.wf.plan loaded for it)")
        plan.update("job_instance", inst, {"subwf_id": sub.wf_id if sub else None})

    def _job_instance_start(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        job_id = self._job_id(wf, event, plan)
        seq = need(event, "job_inst.id")
        known = self.insts.setdefault(job_id, {})
        if seq not in known:
            inst = self.ids.next("job_instance")
            row = undot(event.fields, "job_instance")
            row.setdefault("multiplier_factor", 1)
            row.update(job_instance_id=inst, job_id=job_id, job_submit_seq=seq)
            plan.insert("job_instance", inst, row)
            known[seq] = inst
        if event.name == "stampede.job_inst.pre.start":
            self._jobstate(plan, event)

    def _job_instance_end(self, plan: Plan, event: Event) -> None:
        _, inst = self._inst_id(event)
        changes = undot(event.fields, "job_instance")
        self._jobstate(plan, event)  # first: it refuses a bad status before anything changes
        plan.update("job_instance", inst, changes)
        if event.name == "stampede.job_inst.main.end" and changes.get("exitcode") is not None:
            for inv_id in self.triana_invocations.get(inst, ()):
                plan.update("invocation", inv_id, {"exitcode": changes["exitcode"]})

    def _jobstate(self, plan: Plan, event: Event) -> None:
        states = JOBSTATES.get(event.name)
        if states is None:
            state = event.name.split(".")[2].upper()
        else:
            status = event.fields.get("status")
            status = 0 if status is None else status
            if status not in (-1, 0):
                raise Rejected(f"status {status!r} is neither 0 (success) nor -1 (failure)")
            state = states[status + 1]
        _, inst = self._inst_id(event)
        if event.fields.get("js.id") is None:
            return  # no state sequence (a 3.x lifecycle event): the state has its own event with js.id
        ts = need(event, "ts")
        seq = need(event, "js.id")
        row = {"job_instance_id": inst, "state": state, "timestamp": ts, "jobstate_submit_seq": seq,
               "reason": event.fields.get("reason")}
        plan.insert("jobstate", (inst, state, ts, seq), row)

    def _host(self, plan: Plan, event: Event) -> None:
        if event.fields.get("job.id") is None and event.fields.get("exec_job.id") is not None:  # Pegasus 4.0
            event = Event(event.name, {**event.fields, "job.id": event.fields["exec_job.id"]}, event.id)
        wf, inst = self._inst_id(event)
        if wf.root_wf_id is None:
            raise Rejected("workflow has no root workflow id")
        f = event.fields
        key = (wf.root_wf_id, need(event, "site"), need(event, "hostname"), need(event, "ip"))
        host_id = self.hosts.get(key)
        if host_id is None:
            host_id = self.ids.next("host")
            plan.insert("host", host_id, {"host_id": host_id, "wf_id": key[0], "site": key[1], "hostname": key[2],
                                          "ip": key[3], "uname": f.get("uname"), "total_memory": f.get("total_memory")})
            self.hosts[key] = host_id
        if inst not in self.mapped:
            self.mapped.add(inst)
            plan.update("job_instance", inst, {"host_id": host_id})

    def _keyed(self, plan: Plan, event: Event, table: str, key_cols: tuple[str, ...]) -> int | None:
        """Insert the event's row; its new id (None when this batch already has that row)."""
        wf, inst = self._inst_id(event)
        row = undot(event.fields, table)
        row.update(wf_id=wf.wf_id, job_instance_id=inst)
        key = tuple(row.get(c) for c in key_cols)
        row[ID_TABLES[table]] = None  # assigned below, once we know the row is new in this batch
        if key in plan.inserts.get(table, {}):
            return None
        row_id = row[ID_TABLES[table]] = self.ids.next(table)
        plan.insert(table, key, row)
        return row_id

    def _invocation(self, plan: Plan, event: Event) -> None:
        triana_inst = None
        if event.fields.get("exitcode") is None:
            wf, triana_inst = self._inst_id(event)
            if not triana.unit_job(event.fields.get("job.id"), wf.jobs):
                triana_inst = None  # not Triana's: refused below for its missing exitcode
            else:
                event = Event(event.name, {**event.fields, "exitcode": triana.UNKNOWN_EXITCODE}, event.id)
        inv_id = self._keyed(plan, event, "invocation", ("job_instance_id", "task_submit_seq"))
        if triana_inst is not None and inv_id is not None:
            self.triana_invocations.setdefault(triana_inst, []).append(inv_id)

    def _integrity(self, plan: Plan, event: Event) -> None:
        self._keyed(plan, event, "integrity", ("job_instance_id", "type", "file_type"))

    def _tag(self, plan: Plan, event: Event) -> None:
        self._keyed(plan, event, "tag", ("wf_id", "job_instance_id"))

    def _rc_meta(self, plan: Plan, event: Event) -> None:
        self._wf(event.fields.get("xwf.id"))
        lfn = need(event, "lfn.id")
        plan.rc_lfn[lfn] = None
        plan.rc_meta[(lfn, need(event, "key"))] = need(event, "value")

    def _rc_pfn(self, plan: Plan, event: Event) -> None:
        self._wf(event.fields.get("xwf.id"))
        lfn = need(event, "lfn.id")
        plan.rc_lfn[lfn] = None
        plan.rc_pfn[(lfn, need(event, "pfn"), event.fields.get("site"))] = None

    def _wf_file(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        task_id = self._task_id(wf, event)
        lfn = need(event, "lfn.id")
        plan.rc_lfn[lfn] = None
        plan.wf_files[(wf.wf_id, task_id, lfn)] = event.fields.get("file_type")
