"""A submit host's fleet: one `streamer serve` against one `pegasus-monitord` per workflow, same input, same run.

    nice python bench/bench_fleet.py [--workflows 100] [--jobs 20] [--pieces 40] [--interval 1.5] [--keep]

N synthetic workflows (mixed scenarios, `streamer.synth`) are generated twice (one copy per tool); each
dagman.out is emptied and then appended piece by piece (whole lines, as DAGMan flushes them) at a
realistic pace: a piece every `--interval` seconds per workflow, jittered, all workflows at once. The
same schedule is played first to one `streamer serve --watch ROOT` (per-workflow endpoints: the SQLite
Stampede DB, jobstate.log, and a JSONL file for the latency), then to N `pegasus-monitord` processes
(pegasus-wms 5.1.3 in this venv, following live, each writing its SQLite DB and jobstate.log). The
`** PID =` line of every log names this process, so monitord's DAGMan liveness check sees a live DAGMan.

Printed: total CPU seconds (user + system, from wait4 of every process), total peak RSS (the sum of each
process's peak), and latency p50 / p99 / max: from a piece appended to the first new event in streamer's
JSONL endpoint, and to the first new line of monitord's jobstate.log (its only live output), observed with
inotify. A piece after which a tool wrote nothing before the next piece is counted from its own append
until the tool's next output (pessimistic: a piece with no line that makes an event lengthens a sample).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncinotify import Inotify, Mask

from streamer.synth import generate

SCENARIOS = ["success", "retry", "held", "evicted", "post_failure", "clustered", "xml_kickstart", "success"]


def line_chunks(text: str, pieces: int, rng: random.Random) -> list[str]:
    lines = text.splitlines(keepends=True)
    pieces = max(1, min(pieces, len(lines)))
    cuts = sorted(rng.sample(range(1, len(lines)), pieces - 1)) if pieces > 1 else []
    bounds = [0, *cuts, len(lines)]
    return ["".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]


def expected_counts(src: Path, chunks: list[str]) -> tuple[list[int], list[int]]:
    """After each piece: how many events streamer's monitor has emitted, how many jobstate.log lines
    (MONITORD_* left out) it has written — the monitor run offline over a scratch copy, piece by piece.
    A live follower reaches count k only once it has read piece k: that moment minus the piece's append
    is the latency of the piece's lines (pieces that add nothing are not samples)."""
    from streamer.monitor.runner.core import MonitorCore

    scratch = Path(tempfile.mkdtemp(prefix="expect-", dir=src.parent))
    work = scratch / src.name
    shutil.copytree(src, work, symlinks=True)
    log = next(work.glob("*.dag.dagman.out"))
    core = MonitorCore(str(log), recursive=True, tz="UTC", write_jobstate=True, state=None, read_size=1 << 30)
    events, lines = [], []
    total = len(core.step(False).events)  # static.bp and plan events come before any DAGMan line
    for chunk in chunks:
        with open(log, "a") as fh:
            fh.write(chunk)
        for _ in range(3):  # one step reads a piece; the next ones emit what the engine deferred
            total += len(core.step(False).events)
        for entry in core.tracker.tracked:
            if entry.workflow is not None:
                entry.workflow.flush()
        events.append(total)
        lines.append(sum(1 for p in work.rglob("jobstate.log") if not p.parent.is_symlink()
                         for ln in open(p) if "MONITORD_" not in ln))
    core.close()
    shutil.rmtree(scratch)
    return events, lines


