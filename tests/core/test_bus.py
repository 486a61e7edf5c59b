"""The bus end to end: filters per endpoint, order, batching, backpressure, failures, checkpoints."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Sequence

import pytest

from streamer.core.bus import Bus, BusError, make_route
from streamer.events.codec import JSON_LINES
from streamer.endpoints.base import Endpoint, EndpointError
from streamer.events import Event
from streamer.sources.base import Batch, Source
from streamer.util.urls import EndpointURL

NAMES = ["stampede.xwf.start", "stampede.xwf.end", "stampede.xwf.map.subwf_job", "stampede.inv.start",
         "stampede.inv.end", "stampede.job_inst.main.end", "stampede.job_inst.image.info", "stampede.wf.plan"]


class Recorder(Endpoint):
    """Keeps every batch it receives; optionally waits on `gate` before acknowledging."""

    schemes = ("test",)

    def __init__(self, name: str, gate: asyncio.Event | None = None, fail_after: int | None = None,
                 **options: Any) -> None:
        super().__init__(EndpointURL.parse(f"file:///{name}"), options)
        self.gate = gate
        self.fail_after = fail_after
        self.batches: list[list[Event]] = []
        self.calls = 0

    @property
    def received(self) -> list[Event]:
        return [e for batch in self.batches for e in batch]

    async def write(self, batch: Sequence[Event]) -> None:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise EndpointError(f"{self.name}: broken on purpose")
        if self.gate is not None:
            await self.gate.wait()
        self.batches.append(list(batch))


def numbered(start: int, count: int, name: str = "stampede.xwf.meta") -> list[Event]:
    return [Event(name, {"ts": 1, "key": "n", "value": str(i)}) for i in range(start, start + count)]


def values(events: list[Event]) -> list[int]:
    return [int(e.fields["value"]) for e in events]


async def until(condition, limit: float = 4.0) -> None:
    """Yield to the loop until `condition()` holds (a bound, not a timing assertion)."""
    for _ in range(int(limit / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)


# ---------------------------------------------------------------- filters through the bus

FILTER_CASES = [
    ("*", NAMES),
    ("stampede.xwf.*", ["stampede.xwf.start", "stampede.xwf.end", "stampede.xwf.map.subwf_job"]),
    ("stampede.inv.???", ["stampede.inv.end"]),
    ("stampede.xwf.*,stampede.inv.end", ["stampede.xwf.start", "stampede.xwf.end",
                                         "stampede.xwf.map.subwf_job", "stampede.inv.end"]),
    ("stampede.job_inst.*,!stampede.job_inst.image.info", ["stampede.job_inst.main.end"]),
    ("!stampede.xwf.*,!*.start", ["stampede.inv.end", "stampede.job_inst.main.end",
                                  "stampede.job_inst.image.info", "stampede.wf.plan"]),
    ("*.end", ["stampede.xwf.end", "stampede.inv.end", "stampede.job_inst.main.end"]),
]


async def test_every_filter_form_end_to_end_through_the_bus() -> None:
    """One bus, one endpoint per filter form (given as `?events=`), the same stream to all."""
    stream = [Event(name, {"ts": 1, "rep": rep}) for rep in range(3) for name in NAMES]
    endpoints = [Recorder(f"f{i}", events=patterns, batch=4) for i, (patterns, _) in enumerate(FILTER_CASES)]
    bus = Bus([make_route(e, codec=JSON_LINES) for e in endpoints])
    await bus.start()
    for n in range(0, len(stream), 5):
        await bus.publish(Batch(stream[n:n + 5], position=n))
    await bus.close()
    for endpoint, (patterns, expected) in zip(endpoints, FILTER_CASES):
        want = [(rep, name) for rep in range(3) for name in NAMES if name in expected]
        got = [(e.fields["rep"], e.name) for e in endpoint.received]
        assert got == want, patterns
    assert bus.published_events == len(stream)


async def test_explicit_events_argument_overrides_the_url_option() -> None:
    endpoint = Recorder("x", events="stampede.inv.*")
    route = make_route(endpoint, "stampede.wf.plan", codec=JSON_LINES)
    bus = Bus([route])
    await bus.start()
    await bus.publish(Batch([Event(n, {"ts": 1}) for n in NAMES]))
    await bus.close()
    assert [e.name for e in endpoint.received] == ["stampede.wf.plan"]


# ---------------------------------------------------------------- order and batching

async def test_in_order_delivery_and_batches_of_at_most_batch_size() -> None:
    small = Recorder("small", batch=10, buffer=1000)
    big = Recorder("big", batch=1000, buffer=5000)
    bus = Bus([make_route(small, codec=JSON_LINES), make_route(big, codec=JSON_LINES)])
    await bus.start()
    start = 0
    for size in [3, 7, 10, 1, 9, 4, 4, 4, 8, 2] * 20:  # source batches of uneven sizes
        await bus.publish(Batch(numbered(start, size), position=start + size))
        start += size
    await bus.close()
    assert values(small.received) == list(range(start))
    assert values(big.received) == list(range(start))
    assert small.batches and all(1 <= len(b) <= 10 for b in small.batches)
    assert all(1 <= len(b) <= 1000 for b in big.batches)


async def test_a_source_batch_larger_than_the_endpoint_batch_is_delivered_whole_and_in_order() -> None:
    """Route._take never splits a source batch: one of 25 events reaches a batch=10 endpoint as 25."""
    endpoint = Recorder("e", batch=10)
    bus = Bus([make_route(endpoint, codec=JSON_LINES)])
    await bus.start()
    await bus.publish(Batch(numbered(0, 25), position=1))
    await bus.close()
    assert values(endpoint.received) == list(range(25))


# ---------------------------------------------------------------- backpressure

async def test_stalled_endpoint_without_overflow_holds_the_source_at_buffer_plus_one_batch() -> None:
    """buffer=100, batches of 10: the stalled route accepts 10 batches (its write holds the first),
    the 11th waits for room; the fast route, placed first, already has that 11th batch."""
    gate = asyncio.Event()
    fast = Recorder("fast", buffer=100, batch=10)
    stalled = Recorder("stalled", gate, buffer=100, batch=10, overflow="off")
    bus = Bus([make_route(fast, codec=JSON_LINES), make_route(stalled, codec=JSON_LINES)])
    await bus.start()

    async def produce() -> None:
        for n in range(100):
            await bus.publish(Batch(numbered(n * 10, 10), position=n))

    producer = asyncio.create_task(produce())
    await until(lambda: len(fast.received) >= 110)
    for _ in range(20):  # let the loop run: nothing more may get through
        await asyncio.sleep(0)
    assert not producer.done()
    assert values(fast.received) == list(range(110))
    assert stalled.received == []
    assert bus.published_batches == 10
    gate.set()
    await producer
    await bus.close()
    assert values(fast.received) == list(range(1000))
    assert values(stalled.received) == list(range(1000))
    assert all(len(b) <= 10 for b in stalled.batches)


async def test_stalled_endpoint_with_overflow_does_not_slow_the_fast_one(tmp_path) -> None:
    gate = asyncio.Event()
    stalled = Recorder("stalled", gate, buffer=100, batch=10, overflow_dir=str(tmp_path))
    fast = Recorder("fast", buffer=100, batch=10)
    commits: list[int] = []

    async def commit(position: int) -> None:
        commits.append(position)

    bus = Bus([make_route(stalled, codec=JSON_LINES), make_route(fast, codec=JSON_LINES)], commit=commit, checkpoint_interval=0)
    await bus.start()
    for n in range(100):
        await bus.publish(Batch(numbered(n * 10, 10), position=n))
    await until(lambda: len(fast.received) == 1000)
    assert values(fast.received) == list(range(1000))
    assert stalled.received == []
    assert commits == []
    gate.set()
    await bus.close()
    assert values(stalled.received) == list(range(1000))
    assert commits[-1] == 99 and commits == sorted(commits)


# ---------------------------------------------------------------- failures

async def test_failing_endpoint_with_stop_policy_raises_bus_error_naming_it() -> None:
    good = Recorder("good", batch=10, buffer=10_000)
    bad = Recorder("bad-endpoint", batch=10, buffer=10_000, fail_after=3)
    commits: list[int] = []

    async def commit(position: int) -> None:
        commits.append(position)

    bus = Bus([make_route(good, codec=JSON_LINES), make_route(bad, codec=JSON_LINES)], commit=commit, checkpoint_interval=0)
    await bus.start()
    with pytest.raises(BusError) as raised:
        for n in range(200):
            await bus.publish(Batch(numbered(n * 10, 10), position=n))
            await asyncio.sleep(0)
    await bus.close()
    assert "bad-endpoint" in str(raised.value) and "broken on purpose" in str(raised.value)
    assert bus.error is raised.value
    assert values(bad.received) == list(range(30))  # three batches acknowledged, the fourth failed
    # the good endpoint delivered everything handed to the bus before the stop, in order
    assert values(good.received) == list(range(bus.published_events))
    assert bus.published_events < 2000
    # checkpoint never past what the failed endpoint acknowledged (position n = batch n)
    assert commits and commits[-1] == 2 and max(commits) == 2


async def test_failing_endpoint_with_isolate_policy_others_get_everything_checkpoint_frozen() -> None:
    good = Recorder("good", batch=10, buffer=10_000)
    bad = Recorder("bad", batch=10, buffer=10_000, fail_after=5)
    commits: list[int] = []

    async def commit(position: int) -> None:
        commits.append(position)

    bus = Bus([make_route(good, codec=JSON_LINES), make_route(bad, codec=JSON_LINES)], on_error="isolate", commit=commit, checkpoint_interval=0)
    await bus.start()
    for n in range(100):
        await bus.publish(Batch(numbered(n * 10, 10), position=n))
        await asyncio.sleep(0)
    await bus.close()
    assert bus.error is None
    assert values(good.received) == list(range(1000))
    assert values(bad.received) == list(range(50))
    name, delivered, failed = bus.summary()[1]
    assert name == "file:///bad" and delivered == 50 and "broken on purpose" in str(failed)
    assert commits and commits[-1] == 4 and max(commits) == 4  # batch 4 (events 40..49) is the last the failed one acknowledged


async def test_every_endpoint_failing_stops_even_under_isolate() -> None:
    bus = Bus([make_route(Recorder("a", fail_after=0), codec=JSON_LINES), make_route(Recorder("b", fail_after=0), codec=JSON_LINES)],
              on_error="isolate")
    await bus.start()
    with pytest.raises(BusError, match="every endpoint has failed"):
        for n in range(50):
            await bus.publish(Batch(numbered(n, 1), position=n))
            await asyncio.sleep(0.001)
    await bus.close()


# ---------------------------------------------------------------- checkpoints

class ListSource(Source):
    """Fixed batches; records every commit with what each endpoint had acknowledged then."""

    def __init__(self, batches: list[Batch], endpoints: list["BatchAcker"]) -> None:
        self._batches = batches
        self.endpoints = endpoints
        self.commits: list[tuple[int, list[int]]] = []

    async def batches(self) -> AsyncIterator[Batch]:
        for batch in self._batches:
            yield batch

    async def commit(self, position: Any) -> None:
        self.commits.append((position, [e.acked for e in self.endpoints]))


class BatchAcker(Endpoint):
    """Acknowledges slowly (yields `delay` loop turns per write); records the highest batch number acked."""

    def __init__(self, name: str, delay: int, **options: Any) -> None:
        super().__init__(EndpointURL.parse(f"file:///{name}"), options)
        self.delay = delay
        self.acked = -1
        self.received: list[Event] = []

    async def write(self, batch: Sequence[Event]) -> None:
        for _ in range(self.delay):
            await asyncio.sleep(0.0005)
        self.received.extend(batch)
        self.acked = max(int(e.fields["batch"]) for e in batch)


async def test_commit_only_positions_every_endpoint_acknowledged() -> None:
    def batch_events(n: int) -> list[Event]:
        return [Event("stampede.xwf.meta", {"ts": 1, "batch": n, "i": i}) for i in range(5)]

    fast, slow, slower = BatchAcker("fast", 0, batch=5), BatchAcker("slow", 2, batch=5), BatchAcker("slower", 5, batch=15)
    source = ListSource([Batch(batch_events(n), position=n) for n in range(60)], [fast, slow, slower])
    bus = Bus([make_route(e, codec=JSON_LINES) for e in (fast, slow, slower)], commit=source.commit, checkpoint_interval=0)
    await bus.start()
    async for batch in source.batches():
        await bus.publish(batch)
        await asyncio.sleep(0)
    await bus.close()
    assert len(source.commits) >= 2
    for position, acked in source.commits:
        assert position <= min(acked), (position, acked)
    positions = [p for p, _ in source.commits]
    assert positions == sorted(set(positions))  # increasing, never repeated
    assert positions[-1] == 59
    for endpoint in (fast, slow, slower):
        assert [(e.fields["batch"], e.fields["i"]) for e in endpoint.received] == [
            (n, i) for n in range(60) for i in range(5)]


async def test_batches_dropped_by_every_filter_still_advance_the_checkpoint() -> None:
    only_inv = Recorder("inv", events="stampede.inv.*")
    commits: list[int] = []

    async def commit(position: int) -> None:
        commits.append(position)

    bus = Bus([make_route(only_inv, codec=JSON_LINES)], commit=commit, checkpoint_interval=0)
    await bus.start()
    for n in range(5):
        await bus.publish(Batch(numbered(n, 1), position=n))
    await bus.close()
    assert only_inv.received == []
    assert commits[-1] == 4


async def test_commits_never_overlap_and_the_last_one_written_is_the_final_position() -> None:
    """A source's commit may run in a thread (the checkpoint file is written with asyncio.to_thread):
    the bus must not start a commit while another is under way, nor leave one running after close()
    (a cancelled await does not stop the thread, which then races the final commit)."""
    import threading
    import time

    lock = threading.Lock()
    active = [0]
    overlaps: list[tuple[int, int]] = []
    written: list[int] = []

    def save(position: int) -> None:
        with lock:
            active[0] += 1
            if active[0] > 1:
                overlaps.append((position, active[0]))
        time.sleep(0.02)
        with lock:
            written.append(position)
            active[0] -= 1

    async def commit(position: int) -> None:
        await asyncio.to_thread(save, position)

    endpoint = Recorder("e", batch=10)
    bus = Bus([make_route(endpoint, codec=JSON_LINES)], commit=commit, checkpoint_interval=0)
    await bus.start()
    for n in range(50):
        await bus.publish(Batch(numbered(n * 10, 10), position=n))
        await asyncio.sleep(0.001)
    await bus.close()
    await asyncio.sleep(0.1)  # let any commit thread left behind finish
    assert overlaps == []
    assert written == sorted(written) and written[-1] == 49
