"""Without the compiled fast paths (no C compiler, or STREAMER_PURE_PYTHON=1) streamer gives the same output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streamer.synth import generate

from test_codecs import corpus_bp_files


def _streamer(args: list[str], *, pure: bool, cwd: Path) -> None:
    env = dict(os.environ, TZ="UTC")
    env.pop("STREAMER_PURE_PYTHON", None)
    if pure:
        env["STREAMER_PURE_PYTHON"] = "1"
    subprocess.run([sys.executable, "-m", "streamer", *args, "-q"], check=True, env=env, cwd=cwd, timeout=300)


def test_load_writes_the_same_bytes_pure_or_compiled(shared: Path, tmp_path: Path) -> None:
    inputs = [str(p) for p in corpus_bp_files(shared)]
    for mode in ("pure", "compiled"):
        _streamer(["load", *inputs, "--dest", f"file://{tmp_path}/{mode}.jsonl",
                   "--dest", f"file://{tmp_path}/{mode}.bp"], pure=mode == "pure", cwd=tmp_path)
    for suffix in ("jsonl", "bp"):
        pure, compiled = (tmp_path / f"pure.{suffix}").read_bytes(), (tmp_path / f"compiled.{suffix}").read_bytes()
        assert pure.count(b"\n") > 9000
        assert pure == compiled, suffix


def _events_without_wall_clock(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    # static.start/end carry the replay's own clock: everything else is the workflow's
    return sorted(line for line in lines if "event=stampede.static." not in line)


def test_replay_emits_the_same_events_pure_or_compiled(tmp_path: Path) -> None:
    source = generate(tmp_path / "wf", jobs=40, scenario="clustered", seed=5)
    for mode in ("pure", "compiled"):
        run = tmp_path / mode
        subprocess.run(["cp", "-r", str(source), str(run)], check=True)
        _streamer(["replay", str(run), "--dest", f"file://{tmp_path}/{mode}.bp"], pure=mode == "pure", cwd=tmp_path)
    pure, compiled = (_events_without_wall_clock(tmp_path / f"{m}.bp") for m in ("pure", "compiled"))
    assert len(pure) > 500
    assert pure == compiled
