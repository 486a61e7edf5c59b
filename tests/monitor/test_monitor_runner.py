"""Where the monitor parses: the child-process runner, bounded steps, throttled snapshots."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamer.monitor import tracker as tracker_module
from streamer.monitor.runner import make_runner
from streamer.monitor.runner.core import MonitorCore, Step
from streamer.monitor.errors import MonitorWorkerError
from streamer.monitor.runner.process import ProcessRunner
from streamer.monitor.source import WorkflowSource
from streamer.synth import generate, iter_dagman_chunks


def _core(directory: Path, **options) -> MonitorCore:
    dagman_out = str(next(directory.glob("*.dag.dagman.out")))
    return MonitorCore(dagman_out, recursive=True, tz="UTC", write_jobstate=False, state=None,
                       read_size=1 << 18, **options)


def test_static_events_go_out_in_bounded_steps_before_the_dagman_log(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracker_module, "STATIC_SLICE", 400)
    directory = generate(tmp_path / "w", jobs=300, seed=1)
    core = _core(directory)
    names: list[str] = []
    sizes = []
    while True:
        step = core.step(True)
        sizes.append(len(step.events))
        names.extend(e.name for e in step.events)
        if not step.events and step.at_eof:
            break
    names.extend(e.name for e in core.finish().events)
    static = names.index("stampede.static.end") - names.index("stampede.static.start") - 1
    assert static > 3 * tracker_module.STATIC_SLICE  # the workflow is big enough to need several slices
    full = static // tracker_module.STATIC_SLICE
    # wf.plan and static.start, then the static.bp events a slice per step
    assert sizes[:full] == [2 + tracker_module.STATIC_SLICE] + [tracker_module.STATIC_SLICE] * (full - 1)
    assert names.index("stampede.xwf.start") > names.index("stampede.static.end")


def test_snapshots_are_throttled_but_the_end_of_input_always_has_one(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=300, seed=2)
    core = _core(directory, snapshot_interval=3600)
    core.read_size = 4096  # many steps
    steps = []
    while True:
        step = core.step(True)
        steps.append(step)
        if not step.events and step.at_eof:
            break
    assert len(steps) > 20
    # the first step after a start is always checkpointed (a crash soon after a restart repeats
    # nothing already sent); then, with a long interval, only the end of the input is
    assert steps[0].position is not None
    positioned = [s for s in steps[1:] if s.position is not None]
    assert all(s.at_eof for s in positioned) and positioned
    assert core.finish().position["complete"] is True


def test_auto_picks_a_process_only_for_a_large_log_with_a_core_to_spare(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    small = tmp_path / "small.dag.dagman.out"
    small.write_text("x\n")
    assert make_runner("auto", dagman_out=str(small)).kind == "thread"
    big = tmp_path / "big.dag.dagman.out"
    with big.open("wb") as handle:
        handle.truncate(8 << 20)
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.2, 0.2))  # a quiet machine
    assert make_runner("auto", dagman_out=str(big)).kind == ("process" if cores >= 2 else "thread")
    # a busy one (measured: the child cost more CPU and more wall there, docs/benchmarks.md)
    monkeypatch.setattr(os, "getloadavg", lambda: (cores + 3.0, 1.0, 1.0))
    assert make_runner("auto", dagman_out=str(big)).kind == "thread"
    with pytest.raises(ValueError, match="unknown parser mode"):
        make_runner("fibers", dagman_out=str(big))


def test_a_dead_worker_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=20, seed=3)

    async def run() -> None:
        dagman_out = str(next(directory.glob("*.dag.dagman.out")))
        runner = ProcessRunner(dagman_out=dagman_out, recursive=True, tz="UTC", write_jobstate=False,
                               state=None, read_size=1 << 18)
        await runner.open()
        assert runner.process is not None
        runner.process.kill()
        with pytest.raises(MonitorWorkerError, match=r"exited \(code -9\) during 'step'"):
            await runner.step(True)
        await runner.close()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_process_and_thread_runners_resume_alike(tmp_path: Path) -> None:
    """A state written by the child process resumes in a thread (and the stream is the same)."""
    directory = generate(tmp_path / "w", jobs=40, seed=4)
    reference_dir = generate(tmp_path / "ref", jobs=40, seed=4)

    async def events(source: WorkflowSource, stop_after: int | None = None) -> list:
        out, committed = [], 0
        async for batch in source.batches():
            if stop_after is not None and len(out) >= stop_after:
                break
            out.extend(batch.events)
            if batch.position is not None:
                await source.commit(batch.position)
                committed = len(out)
        await source.close()
        return out[:committed] if stop_after is not None else out

    reference = asyncio.run(events(WorkflowSource(reference_dir, timezone="UTC", parser="thread")))
    first = WorkflowSource(directory, timezone="UTC", parser="process", snapshot_interval=0)
    first.read_size = 2048
    before = asyncio.run(events(first, stop_after=len(reference) // 2))
    assert 0 < len(before) < len(reference)
    after = asyncio.run(events(WorkflowSource(directory, timezone="UTC", parser="thread")))
    assert [e.id for e in before + after] == [e.id for e in reference]


def _children(pid: int) -> list[int]:
    """Child pids of every thread of `pid` (the worker is started from a worker thread)."""
    out = []
    for path in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out.extend(int(p) for p in path.read_text().split())
        except OSError:
            pass
    return out


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
def test_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    directory = generate(tmp_path / "w", jobs=30, seed=5)
    chunks = iter_dagman_chunks(directory, pieces=4, seed=5)
    dagman_out = next(directory.glob("*.dag.dagman.out"))
    with dagman_out.open("a") as handle:
        handle.write(next(chunks))  # DAGMan is still running: follow waits
    parent = subprocess.Popen([sys.executable, "-m", "streamer", "follow", str(directory), "--parser", "process",
                               "-q", "--dest", f"file://{tmp_path}/out.jsonl"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not _children(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert parent.poll() is None, parent.stderr.read().decode() if parent.stderr else ""
        (child,) = _children(parent.pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            try:
                os.waitpid(child, os.WNOHANG)  # reaped by init normally; harmless if not ours
            except ChildProcessError:
                pass
            time.sleep(0.05)
        status = Path(f"/proc/{child}/status")
        assert not status.exists() or "zombie" in status.read_text(), "the worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_thread_runner_steps_share_a_few_parse_threads_first_come_first_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """`streamer serve` steps a hundred workflows at once: their parsing goes through a small pool, in the
    order asked, so the event loop thread is one of a few threads wanting the GIL, not one of a hundred
    (and a big default executor, as serve's, does not change that)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from streamer.monitor.runner import thread as runner_module

    lock = threading.Lock()
    running, peak, started = [0], [0], []

    class Core:
        def __init__(self, name: int) -> None:
            self.name = name

        def step(self, final: bool):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
                started.append(self.name)
            time.sleep(0.02)
            with lock:
                running[0] -= 1
            return Step([], None)

    async def run() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=64))
        runners = []
        for i in range(24):
            r = runner_module.ThreadRunner()
            r.core = Core(i)  # type: ignore[assignment]
            runners.append(r)
        steps = []
        for r in runners:  # asked in this order, each once the one before is queued
            steps.append(asyncio.create_task(r.step(False)))
            await asyncio.sleep(0)
        await asyncio.gather(*steps)

    asyncio.run(run())
    assert peak[0] <= runner_module.PARSE_THREADS
    assert started == list(range(24))


