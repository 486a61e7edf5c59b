"""Load benchmark: >= 1,000,000 events into a JSONL and a BP file at once, against a direct read, same session.

    python bench/bench_load.py [--events 1000000] [--runs 3] [--shared ../shared] [--keep]
    python bench/bench_load.py --reference OLD_TREE [--runs 5] [--events 1000000]

Builds the input by repeating the corpus streams (../shared/corpus/bp/*.bp and
../shared/golden/*.bp) to the requested size, then alternates `--runs` times (default 3):
  floor    a direct read of the file in a fresh Python: reading it and splitting every line
           into its key=value words (the least any BP reader in Python does per line);
  streamer `streamer load BIG -q --dest file://a.jsonl --dest file://a.bp`, on one core
           (taskset when available).
Each run is measured the one way of `bench/reference.py` (CPU of the process tree, wall,
peak RSS summed over the tree, load average); printed: every run, medians and ratios,
events per CPU-second, and the event-type counts of the input and of both outputs (which
must be identical). A quarter of the input is loaded too, to show memory flat in the input size.

With --reference OLD_TREE (another checkout of streamer with its own .venv) it instead runs
that tree's `streamer load` and this tree's, interleaved, on the same input, the same way.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.reference import (Run, compare_counts, interleave, measure as measure_tree, median,  # noqa: E402
                             precompile, run_measured, summary)
from tests.support.validate import count_bp  # noqa: E402


def build_input(shared: Path, target: int, out: Path) -> int:
    lines: list[str] = []
    for path in sorted((shared / "corpus" / "bp").glob("*.bp")) + sorted((shared / "golden").glob("*.bp")):
        lines.extend(line for line in path.read_text().splitlines() if line.strip())
    if not lines:  # else the loop below writes empty lines for ever
        raise SystemExit(f"no event lines in {shared}/corpus/bp/*.bp or {shared}/golden/*.bp (give --shared DIR)")
    block = "\n".join(lines) + "\n"
    count = 0
    with open(out, "w") as handle:
        while count < target:
            handle.write(block)
            count += len(lines)
    return count


_FLOOR = (
    "import sys\n"
    "pending, words = b'', 0\n"
    "with open(sys.argv[1], 'rb') as handle:\n"
    "    while data := handle.read(128 * 1024):\n"
    "        parts = (pending + data).split(b'\\n')\n"
    "        pending = parts.pop()\n"
    "        for line in parts:\n"
    "            words += len(line.decode().split())\n"
    "print(words)\n"
)
"""The floor: read the file in 128 KiB chunks and split every line into its words."""


def floor_cmd(path: Path) -> list[str]:
    return [sys.executable, "-c", _FLOOR, str(path)]


def load_cmd(path: Path, workdir: Path) -> list[str]:
    """`streamer load` into a JSONL and a BP file, on one core when taskset is there."""
    for name in ("a.jsonl", "a.bp"):
        (workdir / name).unlink(missing_ok=True)
    command = [sys.executable, "-m", "streamer", "load", str(path), "-q",
               "--dest", f"file://{workdir}/a.jsonl", "--dest", f"file://{workdir}/a.bp"]
    return ["taskset", "-c", "0", *command] if shutil.which("taskset") else command


def count_jsonl(path: Path) -> dict[str, int]:
    """Events by name in a JSONL file (its `event` member)."""
    import orjson
    counts: collections.Counter[str] = collections.Counter()
    with path.open("rb") as fh:
        for line in fh:
            counts[orjson.loads(line)["event"]] += 1
    return dict(counts)


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def compare(big: Path, n_big: int, reference: Path, runs: int, workdir: Path) -> None:
    """This tree's `streamer load` against the reference tree's, interleaved."""
    for tree in (reference, ROOT):
        precompile(tree)
    print(f"input: {n_big:,} events ({big.stat().st_size / 1e6:.0f} MB); this tree {ROOT} vs reference {reference}")

    def runner(who: str, tree: Path) -> Callable[[], Run]:
        def run() -> Run:
            for name in ("a.jsonl", "a.bp"):
                (workdir / name).unlink(missing_ok=True)
            result = measure_tree(tree, ["load", str(big), "-q", "--dest", f"file://{workdir}/a.jsonl",
                                         "--dest", f"file://{workdir}/a.bp"], workdir, workdir / "load.log")
            written = (count_lines(workdir / "a.jsonl"), count_lines(workdir / "a.bp"))
            assert written == (n_big, n_big), f"{who}: expected {n_big} events in each file, got {written}"
            return result
        return run

    results = interleave({"reference": runner("reference", reference), "this": runner("this", ROOT)}, runs)
    print(summary(results["this"], results["reference"]))
    print(f"  this tree {n_big / median(results['this'], 'cpu'):,.0f} events per CPU-second, reference "
          f"{n_big / median(results['reference'], 'cpu'):,.0f}")


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
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        quarter = run_measured(load_cmd(small, workdir), ROOT, workdir / "load.log", env)
        print(f"input: {n_big:,} events ({big.stat().st_size / 1e6:.0f} MB), {os.cpu_count()} cores", flush=True)
        runs = interleave({"floor": lambda: run_measured(floor_cmd(big), ROOT, workdir / "floor.log", env),
                           "streamer": lambda: run_measured(load_cmd(big, workdir), ROOT, workdir / "load.log", env)},
                          args.runs)
        print(summary(runs["streamer"], runs["floor"], "streamer", "floor"))
        print(f"  streamer load -> JSONL + BP: {n_big / median(runs['streamer'], 'cpu'):,.0f} events per CPU-second "
              f"(median), {n_big / median(runs['streamer'], 'wall'):,.0f} events/s of wall; floor "
              f"{n_big / median(runs['floor'], 'cpu'):,.0f} lines per CPU-second")
        print("events by type:")
        print(compare_counts({"input": count_bp(big), "JSONL": count_jsonl(workdir / "a.jsonl"),
                              "BP": count_bp(workdir / "a.bp")}))
        print(f"peak RSS: {n_small:,} events {quarter.rss_sum_kib / 1024:.0f} MiB; {n_big:,} events "
              f"{median(runs['streamer'], 'rss_sum_kib') / 1024:.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
