"""The loader's memory of ids: every row that other rows point at (workflow,
job, job_instance, task, host) gets its id from the loader, so a batch needs no
round trip per event. The caches are filled from the database once per
workflow (`seed_sql` / `seed`) the first time a batch mentions it; that is
also what makes a restart after `kill -9` safe: re-sent events find the rows
already there and change nothing (every insert is `ON CONFLICT DO NOTHING`
on the table's natural key, replica-catalog rows are matched by their lfn).

A failed transaction leaves the caches ahead of the database: the backend
calls `reset()` and the next attempt re-reads what is really committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from streamer.events import Event
from streamer.endpoints.db.ids import IdSource, id_demand
from streamer.endpoints.db.plan import SQLDialect
from streamer.endpoints.db.rows import LINKING
from streamer.endpoints.db import triana


@dataclass
class CachedWorkflow:
    """A workflow's ids, and the ids of its jobs and tasks by their names."""

    wf_id: int
    root_wf_id: int | None
    parent_wf_id: int | None
    jobs: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    dax: tuple[str, Any] | None = None
    """The wf.plan's (dax.file, dag.file.name): a Triana job instance may name the dax file (`triana`)."""


class IdCache:
    """The ids of the workflows batches mention, and of their jobs, tasks, job instances and hosts."""

    def __init__(self, dialect: SQLDialect, ids: IdSource) -> None:
        self.dialect = dialect
        self.ids = ids
        self.replaced: set[str] = set()
        """Workflow uuids already expunged and re-planned in this run (committed)."""
        self.joined: set[str] = set()
        """Workflow uuids another writer is loading too: a replay joins them rather than expunging."""
        self.triana_invocations: dict[int, list[int]] = {}
        """Job instance -> its Triana invocations (no exitcode of their own): main.end gives theirs. Kept
        through `reset` (an id of a rolled-back row only makes an UPDATE that changes nothing)."""
        self.reset()

    def reset(self) -> None:
        """Forget every cached id (after a failed transaction, or a reconnect)."""
        self.wfs: dict[str, CachedWorkflow | None] = {}
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
        known = self.wfs
        return [uuid for uuid in self.mentioned_uuids(events) if uuid not in known]

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

    def _seeded(self, uuid: str) -> CachedWorkflow:
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
            self.wfs[uuid] = CachedWorkflow(int(wf_id), root, parent,
                                            dax=None if dax_file is None else (dax_file, dag_file))
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

    def _forget(self, doomed: CachedWorkflow) -> None:
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