def prepare(base: Path, count: int, jobs: int, pieces: int) -> tuple[list[list[str]], dict[str, list[Path]], list]:
    rng = random.Random(7)
    chunks, dirs, expect = [], {"streamer": [], "monitord": []}, []
    for i in range(count):
        src = generate(base / "gen" / f"wf{i:03d}", jobs=jobs, scenario=SCENARIOS[i % len(SCENARIOS)], seed=10 * i + 1)
        log = next(src.glob("*.dag.dagman.out"))
        text = re.sub(r"\*\* PID = \d+", f"** PID = {os.getpid()}", log.read_text())
        chunks.append(line_chunks(text, pieces, rng))
        log.write_text("")
        expect.append(expected_counts(src, chunks[-1]))
        for tool in dirs:
            dest = base / tool / f"wf{i:03d}"
            shutil.copytree(src, dest, symlinks=True)
            dirs[tool].append(dest)
    return chunks, dirs, expect


def count_lines(path: Path, state: dict[str, int], skip: bytes | None) -> int:
    """Lines of `path` so far (read incrementally from the last offset)."""
    key = str(path)
    offset, seen = state.get(key + ":off", 0), state.get(key, 0)
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return seen
    end = data.rfind(b"\n") + 1
    body = data[:end]
    seen += body.count(b"\n") - (body.count(skip) if skip else 0)
    state[key + ":off"], state[key] = offset + end, seen
    return seen


async def play(dirs: list[Path], chunks: list[list[str]], targets: list[list[int]], watch_name: str,
               skip: bytes | None, interval: float, done: asyncio.Event) -> list[float]:
    """Append every workflow's pieces on a jittered schedule; a sample per piece: append -> its output."""
    appended: dict[str, list[tuple[int, float]]] = {str(d): [] for d in dirs}  # (target count, append time)
    samples: list[float] = []
    detail: list[tuple[str, float, float]] = []  # (workflow dir, append time, seen time) per sample
    counts: dict[str, int] = {}

    def check(key: str, path: Path) -> None:
        have = count_lines(path, counts, skip)
        waiting = appended[key]
        now = time.monotonic()
        while waiting and waiting[0][0] <= have:
            appended_at = waiting.pop(0)[1]
            samples.append(now - appended_at)
            detail.append((key, appended_at, now))
            if os.environ.get("BENCH_FLEET_DEBUG") and samples[-1] > 0.1:
                print(f"  slow: {key} {1000 * samples[-1]:.0f} ms")

    async def watcher() -> None:
        with Inotify() as inotify:
            for d in dirs:
                inotify.add_watch(d, Mask.MODIFY | Mask.CREATE)
            async for event in inotify:
                if event.name is not None and str(event.name) == watch_name:
                    check(str(event.path.parent), event.path)

    async def writer(i: int, d: Path) -> None:
        rng = random.Random(i)
        log = next(d.glob("*.dag.dagman.out"))
        await asyncio.sleep(rng.uniform(0, interval))
        previous = -1
        for k, chunk in enumerate(chunks[i]):
            with open(log, "a") as fh:
                fh.write(chunk)
            if targets[i][k] > previous:  # a piece that makes no output is no sample
                appended[str(d)].append((targets[i][k], time.monotonic()))
                previous = targets[i][k]
            check(str(d), d / watch_name)
            await asyncio.sleep(interval * rng.uniform(0.5, 1.5))

    task = asyncio.create_task(watcher())
    await asyncio.sleep(0.2)
    await asyncio.gather(*(writer(i, d) for i, d in enumerate(dirs)))
    await done.wait()
    for d in dirs:
        check(str(d), d / watch_name)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    missing = sum(len(v) for v in appended.values())
    if missing:
        print(f"  {watch_name}: {missing} pieces never reached their expected count")
    return samples, detail


def reap(pid: int) -> tuple[float, int]:
    """CPU seconds and peak RSS (bytes) of a finished child."""
    _, status, usage = os.wait4(pid, 0)
    if os.environ.get("BENCH_FLEET_DEBUG"):
        print(f"  pid {pid}: user {usage.ru_utime:.2f} s, system {usage.ru_stime:.2f} s")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


