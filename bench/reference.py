"""The one way the benchmarks measure a run, and compare it with a reference run in the same session.

A shared machine's speed drifts from minute to minute, so a figure measured an
hour ago says little. Every benchmark runs its tool and its reference (the real
`pegasus-monitord`, another checkout of streamer, a direct load) interleaved
(reference, this, reference, this, ...) on identical input and reports medians.
Each run is measured from a fresh parent process (`run_measured`):

  wall      seconds from start to exit;
  cpu       user + system seconds of the whole process tree (RUSAGE_CHILDREN of that parent:
            every descendant the tool waited for, a parsing child included);
  rss_sum   peak RSS summed over the processes of the tree: each process's own peak (VmHWM),
            sampled every 20 ms from /proc while it runs, then added up (on a machine without
            /proc, the largest single process's peak, from RUSAGE_CHILDREN);
  load      the 1-minute load average before and after the run.

CPU time depends far less on the machine's load than wall time: it is the
figure to compare. `summary` prints medians of each, their ratios, and the load.

The reference tree runs with its own `.venv/bin/python` when it has one (an
old tree's compiled modules are built there), else with this Python, its
directory first on PYTHONPATH. Both trees' modules are byte-compiled first
(`compileall`) and PYTHONDONTWRITEBYTECODE is dropped, so no run pays for
compiling the sources (an installed streamer has its .pyc files).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

THIS = Path(__file__).resolve().parent.parent

_MEASURE = r'''
import os, resource, subprocess, sys, threading, time

def tree(root):
    """root and its descendants, from /proc/PID/task/TID/children."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return found

def hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0

peaks, stop = {}, threading.Event()
def sample(root):
    while True:
        for pid in tree(root):
            peaks[pid] = max(peaks.get(pid, 0), hwm(pid))
        if stop.wait(0.02):
            return

log = open(sys.argv[2], "w")
load = os.getloadavg()[0]
t = time.perf_counter()
p = subprocess.Popen(sys.argv[3:], cwd=sys.argv[1], stdout=log, stderr=log)
sampler = threading.Thread(target=sample, args=(p.pid,), daemon=True)
if os.path.isdir("/proc/self/task"):
    sampler.start()
# wait without reaping, so the sampler can still read the exited process's peak
os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
wall = time.perf_counter() - t
stop.set()
if sampler.is_alive():
    sampler.join()
code = p.wait()
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(code, wall, r.ru_utime + r.ru_stime, r.ru_maxrss, max(sum(peaks.values()), r.ru_maxrss), load,
      os.getloadavg()[0])
'''


@dataclass
class Run:
    wall: float
    cpu: float
    rss_kib: int
    """The largest single process's peak RSS."""
    rss_sum_kib: int = 0
    """Peak RSS summed over the process tree."""
    load_before: float = 0.0
    load_after: float = 0.0

    def line(self) -> str:
        return (f"wall {self.wall:7.2f} s  CPU {self.cpu:7.2f} s  peak RSS {self.rss_sum_kib / 1024:5.0f} MiB "
                f"(summed; largest process {self.rss_kib / 1024:.0f})  load {self.load_before:.1f} -> "
                f"{self.load_after:.1f}")


def python_of(tree: Path) -> str:
    venv = tree / ".venv" / "bin" / "python"
    return str(venv) if tree != THIS and venv.exists() else sys.executable


def _env(tree: Path, env: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ if env is None else env, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def precompile(tree: Path) -> None:
    """Byte-compile `tree`'s streamer package, as an installation has it."""
    subprocess.run([python_of(tree), "-m", "compileall", "-q", str(tree / "streamer")], env=_env(tree, None),
                   check=True, stdout=subprocess.DEVNULL)


def run_measured(command: list[str], cwd: Path, log: Path, env: Mapping[str, str] | None = None) -> Run:
    """`command` in `cwd` (its output to `log`) from a fresh parent: wall, CPU, peak RSS and load; raises if
    it fails."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(cwd), str(log), *command],
                          env=dict(os.environ if env is None else env), capture_output=True, text=True)
    fields = proc.stdout.split()
    if proc.returncode or len(fields) != 7 or fields[0] != "0":
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(f"{' '.join(command)} (in {cwd}) failed:\n{tail}{proc.stderr[-2000:]}")
    return Run(float(fields[1]), float(fields[2]), int(fields[3]), int(fields[4]), float(fields[5]),
               float(fields[6]))


def measure(tree: Path, args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> Run:
    """One `python -m streamer ARGS` of `tree` in `cwd` (output to `log`); raises if it fails."""
    return run_measured([python_of(tree), "-m", "streamer", *args], cwd, log, _env(tree, env))


def interleave(tools: Mapping[str, Callable[[], Run]], runs: int,
               report: Callable[[int, str, Run], None] | None = None) -> dict[str, list[Run]]:
    """`runs` rounds of every tool in turn (the reference first), in one session: their runs by name."""
    results: dict[str, list[Run]] = {name: [] for name in tools}
    for i in range(1, runs + 1):
        for name, run in tools.items():
            result = run()
            results[name].append(result)
            if report is not None:
                report(i, name, result)
            else:
                print(f"run {i} {name:9} {result.line()}", flush=True)
    return results


def median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def summary(ours: list[Run], theirs: list[Run], this: str = "this tree", reference: str = "reference") -> str:
    """Medians of both and the ratios this/reference (below 1: this one is cheaper), with the load of the runs."""
    lines = [f"medians over {len(ours)} interleaved runs each (CPU = user + system of the process tree):"]
    for name, runs in ((this, ours), (reference, theirs)):
        lines.append(f"  {name:10} wall {median(runs, 'wall'):7.2f} s  CPU {median(runs, 'cpu'):7.2f} s "
                     f"(range {min(r.cpu for r in runs):.2f}-{max(r.cpu for r in runs):.2f})  peak RSS "
                     f"{median(runs, 'rss_sum_kib') / 1024:5.0f} MiB summed  load "
                     f"{min(r.load_before for r in runs):.1f}-{max(r.load_after for r in runs):.1f}")
    ratio = {attr: median(ours, attr) / max(median(theirs, attr), 1e-9) for attr in ("wall", "cpu", "rss_sum_kib")}
    lines.append(f"ratio {this}/{reference}: wall {ratio['wall']:.3f}, CPU {ratio['cpu']:.3f}, "
                 f"peak RSS {ratio['rss_sum_kib']:.3f}  ({reference} takes {1 / ratio['cpu']:.1f}x the CPU)")
    return "\n".join(lines)


def compare_counts(counts: Mapping[str, Mapping[str, int]], must_match: bool = True) -> str:
    """Event-type counts of each output side by side, and whether they are identical."""
    names = list(counts)
    types = sorted({t for c in counts.values() for t in c})
    width = max([len(t) for t in types] + [10])
    lines = [f"  {'event':{width}} " + " ".join(f"{n:>12}" for n in names)]
    for t in types:
        row = [counts[n].get(t, 0) for n in names]
        mark = "" if len(set(row)) == 1 else "   <- differs"
        lines.append(f"  {t:{width}} " + " ".join(f"{v:>12,}" for v in row) + mark)
    lines.append(f"  {'total':{width}} " + " ".join(f"{sum(counts[n].values()):>12,}" for n in names))
    same = len({tuple(sorted(c.items())) for c in counts.values()}) == 1
    verdict = "identical" if same else ("DIFFERENT" if must_match else "different (expected)")
    lines.append(f"  event-type counts: {verdict}")
    return "\n".join(lines)
