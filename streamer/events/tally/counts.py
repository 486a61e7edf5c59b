"""One DAG's progress counts, and pegasus-status's JSON document built from them.

The keys, their order and the rounding are pegasus-status's (Pegasus 5.1,
`Pegasus/client/status.py`): `percent_done` is succeeded / total in percent,
rounded to two decimals; the totals sum every DAG (sub-workflows included, so
a sub-workflow's node in its parent is counted as well as the sub-workflow's
own nodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

RUNNING, SUCCESS, FAILURE = "Running", "Success", "Failure"
COUNT_KEYS = ("unready", "ready", "pre", "queued", "post", "succeeded", "failed")


def percent(done: int, total: int) -> float:
    """pegasus-status's %DONE: two decimals, 0.0 for an empty DAG."""
    return float(f"{done / total * 100:.2f}") if total else 0.0


@dataclass
class DagCounts:
    """Nodes of one DAG by DAGMan state, its name and its state (Running, Success, Failure)."""

    unready: int = 0
    ready: int = 0
    pre: int = 0
    queued: int = 0
    post: int = 0
    succeeded: int = 0
    failed: int = 0
    total: int = 0
    dagname: str | None = None
    state: str = RUNNING

    @property
    def percent_done(self) -> float:
        return percent(self.succeeded, self.total)

    def as_dict(self) -> dict[str, Any]:
        """The DAG's entry in pegasus-status's JSON, keys in its order."""
        out: dict[str, Any] = {k: getattr(self, k) for k in COUNT_KEYS}
        out["percent_done"] = self.percent_done
        out["total"] = self.total
        if self.dagname is not None:
            out["dagname"] = self.dagname
        out["state"] = self.state
        return out


def totals(dags: Iterable[DagCounts]) -> dict[str, Any]:
    """pegasus-status's `totals`: every count summed, %DONE of the sums."""
    out: dict[str, Any] = {k: 0 for k in COUNT_KEYS}
    total = 0
    for dag in dags:
        for key in COUNT_KEYS:
            out[key] += getattr(dag, key)
        total += dag.total
    out["percent_done"] = percent(out["succeeded"], total)
    out["total"] = total
    return out


def document(dags: dict[str, DagCounts]) -> dict[str, Any]:
    """pegasus-status's JSON document: `totals`, then `dags` with the root DAG under `root`."""
    entries = dict(dags)
    if "root" not in entries:
        entries = {"root": DagCounts(), **entries}
    return {"totals": totals(entries.values()), "dags": {k: v.as_dict() for k, v in entries.items()}}


def summary(dags: Iterable[DagCounts]) -> str:
    """`Summary: 3 DAGs total (Success:2 Running:1)`, as pegasus-status words it."""
    dags = list(dags)
    states = {SUCCESS: 0, FAILURE: 0, RUNNING: 0}
    for dag in dags:
        states[dag.state] = states.get(dag.state, 0) + 1
    parts = " ".join(f"{name}:{n}" for name, n in states.items() if n)
    return f"Summary: {len(dags)} DAG{'' if len(dags) == 1 else 's'} total" + (f" ({parts})" if parts else "")
