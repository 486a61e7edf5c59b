"""Run the real pegasus-monitord on generated directories and count its events.

Used to (re)derive `expected.py`: `python -m tests.support.validate --monitord /tmp/pegvenv/bin/python`.
monitord is never a dependency of streamer; it lives in its own venv.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from streamer.synth.generate import generate
from streamer.synth.spec import SCENARIOS


def run_monitord(python: str, submit_dir: Path, dest: Path, *,
                 timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`pegasus-monitord -r --dest file://DEST <dag>.dagman.out`, from inside the submit dir, TZ=UTC."""
    dagman_out = next(submit_dir.glob("*.dag.dagman.out"))
    env = dict(os.environ, TZ="UTC")
    return subprocess.run([python, "-m", "Pegasus.cli.pegasus-monitord", "-r", "--dest",
                           f"file://{dest}", dagman_out.name], cwd=submit_dir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def count_bp(path: Path) -> dict[str, int]:
    """Events by name in a BP file (`ts=... event=NAME ...` lines)."""
    counts: collections.Counter[str] = collections.Counter()
    with path.open() as fh:
        for line in fh:
            for tok in line.split(" ", 3)[:3]:
                if tok.startswith("event="):
                    counts[tok[6:]] += 1
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.support.validate")
    ap.add_argument("--monitord", default="/tmp/pegvenv/bin/python", help="python with pegasus-wms")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios:
            d = generate(Path(tmp) / name, jobs=args.jobs, scenario=name)
            dest = Path(tmp) / f"{name}.bp"
            proc = run_monitord(args.monitord, d, dest)
            log = d / "monitord.log"
            errors = [line for line in log.read_text().splitlines() if "ERROR" in line or "Traceback" in line] \
                if log.exists() else []
            counted = count_bp(dest) if dest.exists() else None
            print(f"{name!r}: {counted},  # rc={proc.returncode} errors={len(errors)}")
            for e in errors[:5]:
                print("   ", e, file=sys.stderr)
            if proc.returncode:
                print(proc.stderr[-2000:], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