async def catch_up(dirs: list[Path], name: str, skip: bytes | None, initial: list[int] | None) -> None:
    """Until every workflow's output holds what its dagman.out had before the schedule (the first piece)."""
    counts: dict[str, int] = {}
    pending = list(zip(dirs, initial or []))
    while pending:
        pending = [(d, n) for d, n in pending if count_lines(d / name, counts, skip) < n]
        await asyncio.sleep(0.05)


async def run_streamer(base: Path, dirs: list[Path], chunks: list[list[str]], expect: list, interval: float,
                       trace: Path | None = None, initial: list[int] | None = None) -> dict:
    env = {**os.environ, "TZ": "UTC", "STREAMER_STATE_DIR": str(base / "streamer-state")}
    root = dirs[0].parent
    profile = ["-m", "cProfile", "-o", os.environ["BENCH_FLEET_PROFILE"]] if os.environ.get("BENCH_FLEET_PROFILE") else []
    command = [str(Path(__file__).with_name("fleet_trace.py")), str(trace)] if trace else ["-m", "streamer"]
    launched = time.monotonic()
    proc = subprocess.Popen([sys.executable, *profile, *command, "serve", "--watch", str(root), "--timezone", "UTC",
                             "-q", "--workflow-dest", "sqlite", "--workflow-dest", "file://{submit_dir}/events.jsonl"],
                            env=env, stderr=open(base / "serve.err", "wb"))
    registry = base / "streamer-state" / "serve" / "workflows.json"
    while not registry.exists() or not all((d / "events.jsonl").exists() for d in dirs):
        await asyncio.sleep(0.1)  # serve is up and follows every workflow (its endpoints are open)
    await catch_up(dirs, "events.jsonl", None, initial)
    ready = time.monotonic() - launched
    done = asyncio.Event()

    async def finished() -> None:
        while not all((d / "monitord.done").exists() for d in dirs):
            await asyncio.sleep(0.2)
        done.set()

    started = time.monotonic()
    waiter = asyncio.create_task(finished())
    samples, detail = await play(dirs, chunks, [e[0] for e in expect], "events.jsonl", None, interval, done)
    await waiter
    wall = time.monotonic() - started
    proc.send_signal(signal.SIGTERM)
    cpu, rss = await asyncio.to_thread(reap, proc.pid)
    proc.returncode = 0
    events = sum(sum(1 for _ in open(d / "events.jsonl", "rb")) for d in dirs)
    return {"cpu": cpu, "rss": rss, "samples": samples, "wall": wall, "events": events, "processes": 1,
            "detail": detail, "ready": ready}


