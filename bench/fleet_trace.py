"""`streamer serve` with a timeline of every workflow's hot path, for `bench_fleet.py --trace DIR`.

    python bench/fleet_trace.py OUT.json serve --watch ROOT ...

Runs `streamer` with the arguments after OUT.json, its functions wrapped to record, per followed
workflow (CLOCK_MONOTONIC, comparable with the bench's append times): inotify wake-ups (`wake`), the
source leaving its idle wait (`idle`), each parsing step (`step`: asked, started in its thread, ended
there, resumed on the loop; events), each publish (`pub`), each write of the JSONL and SQLite endpoints
(`jsonl`, `sqlite`: start, end, events) and each checkpoint commit (`commit`). A sampler measures the
event loop's lag every 5 ms (`lag`: when it woke, how late) and the default executor's queue. Written to
OUT.json at exit. `bench_fleet.py` joins it with its slow samples (the piece's append time).
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Any

import orjson

now = time.monotonic
current: contextvars.ContextVar[str] = contextvars.ContextVar("workflow", default="?")
timeline: dict[str, list[Any]] = defaultdict(list)
lags: list[tuple[float, float, int]] = []
stalls: list[tuple[float, str]] = []
"""(time, the loop thread's innermost frames) whenever the loop has not ticked for 40 ms."""
collections: list[tuple[float, float, int]] = []
"""(start, seconds, generation) of every garbage collection."""


def record(kind: str, *values: Any) -> None:
    timeline[current.get()].append((kind, *values))


def install() -> None:
    from streamer.core.bus import Bus
    from streamer.endpoints.files import FileEndpoint
    from streamer.endpoints.db.sqlite import SQLiteEndpoint
    from streamer.monitor.runner.core import MonitorCore
    from streamer.monitor.runner.thread import ThreadRunner
    from streamer.monitor.source import WorkflowSource
    from streamer.serve import follower, supervisor
    from streamer.serve.follower import ServeSource

    original_follow = follower.follow

    async def follow(wf: Any, *args: Any, **kwargs: Any) -> bool:
        current.set(wf.found.submit_dir)
        return await original_follow(wf, *args, **kwargs)

    supervisor.follow = follow  # type: ignore[assignment]

    original_wrote = supervisor.Supervisor.wrote

    def wrote(self: Any, path: str) -> None:
        token = current.set(next((d for d in self.followed if path.startswith(d + "/")), "?"))
        record("wake", now())
        current.reset(token)
        original_wrote(self, path)

    supervisor.Supervisor.wrote = wrote  # type: ignore[method-assign]

    original_idle = ServeSource.idle

    async def idle(self: Any, delay: float) -> None:
        started = now()
        await original_idle(self, delay)
        record("idle", started, now())

    ServeSource.idle = idle  # type: ignore[method-assign]

    original_step = MonitorCore.step

    def core_step(self: Any, final: bool) -> Any:
        started = now()
        step = original_step(self, final)
        self._trace = (started, now(), threading.get_ident())
        return step

    MonitorCore.step = core_step  # type: ignore[method-assign]

    original_runner_step = ThreadRunner.step

    async def runner_step(self: Any, final: bool) -> Any:
        asked = now()
        step = await original_runner_step(self, final)
        began, ended, _ = getattr(self.core, "_trace", (0, 0, 0))
        record("step", asked, began, ended, now(), len(step.events))
        return step

    ThreadRunner.step = runner_step  # type: ignore[method-assign]

    original_publish = Bus.publish

    async def publish(self: Any, batch: Any) -> None:
        started = now()
        await original_publish(self, batch)
        record("pub", started, now(), len(batch.events))

    Bus.publish = publish  # type: ignore[method-assign]

    original_write_marked = FileEndpoint.write_marked

    async def write_marked(self: Any, batch: Any, ends: Any) -> Any:
        started = now()
        marks = await original_write_marked(self, batch, ends)
        record("jsonl", started, now(), len(batch))
        return marks

    FileEndpoint.write_marked = write_marked  # type: ignore[method-assign]

    original_sqlite = SQLiteEndpoint.write

    async def sqlite_write(self: Any, batch: Any) -> None:
        started = now()
        await original_sqlite(self, batch)
        record("sqlite", started, now(), len(batch))

    SQLiteEndpoint.write = sqlite_write  # type: ignore[method-assign]

    original_commit = WorkflowSource.commit

    async def commit(self: Any, position: Any, endpoints: Any = None) -> None:
        started = now()
        await original_commit(self, position, endpoints)
        record("commit", started, now())

    WorkflowSource.commit = commit  # type: ignore[method-assign]

    original_run = supervisor.Supervisor.run
    ticked = [now()]
    loop_thread = threading.get_ident()

    def watchdog() -> None:
        import traceback

        reported = 0.0
        while True:
            time.sleep(0.01)
            last = ticked[0]
            if now() - last > 0.04 and reported != last:
                reported = last
                frame = sys._current_frames().get(loop_thread)
                if frame is not None:
                    stack = traceback.extract_stack(frame)[-8:]
                    stalls.append((now(), " < ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}"
                                                      for f in reversed(stack))))

    threading.Thread(target=watchdog, daemon=True).start()

    import gc

    started_gc = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started_gc[0] = now()
        else:
            collections.append((started_gc[0], now() - started_gc[0], info["generation"]))

    gc.callbacks.append(on_gc)

    async def run(self: Any) -> int:
        async def sampler() -> None:
            loop = asyncio.get_running_loop()
            while True:
                before = now()
                ticked[0] = before
                await asyncio.sleep(0.005)
                after = now()
                ticked[0] = after
                executor = getattr(loop, "_default_executor", None)
                queued = executor._work_queue.qsize() if executor is not None else 0
                lags.append((after, after - before - 0.005, queued))

        task = asyncio.create_task(sampler())
        try:
            return await original_run(self)
        finally:
            task.cancel()

    supervisor.Supervisor.run = run  # type: ignore[method-assign]


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):  # usage, never an output file named "--help"
        print("usage: python bench/fleet_trace.py OUT.json STREAMER-ARGS...\n\n" + (__doc__ or ""))
        return 0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2
    out = sys.argv[1]

    def dump() -> None:
        with open(out, "wb") as fh:
            fh.write(orjson.dumps({"timeline": timeline, "lags": lags, "stalls": stalls,
                                   "gc": collections}))

    atexit.register(dump)
    if os.environ.get("FLEET_TRACE_SWITCH"):  # experiments: the GIL's switch interval, seconds
        sys.setswitchinterval(float(os.environ["FLEET_TRACE_SWITCH"]))
    install()
    from streamer.cli.main import main as streamer_main

    return streamer_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------- analysis (bench_fleet.py --trace)

