"""Provenance benchmark: >= 1,000,000 Chimbuko records into a JSONL file and PostgreSQL at once.

    python bench/bench_provenance.py [--records 1000000] [--runs 1] [--dsn postgresql://postgres@127.0.0.1/postgres]

Writes the input with `streamer.synth.provenance` (function executions of 8
ranks, one in ten an anomaly with its call stack, window and node state, GPU
kernels; plus metadata, statistics and models), one JSON record per line, then
in the same run measures:
  floor    reading the file in chunks and `orjson.loads` of every line
           (the least any reader of these records in Python does);
  streamer `streamer load records.jsonl --dest file://out.jsonl --dest postgresql://.../<fresh db>`
           in a subprocess: records/s and peak RSS.
It checks that the JSONL file has one line and PostgreSQL one row per record,
and also loads a quarter of the input to compare memory. Memory is bounded by the
endpoints' buffers (`?buffer=N` events each, default 50,000), and a record in memory
(nested dicts and lists) weighs several KiB: `--buffer 5000` shows the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamer.synth.provenance import generate, iter_executions  # noqa: E402
from tests.support.pghelp import fresh_database_sync  # noqa: E402


def build_input(count: int, out: Path) -> int:
    """`count` records: the small collections of a run, then function executions."""
    small = generate(ranks=8, steps=2, per_step=1, seed=2)
    written = 0
    with open(out, "wb") as handle:
        for collection in ("metadata", "func_stats", "counter_stats", "ad_model"):
            for record in small[collection]:
                handle.write(orjson.dumps(record) + b"\n")
                written += 1
        buffer = []
        for _, record in iter_executions(count - written, ranks=8, seed=9):
            buffer.append(orjson.dumps(record))
            if len(buffer) >= 10_000:
                handle.write(b"\n".join(buffer) + b"\n")
                written += len(buffer)
                buffer.clear()
        if buffer:
            handle.write(b"\n".join(buffer) + b"\n")
            written += len(buffer)
    return written


def floor(path: Path) -> float:
    """Seconds to read `path` in 128 KiB chunks and orjson.loads every line."""
    started = time.perf_counter()
    pending = b""
    loads = orjson.loads
    with open(path, "rb") as handle:
        while True:
            data = handle.read(128 * 1024)
            if not data:
                break
            parts = (pending + data).split(b"\n")
            pending = parts.pop()
            for line in parts:
                if line:
                    loads(line)
    return time.perf_counter() - started


_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter(); subprocess.run(sys.argv[1:], check=True)\n"
    "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


async def _count_rows(dsn: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        total = 0
        for table in ("anomalies", "normalexecs", "metadata", "func_stats", "counter_stats", "ad_model"):
            total += await conn.fetchval(f'SELECT COUNT(*) FROM chimbuko."{table}"')
        return total
    finally:
        await conn.close()


def run_streamer(path: Path, workdir: Path, dsn: str, expected: int, buffer: int | None = None) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one `streamer load` into a JSONL file and a fresh PostgreSQL database."""
    out = workdir / "out.jsonl"
    out.unlink(missing_ok=True)
    with fresh_database_sync(dsn, "streamer_bench") as db:
        query = f"?buffer={buffer}" if buffer else ""
        command = [sys.executable, "-m", "streamer", "load", str(path), "-q",
                   "--dest", f"file://{out}{query}", "--dest", f"{db}{query}"]
        result = subprocess.run([sys.executable, "-c", _MEASURE, *command], check=True, cwd=ROOT,
                                capture_output=True, text=True).stdout.split()
        lines = sum(1 for _ in open(out, "rb"))
        rows = asyncio.run(_count_rows(db))
        if lines != expected or rows != expected:
            raise SystemExit(f"bench: expected {expected} records, JSONL has {lines} lines, PostgreSQL {rows} rows")
    return float(result[0]), int(result[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="PostgreSQL server to create the benchmark databases in")
    parser.add_argument("--buffer", type=int, help="?buffer=N for both endpoints (events held in memory per "
                        "endpoint; default the bus's 50,000)")
    parser.add_argument("--keep", action="store_true", help="keep the input and output files")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="streamer-bench-prov-"))
    big, small = workdir / "records.jsonl", workdir / "quarter" / "records.jsonl"
    small.parent.mkdir()
    started = time.perf_counter()
    count = build_input(args.records, big)
    quarter = build_input(args.records // 4, small)
    print(f"input: {count:,} records, {big.stat().st_size / 1e6:,.0f} MB ({time.perf_counter() - started:.0f} s to make)")
    floors, ours, rss = [], [], []
    for run in range(args.runs):
        f = floor(big)
        s, peak = run_streamer(big, workdir, args.dsn, count, args.buffer)
        floors.append(count / f)
        ours.append(count / s)
        rss.append(peak)
        print(f"run {run + 1}: floor {count / f:,.0f} records/s ({f:.1f} s); streamer -> JSONL + PostgreSQL "
              f"{count / s:,.0f} records/s ({s:.1f} s), peak RSS {peak / 1024:,.0f} MiB; ratio {f / s:.3f}")
    _, quarter_peak = run_streamer(small, small.parent, args.dsn, quarter, args.buffer)
    print(f"median: floor {statistics.median(floors):,.0f} records/s, streamer {statistics.median(ours):,.0f} "
          f"records/s ({statistics.median(ours) / statistics.median(floors):.1%} of the floor); "
          f"peak RSS {max(rss) / 1024:,.0f} MiB at {count:,} records, {quarter_peak / 1024:,.0f} MiB at {quarter:,}")
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"kept {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
