"""Fuzz every parser of untrusted text for longer than the test suite does.

    python bench/fuzz.py --minutes 10                 # all targets, time shared out
    python bench/fuzz.py --minutes 5 --target bp_line --target kickstart
    python bench/fuzz.py --minutes 2 --engine hypothesis

The targets are `tests/support/fuzz_targets.py` (BP/JSON lines, dagman.out lines,
kickstart YAML/XML, .sub, braindump, static.bp, jobstate.log lines, and every
compiled module against its Python definition). With atheris installed
(`pip install atheris`) each target runs coverage-guided under libFuzzer in a
child process of its own, starting from the corpus inputs; otherwise, or with
`--engine hypothesis`, hypothesis runs the suite's hostile mutations for the
time given. Crashing inputs are kept in `--findings` (default
`bench/fuzz-findings/`, not in git); the exit code is 1 when there is any.

Under the sanitizers: `bash bench/asan.sh` builds the extensions with
AddressSanitizer and UndefinedBehaviorSanitizer and runs this with them.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # streamer and tests (a package)


def atheris_child(name: str, seconds: int, findings: Path) -> None:
    """In a child process: one target under libFuzzer until `seconds` are up."""
    import atheris

    with atheris.instrument_imports(include=["streamer", "tests.support.fuzz_targets"]):
        from tests.support import fuzz_targets
    target = fuzz_targets.TARGETS[name]
    corpus = Path(tempfile.mkdtemp(prefix=f"streamer-fuzz-{name}-"))
    for number, seed in enumerate(target.seeds()):
        (corpus / f"seed{number:04d}").write_bytes(seed)
    findings.mkdir(parents=True, exist_ok=True)
    atheris.Setup([sys.argv[0], f"-max_total_time={seconds}", "-max_len=262144", "-rss_limit_mb=4096",
                   f"-artifact_prefix={findings}/{name}-", "-print_final_stats=1", str(corpus)],
                  target.run)
    atheris.Fuzz()


def run_atheris(names: list[str], seconds: int, findings: Path) -> dict[str, tuple[int, int]]:
    results = {}
    for name in names:
        before = set(findings.glob(f"{name}-*")) if findings.is_dir() else set()
        started = time.monotonic()
        child = subprocess.run([sys.executable, __file__, "--atheris-child", name, "--seconds", str(seconds),
                                "--findings", str(findings)], capture_output=True, text=True)
        runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", child.stderr)
        found = set(findings.glob(f"{name}-*")) - before if findings.is_dir() else set()
        if child.returncode != 0 and not found:
            sys.stderr.write(child.stderr[-3000:])
        results[name] = (int(runs[-1]) if runs else 0, len(found))
        print(f"{name:15s} {results[name][0]:>10,} runs  {len(found)} finding(s)  "
              f"{time.monotonic() - started:6.1f} s  exit {child.returncode}", flush=True)
    return results


def run_hypothesis(names: list[str], seconds: int) -> dict[str, tuple[int, int]]:
    from hypothesis import HealthCheck, given, settings

    from tests.support import fuzz_targets
    from tests.monitor.test_fuzz import hostile

    results = {}
    for name in names:
        target = fuzz_targets.TARGETS[name]
        seeds = target.seeds()
        runs = 0
        deadline = time.monotonic() + seconds
        failures = 0
        while time.monotonic() < deadline:
            @settings(max_examples=200, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(hostile(seeds))
            def check(data: bytes) -> None:
                nonlocal runs
                runs += 1
                target.run(data)

            try:
                check()
            except Exception as exc:  # noqa: BLE001 - a finding: report it and go on with the next target
                failures += 1
                print(f"{name}: FINDING {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
                break
        results[name] = (runs, failures)
        print(f"{name:15s} {runs:>10,} runs  {failures} finding(s)", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.disable(logging.CRITICAL)  # the parsers report bad input as warnings: millions of them here
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="total time, shared by the targets (default 5)")
    parser.add_argument("--target", action="append", help="a target of tests/support/fuzz_targets.py (repeatable; default all)")
    parser.add_argument("--engine", choices=("auto", "atheris", "hypothesis"), default="auto")
    parser.add_argument("--findings", type=Path, default=ROOT / "bench" / "fuzz-findings")
    parser.add_argument("--atheris-child", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.atheris_child:
        atheris_child(args.atheris_child, args.seconds, args.findings)
        return 0
    from tests.support import fuzz_targets

    names = args.target or sorted(fuzz_targets.TARGETS)
    unknown = sorted(set(names) - set(fuzz_targets.TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(fuzz_targets.TARGETS))}")
    seconds = max(1, int(args.minutes * 60 / len(names)))
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "hypothesis"
    print(f"fuzzing {len(names)} target(s) for {seconds} s each with {engine}", flush=True)
    results = run_atheris(names, seconds, args.findings) if engine == "atheris" else run_hypothesis(names, seconds)
    total_runs = sum(r for r, _ in results.values())
    total_found = sum(f for _, f in results.values())
    print(f"total: {total_runs:,} runs, {total_found} finding(s)" +
          (f" (inputs in {args.findings})" if total_found and engine == "atheris" else ""))
    return 1 if total_found else 0


if __name__ == "__main__":
    os.environ.setdefault("STREAMER_SHARED", str(ROOT.parent / "shared"))
    sys.exit(main())
