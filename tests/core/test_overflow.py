"""A stalled endpoint parks its events on disk; the others keep their pace; nothing is lost."""

from __future__ import annotations

import asyncio
from typing import Sequence

from streamer.core.bus import Bus, make_route
from streamer.events.codec import JSON_LINES
from streamer.endpoints.base import Endpoint
from streamer.events import Event
from streamer.sources.base import Batch
from streamer.util.urls import EndpointURL


class Recorder(Endpoint):
    """Keeps what it receives; waits on `gate` before each write while the gate is closed."""

    def __init__(self, name: str, gate: asyncio.Event | None = None, **options) -> None:
        super().__init__(EndpointURL.parse(f"file:///{name}"), options)
        self.received: list[Event] = []
        self.gate = gate

    async def write(self, batch: Sequence[Event]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.received.extend(batch)


def events(start: int, count: int) -> list[Event]:
    return [Event("stampede.xwf.meta", {"ts": 1, "key": "n", "value": str(i)}) for i in range(start, start + count)]


async def test_stalled_endpoint_overflows_to_disk_and_the_fast_one_gets_everything(tmp_path) -> None:
    gate = asyncio.Event()
    slow = Recorder("slow", gate, buffer=100, batch=10, overflow_dir=str(tmp_path))
    fast = Recorder("fast", buffer=100, batch=10)
    committed: list[int] = []

    async def commit(position: int) -> None:
        committed.append(position)

    bus = Bus([make_route(slow, codec=JSON_LINES), make_route(fast, codec=JSON_LINES)], commit=commit, checkpoint_interval=0)
    await bus.start()
    for n in range(100):
        await bus.publish(Batch(events(n * 10, 10), position=n))
    for _ in range(200):
        if len(fast.received) == 1000:
            break
        await asyncio.sleep(0.01)
    assert [e.fields["value"] for e in fast.received] == [str(i) for i in range(1000)]
    assert slow.received == []
    parked = list(tmp_path.glob("*.overflow"))
    assert len(parked) == 1 and parked[0].stat().st_size > 0
    assert committed == []  # the slow endpoint acknowledged nothing: no checkpoint yet
    gate.set()
    await bus.close()
    assert [e.fields["value"] for e in slow.received] == [str(i) for i in range(1000)]
    assert [e.id for e in slow.received] == [e.id for e in fast.received]
    assert committed[-1] == 99
    assert list(tmp_path.glob("*.overflow")) == []


async def test_overflow_off_applies_backpressure_to_the_source() -> None:
    gate = asyncio.Event()
    slow = Recorder("slow", gate, buffer=100, batch=10, overflow="off")
    fast = Recorder("fast", buffer=100, batch=10)
    bus = Bus([make_route(slow, codec=JSON_LINES), make_route(fast, codec=JSON_LINES)])
    await bus.start()

    async def produce() -> None:
        for n in range(100):
            await bus.publish(Batch(events(n * 10, 10), position=n))

    producer = asyncio.create_task(produce())
    await asyncio.sleep(0.2)
    assert not producer.done()                 # held back by the slow endpoint's full buffer
    assert 100 <= len(fast.received) < 1000    # the fast one got at most a buffer ahead
    gate.set()
    await producer
    await bus.close()
    assert len(slow.received) == len(fast.received) == 1000


def test_overflow_cap_reads_sizes_as_the_spool_size_does() -> None:
    """`overflow=1G` used to crash (`int('1g')`); it is the same size syntax as `spool_size`."""
    import pytest

    from streamer.core.options import OptionError

    assert make_route(Recorder("a", overflow="1G"), codec=JSON_LINES).overflow_bytes == 1 << 30
    assert make_route(Recorder("b", overflow="512M"), codec=JSON_LINES).overflow_bytes == 512 << 20
    assert make_route(Recorder("c", overflow="no"), codec=JSON_LINES).overflow_bytes == 0
    with pytest.raises(OptionError, match=r"^file:///d: overflow: 'lots' is not a size \(bytes, or 512M, 2G, or off\)$"):
        make_route(Recorder("d", overflow="lots"), codec=JSON_LINES)


def test_the_overflow_file_stores_records_with_the_codec_it_is_given(tmp_path) -> None:
    from streamer.core.overflow import OverflowFile

    class Upper:
        def encode(self, record: str) -> bytes:
            return record.upper().encode()

        def decode(self, data: bytes) -> str:
            return data.decode()

    file = OverflowFile(tmp_path, "t", 1 << 20, Upper())
    file.append(7, ["ab", "cd"])
    file.append(8, [])
    assert file.pop() == (7, ["AB", "CD"])
    assert file.path.read_bytes() == b"7\tAB\n7\tCD\n8\t\n"
    assert file.pop() == (8, [])
    file.close()


class Note:
    """A record that is no Stampede event: the bus needs only its name."""

    def __init__(self, name: str, text: str) -> None:
        self.name, self.text = name, text


class NoteCodec:
    """`name|text`: a codec of the caller's, as the pipeline injects the Stampede one."""

    def __init__(self) -> None:
        self.encoded = 0

    def encode(self, record: Note) -> bytes:
        self.encoded += 1
        return f"{record.name}|{record.text}".encode()

    def decode(self, data: bytes) -> Note:
        name, _, text = data.decode().partition("|")
        return Note(name, text)


class PlainSink:
    """A sink that is no `Endpoint`: just what `core.sink.Sink` asks for."""

    default_events = "*"
    state_key = None

    def __init__(self, name: str, gate: asyncio.Event | None = None, **options) -> None:
        self.name, self.gate, self.options = name, gate, options
        self.received: list[tuple[str, str]] = []

    def option(self, key: str, default=None):
        return self.options.get(key, default)

    async def open(self) -> None: ...

    def prepare(self, events) -> None: ...

    async def write(self, batch) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.received.extend((note.name, note.text) for note in batch)

    async def write_marked(self, batch, ends):
        raise AssertionError("not an exact sink")

    def mark(self) -> None:
        return None

    def holding(self) -> bool:
        return False

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


async def test_the_bus_parks_any_named_record_with_the_codec_its_route_is_given(tmp_path) -> None:
    """The core bus knows records and codecs, not events: plain records through a stalled sink's overflow."""
    gate = asyncio.Event()
    codec = NoteCodec()
    slow = PlainSink("slow", gate, buffer=10, batch=5, overflow_dir=str(tmp_path), events="a.*")
    fast = PlainSink("fast", buffer=10, batch=5)
    bus = Bus([make_route(slow, codec=codec), make_route(fast, codec=codec)])
    await bus.start()
    sent = [Note("a.x" if i % 3 else "b.y", f"n{i}") for i in range(60)]
    for n in range(12):
        await bus.publish(Batch(sent[n * 5:(n + 1) * 5], position=n))
    for _ in range(200):
        if len(fast.received) == 60:
            break
        await asyncio.sleep(0.01)
    assert fast.received == [(note.name, note.text) for note in sent]
    assert len(list(tmp_path.glob("*.overflow"))) == 1 and codec.encoded > 0  # parked through the codec
    gate.set()
    await bus.close()
    assert slow.received == [(note.name, note.text) for note in sent if note.name == "a.x"]


def test_a_route_with_an_overflow_file_needs_a_codec() -> None:
    import pytest

    with pytest.raises(ValueError, match=r"^endpoint slow: an overflow file needs a codec \(or overflow=off\)$"):
        make_route(PlainSink("slow"), codec=None)
    assert make_route(PlainSink("held", overflow="off"), codec=None).overflow_bytes == 0
