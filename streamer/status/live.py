"""The --watch display: a rich live view on a terminal, periodic plain lines elsewhere.

On a terminal the view is drawn on the alternate screen and redrawn in place
(it never scrolls the terminal; what does not fit is cropped); when the
workflows end or on Ctrl-C the terminal is restored and the final view is
printed once on the normal screen. When stdout is not a terminal, a line is
printed whenever the numbers change, and the full report at the end.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from streamer.util.localtime import shown
from streamer.events.tally.counts import FAILURE, SUCCESS
from streamer.status.text import View, _duration, plain_report, status_line

_STATE_STYLE = {SUCCESS: "bold green", FAILURE: "bold red"}


def _name(row: Any) -> Text:
    prefix = "" if row.depth == 0 else "  " * (row.depth - 1) + "└─ "
    text = Text(prefix + row.name)
    if row.xwf_id:
        text.append(f"  {row.label or ''} {row.xwf_id[:8]}", style="dim")
    return text


def render(view: View, *, long: bool = False, now: float | None = None, width: int | None = None) -> Group:
    """The whole live view as one rich renderable, for a terminal `width` columns wide."""
    clock = shown(time.time() if now is None else now, date=False)
    head = Text.assemble(("streamer status ", "bold"), view.source, f"   {clock}   ",
                         ("finished" if view.finished else "Ctrl-C to exit", "dim"))
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("WORKFLOW", no_wrap=True)
    table.add_column("PROGRESS", width=22, no_wrap=True)
    for name in ("UNREADY", "READY", "PRE", "QUEUED", "POST", "SUCCESS", "FAILURE", "%DONE"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    for row in view.dags:
        c = row.counts
        table.add_row(_name(row), ProgressBar(total=max(c.total, 1), completed=c.succeeded, width=20),
                      str(c.unready), str(c.ready), str(c.pre), str(c.queued), str(c.post), str(c.succeeded),
                      Text(str(c.failed), style="red" if c.failed else ""), str(c.percent_done),
                      Text(c.state, style=_STATE_STYLE.get(c.state, "yellow")))
    if len(view.dags) > 1:
        t = view.totals()
        table.add_row(Text(f"TOTALS ({t['total']} jobs)", style="bold"), "", str(t["unready"]), str(t["ready"]),
                      str(t["pre"]), str(t["queued"]), str(t["post"]), str(t["succeeded"]), str(t["failed"]),
                      str(t["percent_done"]), "")
    parts: list[Any] = [head, Text(""), table]
    submit = [row for row in view.dags if row.submit_dir]
    if submit:
        parts.append(Text(""))
        for row in submit:
            parts.append(Text(f"{row.name}: {row.submit_host or '?'}:{row.submit_dir}", style="dim"))
    if view.held:
        held = Table(title="Held jobs", title_justify="left", box=None, pad_edge=False, header_style="bold")
        held_rows = [(job.workflow, job.job, job.hold_reason or "-") for job in view.held]
        widths = [max(len(name), *(len(r[i]) for r in held_rows)) for i, name in enumerate(("WORKFLOW", "JOB"))]
        for name, wide in zip(("WORKFLOW", "JOB"), widths):  # whole: the reason is cut to what is left, not they
            held.add_column(name, no_wrap=True, min_width=wide)
        held.add_column("HOLD REASON", no_wrap=True)
        room = max((width or 10_000) - sum(widths) - 4, 12)  # 2 columns between cells
        for workflow, job, reason in held_rows:
            held.add_row(workflow, job, reason if len(reason) <= room else reason[:room - 1] + "…")
        parts += [Text(""), held]
    if view.failures:
        failures = Table(title="Last failures", title_justify="left", box=None, header_style="bold red")
        rows = []
        for f in reversed(view.failures):
            when = shown(f.ts, date=False) if isinstance(f.ts, (int, float)) else "-"
            step = f.job if f.step == "job" else f"{f.job} ({f.step})"
            rows.append((when, f.workflow, step, "-" if f.exitcode is None else str(f.exitcode), f.host or "-",
                         f.stderr or f.reason or ""))
        for i, name in enumerate(("TIME", "WORKFLOW", "JOB", "EXIT", "HOST", "STDERR")):
            widest = max(len(name), *(len(r[i]) for r in rows))
            failures.add_column(name, no_wrap=True, overflow="ellipsis",
                                min_width=None if name in ("HOST", "STDERR") else widest)
        for cells in rows:
            failures.add_row(*cells)
        parts += [Text(""), failures]
    if long and view.jobs:
        jobs = Table(title="Jobs", title_justify="left", box=None, header_style="bold")
        for name in ("WORKFLOW", "JOB", "STATE", "RETRIES", "SITE", "HOST", "DURATION"):
            jobs.add_column(name, no_wrap=True, justify="right" if name in ("RETRIES", "DURATION") else "left")
        for j in view.jobs:
            jobs.add_row(j.workflow, j.job, j.state, str(j.retries), j.site or "-", j.host or "-",
                         _duration(j.duration))
        parts += [Text(""), jobs]
    if view.warnings:
        parts.append(Text(""))
        parts += [Text(w, style="yellow", no_wrap=True, overflow="ellipsis") for w in view.warnings]
    return Group(*parts)


class RichDisplay:
    """Live view on the alternate screen; the final view printed on the normal screen."""

    def __init__(self, stream: TextIO, *, long: bool) -> None:
        self.console = Console(file=stream)
        self.long = long
        self.live = Live(console=self.console, screen=True, auto_refresh=False, transient=False,
                         vertical_overflow="crop", redirect_stdout=False, redirect_stderr=False)

    def __enter__(self) -> "RichDisplay":
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.__exit__(*exc)

    def show(self, view: View) -> None:
        self.live.update(render(view, long=self.long, width=self.console.width), refresh=True)

    def final(self, view: View) -> None:
        self.console.print(render(view, long=self.long, width=self.console.width))


class PlainDisplay:
    """Not a terminal: a status line whenever the numbers change, the report at the end."""

    def __init__(self, stream: TextIO, *, long: bool) -> None:
        self.stream = stream
        self.long = long
        self._last = ""

    def __enter__(self) -> "PlainDisplay":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def show(self, view: View) -> None:
        line = status_line(view)
        key = line.split(" ", 1)[1]
        if key != self._last:
            self._last = key
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except BrokenPipeError:
                raise SystemExit(0) from None

    def final(self, view: View) -> None:
        self.stream.write("\n" + plain_report(view, long=self.long))
        self.stream.flush()


def make_display(stream: TextIO, *, long: bool, interval: float) -> RichDisplay | PlainDisplay:
    isatty = getattr(stream, "isatty", lambda: False)()
    return RichDisplay(stream, long=long) if isatty else PlainDisplay(stream, long=long)
