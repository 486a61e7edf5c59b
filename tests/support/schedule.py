"""The order tests are handed to pytest-xdist's workers in: the long poles first, spread over the workers.

`--dist worksteal` gives worker k the k-th contiguous slice of the collection, then lets an idle worker take the
tail half of the longest queue. In file order, the minutes-long tests (own clusters, kill/restart faults, real
pegasus-monitord side by side) meet on one worker or start last, and the run ends long after the others are idle.
So each worker's slice is built here: the heavy units first, dealt longest-first to the least-loaded worker (the
LPT rule), then the light tests filling the slices to the sizes xdist cuts; the light tails are what the others
steal. A unit is one test, or a whole module whose tests share a module-scoped fixture of that module (its
cluster or generated workflows are set up once, on one worker).

Weights come from `tests/durations.json` (seconds per test id, setup and teardown included, measured by
`STREAMER_TEST_DURATIONS=$PWD/tests/durations.json scripts/test.sh` on a quiet machine; the pure-Python pass has
its own table, or uses the compiled pass's): a test not listed weighs `SLOW` if it is marked `slow`, `LIGHT`
otherwise. The order changes nothing a test does; without xdist the collection order is kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
SLOW = 30.0
"""The weight of a test marked `slow` with no measured duration (a fault test takes 20-120 s under load)."""
LIGHT = 0.3
"""The weight of any other test with no measured duration."""
HEAVY = 4.0
"""Units from this weight on are dealt to the workers first."""
RECORDED = 1.0
"""Tests faster than this are left out of the durations file (they weigh `LIGHT`)."""


def pass_name() -> str:
    return "pure" if os.environ.get("STREAMER_PURE_PYTHON") == "1" else "compiled"


def measured() -> dict[str, float]:
    try:
        table = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    this = table.get(pass_name()) or table.get("compiled", {})  # the pure pass's poles are the compiled one's
    return {str(k): float(v) for k, v in this.items()}


def weight(item: pytest.Item, table: dict[str, float]) -> float:
    if item.nodeid in table:
        return table[item.nodeid]
    return SLOW if item.get_closest_marker("slow") else LIGHT


def unit_key(item: pytest.Item) -> str:
    """The module's path when the test uses a module-scoped fixture defined in its module, else its own id."""
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        for fixture in defs:
            if fixture.scope == "module" and fixture.baseid == module:
                return module
    return item.nodeid


def slice_sizes(total: int, workers: int) -> list[int]:
    """The sizes of xdist worksteal's first slices: `len(pending) // nodes_remaining`, worker after worker."""
    sizes = []
    for remaining in range(workers, 0, -1):
        sizes.append(total // remaining)
        total -= sizes[-1]
    return sizes


def deal(units: list[tuple[float, list[pytest.Item]]], sizes: list[int]) -> list[pytest.Item]:
    """The items as the concatenation of one slice per worker, each of its size, heavy units first in each."""
    slices: list[list[tuple[float, list[pytest.Item]]]] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    room = list(sizes)
    for unit in sorted(units, key=lambda u: -u[0]):  # stable: equal weights keep collection order
        fits = [k for k in range(len(sizes)) if room[k] >= len(unit[1])] or [room.index(max(room))]
        k = min(fits, key=lambda i: (load[i], i))
        slices[k].append(unit)
        load[k] += unit[0]
        room[k] -= len(unit[1])
    return [item for part in slices for _, items in part for item in items]


def order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    table = measured()
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_key(item), []).append(item)
    weighted = [(sum(weight(i, table) for i in group), group) for group in units.values()]
    heavy = [u for u in weighted if u[0] >= HEAVY]
    light = [u for u in weighted if u[0] < HEAVY]
    return deal(heavy + light, slice_sizes(len(items), workers))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1 and config.getoption("dist", "no") == "worksteal":
        items[:] = order(items, workers)


# ---------------------------------------------------------------- recording the durations

_seen: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("STREAMER_TEST_DURATIONS"):
        _seen[report.nodeid] = _seen.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With `STREAMER_TEST_DURATIONS=FILE`, the controller writes this pass's durations into FILE (the other
    pass's table kept)."""
    target = os.environ.get("STREAMER_TEST_DURATIONS")
    if not target or hasattr(session.config, "workerinput") or not _seen:
        return
    path = Path(target)
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    table[pass_name()] = dict(sorted((k, round(v, 1)) for k, v in _seen.items() if v >= RECORDED))
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")