def test_a_live_workflows_step_goes_ahead_of_steps_still_reading_a_backlog() -> None:
    """serve restarted beside live workflows: while the parse threads are busy with backlogs, the step of a
    workflow that had caught up (a piece just appended) is taken before the queued backlog steps, and
    a runner is live once a step reached the end of its logs."""
    import threading

    from streamer.monitor.runner import thread as runner_module

    gate = threading.Event()
    started: list[str] = []
    lock = threading.Lock()

    class Core:
        def __init__(self, name: str, at_eof: bool) -> None:
            self.name, self.at_eof = name, at_eof

        def step(self, final: bool):
            with lock:
                started.append(self.name)
            if self.name.startswith("busy"):
                gate.wait(10)
            return Step([], None, at_eof=self.at_eof)

    def runner(name: str, *, live: bool = False, at_eof: bool = False) -> runner_module.ThreadRunner:
        r = runner_module.ThreadRunner()
        r.core = Core(name, at_eof)  # type: ignore[assignment]
        r.live = live
        return r

    async def run() -> list[runner_module.ThreadRunner]:
        busy = [runner(f"busy{i}") for i in range(runner_module.PARSE_THREADS)]
        backlog = [runner(f"backlog{i}") for i in range(5)]
        live = runner("live", live=True, at_eof=True)
        steps = [asyncio.create_task(r.step(False)) for r in busy]
        while len(started) < len(busy):  # every parse thread holds a backlog step
            await asyncio.sleep(0.005)
        steps += [asyncio.create_task(r.step(False)) for r in backlog]
        await asyncio.sleep(0.05)
        steps.append(asyncio.create_task(live.step(False)))  # asked last
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(*steps)
        return [live, backlog[0]]

    live, backlog = asyncio.run(run())
    after_busy = started[runner_module.PARSE_THREADS:]
    assert after_busy == ["live"] + [f"backlog{i}" for i in range(5)]
    assert live.live is True and backlog.live is False  # from each step's at_eof