async def run_monitord(base: Path, dirs: list[Path], chunks: list[list[str]], expect: list, interval: float,
                       initial: list[int] | None = None) -> dict:
    procs = []
    launched = time.monotonic()
    for d in dirs:  # a HOME each: serve writes no master DB, so monitord's is kept out of the contest
        home = base / "monitord-home" / d.name
        (home / ".pegasus").mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "TZ": "UTC", "HOME": str(home)}
        procs.append(subprocess.Popen([sys.executable, "-m", "Pegasus.cli.pegasus-monitord", "-N",
                                       "--no-notifications", next(d.glob("*.dag.dagman.out")).name], cwd=d, env=env,
                                      stdout=subprocess.DEVNULL, stderr=open(base / f"monitord-{d.name}.err", "wb")))
    while not all((d / "jobstate.log").exists() for d in dirs):  # MONITORD_STARTED: each is up
        await asyncio.sleep(0.1)
    await catch_up(dirs, "jobstate.log", b"MONITORD_", initial)
    ready = time.monotonic() - launched
    done = asyncio.Event()
    usage: list[tuple[float, int]] = []

    async def finished() -> None:
        usage.extend(await asyncio.gather(*(asyncio.to_thread(reap, p.pid) for p in procs)))
        done.set()

    started = time.monotonic()
    waiter = asyncio.create_task(finished())
    samples, _ = await play(dirs, chunks, [e[1] for e in expect], "jobstate.log", b"MONITORD_", interval, done)
    await waiter
    wall = time.monotonic() - started
    for p in procs:
        p.returncode = 0
    return {"cpu": sum(u[0] for u in usage), "rss": sum(u[1] for u in usage), "samples": samples, "wall": wall,
            "events": None, "processes": len(procs), "ready": ready}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def report(name: str, r: dict) -> None:
    s = r["samples"]
    print(f"{name:9s} {r['processes']:4d} proc  CPU {r['cpu']:8.2f} s  peak RSS {r['rss'] / 2**20:8.1f} MiB  "
          f"latency p50 {1000 * pct(s, .5):7.1f} ms  p99 {1000 * pct(s, .99):7.1f} ms  max {1000 * max(s or [0]):7.1f} ms"
          f"  ({len(s)} samples, wall {r['wall']:.1f} s; {r['ready']:.1f} s from start to caught up)")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workflows", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=20, help="compute jobs per workflow")
    ap.add_argument("--pieces", type=int, default=40, help="appends per dagman.out")
    ap.add_argument("--interval", type=float, default=1.5, help="mean seconds between appends of one workflow")
    ap.add_argument("--skip-monitord", "--streamer-only", action="store_true", help="run only the streamer half")
    ap.add_argument("--trace", action="store_true",
                    help="run serve under fleet_trace.py and print where each piece's time went (not for CPU figures)")
    ap.add_argument("--during-catch-up", action="store_true",
                    help="start the schedule as soon as the endpoints are open, while each tool still reads what "
                         "the logs held at its start (by default it waits for that)")
    ap.add_argument("--keep", action="store_true", help="keep the directories (printed)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        chunks, dirs, expect = prepare(base, args.workflows, args.jobs, args.pieces)
        # DAGMan's first lines are there before its monitor starts (pegasus-dagman starts monitord after
        # DAGMan; monitord gives up on an empty dagman.out): the first piece is not part of the schedule
        for tool in dirs.values():
            for i, d in enumerate(tool):
                with open(next(d.glob("*.dag.dagman.out")), "a") as fh:
                    fh.write(chunks[i][0])
        chunks = [c[1:] for c in chunks]
        initial = None if args.during_catch_up else ([e[0][0] for e in expect], [e[1][0] for e in expect])
        expect = [(e[0][1:], e[1][1:]) for e in expect]
        lines = sum(c.count("\n") for cs in chunks for c in cs)
        print(f"{args.workflows} workflows x {args.jobs} jobs, {lines:,} dagman.out lines in {args.pieces} pieces "
              f"each, a piece every ~{args.interval} s per workflow")
        trace = base / "trace.json" if args.trace else None
        load = os.getloadavg()
        canary = None
        if trace is not None:
            from fleet_trace import CANARY

            canary = subprocess.Popen([sys.executable, "-c", CANARY, str(base / "canary.txt")])
        s = await run_streamer(base, dirs["streamer"], chunks, expect, args.interval, trace,
                               initial[0] if initial else None)
        if canary is not None:
            canary.terminate()
            canary.wait()
        report("streamer", s)
        print(f"          {s['events']:,} events; load average before {load[0]:.1f}, after "
              f"{os.getloadavg()[0]:.1f} (1 min)")
        if trace is not None:
            from fleet_trace import explain

            (base / "samples.json").write_text(repr(s["detail"]))
            explain(str(trace), s["detail"], canary=str(base / "canary.txt"))
        if not args.skip_monitord:
            m = await run_monitord(base, dirs["monitord"], chunks, expect, args.interval,
                                   initial[1] if initial else None)
            report("monitord", m)
            print(f"streamer / monitord: CPU {s['cpu'] / m['cpu']:.3f}x (target <= 0.1), "
                  f"peak RSS {s['rss'] / m['rss']:.3f}x (target <= 0.05); streamer p99 "
                  f"{1000 * pct(s['samples'], .99):.1f} ms (target < 100), monitord p99 "
                  f"{1000 * pct(m['samples'], .99):.1f} ms")
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
