"""`serve` never lets a workflow's own files decide where it writes (issue 27 item 1).

`{wf_uuid}`, `{dag}` and `{submit_dir}` in a `--workflow-dest` template come from the workflow's
braindump: a value that would leave its directory (or change the URL) refuses that workflow's
templated endpoint with a message naming the workflow and the value; its other endpoints and the
other workflows go on.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.config.settings import ConfigError
from streamer.serve.config import ServeConfig
from streamer.synth import generate
from tests.serve.test_serve import wait_serving
from tests.support.commands import wait_for

UUID = "21636369-8b52-4b4a-97b7-50923ceb3ffd"


def with_uuid(submit: Path, uuid: str) -> None:
    braindump = submit / "braindump.yml"
    text = braindump.read_text()
    old = next(line.split('"')[1] for line in text.splitlines() if line.startswith("wf_uuid:"))
    braindump.write_text(text.replace(old, uuid))


def test_a_braindump_uuid_that_climbs_out_gets_no_file_outside(tmp_path: Path) -> None:
    root, out = tmp_path / "root", tmp_path / "x" / "data" / "out"  # ../../../ lands in tmp_path
    out.mkdir(parents=True)
    good = generate(root / "good", jobs=2, scenario="success", seed=3)
    bad = generate(root / "bad", jobs=2, scenario="success", seed=4)
    with_uuid(good, UUID)
    with_uuid(bad, "../../../ESCAPED")
    env = {**os.environ, "TZ": "UTC", "STREAMER_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "streamer", "serve", "--watch", str(root), "--timezone", "UTC",
                             "--workflow-dest", f"file://{out}/{{wf_uuid}}.jsonl", "--workflow-dest", "sqlite"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wait_serving(tmp_path / "state")
        wait_for(lambda: (good / "monitord.done").exists() and (bad / "monitord.done").exists(),
                 "both workflows to finish", timeout=120)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    escaped = [str(p) for p in tmp_path.rglob("ESCAPED*")]
    assert escaped == [], f"written outside {out}: {escaped}"
    assert sorted(p.name for p in out.iterdir()) == [f"{UUID}.jsonl"]
    assert len((out / f"{UUID}.jsonl").read_text().splitlines()) > 10
    refusal = [line for line in err.splitlines() if "refused" in line]
    assert len(refusal) == 1 and str(bad) in refusal[0] and "{wf_uuid}.jsonl" in refusal[0] and \
        "wf_uuid '../../../ESCAPED'" in refusal[0], err
    with sqlite3.connect(bad / "synth-0.stampede.db") as db:  # its other endpoint went on
        assert db.execute("SELECT wf_uuid FROM workflow").fetchall() == [("../../../ESCAPED",)]


@pytest.mark.parametrize("uuid", ["..", ".", "a/b", "a\\b", "x?events=*", "x#y", "%2e%2e%2fETC", "a@b", "a:b",
                                  "a b", "a\nb", "a\x00b", "\u202eabc", "x" * 256])
def test_every_unsafe_value_refuses_the_templated_endpoint_only(uuid: str, tmp_path: Path) -> None:
    config = ServeConfig(workflow_dest=[f"file://{tmp_path}/{{wf_uuid}}.jsonl", "sqlite",
                                        f"file://{tmp_path}/{{dag}}.bp"])
    specs = config.workflow_specs(str(tmp_path), "synth-0", uuid, f"sqlite:///{tmp_path}/synth-0.stampede.db")
    assert [s.url.raw for s in specs] == [f"sqlite:///{tmp_path}/synth-0.stampede.db", f"file://{tmp_path}/synth-0.bp"]


def test_safe_values_fill_the_templates(tmp_path: Path) -> None:
    config = ServeConfig(workflow_dest=[f"file://{tmp_path}/{{wf_uuid}}-{{dag}}.jsonl"])
    specs = config.workflow_specs(str(tmp_path), "black-diamond_0.x", UUID, "sqlite:///x.db")
    assert [s.url.raw for s in specs] == [f"file://{tmp_path}/{UUID}-black-diamond_0.x.jsonl"]
    with pytest.raises(ConfigError, match="bad template"):
        ServeConfig(workflow_dest=["file:///x/{nope}.jsonl"]).workflow_specs("/s", "d", UUID, "sqlite:///x.db")
