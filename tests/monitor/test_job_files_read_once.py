"""A job's `.err` file is read once per job end, not once for PegasusLite's exit code and again for its text.

The .sub file's `error` path and `<job>.err` name the same file in a planned workflow; the engine reads it
once when the two paths are the same string, twice (as before) when they differ. Counted in a child in
pure-Python mode, where the engine's `read_text` can be wrapped (the compiled engine binds it at build time;
tests/util/test_compiled.py holds the two paths to the same events).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from streamer.synth import generate

_COUNT = """
import collections, json, sys
from streamer.monitor.engine import outputs
reads = collections.Counter()
original = outputs.read_text
def counted(path, *args, **kwargs):
    reads[path] += 1
    return original(path, *args, **kwargs)
outputs.read_text = counted
from streamer.cli.entry import main
sys.argv = ["streamer", "replay", sys.argv[1], "-q", "--dest", "file://" + sys.argv[2]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(reads))
"""


def _reads(run: Path, tmp_path: Path) -> dict[str, int]:
    env = {**os.environ, "STREAMER_PURE_PYTHON": "1", "TZ": "UTC"}
    done = subprocess.run([sys.executable, "-c", _COUNT, str(run), str(tmp_path / "out.bp")], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    counts: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return counts


def test_err_file_read_once_per_job(tmp_path: Path) -> None:
    run = generate(tmp_path / "w", jobs=3, seed=0)
    reads = _reads(run, tmp_path)
    err = {path: count for path, count in reads.items() if ".err" in os.path.basename(path)}
    jobs = {path for path in reads if ".out" in os.path.basename(path)}
    assert len(err) == len(jobs) > 3  # the compute jobs and the auxiliary ones, each job's .err once
    assert set(err.values()) == {1}


def test_err_file_read_twice_when_the_paths_differ(tmp_path: Path) -> None:
    """A .sub file whose `error` names another file: both are read, as monitord does."""
    run = generate(tmp_path / "w", jobs=3, seed=0)
    sub = next(path for path in sorted(run.rglob("*.sub")) if "ID0000001" in path.name)
    job = sub.name[:-len(".sub")]
    lines = sub.read_text().splitlines(keepends=True)
    errors = [number for number, line in enumerate(lines) if line.startswith("error = ")]
    assert len(errors) == 1
    lines[errors[0]] = f"error = elsewhere/{job}.err\n"
    sub.write_text("".join(lines))
    (run / "elsewhere").mkdir()
    for err in sub.parent.glob(f"{job}.err*"):
        (run / "elsewhere" / err.name).write_bytes(err.read_bytes())
    reads = _reads(run, tmp_path)
    err_reads = {path: count for path, count in reads.items() if os.path.basename(path).startswith(job + ".err")}
    assert sorted(os.path.relpath(path, run) for path in err_reads) == sorted(
        [f"elsewhere/{job}.err.000", os.path.relpath(sub.parent / f"{job}.err.000", run)])
    assert set(err_reads.values()) == {1}
