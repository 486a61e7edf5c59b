"""Workflow-monitor benchmark: `streamer replay` against the real `pegasus-monitord -r`.

    python bench/bench_monitor.py [--jobs 1000,5000,20000] [--monitord PYTHON]
                                  [--scenario success] [--db] [--skip-streamer] [--skip-monitord] [--keep]
    python bench/bench_monitor.py --reference OLD_TREE [--runs 5] [--jobs 5000,20000]

For each size the synthetic generator (streamer.synth) writes a submit directory of N
compute jobs (plus create_dir, stage_in, stage_out/register per 1000, cleanup). Each tool
gets its own identical copy (both write jobstate.log and state files into the run dir):

  streamer  `python -m streamer replay DIR --dest file:///.../streamer.bp`
  monitord  `python -m Pegasus.cli.pegasus-monitord -r --dest file:///.../monitord.bp <dag>.dagman.out`
            run from inside the copy, as monitord expects (pegasus-wms from the test extra, or --monitord PYTHON)

Both write a BP file. Printed per tool: wall seconds, events written, events/s, peak RSS
of the process tree (a fresh parent per run reads RUSAGE_CHILDREN), then the ratio.
With --db each tool instead loads a Stampede SQLite DB: monitord with no --dest (its
default sqlite:///<dag>.stampede.db), streamer with --dest sqlite:///<dir>/streamer.stampede.db.
TZ=UTC for both, so DAGMan's zone-less timestamps read the same way.

With --reference OLD_TREE (another checkout of streamer, e.g. `git worktree add ../old c582f4e`
with its own .venv) the benchmark compares this tree's `streamer replay` with that tree's
instead of monitord: --runs replays of each, interleaved on fresh copies of one generated
directory, medians of wall and CPU time and the ratio this/reference (bench/reference.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.reference import Run, measure as measure_tree, precompile, run_measured, summary  # noqa: E402
from streamer.synth import generate  # noqa: E402
from tests.support.validate import count_bp  # noqa: E402

def measure(command: list[str], cwd: Path) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of `command` run in `cwd`; raises if it fails.

    The tool's own output goes to <cwd>.log, so printing costs the same for both tools.
    """
    run = run_measured(command, cwd, cwd.with_suffix(".log"), dict(os.environ, TZ="UTC", PYTHONPATH=str(ROOT)))
    return run.wall, run.rss_kib


def streamer_cmd(run_dir: Path, dest: str) -> list[str]:
    return [sys.executable, "-m", "streamer", "replay", str(run_dir), "-q", "--dest", dest]


def monitord_cmd(python: str, run_dir: Path, dest: str | None) -> list[str]:
    dagman_out = next(run_dir.glob("*.dag.dagman.out")).name
    return [python, "-m", "Pegasus.cli.pegasus-monitord", "-r", *(["--dest", dest] if dest else []), dagman_out]


def sqlite_rows(db: Path) -> int:
    """Rows in the tables that grow with the workflow (a size check for --db runs)."""
    import sqlite3
    with sqlite3.connect(db) as con:
        return sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                   for t in ("job_instance", "jobstate", "invocation"))


