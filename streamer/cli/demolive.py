"""`streamer demo --live`: a workflow that grows, to try `follow`, `tail`, `status --watch` and `serve` on.

A synthetic Pegasus 5 submit directory (`streamer.synth`, fixed seed: a retried job and a held one) is
written with an empty dagman.out, which then grows line by line, as DAGMan would write it, for `--duration`
seconds; meanwhile the commands to try are printed with this directory's paths. Nothing here is a server:
every command it suggests reads the directory, as they read a real run.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

PIECES_PER_SECOND = 4
"""How often the log grows (whole lines, as DAGMan writes them)."""


def _pieces(text: str, count: int) -> list[str]:
    """`text` in `count` runs of whole lines (fewer for a short text)."""
    lines = text.splitlines(keepends=True)
    count = max(1, min(count, len(lines)))
    size, extra = divmod(len(lines), count)
    out, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        out.append("".join(lines[start:end]))
        start = end
    return out


def instructions(workflow: Path, out: Path, duration: float, streamer: str) -> str:
    events = out / "events.jsonl"
    return (f"streamer demo --live: a workflow whose dagman.out grows for {duration:g} s in {workflow} "
            "(Ctrl-C stops it)\n"
            "in another terminal, try:\n"
            f"  {streamer} follow {workflow} --dest -             # its events as DAGMan writes them\n"
            f"  {streamer} status {workflow} --watch              # live progress, like pegasus-status -w\n"
            f"  {streamer} follow {workflow} --dest {events} --no-jobstate   # and in a third terminal:\n"
            f"  {streamer} tail {events} --from-start\n"
            f"  {streamer} serve --watch {out}                    # every workflow under a directory, as a "
            "site runs it\n"
            "(run the demo again for a new run; the commands above end when DAGMan finishes)\n")


async def run_live_demo(out: Path, *, duration: float, quiet: bool = False) -> int:
    from streamer.cli.demo import streamer_command
    from streamer.synth import generate

    if duration <= 0:
        raise ValueError("--duration must be more than 0 seconds")
    out = out.resolve()
    workflow = out / "live"
    if workflow.exists():
        shutil.rmtree(workflow)
    out.mkdir(parents=True, exist_ok=True)
    generate(workflow, jobs=12, scenario=["retry", "held"], seed=7, label="live")
    log = next(workflow.glob("*.dag.dagman.out"))
    pieces = _pieces(log.read_text(), int(duration * PIECES_PER_SECOND))
    log.write_text("")  # DAGMan has not started yet
    say = (lambda text: None) if quiet else (lambda text: (sys.stderr.write(text), sys.stderr.flush()))
    say(instructions(workflow, out, duration, streamer_command()))
    pause = duration / len(pieces)
    written = 0
    try:
        for piece in pieces:
            await asyncio.sleep(pause)
            with open(log, "a") as handle:
                handle.write(piece)
            written += 1
    except asyncio.CancelledError:  # Ctrl-C
        say(f"streamer demo: stopped with {written} of {len(pieces)} parts of the log written ({log})\n")
        raise
    say(f"streamer demo: DAGMan finished ({log} is complete); followers and status --watch end now\n")
    return 0
