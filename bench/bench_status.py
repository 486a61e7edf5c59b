"""`streamer status` against the real `pegasus-status`, on the same synthetic submit directories.

    python bench/bench_status.py [--jobs 1000,20000] [--runs 3]

For each size the generator (streamer.synth) writes a submit directory of N compute jobs.
Timed, each as a fresh process (so interpreter start-up counts for both):

  pegasus-status   `python -m Pegasus.cli.pegasus-status --jsonrv --noqueue DIR`
  status (dir)     `python -m streamer status DIR --json`  (the same document, checked equal)
  status (events)  `python -m streamer status EVENTS.bp --json`  (the events of a replay of DIR)
  status --long    `python -m streamer status DIR --long`  (adds the monitor run in memory)

and, in-process, the cost of one `--watch` refresh that finds nothing new (a poll of every
dagman.out) and of one that reads a 1/20 of the file. Median of --runs, and ratios against
pegasus-status of the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamer.status.progress import SubmitDirProgress  # noqa: E402
from streamer.synth import generate  # noqa: E402


def timed(command: list[str], runs: int) -> tuple[float, str]:
    times, out = [], ""
    env = dict(os.environ, TZ="UTC", PYTHONPATH=str(ROOT))
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - start)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}")
        out = proc.stdout
    return statistics.median(times), out


def poll_costs(run_dir: Path) -> tuple[float, float]:
    """Seconds of a refresh with nothing new, and of one reading 1/20 of the dagman.out."""
    log = next(run_dir.glob("*.dag.dagman.out"))
    text = log.read_bytes()
    progress = SubmitDirProgress(run_dir)
    progress.poll()
    start = time.perf_counter()
    for _ in range(100):
        progress.poll(rescan=False)
    idle = (time.perf_counter() - start) / 100
    cut = len(text) - len(text) // 20
    log.write_bytes(text[:cut])
    progress = SubmitDirProgress(run_dir)
    progress.poll()
    with open(log, "ab") as handle:
        handle.write(text[cut:])
    start = time.perf_counter()
    progress.poll(rescan=False)
    return idle, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="1000,20000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp:
        for jobs in [int(j) for j in args.jobs.split(",")]:
            run_dir = generate(Path(tmp) / f"wf{jobs}", jobs=jobs, scenario="retry,held", seed=0)
            size = next(run_dir.glob("*.dagman.out")).stat().st_size
            copy = Path(tmp) / f"copy{jobs}"
            shutil.copytree(run_dir, copy, symlinks=True)
            events = Path(tmp) / f"events{jobs}.bp"
            subprocess.run([py, "-m", "streamer", "replay", str(copy), "--dest", f"file://{events}",
                            "--no-jobstate", "-q"], check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            theirs, their_doc = timed([py, "-m", "Pegasus.cli.pegasus-status", "--jsonrv", "--noqueue",
                                       str(run_dir)], args.runs)
            ours, our_doc = timed([py, "-m", "streamer", "status", str(run_dir), "--json"], args.runs)
            assert our_doc == their_doc, "documents differ"
            from_events, _ = timed([py, "-m", "streamer", "status", str(events), "--json"], args.runs)
            long, _ = timed([py, "-m", "streamer", "status", str(run_dir), "--long"], args.runs)
            idle, step = poll_costs(run_dir)
            print(f"{jobs:>6} jobs, dagman.out {size / 1e6:.1f} MB, {events.stat().st_size / 1e6:.1f} MB of events")
            print(f"  pegasus-status --jsonrv   {theirs:7.2f} s")
            print(f"  streamer status DIR       {ours:7.2f} s  ({ours / theirs:.2f}x pegasus-status's time)")
            print(f"  streamer status EVENTS    {from_events:7.2f} s  ({from_events / theirs:.2f}x)")
            print(f"  streamer status --long    {long:7.2f} s  ({long / theirs:.2f}x)")
            print(f"  --watch refresh: nothing new {idle * 1e6:.0f} us, 1/20 of the log {step * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
