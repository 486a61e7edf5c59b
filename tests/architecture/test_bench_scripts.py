"""The benchmarks stay runnable: every script in bench/ imports what it names and answers --help (they are run
by hand, so nothing else would notice a module that moved)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(path.name for path in (ROOT / "bench").glob("*.py") if '__name__ == "__main__"' in path.read_text())
"""Every runnable script (fleet_trace.py, run by bench_fleet.py with serve's own arguments, too)."""


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_answers_help(script: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--help"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower() and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # --help writes nothing (fleet_trace once wrote a file named "--help")


def test_fleet_trace_imports_what_it_patches() -> None:
    probe = ("import runpy, sys; sys.argv = ['fleet_trace.py']; "
             "mod = runpy.run_path('bench/fleet_trace.py', run_name='not_main'); mod['install'](); print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr
