"""A resumed `follow` describes the workflow, not this process's share of it: the end summary keeps every
job, the failed ones and the label; the progress line knows DAGMan started; the resume is announced."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

from streamer.cli.main import main
from streamer.monitor.source import WorkflowSource
from streamer.console.progressline import RunView
from streamer.synth import generate
from tests.support.commands import wait_for


def _summary(err: str) -> list[str]:
    """The end summary's lines from `workflow ...` on, without the tool line (it names the directory)."""
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("workflow "))
    return [line for line in lines[start:] if not line.startswith(("why:", "statistics:"))]


def test_a_resumed_follow_summarises_the_whole_workflow(tmp_path: Path, capsys) -> None:
    submit = generate(tmp_path / "run", jobs=8, scenario="post_failure", seed=3)
    reference = shutil.copytree(submit, tmp_path / "reference")
    assert main(["replay", str(reference), "--no-jobstate", "--state", str(tmp_path / "ref.state"),
                 "--dest", f"file://{tmp_path}/ref.jsonl"]) == 0
    expected = _summary(capsys.readouterr().err)
    assert expected[0] == "workflow synth: Failure · 9/13 jobs succeeded · 1 failed", expected
    assert expected[1] == "failed jobs:" and expected[2].startswith("  findrange_ID0000001 (POST script)  exit 1")

    dagman_out = next(submit.glob("*.dag.dagman.out"))
    text = dagman_out.read_text()
    lines = text.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "failed with status" in line) + 3
    dagman_out.write_text("".join(lines[:cut]))  # DAGMan is running, the POST script has failed
    state = tmp_path / "follow.state"
    command = ["follow", str(submit), "--no-jobstate", "--state", str(state), "--dest", f"file://{tmp_path}/f.jsonl"]
    first = subprocess.Popen([sys.executable, "-m", "streamer", *command], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    offset = f'"offset":{len("".join(lines[:cut]).encode())}'
    wait_for(lambda: first.poll() is not None or (state.exists() and offset in state.read_text()),
             "the first follow to read to the cut", 60)
    assert first.poll() is None, "the first follow ended"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)

    view = RunView(follow=True)  # the progress line of the resumed run, before it reads anything new
    view.prime(WorkflowSource(submit, follow=True, write_jobstate=False, state_path=state).history())
    line = view.line()
    assert line.startswith("synth: ") and " · 1 failed · " in line, line

    dagman_out.write_text(text)  # DAGMan goes on and exits
    assert main(command) == 0
    err = capsys.readouterr().err
    assert f"streamer: resuming {dagman_out} from line {cut} (state {state})" in err, err
    assert _summary(err) == expected
