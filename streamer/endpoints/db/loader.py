"""Stampede events -> Stampede rows, shared by the SQLite and PostgreSQL endpoints.

The loader reproduces what monitord's `workflow_loader` writes (which event
fills which table, `root_wf_id` / `parent_wf_id`, the host of each job
instance, sub-workflow links, the jobstate names derived from event and
status, integrity, tag, replica-catalog and metadata rows) but is built for
batches: it turns a whole batch into a `Plan` of rows per table, entirely in
memory, and the backend writes the plan in one transaction.

Why ids live in memory: every row that other rows point at (workflow, job,
job_instance, task, host) gets its id from the loader, so a batch needs no
round trip per event. The caches are filled from the database once per
workflow (`seed_sql` / `seed`) the first time a batch mentions it; that is
also what makes a restart after `kill -9` safe: re-sent events find the rows
already there and change nothing (every insert is `ON CONFLICT DO NOTHING`
on the table's natural key, replica-catalog rows are matched by their lfn).

A failed transaction leaves the caches ahead of the database: the backend
calls `reset()` and the next attempt re-reads what is really committed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from streamer.events import Event
from streamer.endpoints.db.ids import ID_TABLES, IdSource, id_demand
from streamer.endpoints.db.plan import Plan, SQLDialect
from streamer.endpoints.db.rows import COLUMNS, JOBSTATES, LINKING, NOOP, Rejected, describe, need, sanitize_argv, undot
from streamer.endpoints.db import triana

log = logging.getLogger("streamer.endpoints.db")


@dataclass
class _Wf:
    wf_id: int
    root_wf_id: int | None
    parent_wf_id: int | None
    jobs: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    dax: tuple[str, Any] | None = None
    """The wf.plan's (dax.file, dag.file.name): a Triana job instance may name the dax file (`triana`)."""


