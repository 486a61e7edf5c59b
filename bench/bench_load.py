"""Load benchmark: >= 1,000,000 events into a JSONL and a BP file at once.

    python bench/bench_load.py [--events 1000000] [--runs 3] [--shared ../shared] [--keep]
    python bench/bench_load.py --reference OLD_TREE [--runs 5] [--events 1000000]

Builds the input by repeating the corpus streams (../shared/corpus/bp/*.bp and
../shared/golden/*.bp) to the requested size, then in the same run measures:
  floor    reading the file and splitting it into lines and key=value words
           (the least any BP reader in Python does per line);
  streamer `streamer load BIG --dest file://a.jsonl --dest file://a.bp` in a
           subprocess on one core (taskset when available): events/s, peak RSS.
Each of `--runs` runs measures the floor and then streamer, back to back (a
shared VM's speed drifts; the ratio to the floor is the steadier figure). It
also loads a quarter of the input to show memory stays flat in the input
size. Prints events/s of both per run, the median and range, and the ratio.

With --reference OLD_TREE (another checkout of streamer with its own .venv) it instead runs
that tree's `streamer load` and this tree's, interleaved, on the same input, --runs times
each, and prints medians of wall and CPU time and the ratio this/reference
(bench/reference.py).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.reference import Run, measure as measure_tree, precompile, summary  # noqa: E402


def build_input(shared: Path, target: int, out: Path) -> int:
    lines: list[str] = []
    for path in sorted((shared / "corpus" / "bp").glob("*.bp")) + sorted((shared / "golden").glob("*.bp")):
        lines.extend(line for line in path.read_text().splitlines() if line.strip())
    block = "\n".join(lines) + "\n"
    count = 0
    with open(out, "w") as handle:
        while count < target:
            handle.write(block)
            count += len(lines)
    return count


def floor(path: Path) -> float:
    """Seconds to read `path` in 128 KiB chunks and split every line into its words."""
    started = time.perf_counter()
    pending = b""
    words = 0
    with open(path, "rb") as handle:
        while True:
            data = handle.read(128 * 1024)
            if not data:
                break
            parts = (pending + data).split(b"\n")
            pending = parts.pop()
            for line in parts:
                words += len(line.decode().split())
    return time.perf_counter() - started


_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter(); subprocess.run(sys.argv[1:], check=True)\n"
    "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def run_streamer(path: Path, workdir: Path) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one `streamer load` into a JSONL and a BP file."""
    for name in ("a.jsonl", "a.bp"):
        (workdir / name).unlink(missing_ok=True)
    command = [sys.executable, "-m", "streamer", "load", str(path), "-q",
               "--dest", f"file://{workdir}/a.jsonl", "--dest", f"file://{workdir}/a.bp"]
    if shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    # a fresh parent per run, so the peak RSS is this run's alone
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], check=True, cwd=ROOT,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def compare(big: Path, n_big: int, reference: Path, runs: int, workdir: Path) -> None:
    """This tree's `streamer load` against the reference tree's, interleaved."""
    for tree in (reference, ROOT):
        precompile(tree)
    print(f"input: {n_big:,} events ({big.stat().st_size / 1e6:.0f} MB); this tree {ROOT} vs reference {reference}")
    results: dict[str, list[Run]] = {"reference": [], "this": []}
    for i in range(1, runs + 1):
        for who, tree in (("reference", reference), ("this", ROOT)):
            for name in ("a.jsonl", "a.bp"):
                (workdir / name).unlink(missing_ok=True)
            run = measure_tree(tree, ["load", str(big), "-q", "--dest", f"file://{workdir}/a.jsonl",
                                      "--dest", f"file://{workdir}/a.bp"], workdir, workdir / "load.log")
            written = (count_lines(workdir / "a.jsonl"), count_lines(workdir / "a.bp"))
            assert written == (n_big, n_big), f"{who}: expected {n_big} events in each file, got {written}"
            results[who].append(run)
            print(f"run {i} {who:9} wall {run.wall:6.2f} s  CPU {run.cpu:6.2f} s  {n_big / run.wall:>9,.0f} events/s  "
                  f"peak RSS {run.rss_kib / 1024:4.0f} MiB", flush=True)
    print(summary(results["this"], results["reference"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="streamer runs on the full input (default 3)")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--reference", metavar="TREE", type=Path, help="compare with this other checkout of streamer")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="streamer-bench-"))
    try:
        if args.reference:
            big = workdir / "big.bp"
            compare(big, build_input(args.shared, args.events, big), args.reference.resolve(), args.runs, workdir)
            return 0
        small = workdir / "quarter.bp"
        big = workdir / "big.bp"
        n_small = build_input(args.shared, args.events // 4, small)
        n_big = build_input(args.shared, args.events, big)
        small_s, small_rss = run_streamer(small, workdir)
        print(f"input: {n_big:,} events ({big.stat().st_size / 1e6:.0f} MB)")
        rates, ratios, big_rss = [], [], 0
        for run in range(1, args.runs + 1):
            floor_s = floor(big)
            big_s, rss = run_streamer(big, workdir)
            written = (count_lines(workdir / "a.jsonl"), count_lines(workdir / "a.bp"))
            assert written == (n_big, n_big), f"expected {n_big} events in each file, got {written}"
            rates.append(n_big / big_s)
            ratios.append(big_s / floor_s)
            big_rss = max(big_rss, rss)
            print(f"run {run}: floor (read + split lines and words) {n_big / floor_s:>10,.0f} lines/s ({floor_s:.2f} s); "
                  f"streamer load -> JSONL + BP {n_big / big_s:>8,.0f} events/s ({big_s:.2f} s, "
                  f"{big_s / floor_s:.1f}x the floor's time)")
        print(f"streamer load -> JSONL + BP: median {statistics.median(rates):,.0f} events/s "
              f"(range {min(rates):,.0f} - {max(rates):,.0f} over {len(rates)} runs), "
              f"median {statistics.median(ratios):.1f}x the floor's time")
        print(f"peak RSS: {n_small:,} events {small_rss / 1024:.0f} MiB; {n_big:,} events {big_rss / 1024:.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
