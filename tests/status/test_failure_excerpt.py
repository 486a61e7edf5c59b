"""The failure excerpt (issue 26 item 12): for a PegasusLite job, the lines of its .err that explain the failure,
not the wrapper's boilerplate — in the end summary, `status`, `status --long` and `tail` alike."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

from streamer.events.tally.excerpt import stderr_excerpt
from streamer.synth import generate

LITE_ERR = """\
2023-03-03 23:11:14: PegasusLite: version 5.0.5
2023-03-03 23:11:14: Executing on host workflow.isi.edu IP=128.9.46.53

########################[Pegasus Lite] Setting up workdir ########################
2023-03-03 23:11:14: Not creating a new work directory as it is already set to /home/u/wf/execute/dir_148537

##############[Pegasus Lite] Figuring out the worker package to use ##############
2023-03-03 23:11:14: The job contained a Pegasus worker package
tar: write error

##################### Checking file integrity for input files #####################

######################[Pegasus Lite] Executing the user task ######################
2023-03-03 23:11:15: User task failed with exitcode 2
PegasusLite: exitcode 2
"""
WHY = "tar: write error · User task failed with exitcode 2"


def test_the_excerpt_is_what_explains_the_failure() -> None:
    assert stderr_excerpt(quote(LITE_ERR)) == WHY
    assert stderr_excerpt(LITE_ERR) == WHY
    # a task's own long stderr: its lines that say what failed, not the first ones
    noisy = LITE_ERR.replace("tar: write error\n", "".join(f"step {i} done\n" for i in range(50))
                             + "ERROR: cannot open f.in: No such file or directory\n")
    assert stderr_excerpt(noisy) == "ERROR: cannot open f.in: No such file or directory · " \
                                    "User task failed with exitcode 2"
    assert stderr_excerpt("plain stderr of a job without PegasusLite%0Asecond") == \
        "plain stderr of a job without PegasusLite"
    success = LITE_ERR.replace("tar: write error\n", "").replace(
        "2023-03-03 23:11:15: User task failed with exitcode 2\nPegasusLite: exitcode 2\n", "PegasusLite: exitcode 0\n")
    assert stderr_excerpt(success) is None
    assert stderr_excerpt("a" * 100_000 + "%0A") == "a" * 200 + "…"  # shown cut, never whole


def test_status_and_the_end_summary_show_the_lines_that_explain_the_failure(tmp_path: Path) -> None:
    run = generate(tmp_path / "wf", jobs=3, scenario="rescue", seed=0)
    failed = sorted(path for path in run.rglob("*.err.*") if "User task failed" in path.read_text())
    assert failed
    for path in failed:
        path.write_text(LITE_ERR)
    done = subprocess.run([sys.executable, "-m", "streamer", "replay", str(run)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    status = subprocess.run([sys.executable, "-m", "streamer", "status", str(run), "--long"], capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    lines = [line for line in status.stdout.splitlines() if re.search(r" exit=\d+ host=", line)]
    assert lines and all(line.endswith(WHY) for line in lines), status.stdout
    assert "Not creating a new work directory" not in status.stdout + done.stderr
