"""What `streamer replay` / `streamer follow` print at the end: the workflow's status, its failed
jobs (exit code, host, first line of stderr) and the Pegasus tool to look further.

Drawn with rich (colours on a terminal only), from the events the run saw (`progressline.RunView`).
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from streamer.console.progressline import RunView
from streamer.events.tally.counts import FAILURE, RUNNING, SUCCESS
from streamer.events.tally.tracker import FAILED

if TYPE_CHECKING:  # rich is imported when a summary is drawn (not under -q)
    from rich.text import Text

MAX_SHOWN = 10
"""Failed jobs listed at most (the rest are counted)."""


def pegasus_tool(name: str) -> str:
    """How to run a Pegasus tool here: its console script, else `python -m Pegasus.cli.<name>`."""
    if shutil.which(name):
        return name
    if importlib.util.find_spec("Pegasus") is not None:
        return f"{shlex.quote(sys.executable)} -m Pegasus.cli.{name}"
    return name


def summary_text(view: RunView, submit_dir: str | Path, *, tools: bool = True) -> Text:
    """The summary; `tools`: the Stampede DB Pegasus's tools read is written, so name the one to run next (else
    they cannot read this run, as the note at the start said, and none is suggested)."""
    from rich.text import Text

    out = Text()
    roots = view.tracker.roots()
    if not roots:
        out.append("streamer: no workflow events were read (has DAGMan started?)\n")
        return out
    done, total, _running, held, failed = view.jobs()
    failures = []
    for wf in view.tracker.workflows.values():
        label = wf.label or (wf.dag or "").removesuffix(".dag") or wf.xwf_id[:8]
        for job in wf.jobs.values():
            if wf.node_state(job) == FAILED:
                failures.append((label, job))
    for root in roots:
        label = root.label or (root.dag or "").removesuffix(".dag") or root.xwf_id[:8]
        style = {SUCCESS: "bold green", FAILURE: "bold red"}.get(root.state, "bold yellow")
        state = root.state if root.state != RUNNING else "Running (DAGMan has not finished)"
        out.append("workflow ")
        out.append(label, style="bold")
        out.append(": ")
        out.append(state, style=style)
        out.append(f" · {done}/{total} jobs succeeded · {len(failures)} failed")
        if held:
            out.append(f" · {held} held")
        out.append("\n")
    if failures:
        out.append("failed jobs:\n", style="bold red")
        for label, job in failures[:MAX_SHOWN]:
            last = next((f for f in reversed(view.tracker.failures) if f.job == job.name), None)
            step = f" ({last.step})" if last is not None and last.step != "job" else ""
            code = last.exitcode if last is not None else job.exitcode
            out.append(f"  {job.name}{step}", style="red")
            out.append(f"  exit {code if code is not None else '?'}  host {job.host or '?'}")
            if job.stderr and not step:
                out.append(f"  stderr: {job.stderr}")
            if len(roots) > 1 or label != (roots[0].label or ""):
                out.append(f"  ({label})", style="dim")
            out.append("\n")
        if len(failures) > MAX_SHOWN:
            out.append(f"  ... and {len(failures) - MAX_SHOWN} more\n")
    if not tools:
        return out
    if any(root.state == FAILURE for root in roots) or failures:
        out.append(f"why: {pegasus_tool('pegasus-analyzer')} {shlex.quote(str(submit_dir))}\n")
    elif all(root.state == SUCCESS for root in roots):
        out.append(f"statistics: {pegasus_tool('pegasus-statistics')} -s all {shlex.quote(str(submit_dir))}\n")
    return out


def print_end_summary(view: RunView, submit_dir: str | Path, stream: TextIO, *, tools: bool = True) -> None:
    from rich.console import Console

    console = Console(file=stream, highlight=False, soft_wrap=True)
    console.print(summary_text(view, submit_dir, tools=tools), end="")