class Loader:
    """Turns batches of events into Plans; remembers ids between batches."""

    def __init__(self, dialect: SQLDialect, ids: IdSource, *, replay: bool = False) -> None:
        self.dialect = dialect
        self.ids = ids
        self.replay = replay
        self.replaced: set[str] = set()
        """Workflow uuids already expunged and re-planned in this run (committed)."""
        self.joined: set[str] = set()
        """Workflow uuids another writer is loading too: a replay joins them rather than expunging."""
        self.triana_invocations: dict[int, list[int]] = {}
        """Job instance -> its Triana invocations (no exitcode of their own): main.end gives theirs. Kept
        through `reset` (an id of a rolled-back row only makes an UPDATE that changes nothing)."""
        self.links_wait = False
        """Refuse (as an orphan the endpoint holds: `dbcommon`) a workflow whose root or parent, or a
        sub-workflow link whose sub-workflow, is not loaded yet, instead of leaving the link empty:
        set with `wait_parents`, when other writers may still be loading them."""
        self.reset()
        self._handlers: dict[str, Callable[[Plan, Event], None]] = {
            "stampede.wf.plan": self._workflow,
            "stampede.xwf.start": self._workflowstate,
            "stampede.xwf.end": self._workflowstate,
            "stampede.xwf.meta": self._workflow_meta,
            "stampede.job.info": self._job,
            "stampede.job.edge": self._job_edge,
            "stampede.task.info": self._task,
            "stampede.task.edge": self._task_edge,
            "stampede.task.meta": self._task_meta,
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

    def reset(self) -> None:
        """Forget every cached id (after a failed transaction, or a reconnect)."""
        self.wfs: dict[str, _Wf | None] = {}
        """uuid -> cached workflow, or None when known to be absent from the database."""
        self.insts: dict[int, dict[int, int]] = {}  # job_id -> {submit seq -> job_instance_id}
        self.mapped: set[int] = set()  # job instances that already have their host
        self.hosts: dict[tuple[int, str, str, str], int] = {}
        self._pending_replaced: set[str] = set()

    def forget(self, uuids: Iterable[str]) -> None:
        """Drop the cached ids of these workflows (another writer changed them): the next batch re-reads."""
        for uuid in uuids:
            wf = self.wfs.pop(uuid, None)
            if wf is None:
                continue
            for job_id in wf.jobs.values():
                for inst in self.insts.pop(job_id, {}).values():
                    self.mapped.discard(inst)
            root = wf.root_wf_id
            self.hosts = {k: v for k, v in self.hosts.items() if k[0] != root}

    def share(self, uuids: Sequence[str]) -> None:
        """Another writer loads these workflows too: re-read their ids (now, and at every batch the backend
        finds them shared), and a replay joins that load rather than expunging it."""
        if uuids:
            self.forget(uuids)
            self.joined.update(uuids)

    # -- seeding from the database ---------------------------------------

    @staticmethod
    def mentioned_uuids(events: Iterable[Event]) -> list[str]:
        """Every workflow uuid the batch names (its own and, in linking events, root, parent, sub)."""
        seen: dict[str, None] = {}
        last = None
        for event in events:
            f = event.fields
            uuid = f.get("xwf.id")
            if uuid is not last:
                last = uuid
                if isinstance(uuid, str):
                    seen[uuid] = None
            if event.name in LINKING:
                for key in ("root.xwf.id", "parent.xwf.id", "subwf.id"):
                    other = f.get(key)
                    if isinstance(other, str):
                        seen[other] = None
        return list(seen)

    def unknown_uuids(self, events: Iterable[Event]) -> list[str]:
        """Workflow uuids the batch mentions whose ids are not cached yet."""
        seen: dict[str, None] = {}
        known = self.wfs
        last = None
        for event in events:
            f = event.fields
            uuid = f.get("xwf.id")
            if uuid is not last:  # consecutive events mostly share their workflow
                last = uuid
                if isinstance(uuid, str) and uuid not in known:
                    seen[uuid] = None
            if event.name in LINKING:
                for key in ("root.xwf.id", "parent.xwf.id", "subwf.id"):
                    other = f.get(key)
                    if isinstance(other, str) and other not in known:
                        seen[other] = None
        return list(seen)

    def seed_sql(self, uuids: Sequence[str]) -> list[tuple[str, str, list[Any]]]:
        """(name, SQL, params): the first query of seeding; pass its rows to `seed`.

        Most batches mention only new workflows, so the ids of jobs, tasks,
        instances and hosts are asked for only when a workflow is found.
        """
        cond, params = self.dialect.any_of("w.wf_uuid", uuids)
        return [("workflow", "SELECT w.wf_uuid, w.wf_id, w.root_wf_id, w.parent_wf_id, w.dax_file, "
                             f"w.dag_file_name FROM workflow w WHERE {cond}", params)]

    def _detail_sql(self, uuids: Sequence[str]) -> list[tuple[str, str, list[Any]]]:
        cond, params = self.dialect.any_of("w.wf_uuid", uuids)
        return [
            ("job", f"SELECT w.wf_uuid, j.exec_job_id, j.job_id FROM job j JOIN workflow w ON w.wf_id = j.wf_id "
                    f"WHERE {cond}", params),
            ("task", f"SELECT w.wf_uuid, t.abs_task_id, t.task_id FROM task t JOIN workflow w ON w.wf_id = t.wf_id "
                     f"WHERE {cond}", params),
            ("job_instance", "SELECT i.job_id, i.job_submit_seq, i.job_instance_id, i.host_id FROM job_instance i "
                             "JOIN job j ON j.job_id = i.job_id JOIN workflow w ON w.wf_id = j.wf_id "
                             f"WHERE {cond}", params),
            ("host", "SELECT h.wf_id, h.site, h.hostname, h.ip, h.host_id FROM host h WHERE h.wf_id IN "
                     f"(SELECT w.root_wf_id FROM workflow w WHERE {cond})", params),
        ]

    def _seeded(self, uuid: str) -> _Wf:
        """A workflow the seeding queries returned (its job and task rows join on it)."""
        wf = self.wfs.get(uuid)
        if wf is None:
            raise LookupError(f"a job or task row of workflow {uuid}, which the database did not return")
        return wf

    def seed(self, uuids: Sequence[str],
             results: Mapping[str, Sequence[Sequence[Any]]]) -> list[tuple[str, str, list[Any]]]:
        """Take query results; returns the follow-up queries to run (then `seed` their rows too)."""
        for uuid in uuids:
            self.wfs.setdefault(uuid, None)
        found = []
        for uuid, wf_id, root, parent, dax_file, dag_file in results.get("workflow", ()):
            self.wfs[uuid] = _Wf(int(wf_id), root, parent, dax=None if dax_file is None else (dax_file, dag_file))
            found.append(uuid)
        for uuid, exec_id, job_id in results.get("job", ()):
            self._seeded(uuid).jobs[exec_id] = job_id
        follow: list[tuple[str, str, list[Any]]] = []
        if "job" in results:  # the dax job is Triana's (who declares `unit:` jobs) alone
            for uuid in uuids:
                wf = self.wfs.get(uuid)
                if wf is not None and wf.dax and not triana.is_triana(wf.jobs):
                    wf.dax = None
            triana_wfs = [wf.wf_id for wf in map(self.wfs.get, uuids) if wf is not None and wf.dax]
            if triana_wfs:  # their invocations still waiting for main.end's exitcode
                follow.append(("triana_invocation", *triana.waiting_invocations(self.dialect, triana_wfs)))
        for inst_id, inv_id in results.get("triana_invocation", ()):
            self.triana_invocations.setdefault(inst_id, []).append(inv_id)
        for uuid, abs_id, task_id in results.get("task", ()):
            self._seeded(uuid).tasks[abs_id] = task_id
        for job_id, seq, inst_id, host_id in results.get("job_instance", ()):
            self.insts.setdefault(job_id, {})[seq] = inst_id
            if host_id is not None:
                self.mapped.add(inst_id)
        for wf_id, site, hostname, ip, host_id in results.get("host", ()):
            self.hosts[(wf_id, site, hostname, ip)] = host_id
        return self._detail_sql(found) + follow if found else follow

    def id_demand(self, events: Sequence[Event]) -> dict[str, int]:
        """At most how many new ids per table this batch takes, with the job rows of Triana's dax job."""
        demand = id_demand(events)
        extra = triana.dax_jobs(events, {uuid: wf.dax[0] for uuid, wf in self.wfs.items() if wf is not None and wf.dax})
        if extra:
            demand["job"] = demand.get("job", 0) + extra
        return demand

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

    def _wf(self, uuid: Any) -> _Wf:
        wf = self.wfs.get(uuid) if isinstance(uuid, str) else None
        if wf is None:
            raise Rejected(f"unknown workflow {uuid} (no stampede.wf.plan loaded for it)")
        return wf

    def _job_id(self, wf: _Wf, event: Event, plan: Plan | None = None) -> int:
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

    def _inst_id(self, event: Event) -> tuple[_Wf, int]:
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
        self.wfs[uuid] = _Wf(wf_id, root_id, row["parent_wf_id"],
                             dax=(f["dax.file"], f.get("dag.file.name")) if triana.names_itself(f) else None)

    def _forget(self, doomed: _Wf) -> None:
        """Drop the cached ids of a workflow about to be expunged, and its descendants'."""
        ids = {doomed.wf_id}
        changed = True
        while changed:
            changed = False
            for wf in self.wfs.values():
                if wf and wf.wf_id not in ids and (wf.parent_wf_id in ids or wf.root_wf_id == doomed.wf_id):
                    ids.add(wf.wf_id)
                    changed = True
        for uuid, wf in list(self.wfs.items()):
            if wf and wf.wf_id in ids:
                for job_id in wf.jobs.values():
                    for inst in self.insts.pop(job_id, {}).values():
                        self.mapped.discard(inst)
                self.wfs[uuid] = None
        self.hosts = {k: v for k, v in self.hosts.items() if k[0] not in ids}

    def _workflowstate(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        state = "WORKFLOW_STARTED" if event.name == "stampede.xwf.start" else "WORKFLOW_TERMINATED"
        f = event.fields
        ts = need(event, "ts")
        row = {"wf_id": wf.wf_id, "state": state, "timestamp": ts,
               "restart_count": need(event, "restart_count"), "status": f.get("status"), "reason": f.get("reason")}
        plan.insert("workflowstate", (wf.wf_id, state, ts), row)

    def _workflow_meta(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        key = need(event, "key")
        plan.insert("workflow_meta", (wf.wf_id, key), {"wf_id": wf.wf_id, "key": key, "value": need(event, "value")})

    def _job(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        exec_id = need(event, "job.id")
        if exec_id in wf.jobs:
            return
        row = undot(event.fields, "job")
        job_id = self.ids.next("job")
        row.update(job_id=job_id, wf_id=wf.wf_id, exec_job_id=exec_id, clustered=bool(row.get("clustered")))
        plan.insert("job", job_id, row)
        wf.jobs[exec_id] = job_id

    def _job_edge(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        parent, child = need(event, "parent.job.id"), need(event, "child.job.id")
        key = (wf.wf_id, triana.unit_job(parent, wf.jobs) or parent, triana.unit_job(child, wf.jobs) or child)
        plan.insert("job_edge", key, dict(zip(COLUMNS["job_edge"], key)))

    def _task(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        abs_id = need(event, "task.id")
        if abs_id in wf.tasks:
            return
        row = undot(event.fields, "task")
        task_id = self.ids.next("task")
        row.update(task_id=task_id, wf_id=wf.wf_id, abs_task_id=abs_id)
        plan.insert("task", task_id, row)
        wf.tasks[abs_id] = task_id

    def _task_edge(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        parent, child = need(event, "parent.task.id"), need(event, "child.task.id")
        key = (wf.wf_id, triana.task_of(parent, wf.tasks) or parent, triana.task_of(child, wf.tasks) or child)
        plan.insert("task_edge", key, dict(zip(COLUMNS["task_edge"], key)))

    def _task_id(self, wf: _Wf, event: Event) -> int:
        abs_id = need(event, "task.id")
        task_id = wf.tasks.get(abs_id)
        if task_id is None:
            raise Rejected(f"unknown task {abs_id} (no stampede.task.info loaded for it)")
        return task_id

    def _task_meta(self, plan: Plan, event: Event) -> None:
        wf = self._wf(event.fields.get("xwf.id"))
        task_id = self._task_id(wf, event)
        key = need(event, "key")
        plan.insert("task_meta", (task_id, key), {"task_id": task_id, "key": key, "value": need(event, "value")})

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