def bench_size(n: int, args: argparse.Namespace, work: Path) -> None:
    started = time.perf_counter()
    dirs = {tool: generate(work / f"{tool}-{n}", jobs=n, scenario=args.scenario, seed=args.seed)
            for tool in ("streamer", "monitord")}
    gen_s = (time.perf_counter() - started) / 2
    size = sum(f.stat().st_size for f in dirs["monitord"].rglob("*") if f.is_file())
    print(f"\n== {n:,} compute jobs, scenario {args.scenario}: generated in {gen_s:.1f} s "
          f"({size / 1e6:.0f} MB per copy)")
    results: dict[str, tuple[float, int, int]] = {}
    for tool in ("streamer", "monitord"):
        if getattr(args, f"skip_{tool}"):
            continue
        d = dirs[tool]
        if args.db:
            dest = None if tool == "monitord" else f"sqlite:///{d}/streamer.stampede.db"
            cmd = (monitord_cmd(args.monitord, d, None) if tool == "monitord" else streamer_cmd(d, dest or ""))
            secs, rss = measure(cmd, d)
            db = next(d.glob("*.stampede.db")) if tool == "monitord" else d / "streamer.stampede.db"
            count = sqlite_rows(db)
            unit = "rows"
        else:
            out = work / f"{tool}-{n}.bp"
            cmd = (monitord_cmd(args.monitord, d, f"file://{out}") if tool == "monitord"
                   else streamer_cmd(d, f"file://{out}"))
            secs, rss = measure(cmd, d)
            count = sum(count_bp(out).values())
            unit = "events"
        results[tool] = (secs, count, rss)
        print(f"{tool:9} {secs:9.2f} s  {count:>10,} {unit}  {count / secs:>10,.0f} {unit}/s  "
              f"peak RSS {rss / 1024:6.0f} MiB")
    if len(results) == 2:
        (s_s, s_n, s_r), (m_s, m_n, m_r) = results["streamer"], results["monitord"]
        print(f"ratio     streamer is {m_s / s_s:.1f}x faster (throughput {(s_n / s_s) / (m_n / m_s):.1f}x), "
              f"RSS {s_r / m_r:.2f}x monitord's; counts {s_n:,} vs {m_n:,}")


def compare_size(n: int, args: argparse.Namespace, work: Path) -> None:
    """This tree's replay against the reference tree's, interleaved, on copies of one directory."""
    pristine = generate(work / f"pristine-{n}", jobs=n, scenario=args.scenario, seed=args.seed)
    print(f"\n== {n:,} compute jobs, scenario {args.scenario}: this tree {ROOT} vs reference {args.reference}")
    for tree in (Path(args.reference).resolve(), ROOT):
        precompile(tree)
    runs: dict[str, list[Run]] = {"reference": [], "this": []}
    counts: dict[str, set[int]] = {"reference": set(), "this": set()}
    for i in range(1, args.runs + 1):
        for who, tree in (("reference", Path(args.reference).resolve()), ("this", ROOT)):
            run_dir = work / f"{who}-{n}"
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.copytree(pristine, run_dir)
            out = work / f"{who}-{n}.bp"
            out.unlink(missing_ok=True)
            run = measure_tree(tree, ["replay", str(run_dir), "-q", "--dest", f"file://{out}"], run_dir,
                               run_dir.with_suffix(".log"), env=dict(os.environ, TZ="UTC"))
            runs[who].append(run)
            counts[who].add(sum(count_bp(out).values()))
            print(f"run {i} {who:9} wall {run.wall:7.2f} s  CPU {run.cpu:7.2f} s  peak RSS {run.rss_kib / 1024:5.0f} MiB",
                  flush=True)
    print(f"events written: this {sorted(counts['this'])}, reference {sorted(counts['reference'])}")
    print(summary(runs["this"], runs["reference"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="1000,5000,20000", help="comma-separated compute-job counts")
    ap.add_argument("--monitord", default=sys.executable, help="a python with pegasus-wms installed (default: this one; the test extra installs it)")
    ap.add_argument("--scenario", default="success")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db", action="store_true", help="load a Stampede SQLite DB instead of writing BP")
    ap.add_argument("--skip-streamer", action="store_true")
    ap.add_argument("--skip-monitord", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--reference", metavar="TREE", help="compare with this other checkout of streamer (not monitord)")
    ap.add_argument("--runs", type=int, default=5, help="with --reference: runs of each tree (default 5)")
    args = ap.parse_args()
    if args.reference and not (Path(args.reference) / "streamer").is_dir():
        ap.error(f"{args.reference}: not a checkout of streamer")
    if not args.reference and not args.skip_monitord and not shutil.which(args.monitord):
        ap.error(f"{args.monitord} not found: python3 -m venv /tmp/pegvenv && /tmp/pegvenv/bin/pip install pegasus-wms")
    work = Path(tempfile.mkdtemp(prefix="streamer-bench-monitor-"))
    try:
        for n in (int(x) for x in args.jobs.split(",")):
            (compare_size if args.reference else bench_size)(n, args, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