HEAVY = ("pydantic", "rich", "asyncio", "concurrent.futures", "streamer.events.chimbuko", "streamer.monitor.source")
"""Modules a replay's processes load only when they need them (their start-up is CPU in every replay)."""

_SERVED = """
import gc, io, sys
from streamer.monitor.runner import child, process
options = dict(dagman_out=sys.argv[1], recursive=True, tz="UTC", write_jobstate=False, state=None, read_size=1 << 20)
requests = process.frame(("open", (options, 30))) + process.frame(("step", (True,))) + process.frame(("close", ()))
sys.stdin = io.TextIOWrapper(io.BytesIO(requests))
sys.stdout = replies = io.TextIOWrapper(io.BytesIO())  # kept: serve() swaps sys.stdout
child.serve()
print(sorted(m for m in sys.modules if m in sys.argv[2:]), gc.get_threshold()[0], file=sys.__stderr__)
"""


def test_the_parsing_child_and_a_quiet_replay_load_no_provenance_models_nor_rich(tmp_path: Path) -> None:
    """The child imports what parsing needs (no asyncio, no source) and tunes its GC as the parent does; a quiet
    replay to a BP file with no provenance record never builds the pydantic models of `events/chimbuko/models.py`
    (~0.1 s per process), nor draws with rich (~25 ms)."""
    directory = generate(tmp_path / "w", jobs=20, seed=1)
    dagman_out = str(next(directory.glob("*.dag.dagman.out")))
    child = subprocess.run([sys.executable, "-c", _SERVED, dagman_out, *HEAVY], capture_output=True, text=True,
                           check=True)
    assert child.stderr.strip().split("\n")[-1] == "[] 10000"
    check = "import sys; {}; print(sorted(m for m in sys.modules if m in %r))" % (HEAVY,)
    replay = ("from streamer.cli.main import main; sys.argv = ['streamer', 'replay', {!r}, '-q', '--dest', {!r}];"
              " code = main()").format(str(directory), f"file://{tmp_path / 'out.bp'}")
    parent = subprocess.run([sys.executable, "-c", check.format(replay)], capture_output=True, text=True,
                            check=True, env={**os.environ, "TZ": "UTC"})
    assert parent.stdout.strip().split("\n")[-1] == "['asyncio', 'concurrent.futures', 'streamer.monitor.source']"
    assert (tmp_path / "out.bp").read_text().count("event=stampede.job_inst.main.end") == 25  # 20 compute, 5 others
