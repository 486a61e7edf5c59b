"""`streamer replay` and `streamer follow`: a workflow's logs read from the start to the end (like
pegasus-monitord -r), or followed live until DAGMan exits."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamer.cli.help import epilog
from streamer.cli.jobstate import is_jobstate_log, run_jobstate
from streamer.cli.options import HelpFormatter, common, endpoint_options
from streamer.config.command import collect_endpoints, report
from streamer.config.settings import ConfigError, load_toml
from streamer.config.statedir import destinations_of, refuse_read_only, replay_state_path, writes_submit_dir

if TYPE_CHECKING:
    from streamer.console.progressline import RunView
    from streamer.monitor.source import WorkflowSource


def add_replay_commands(commands: Any) -> None:
    """`replay` and `follow`: the same options but `--resume` (replay) and `--keep-alive` (follow)."""
    for name, follow in (("replay", False), ("follow", True)):
        what = ("Read a workflow's logs from the start to the end and exit (like pegasus-monitord -r)."
                if not follow else "Follow a running workflow live until DAGMan exits.")
        cmd = commands.add_parser(name, help=what.split(" (")[0].lower().rstrip("."), description=what +
                                  " With no --dest, writes jobstate.log and <dag>.stampede.db next to "
                                  "the workflow, as monitord does.", epilog=epilog(name), formatter_class=HelpFormatter)
        cmd.add_argument("path", metavar="SUBMIT_DIR|DAGMAN_OUT|JOBSTATE_LOG",
                         help="a Pegasus submit dir, its *.dagman.out (also a plain DAG's, without "
                              "braindump), or a plain DAG's jobstate.log (DAGMan's JOBSTATE_LOG; its state "
                              "goes to <jobstate.log>.streamer.json)")
        endpoint_options(cmd)
        cmd.add_argument("--no-recursive", action="store_true", help="do not follow sub-workflows")
        cmd.add_argument("--timezone", metavar="TZ",
                         help="zone of DAGMan's zone-less times: an IANA name, UTC or an offset "
                              "(-08:00); default: the one braindump.yml records")
        cmd.add_argument("--append", action="store_true",
                         help="keep what an earlier run wrote: database rows of this workflow, and "
                              "the content of file endpoints (a replay overwrites them otherwise, as monitord -r)")
        cmd.add_argument("--no-jobstate", action="store_true", help="do not write jobstate.log")
        cmd.add_argument("--parser", choices=("auto", "thread", "process"), default="auto",
                         help="where log parsing runs: a thread, or a child process that overlaps it with "
                              "delivery on a second core (auto: a process for a dagman.out over 4 MB while a core "
                              "is idle)")
        cmd.add_argument("--state", metavar="PATH", help="where to keep the resume state, file endpoints' "
                         "lengths included (default: streamer.state.json in the submit dir)")
        if follow:
            cmd.add_argument("--keep-alive", action="store_true",
                             help="after DAGMan exits, keep waiting for a restart (rescue DAG)")
        else:
            cmd.add_argument("--resume", action="store_true",
                             help="go on from where an interrupted replay to the same endpoints stopped "
                                  "(default: start from the beginning)")
        common(cmd)


async def run_replay(args: argparse.Namespace, *, follow: bool) -> int:
    from streamer.console.endsummary import print_end_summary
    from streamer.console.progressline import ProgressLine, RunView
    from streamer.run.pipeline import RunOptions
    from streamer.run.summary import print_summary
    from streamer.run.workflow import WorkflowRun

    try:
        from streamer.monitor.source import WorkflowSource
    except ImportError as exc:
        raise ConfigError(f"the workflow monitor is not available in this build: {exc}") from None
    path = Path(args.path)
    if is_jobstate_log(path) and (path.exists() or follow):
        return await run_jobstate(args, path, follow=follow, command="follow" if follow else "replay")
    if not path.exists():
        raise ConfigError(f"{args.path}: no such submit directory, dagman.out or jobstate.log file")
    tz = _workflow_zone(args, path, load_toml(args.config).timezone if args.config else None)
    source = WorkflowSource(path, follow=follow, recursive=not args.no_recursive, timezone=tz,
                            keep_alive=getattr(args, "keep_alive", False), write_jobstate=not args.no_jobstate,
                            state_path=Path(args.state) if args.state else None, parser=args.parser,
                            resume=follow or args.resume)
    settings = collect_endpoints(args, defaults=[source.default_db_url()])
    here = source.plain or writes_submit_dir(source, settings.endpoints)  # else: nothing is written there
    if not args.state and not here:
        source.state_path = replay_state_path(source.submit_dir)
    refuse_read_only(source, settings.endpoints, state_given=bool(args.state))
    workflow = WorkflowRun(source, replay=not args.append and not follow, here=here)
    # reads the state: its notes (resuming from where, or why not) are said now
    resuming = await workflow.decide(destinations_of(settings.endpoints))
    for note in source.notes:
        report(note)
    if not args.dest and not args.config and not args.conf and not args.quiet:
        sys.stderr.write(f"streamer: no --dest: writing {settings.endpoints[0].url.masked} and jobstate.log\n")
    db_written = any(s.url.raw == source.default_db_url() for s in settings.endpoints)
    if (args.dest or args.config or args.conf) and not args.quiet and not source.plain and not db_written:
        sys.stderr.write(f"streamer: note: {source.default_db_url().rsplit('/', 1)[-1]} is not written (endpoints "
                         f"given), so pegasus-analyzer and pegasus-statistics cannot read this run; add "
                         f"--dest {source.default_db_url()} to keep monitord's database\n")
    view = RunView(follow=follow, keep_alive=getattr(args, "keep_alive", False))
    if resuming and not args.quiet:
        await _prime(view, source)
    meter = ProgressLine(view, sys.stderr, enabled=not args.quiet and sys.stderr.isatty())
    try:  # -q: no progress line, no summary, nothing to count
        result = await workflow.run(settings.endpoints, RunOptions(
            on_error=settings.on_error, meter=meter, metrics=args.metrics, watch=None if args.quiet else view.watch))
    finally:  # also when an endpoint cannot even be built: the terminal gets its cursor back
        meter.finish()
    if not args.quiet:
        print_summary(result, sys.stderr)
        if not source.plain:
            print_end_summary(view, source.submit_dir, sys.stderr, tools=db_written)
    return result.exit_code


async def _prime(view: RunView, source: WorkflowSource) -> None:
    """The progress line and end summary of a resumed run start from what came before its position."""
    import asyncio
    import logging

    try:
        await asyncio.to_thread(view.prime, source.history())
    except Exception as exc:  # noqa: BLE001 - only the counts on screen depend on it, never the events
        logging.getLogger("streamer").warning("%s: the jobs before the resumed position are not counted on screen "
                                              "(%s)", source.dagman_out, exc)


def _workflow_zone(args: argparse.Namespace, path: Path, configured: str | None = None) -> str | None:
    """--timezone (else `timezone` of --config) checked, a usage error naming it; the zone `zones.for_workflow`
    gives, said on stderr."""
    from streamer.monitor import zones

    zone = zones.for_workflow(path if path.is_dir() else path.parent, args.timezone or configured)
    if not args.quiet and not (args.timezone or configured):
        sys.stderr.write(f"streamer: DAGMan times read in {zone.why}; --timezone to change\n")
    return zone.name