CANARY = """
import signal, sys, time
out, lags = sys.argv[1], []
signal.signal(signal.SIGTERM, signal.default_int_handler)
try:
    while True:
        before = time.monotonic()
        time.sleep(0.005)
        after = time.monotonic()
        if after - before > 0.025:
            lags.append((after, after - before - 0.005))
except KeyboardInterrupt:
    pass
open(out, "w").write(repr(lags))
"""
"""A process that only sleeps 5 ms at a time (started by the bench beside serve, as niced): when it wakes
20 ms late or more, the machine did not schedule it, and a stall of serve at that moment is the machine's."""


def machine_stalls(path: str) -> list[tuple[float, float]]:
    import ast

    try:
        with open(path) as fh:
            return list(ast.literal_eval(fh.read()))
    except (OSError, ValueError, SyntaxError):
        return []

def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def explain(trace_path: str, samples: list[tuple[str, float, float]], slowest: int = 15,
            canary: str | None = None) -> None:
    """Print where the time of the pieces went: per stage over every sample, and the slowest pieces.

    `samples`: (submit dir, append time, time the bench saw the piece's events)."""
    with open(trace_path, "rb") as fh:
        data = orjson.loads(fh.read())
    timeline: dict[str, list[list[Any]]] = data["timeline"]
    stages: dict[str, list[float]] = defaultdict(list)
    rows = []
    for key, appended, seen in samples:
        items = timeline.get(key, [])
        # the JSONL write that made the piece visible: the last one ending before the bench saw it
        writes = [i for i in items if i[0] == "jsonl" and i[2] <= seen + 0.002 and i[2] >= appended]
        if not writes:
            continue
        write = writes[-1]
        steps = [i for i in items if i[0] == "step" and i[3] <= write[1] and i[1] >= appended - 0.5 and i[5]]
        step = steps[-1] if steps else None
        wakes = [i[1] for i in items if i[0] == "wake" and appended <= i[1] <= seen]
        idles = [i[2] for i in items if i[0] == "idle" and appended <= i[2] <= seen]
        pubs = [i for i in items if i[0] == "pub" and step is not None and i[1] >= step[4] and i[2] <= write[2]]
        split = {
            "wake": (wakes[0] - appended) if wakes else float("nan"),
            "idle->step": (step[1] - idles[0]) if step and idles else float("nan"),
            "queue": (step[2] - step[1]) if step else float("nan"),
            "parse": (step[3] - step[2]) if step else float("nan"),
            "resume": (step[4] - step[3]) if step else float("nan"),
            "publish": (pubs[0][2] - pubs[0][1]) if pubs else float("nan"),
            "to write": (write[1] - step[4]) if step else float("nan"),
            "write": write[2] - write[1],
            "seen": seen - write[2],
        }
        for name, value in split.items():
            if value == value:
                stages[name].append(value)
        rows.append((seen - appended, key, appended, split, step))
    print("  stage        p50 ms   p99 ms   max ms")
    for name, values in stages.items():
        print(f"  {name:10s} {1000 * _pct(values, .5):8.1f} {1000 * _pct(values, .99):8.1f} "
              f"{1000 * max(values):8.1f}")
    lags = data["lags"]
    lag_values = [lag for _, lag, _ in lags]
    print(f"  loop lag (5 ms sampler): p50 {1000 * _pct(lag_values, .5):.1f} ms, p99 "
          f"{1000 * _pct(lag_values, .99):.1f} ms, max {1000 * max(lag_values or [0]):.1f} ms; executor queue max "
          f"{max((q for _, _, q in lags), default=0)}")
    origin = min((a for _, a, _ in samples), default=0.0)
    stalls = [(at - origin, lag) for at, lag, _ in lags if lag > 0.05]
    print("  loop stalls > 50 ms (s after the first append: ms): "
          + ", ".join(f"{at:.1f}: {1000 * lag:.0f}" for at, lag in stalls[:40]))
    slow_gc = [(at - origin, took, gen) for at, took, gen in data.get("gc", []) if took > 0.01]
    print(f"  garbage collections: {len(data.get('gc', []))}, over 10 ms: "
          + ", ".join(f"{at:.1f} s gen{gen} {1000 * took:.0f} ms" for at, took, gen in slow_gc[:20]))
    where: dict[str, int] = defaultdict(int)
    for _, stack in data.get("stalls", []):
        where[stack] += 1
    print("  where the loop thread was during stalls > 40 ms:")
    for stack, count in sorted(where.items(), key=lambda kv: -kv[1])[:12]:
        print(f"    {count:4d}x {stack}")
    machine = machine_stalls(canary) if canary else []
    if canary:
        print(f"  canary (a process that only sleeps 5 ms, as niced): {len(machine)} wake-ups 20 ms late or more, "
              f"worst {1000 * max((lag for _, lag in machine), default=0):.0f} ms")
    slow = [r for r in rows if r[0] > 0.1]
    if machine and slow:
        hit = sum(1 for r in slow if any(r[2] <= at <= r[2] + r[0] + 0.01 for at, _ in machine))
        print(f"  pieces over 100 ms: {len(slow)}, of which {hit} overlap a stall of the canary")
    rows.sort(key=lambda r: r[0], reverse=True)
    for latency, key, appended, split, step in rows[:slowest]:
        parts = "  ".join(f"{name} {1000 * value:.0f}" for name, value in split.items() if value == value)
        near = [lag for at, lag, _ in lags if appended <= at <= appended + latency + 0.01]
        events = step[5] if step else 0
        canary_lag = [lag for at, lag in machine if appended <= at <= appended + latency + 0.01]
        print(f"  {1000 * latency:6.0f} ms at {appended - origin:5.1f} s {key.rsplit('/', 1)[-1]} ({events} ev): {parts}; "
              f"worst loop lag meanwhile {1000 * max(near or [0]):.0f} ms, canary {1000 * max(canary_lag or [0]):.0f} ms")
