"""The order the suite is handed to pytest-xdist's workers in (tests/support/schedule.py): the long poles first on
every worker, each worker's slice exactly the one `--dist worksteal` gives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdist.scheduler.worksteal import WorkStealingScheduling

from tests.support.schedule import deal, slice_sizes


@dataclass
class Node:
    """What WorkStealingScheduling sees of a worker: the test indices it is sent."""
    name: str
    sent: list[int] = field(default_factory=list)
    shutting_down: bool = False

    @property
    def gateway(self) -> Any:
        return type("Gateway", (), {"id": self.name})

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:  # a worker with fewer than 2 tests and nothing to steal runs its last one
        self.shutting_down = True

    def __hash__(self) -> int:
        return id(self)


class Config:
    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return [f"{self.workers}*popen"]


def first_slices(total: int, workers: int) -> list[list[int]]:
    """The test indices xdist's own worksteal scheduler sends each worker at the start."""
    scheduler = WorkStealingScheduling(Config(workers))  # type: ignore[arg-type]
    nodes = [Node(f"gw{k}") for k in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, [f"t{i}" for i in range(total)])  # type: ignore[arg-type]
    scheduler.schedule()
    return [node.sent for node in nodes]


def test_slice_sizes_are_those_xdist_worksteal_sends() -> None:
    for total, workers in [(1400, 4), (650, 4), (10, 4), (7, 3), (1401, 6), (3, 2)]:
        slices = first_slices(total, workers)
        assert [len(s) for s in slices] == slice_sizes(total, workers), (total, workers)
        assert [i for s in slices for i in s] == list(range(total))  # contiguous, in order


def cut(ordered: list[str], sizes: list[int]) -> list[list[str]]:
    slices, start = [], 0
    for size in sizes:
        slices.append(ordered[start:start + size])
        start += size
    return slices


def test_heavy_units_are_spread_and_first_in_each_slice() -> None:
    heavy = [(300.0, ["site1", "site2", "site3"]), (120.0, ["faults"]), (100.0, ["crash"]), (90.0, ["serve"]),
             (60.0, ["dashboard"])]
    light = [(0.3, [f"t{i:02}"]) for i in range(20)]
    sizes = slice_sizes(27, 4)
    assert sizes == [6, 7, 7, 7]
    ordered = deal(heavy + light, sizes)
    assert sorted(ordered) == sorted(x for _, items in heavy + light for x in items)  # each test once
    slices = cut(ordered, sizes)
    assert [s[:3] for s in slices] == [["site1", "site2", "site3"], ["faults", "t06", "t07"], ["crash", "t00", "t01"],
                                       ["serve", "dashboard", "t12"]]  # longest first, one per worker, the module whole
    for part in slices:
        light_part = [x for x in part if x.startswith("t")]
        assert light_part == sorted(light_part)  # the light tests in collection order behind the poles
        assert part[len(part) - len(light_part):] == light_part


def test_a_module_larger_than_any_room_left_is_kept_whole() -> None:
    ordered = deal([(1.0, ["a", "b", "c"]), (5.0, ["x"]), (4.0, ["y"])], [2, 3])
    assert ordered == ["x", "y", "a", "b", "c"]
