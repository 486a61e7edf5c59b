"""Same-run comparison with another checkout of streamer (`--reference TREE` of the benchmarks).

A shared machine's speed drifts from minute to minute, so a figure measured an
hour ago says little. The benchmarks run this tree and the reference tree
interleaved (reference, this, reference, this, ...) on identical input and
report medians of wall time and of CPU time (user + system of the whole
process tree, from RUSAGE_CHILDREN of a fresh parent per run), and their
ratio: CPU time depends far less on the machine's load than wall time.

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
from dataclasses import dataclass
from pathlib import Path

THIS = Path(__file__).resolve().parent.parent

_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "log = open(sys.argv[2], 'w')\n"
    "t = time.perf_counter(); p = subprocess.run(sys.argv[3:], cwd=sys.argv[1], stdout=log, stderr=log)\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(p.returncode, time.perf_counter() - t, r.ru_utime + r.ru_stime, r.ru_maxrss)\n"
)


@dataclass
class Run:
    wall: float
    cpu: float
    rss_kib: int


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


def run_measured(command: list[str], cwd: Path, log: Path, env: dict[str, str]) -> Run:
    """`command` in `cwd` (its output to `log`) from a fresh parent: wall, CPU and peak RSS; raises if it fails."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(cwd), str(log), *command], env=env,
                          capture_output=True, text=True)
    fields = proc.stdout.split()
    if proc.returncode or not fields or fields[0] != "0":
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(f"{' '.join(command)} (in {cwd}) failed:\n{tail}{proc.stderr[-2000:]}")
    return Run(float(fields[1]), float(fields[2]), int(fields[3]))


def measure(tree: Path, args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> Run:
    """One `python -m streamer ARGS` of `tree` in `cwd` (output to `log`); raises if it fails."""
    return run_measured([python_of(tree), "-m", "streamer", *args], cwd, log, _env(tree, env))


def summary(ours: list[Run], theirs: list[Run]) -> str:
    """Medians of both trees and the ratio this/reference (below 1: this tree is faster)."""
    def med(runs: list[Run], attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in runs)

    ow, oc, tw, tc = med(ours, "wall"), med(ours, "cpu"), med(theirs, "wall"), med(theirs, "cpu")
    return (f"medians over {len(ours)} interleaved runs each: this tree wall {ow:.2f} s, CPU {oc:.2f} s; "
            f"reference wall {tw:.2f} s, CPU {tc:.2f} s\n"
            f"ratio this/reference: wall {ow / tw:.3f}, CPU {oc / tc:.3f}  (CPU ranges: this "
            f"{min(r.cpu for r in ours):.2f}-{max(r.cpu for r in ours):.2f} s, reference "
            f"{min(r.cpu for r in theirs):.2f}-{max(r.cpu for r in theirs):.2f} s)")
