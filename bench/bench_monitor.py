"""Workflow-monitor benchmark: `streamer replay` against the real `pegasus-monitord -r`, in the same session.

    python bench/bench_monitor.py [--jobs 1000,5000,20000] [--runs 3] [--monitord PYTHON]
                                  [--scenario success] [--db] [--skip-streamer] [--skip-monitord] [--keep]
                                  [--interpreted]
    python bench/bench_monitor.py --reference OLD_TREE [--runs 5] [--jobs 5000,20000]

For each size the synthetic generator (streamer.synth) writes a submit directory of N
compute jobs (plus create_dir, stage_in, stage_out/register per 1000, cleanup). Every run
gets a fresh copy of it (both tools write jobstate.log and state files into the run dir):

  monitord  `python -m Pegasus.cli.pegasus-monitord -r --dest file:///.../monitord.bp <dag>.dagman.out`
            run from inside the copy, as monitord expects (pegasus-wms from the test extra, or --monitord PYTHON)
  streamer  `python -m streamer replay DIR -q --dest file:///.../streamer.bp`

The two alternate (monitord, streamer, monitord, ...) `--runs` times (default 3), each measured
the one way of `bench/reference.py`: CPU of the whole process tree (user + system, children
included), wall, peak RSS summed over the tree, and the load average before and after. Printed:
every run, the medians and the ratios, and the event-type counts of both outputs (which must be
identical). With --db each tool instead loads a Stampede SQLite DB: monitord with no --dest (its
default sqlite:///<dag>.stampede.db), streamer with --dest sqlite:///<dir>/streamer.stampede.db,
and the rows of the tables that grow with the workflow are compared. TZ=UTC for both, so DAGMan's
zone-less timestamps read the same way.

With --interpreted a third tool joins the rounds: streamer with STREAMER_NO_MYPYC=1, its
mypyc-compiled modules unused (the C codec kept), so what the mypyc build buys is read from the
same session; its output's event counts must equal the compiled run's.

With --reference OLD_TREE (another checkout of streamer, e.g. `git worktree add ../old c582f4e`
with its own .venv) the benchmark compares this tree's `streamer replay` with that tree's
instead of monitord, the same way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.reference import (Run, compare_counts, interleave, measure as measure_tree, median,  # noqa: E402
                             precompile, run_measured, summary)
from streamer.synth import generate  # noqa: E402
from tests.support.validate import count_bp  # noqa: E402

def streamer_cmd(run_dir: Path, dest: str) -> list[str]:
    return [sys.executable, "-m", "streamer", "replay", str(run_dir), "-q", "--dest", dest]


def monitord_cmd(python: str, run_dir: Path, dest: str | None) -> list[str]:
    dagman_out = next(run_dir.glob("*.dag.dagman.out")).name
    return [python, "-m", "Pegasus.cli.pegasus-monitord", "-r", *(["--dest", dest] if dest else []), dagman_out]


def sqlite_rows(db: Path) -> dict[str, int]:
    """Rows of the tables that grow with the workflow (the --db runs' counts)."""
    import sqlite3
    with sqlite3.connect(db) as con:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("workflow", "job", "job_instance", "jobstate", "invocation", "task")}


def _fresh(pristine: Path, run_dir: Path) -> Path:
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(pristine, run_dir)
    return run_dir


def bench_size(n: int, args: argparse.Namespace, work: Path) -> dict[str, list[Run]]:
    """`--runs` rounds of monitord then streamer on fresh copies of one generated directory."""
    started = time.perf_counter()
    pristine = generate(work / f"pristine-{n}", jobs=n, scenario=args.scenario, seed=args.seed)
    size = sum(f.stat().st_size for f in pristine.rglob("*") if f.is_file())
    print(f"\n== {n:,} compute jobs, scenario {args.scenario}: generated in {time.perf_counter() - started:.1f} s "
          f"({size / 1e6:.0f} MB), {'SQLite DB' if args.db else 'BP file'} output, {os.cpu_count()} cores", flush=True)
    env = dict(os.environ, TZ="UTC", PYTHONPATH=str(ROOT))
    counts: dict[str, dict[str, int]] = {}

    def runner(tool: str) -> Callable[[], Run]:
        def run() -> Run:
            d = _fresh(pristine, work / f"{tool}-{n}")
            out = work / f"{tool}-{n}.bp"
            out.unlink(missing_ok=True)
            if args.db:
                cmd = (monitord_cmd(args.monitord, d, None) if tool == "monitord"
                       else streamer_cmd(d, f"sqlite:///{d}/streamer.stampede.db"))
            else:
                cmd = (monitord_cmd(args.monitord, d, f"file://{out}") if tool == "monitord"
                       else streamer_cmd(d, f"file://{out}"))
            result = run_measured(cmd, d, d.with_suffix(".log"),
                                  dict(env, STREAMER_NO_MYPYC="1") if tool == "interpreted" else env)
            if args.db:
                db = next(d.glob("*.stampede.db")) if tool == "monitord" else d / "streamer.stampede.db"
                counted = sqlite_rows(db)
            else:
                counted = count_bp(out)
            if counts.setdefault(tool, counted) != counted:
                raise RuntimeError(f"{tool}: the runs' outputs differ ({counts[tool]} then {counted})")
            return result
        return run

    tools = {tool: runner(tool) for tool in ("monitord", "streamer") if not getattr(args, f"skip_{tool}")}
    if args.interpreted:
        tools["interpreted"] = runner("interpreted")
        for name, extra in (("streamer", {}), ("interpreted", {"STREAMER_NO_MYPYC": "1"})):
            version = subprocess.run([sys.executable, "-m", "streamer", "--version"], capture_output=True, text=True,
                                     env=dict(env, **extra), check=True).stdout.strip()
            print(f"  {name}: {version}")
    runs = interleave(tools, args.runs)
    if "interpreted" in runs and "streamer" in runs:
        print(summary(runs["streamer"], runs["interpreted"], "streamer", "interpreted"))
    if "monitord" in runs and "streamer" in runs:
        print(summary(runs["streamer"], runs["monitord"], "streamer", "monitord"))
        total = sum(counts["streamer"].values())
        print(f"  streamer {total / median(runs['streamer'], 'cpu'):,.0f} {'rows' if args.db else 'events'} "
              f"per CPU-second, monitord {total / median(runs['monitord'], 'cpu'):,.0f}")
    print(f"{'rows by table' if args.db else 'events by type'} (one run of each; every run of a tool wrote the same):")
    print(compare_counts(counts))
    return runs


