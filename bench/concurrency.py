"""Many writers, one database: N `streamer replay` processes at once into one PostgreSQL DB and one SQLite file.

    python bench/concurrency.py [--workflows 8] [--jobs 150] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
                                [--backend both|postgresql|sqlite]

Generates `--workflows` different synthetic workflows (`streamer.synth`, one seed each, scenarios mixed
so retries, held jobs, sub-workflows and shared replica-catalog files all occur) and a second copy of the
first one (same workflow uuid: the same workflow loaded twice at once). Then, for each backend:

1. reference: every workflow replayed alone, one after the other, each into a database of its own;
2. concurrent: all `--workflows` + 1 replays started at once into ONE database.

It prints each process's exit code and time, and whether the concurrent database holds exactly the rows
of the separate loads (compared through natural keys, `tests/support/dbcompare.py`: auto ids differ, rows must
not). Exit status 0 only when every process exited 0 and the rows are equal. PostgreSQL databases are
created with random names and dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # streamer and tests (a package)

from streamer.synth import generate  # noqa: E402
from tests.support import dbcompare, pghelp  # noqa: E402

SCENARIOS = ("success", "retry,held", "hierarchical", "clustered,evicted", "success", "retry",
             "held,submit_failure", "success")


def make_workflows(base: Path, count: int, jobs: int) -> list[Path]:
    dirs = []
    for i in range(count):
        dirs.append(generate(base / f"wf{i}", jobs=jobs, scenario=SCENARIOS[i % len(SCENARIOS)],
                             seed=10 * i + 1))  # a sub-workflow takes seed + 1
    twin = base / "wf0-twin"
    shutil.copytree(dirs[0], twin, symlinks=True)
    return dirs + [twin]


def replay_cmd(submit: Path, dest: str) -> list[str]:
    return [sys.executable, "-m", "streamer", "replay", str(submit), "--timezone", "UTC", "-q",
            "--no-jobstate", "--dest", dest]


def run_at_once(commands: list[tuple[list[str], Path]]) -> list[tuple[int, float, str]]:
    started = time.monotonic()
    procs = []
    for cmd, state in commands:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs.append(subprocess.Popen([*cmd, "--state", str(state)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
    out = []
    for proc in procs:
        _, err = proc.communicate(timeout=900)
        out.append((proc.returncode, time.monotonic() - started, err))
    return out


def merged(snapshots: list[dbcompare.Snapshot]) -> dbcompare.Snapshot:
    """Rows of separate loads as one database holds them: multisets added, shared rows (lfns) once."""
    out: dict[str, Counter] = {}
    for snap in snapshots:
        for table, rows in snap.items():
            acc = out.setdefault(table, Counter())
            for row, n in rows.items():
                if table in ("dbversion", "rc_lfn", "rc_pfn", "rc_meta"):  # shared by every workflow
                    acc[row] = 1
                else:
                    acc[row] += n
    return out


def differences(actual: dbcompare.Snapshot, separate: list[dbcompare.Snapshot]) -> dict:
    """`dbcompare.compare` against the merged separate loads.

    `rc_meta` holds one value per (lfn, key), the last one written (monitord's rule): workflows naming the
    same file with different metadata leave whichever wrote last, so there each (lfn, key) must be present
    once with a value one of the separate loads wrote.
    """
    expected = merged(separate)
    written: dict[tuple, set] = {}
    for snap in separate:
        for (lfn, key, value) in snap.get("rc_meta", ()):
            written.setdefault((lfn, key), set()).add(value)
    got = actual.get("rc_meta", Counter())
    ok_meta = (sorted((lfn, key) for lfn, key, _ in got.elements()) == sorted(written)
               and all(value in written[(lfn, key)] for lfn, key, value in got))
    actual = {k: v for k, v in actual.items() if k != "rc_meta"}
    expected = {k: v for k, v in expected.items() if k != "rc_meta"}
    diff = dbcompare.compare(actual, expected)
    if not ok_meta:
        diff["rc_meta"] = ([("not one value per (lfn, key) among those written",)], [])
    return diff


def report(label: str, results: list[tuple[int, float, str]]) -> bool:
    ok = True
    for i, (code, seconds, err) in enumerate(results):
        print(f"  process {i}: exit {code} after {seconds:.1f} s")
        if code != 0:
            ok = False
            print("    " + err.strip().replace("\n", "\n    ")[-2000:])
    return ok


def bench_sqlite(base: Path, dirs: list[Path]) -> bool:
    print("SQLite:")
    separate = []
    ref_started = time.monotonic()
    for i, d in enumerate(dirs[:-1]):  # the twin's rows are the original's
        db = base / f"ref{i}.db"
        res = run_at_once([(replay_cmd(d, f"sqlite:///{db}"), base / f"ref{i}.state")])
        if res[0][0] != 0:
            print(f"  reference load {i} failed: {res[0][2]}")
            return False
        separate.append(dbcompare.sqlite_snapshot(str(db)))
    print(f"  separate loads, one after the other: {time.monotonic() - ref_started:.1f} s")
    shared = base / "shared.db"
    results = run_at_once([(replay_cmd(d, f"sqlite:///{shared}"), base / f"c{i}.state") for i, d in enumerate(dirs)])
    ok = report("sqlite", results)
    diff = differences(dbcompare.sqlite_snapshot(str(shared)), separate)
    print(f"  {len(dirs)} at once into one file: {max(r[1] for r in results):.1f} s; rows equal to separate loads: "
          f"{'yes' if not diff else 'NO'}")
    if diff:
        print(dbcompare.format_diff(diff)[:4000])
    return ok and not diff


def bench_pg(base: Path, dirs: list[Path], dsn: str) -> bool:
    print("PostgreSQL:")
    names = [f"streamer_conc_{uuid.uuid4().hex[:10]}_{i}" for i in range(len(dirs))]
    shared_name = f"streamer_conc_{uuid.uuid4().hex[:10]}_shared"
    try:
        for name in names[:-1] + [shared_name]:
            asyncio.run(pghelp.admin(dsn, f"CREATE DATABASE {name}"))
        separate = []
        ref_started = time.monotonic()
        for i, d in enumerate(dirs[:-1]):
            res = run_at_once([(replay_cmd(d, pghelp.database_url(dsn, names[i])), base / f"pref{i}.state")])
            if res[0][0] != 0:
                print(f"  reference load {i} failed: {res[0][2]}")
                return False
            separate.append(asyncio.run(pghelp.pg_snapshot(pghelp.database_url(dsn, names[i]))))
        print(f"  separate loads, one after the other: {time.monotonic() - ref_started:.1f} s")
        url = pghelp.database_url(dsn, shared_name)
        results = run_at_once([(replay_cmd(d, url), base / f"pc{i}.state") for i, d in enumerate(dirs)])
        ok = report("postgresql", results)
        diff = differences(asyncio.run(pghelp.pg_snapshot(url)), separate)
        print(f"  {len(dirs)} at once into one database: {max(r[1] for r in results):.1f} s; rows equal to "
              f"separate loads: {'yes' if not diff else 'NO'}")
        if diff:
            print(dbcompare.format_diff(diff)[:4000])
        return ok and not diff
    finally:
        for name in names[:-1] + [shared_name]:
            asyncio.run(pghelp.admin(dsn, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflows", type=int, default=8, help="different workflows loaded at once (default 8)")
    parser.add_argument("--jobs", type=int, default=150, help="compute jobs per workflow (default 150)")
    parser.add_argument("--pg", default=os.environ.get("STREAMER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--backend", choices=("both", "postgresql", "sqlite"), default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="streamer-conc-") as tmp:
        base = Path(tmp)
        dirs = make_workflows(base, args.workflows, args.jobs)
        print(f"{args.workflows} workflows of {args.jobs} compute jobs, plus the first one a second time "
              f"({len(dirs)} processes at once)")
        ok = True
        if args.backend in ("both", "sqlite"):
            ok &= bench_sqlite(base, dirs)
        if args.backend in ("both", "postgresql"):
            ok &= bench_pg(base, dirs, args.pg)
    print("RESULT:", "every process exited 0, rows equal to separate loads" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
