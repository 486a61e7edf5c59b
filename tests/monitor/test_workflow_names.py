"""Names read from a workflow's braindump never pick a path outside its place (issue 27 item 1).

`monitord -o DIR` writes `DIR/<wf_uuid>-jobstate.log`; the braindump's `dag`, `notify` and `properties`
name files of the submit directory itself. A value that would leave its directory is refused by name:
no file written or read outside.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.monitor.engineopts import EngineOptions
from streamer.monitor.parsers import braindump
from streamer.util.safenames import UnsafeName
from streamer.synth import generate

ROOT = Path(__file__).resolve().parents[2]


def set_key(submit: Path, key: str, value: str) -> None:
    path = submit / "braindump.yml"
    lines = [f'{key}: "{value}"' if line.startswith(f"{key}:") else line for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": "UTC", "HOME": str(cwd), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "streamer", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_monitord_output_dir_keeps_a_climbing_uuid_inside(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "a" / "b" / "wf", jobs=2, scenario="success", seed=0)
    set_key(run_dir, "wf_uuid", "../../../ESCAPED")
    set_key(run_dir, "root_wf_uuid", "../../../ESCAPED")
    out = tmp_path / "a" / "b" / "analyzer"
    result = run(["monitord", "-r", "--no-events", "--no-notifications", "-o", str(out),
                  "synth-0.dag.dagman.out"], run_dir)
    assert "Traceback" not in result.stderr, result.stderr
    assert [str(p) for p in tmp_path.rglob("*ESCAPED*")] == []
    assert "no jobstate.log written for this workflow: wf_uuid '../../../ESCAPED' cannot be used as a name" \
        in result.stderr


@pytest.mark.parametrize("uuid", ["../x", "..", "a/b", "x\x00", "y" * 300])
def test_jobstate_path_refuses_what_leaves_the_output_dir(uuid: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafeName, match="wf_uuid"):
        EngineOptions(output_dir="out").jobstate_path(str(tmp_path), uuid)
    assert EngineOptions().jobstate_path(str(tmp_path), uuid) == str(tmp_path / "jobstate.log")


@pytest.mark.parametrize("key", ["dag", "notify", "properties"])
@pytest.mark.parametrize("value", ["../outside/x.dag", "/etc/passwd", "..", "a\nb", "%2e%2e%2fx"])
def test_braindump_files_outside_the_submit_dir_are_refused_by_line(key: str, value: str, tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=2, scenario="success", seed=0)
    set_key(run_dir, key, value.replace("\n", "\\n"))
    line = next(n for n, text in enumerate((run_dir / "braindump.yml").read_text().splitlines(), 1)
                if text.startswith(f"{key}:"))
    with pytest.raises(braindump.BraindumpError) as raised:
        braindump.load(run_dir)
    assert str(raised.value).startswith(f"{run_dir / 'braindump.yml'}:{line}: {key} ")


def test_replay_of_a_braindump_naming_a_dag_outside_reads_nothing_there(tmp_path: Path) -> None:
    run_dir = generate(tmp_path / "wf", jobs=2, scenario="success", seed=0)
    outside = generate(tmp_path / "outside", jobs=3, scenario="success", seed=5)
    set_key(run_dir, "dag", "../outside/synth-0.dag")
    (run_dir / "synth-0.dag.dagman.out").unlink()
    result = run(["replay", str(run_dir), "--dest", f"file://{tmp_path}/events.jsonl", "--no-jobstate", "-q"],
                 tmp_path)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "dag '../outside/synth-0.dag' cannot be used as a name" in result.stderr, result.stderr
    assert not (tmp_path / "events.jsonl").exists() or (tmp_path / "events.jsonl").read_text() == ""
    assert not (outside / "jobstate.log").exists()