def compare_size(n: int, args: argparse.Namespace, work: Path) -> dict[str, list[Run]]:
    """This tree's replay against the reference tree's, interleaved, on copies of one directory."""
    pristine = generate(work / f"pristine-{n}", jobs=n, scenario=args.scenario, seed=args.seed)
    reference = Path(args.reference).resolve()
    print(f"\n== {n:,} compute jobs, scenario {args.scenario}: this tree {ROOT} vs reference {reference}")
    for tree in (reference, ROOT):
        precompile(tree)
    counts: dict[str, dict[str, int]] = {}

    def runner(who: str, tree: Path) -> Callable[[], Run]:
        def run() -> Run:
            run_dir = _fresh(pristine, work / f"{who}-{n}")
            out = work / f"{who}-{n}.bp"
            out.unlink(missing_ok=True)
            result = measure_tree(tree, ["replay", str(run_dir), "-q", "--dest", f"file://{out}"], run_dir,
                                  run_dir.with_suffix(".log"), env=dict(os.environ, TZ="UTC"))
            counts[who] = count_bp(out)
            return result
        return run

    runs = interleave({"reference": runner("reference", reference), "this": runner("this", ROOT)}, args.runs)
    print(summary(runs["this"], runs["reference"]))
    print(compare_counts(counts))
    return runs


def scaling(table: dict[int, dict[str, list[Run]]]) -> str:
    """Per-job CPU and peak RSS of each tool at each size (medians): flat in the workflow's size is the goal."""
    tools = list(next(iter(table.values())))
    lines = ["\nper compute job (medians): CPU ms/job, peak RSS summed over the process tree",
             "| jobs | " + " | ".join(f"{t} CPU ms/job | {t} peak RSS MiB" for t in tools) + " |",
             "|---|" + "---|---|" * len(tools)]
    for n, runs in table.items():
        lines.append(f"| {n:,} | " + " | ".join(f"{median(runs[t], 'cpu') / n * 1000:.3f} | "
                                              f"{median(runs[t], 'rss_sum_kib') / 1024:.0f}" for t in tools) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="1000,5000,20000", help="comma-separated compute-job counts")
    ap.add_argument("--monitord", default=sys.executable, help="a python with pegasus-wms installed (default: this one; the test extra installs it)")
    ap.add_argument("--scenario", default="success")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db", action="store_true", help="load a Stampede SQLite DB instead of writing BP")
    ap.add_argument("--skip-streamer", action="store_true")
    ap.add_argument("--skip-monitord", action="store_true")
    ap.add_argument("--interpreted", action="store_true",
                    help="also run streamer with STREAMER_NO_MYPYC=1 (its mypyc-compiled modules unused, the C codec "
                         "kept), interleaved with the others: what the mypyc build buys")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--reference", metavar="TREE", help="compare with this other checkout of streamer (not monitord)")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs of each tool (default 3: medians of 3)")
    args = ap.parse_args()
    if args.reference and not (Path(args.reference) / "streamer").is_dir():
        ap.error(f"{args.reference}: not a checkout of streamer")
    if not args.reference and not args.skip_monitord and not shutil.which(args.monitord):
        ap.error(f"{args.monitord} not found: python3 -m venv /tmp/pegvenv && /tmp/pegvenv/bin/pip install pegasus-wms")
    args.monitord = os.path.abspath(shutil.which(args.monitord) or args.monitord)  # the runs start in other dirs
    work = Path(tempfile.mkdtemp(prefix="streamer-bench-monitor-"))
    table: dict[int, dict[str, list[Run]]] = {}
    try:
        for n in (int(x) for x in args.jobs.split(",")):
            table[n] = (compare_size if args.reference else bench_size)(n, args, work)
        print(scaling(table))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
