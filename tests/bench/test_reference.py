"""bench/reference.py: the one way the benchmarks measure a run (CPU and RSS of the whole process tree, load)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from bench.reference import Run, compare_counts, interleave, run_measured, summary

# a parent holding ~40 MiB that starts a child holding ~80 MiB and burning CPU; both alive together
_TREE = textwrap.dedent("""
    import subprocess, sys, time
    held = bytearray(40 << 20)
    child = ("import time\\nheld = bytearray(80 << 20)\\nt = time.process_time()\\n"
             "while time.process_time() - t < 0.3: pass\\ntime.sleep(0.2)\\n")
    subprocess.run([sys.executable, "-c", child], check=True)
""")


def test_run_measured_sums_the_peak_rss_and_cpu_of_the_whole_process_tree(tmp_path: Path) -> None:
    run = run_measured([sys.executable, "-c", _TREE], tmp_path, tmp_path / "log")
    mib = 1024
    assert 80 * mib < run.rss_kib < 110 * mib  # the largest single process: the child
    assert run.rss_sum_kib >= run.rss_kib + 40 * mib  # the parent's 40 MiB added to it
    assert run.rss_sum_kib < 170 * mib
    assert run.cpu >= 0.3  # the child's busy loop counts
    assert run.wall >= run.cpu * 0.5
    assert run.load_before >= 0 and run.load_after >= 0


def test_a_failing_command_is_an_error_with_its_output(tmp_path: Path) -> None:
    try:
        run_measured([sys.executable, "-c", "print('broken here'); raise SystemExit(3)"], tmp_path, tmp_path / "log")
    except RuntimeError as exc:
        assert "broken here" in str(exc)
    else:
        raise AssertionError("a failing command must raise")


def test_interleave_alternates_the_tools_and_summary_gives_medians_ratios_and_load() -> None:
    order: list[str] = []

    def tool(name: str, cpu: float) -> Run:
        order.append(name)
        return Run(wall=cpu * 2, cpu=cpu, rss_kib=1024, rss_sum_kib=2048, load_before=1.5, load_after=2.5)

    runs = interleave({"ref": lambda: tool("ref", 10.0), "us": lambda: tool("us", 1.0)}, 3, report=lambda *a: None)
    assert order == ["ref", "us"] * 3
    text = summary(runs["us"], runs["ref"], "us", "ref")
    assert "CPU    1.00 s" in text and "CPU   10.00 s" in text
    assert "ratio us/ref: wall 0.100, CPU 0.100, peak RSS 1.000  (ref takes 10.0x the CPU)" in text
    assert "load 1.5-2.5" in text


def test_compare_counts_says_whether_the_event_types_are_identical() -> None:
    same = compare_counts({"monitord": {"a": 2, "b": 1}, "streamer": {"b": 1, "a": 2}})
    assert same.splitlines()[-1].strip() == "event-type counts: identical"
    differ = compare_counts({"monitord": {"a": 2}, "streamer": {"a": 2, "b": 1}})
    assert "<- differs" in differ and differ.splitlines()[-1].strip() == "event-type counts: DIFFERENT"
