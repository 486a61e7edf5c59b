"""`streamer` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from streamer import __version__
from streamer.config.command import collect_endpoints, report, warn_unmatched
from streamer.config.settings import ConfigError, load_toml
from streamer.endpoints import EndpointError
from streamer.endpoints.options import help_text as option_help
from streamer.core.filters import FilterError
from streamer.cli.help import epilog
from streamer.cli.jobstate import is_jobstate_log, run_jobstate
from streamer.util.runtime import run, setup_logging
from streamer.sources.base import SourceError
from streamer.config.statedir import destinations_of, refuse_read_only, replay_state_path, writes_submit_dir
from streamer.util.urls import mask
from streamer.util.exitcodes import Exit

if TYPE_CHECKING:
    from streamer.console.progressline import RunView
    from streamer.monitor.source import WorkflowSource

log = logging.getLogger("streamer")

DESCRIPTION = """\
streamer turns Pegasus / HTCondor DAGMan workflow logs into Stampede events
and publishes every event to many endpoints at once, each with its own filter
and buffer: JSON-lines or BP files, a terminal, AMQP (RabbitMQ), PostgreSQL,
and an embedded SQLite Stampede database.
"""

EPILOG = """\
endpoint URLs (--dest, repeatable; each takes ?events=PATTERNS):
  file:///abs/events.jsonl      JSON lines, monitord's AMQP form (keys with . -> _)
  file:///abs/events.bp         NetLogger BP lines (suffix decides; ?encoding=json|bp)
  /abs/events.bp, out.jsonl     a bare path is a file
  -  or  term:                   the terminal (term:?format=json&events=stampede.xwf.*)
  amqp://user:pass@host:5672/vhost/exchange   RabbitMQ topic exchange (amqps:// for TLS)
  postgresql://user@host:5432/db              Stampede schema, created if missing
  sqlite:///relative.db  sqlite:////abs.db    Stampede schema, embedded
  mysql://user:pass@host:3306/db              Stampede schema in MySQL / MariaDB (mariadb:// too)
  (database endpoints: --upgrade-schema upgrades an older Stampede schema, else it is refused)
  (Chimbuko provenance records, chimbuko.* events, go to their own tables beside it)

filters (?events=, --events): comma-separated globs, OR-ed; * matches any run
of characters (dots too), ? one character, !pattern excludes.
  'stampede.xwf.*,stampede.inv.end'   'stampede.job_inst.*,!stampede.job_inst.image.info'

examples:
  streamer load run.bp --dest file:///tmp/all.jsonl --dest 'file:///tmp/wf.bp?events=stampede.xwf.*'
  streamer load run.bp --dest amqp://guest:guest@localhost:5672/%2F/pegasus --follow --checkpoint run.ckpt
  streamer tail /tmp/all.jsonl --events 'stampede.job_inst.main.end'
  streamer load provdb/anomalies.jsonl provdb/func_stats.json --dest postgresql://postgres@localhost/prov
  streamer tail provdb/anomalies.jsonl --from-start --no-follow    # function, rank, step, runtime, score
  streamer tail amqp://guest:guest@localhost/%2F/pegasus --events 'stampede.job_inst.*'
  streamer replay /path/to/submit/dir            # jobstate.log + <dag>.stampede.db, like monitord -r
  streamer follow /path/to/submit/dir --dest amqp://...   # live, until DAGMan exits
  streamer replay /path/to/dag/jobstate.log      # a plain DAG's JOBSTATE_LOG -> <dag>.stampede.db
  streamer status /path/to/submit/dir --watch     # live progress, like pegasus-status -w
"""



class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=34)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors echo the arguments with passwords masked (`invalid choice:
    'amqp://u:***@h/x'` for a URL given to the wrong option); the subcommands' parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {mask(message)}\n")


class _Once(argparse.Action):
    """An option that may be given once: a second `--events` would silently replace the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) not in (None, self.default):
            parser.error(f"{option_string} given twice: give one comma-separated list "
                         f"(--events 'stampede.xwf.*,stampede.inv.end')")
        setattr(namespace, self.dest, values)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more messages (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line and no summary")


def _endpoint_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("endpoints")
    group.add_argument("-d", "--dest", action="append", default=[], metavar="URL",
                       help="endpoint URL (repeatable); see the list below")
    group.add_argument("--events", metavar="PATTERNS", action=_Once,
                       help="filter for endpoints that have none of their own (default: all events)")
    group.add_argument("--config", metavar="TOML", help="streamer.toml with [[endpoint]] tables")
    group.add_argument("--conf", metavar="PROPERTIES",
                       help="pegasus.properties: pegasus.catalog.workflow[.<name>].url/.events, "
                            "pegasus.monitord.encoding")
    group.add_argument("--upgrade-schema", action="store_true",
                       help="database endpoints: upgrade an older Stampede schema (8..13) to 14 in place, as "
                            "pegasus-db-admin update does (default: refuse it, naming that command)")
    group.add_argument("--on-error", choices=("stop", "isolate"),
                       help="a failing endpoint stops the run (default) or is isolated while the others go on")
    group.add_argument("--metrics", metavar="HOST:PORT",
                       help="serve Prometheus metrics on http://HOST:PORT/metrics and health on /healthz")


def build_parser() -> argparse.ArgumentParser:
    main_epilog = EPILOG + "\n" + option_help() + "\n"  # every URL option, from the endpoints' declarations
    parser = Parser(prog="streamer", description=DESCRIPTION, epilog=main_epilog, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"streamer {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    load = commands.add_parser("load", help="publish the events of .bp / .jsonl files to endpoints",
                               description="Read Stampede events from .bp or .jsonl files (replay to the end, "
                                           "or --follow like tail -F) and publish them to every --dest. "
                                           "Chimbuko provenance exports (one file per collection: "
                                           "anomalies.jsonl, normalexecs.json, metadata.jsonl, func_stats.json, "
                                           "counter_stats.jsonl, ad_model.json; JSON lines, arrays or "
                                           "documents) are recognised by name or content and published as "
                                           "chimbuko.* events.",
                               epilog=epilog("load"), formatter_class=HelpFormatter)
    load.add_argument("files", nargs="+", metavar="FILE",
                      help=".bp or .jsonl event file(s), one DAGMan jobstate.log (recognised by its lines), "
                           "Chimbuko provenance exports (anomalies.jsonl, ...), or one RabbitMQ queue to collect: "
                           "amqp://user:pass@host/vhost/QUEUE[?declare=true&bind=EXCHANGE&prefetch=N&idle=S]")
    _endpoint_options(load)
    load.add_argument("-f", "--follow", action="store_true",
                      help="keep reading as the files grow (rotation, truncation, late creation handled)")
    load.add_argument("--checkpoint", metavar="PATH",
                      help="resume from / save the acknowledged position here, with the length of every "
                           "file endpoint (no loss; files cut back on resume, so each event is in them once)")
    load.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    _common(load)

    tail = commands.add_parser("tail", help="print events as they arrive (event file or AMQP broker)",
                               description="Print events from an event file (like tail -F) or from an "
                                           "AMQP exchange, one readable line each. Chimbuko provenance "
                                           "records show function, rank, io step, runtime and anomaly score.",
                               epilog=epilog("tail"), formatter_class=HelpFormatter)
    tail.add_argument("source", metavar="FILE|AMQP-URL")
    tail.add_argument("--events", metavar="PATTERNS", default="*", action=_Once,
                      help="only events matching these globs")
    tail.add_argument("--format", choices=("pretty", "bp", "json"), default="pretty")
    tail.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    tail.add_argument("--from-start", action="store_true", help="files: print what is already there first")
    tail.add_argument("--no-follow", action="store_true", help="files: print and exit at the end")
    tail.add_argument("--queue", metavar="NAME", help="AMQP: read this durable queue instead of a private one")
    _common(tail)

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
        _endpoint_options(cmd)
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
        _common(cmd)

    from streamer.cli.status import add_status_command

    add_status_command(commands, HelpFormatter, _common)

    from streamer.cli.topology import add_topology_command

    add_topology_command(commands, HelpFormatter)

    from streamer.cli.serve import add_serve_command

    add_serve_command(commands, HelpFormatter, _common, _endpoint_options)

    # drop-in for pegasus-monitord (streamer/monitord/): parsed by its own module, see `streamer monitord -h`
    commands.add_parser("monitord", add_help=False, help="run as pegasus-monitord (same options, properties, files)")
    commands.add_parser("install-monitord", add_help=False,
                        help="write a pegasus-monitord launcher into $PEGASUS_HOME/bin that starts streamer")
    demo = commands.add_parser("demo", help="replay the bundled example workflow, or grow one live (--live)",
                               epilog=epilog("demo"), formatter_class=HelpFormatter)
    demo.add_argument("--out", metavar="DIR", default="streamer-demo",
                      help="where to put the example workflow and its outputs (default: ./streamer-demo)")
    demo.add_argument("--live", action="store_true",
                      help="instead: write a workflow whose dagman.out grows for --duration seconds, and print "
                           "the commands to try on it (follow, tail, status --watch, serve)")
    demo.add_argument("--duration", type=float, default=60.0, metavar="SECONDS",
                      help="--live: how long the workflow runs (default: 60)")
    _common(demo)
    return parser


# ---------------------------------------------------------------- commands

async def cmd_load(args: argparse.Namespace) -> int:
    from streamer.run.pipeline import Run, RunOptions
    from streamer.run.summary import print_summary
    from streamer.run.wiring import build_endpoints
    from streamer.sources.provenance import open_source

    settings = collect_endpoints(args)
    if not settings.endpoints:
        raise ConfigError("no endpoint: give --dest URL (e.g. --dest file:///tmp/events.jsonl), --config or --conf")
    if any(name.startswith(("amqp://", "amqps://")) for name in args.files):
        from streamer.cli.collect import run_collector

        return await run_collector(args, settings)
    jobstate_logs = [name for name in args.files if is_jobstate_log(Path(name))]
    if jobstate_logs:
        if len(args.files) > 1:
            raise ConfigError(f"{jobstate_logs[0]}: a DAGMan jobstate.log is loaded on its own "
                              "(one streamer load per jobstate.log)")
        return await run_jobstate(args, Path(jobstate_logs[0]), follow=args.follow, command="load")
    for name in args.files:
        path = Path(name)
        if path.is_dir():
            raise ConfigError(f"{name}: is a directory, not an event file "
                              f"(for a submit dir use: streamer replay {name})")
        _check_input(path, args.follow, command="load")
    inputs = _distinct_inputs(args.files)
    source = open_source(inputs, follow=args.follow, checkpoint=args.checkpoint or settings.checkpoint,
                         strict=args.strict, report=report,
                         destinations=[spec.url for spec in settings.endpoints])
    options = RunOptions(on_error=settings.on_error, progress=None if not args.quiet else False, metrics=args.metrics)
    result = await Run(source, build_endpoints(settings.endpoints), options).run()
    if not args.quiet:
        print_summary(result, sys.stderr, bad_lines=source.stats.bad)
    if args.strict and source.stats.bad and result.exit_code == 0:
        return 1
    return result.exit_code


def _check_input(path: Path, follow: bool, *, command: str) -> None:
    """Usage error for an input that can never be read (a missing one only when not following), or that is no
    event file at all (a dagman.out, a Stampede DB: the message names what reads it)."""
    from streamer.sources.follow import FollowError, check_readable
    from streamer.sources.sniff import NotEventFile, check_event_file

    try:
        check_readable(path)
    except FileNotFoundError as exc:
        if not follow:
            raise ConfigError(str(exc)) from None
        return
    except FollowError as exc:
        raise ConfigError(str(exc)) from None
    try:
        check_event_file(path, command)
    except NotEventFile as exc:
        raise ConfigError(str(exc)) from None


def _distinct_inputs(names: list[str]) -> list[str]:
    """Each input file once: the same file given twice (or through a link) is read once, by device and inode."""
    seen: dict[tuple[int, int], str] = {}
    out = []
    for name in names:
        try:
            st = Path(name).stat()
        except OSError:  # not there yet (--follow waits for it)
            key = None
        else:
            key = (st.st_dev, st.st_ino)
        if key is not None and key in seen:
            report(f"{name}: the same file as {seen[key]}: read once")
            continue
        if key is not None:
            seen[key] = name
        out.append(name)
    return out


def _tail_start(path: Path) -> Any:
    """A FilePosition at the current end of `path` (line count included), or None."""
    from streamer.sources.follow import FilePosition

    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    lines = 0
    with open(path, "rb") as handle:
        remaining = st.st_size
        while remaining > 0:
            block = handle.read(min(remaining, 1 << 20))
            if not block:
                break
            lines += block.count(b"\n")
            remaining -= len(block)
    return FilePosition(str(path), st.st_dev, st.st_ino, st.st_size, lines)


async def cmd_tail(args: argparse.Namespace) -> int:
    from streamer.endpoints.terminal import TerminalEndpoint
    from streamer.run.pipeline import Run, RunOptions
    from streamer.run.wiring import unfiltered
    from streamer.util.urls import EndpointURL

    warn_unmatched(args.events)
    terminal = TerminalEndpoint(EndpointURL.parse("-"), {"format": args.format, "color": args.color,
                                                          "events": args.events,
                                                          "fields": "all" if args.verbose else "compact"})
    from streamer.sources.base import Source

    source: Source
    is_amqp = args.source.startswith(("amqp://", "amqps://"))
    if is_amqp:
        try:
            from streamer.sources.amqp.tail import AMQPSource
        except ImportError as exc:
            raise ConfigError(f"AMQP tail is not available: {exc}") from None
        from streamer.util.urls import EndpointURL, with_password

        source = AMQPSource(with_password(EndpointURL.parse(args.source)).raw, events=args.events, queue=args.queue)
    else:
        from streamer.sources.provenance import ProvenanceSource, end_position, open_source

        path = Path(args.source)
        _check_input(path, not args.no_follow, command="tail")
        files = open_source([path], follow=not args.no_follow, report=report)
        if not args.from_start and not args.no_follow:
            start = _tail_start(path)
            if start is not None and isinstance(files, ProvenanceSource):
                start = end_position(path, start.line)
            if start is not None:
                files.start_at(path, start)
        source = files
    # a tail runs until stopped: Ctrl-C ends it normally
    result = await Run(source, [unfiltered(terminal)], RunOptions(progress=False, live=is_amqp or source.follow)).run()
    return result.exit_code


async def cmd_monitor(args: argparse.Namespace, *, follow: bool) -> int:
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
        sys.stderr.write(f"streamer: no --dest: writing {mask(settings.endpoints[0].url)} and jobstate.log\n")
    db_written = any(s.url == source.default_db_url() for s in settings.endpoints)
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


async def cmd_demo(args: argparse.Namespace) -> int:
    if args.live:
        from streamer.cli.demolive import run_live_demo

        return await run_live_demo(Path(args.out), duration=args.duration, quiet=args.quiet)
    from streamer.cli.demo import run_demo

    return await run_demo(Path(args.out), quiet=args.quiet)


async def dispatch(args: argparse.Namespace) -> int:
    if args.command == "load":
        return await cmd_load(args)
    if args.command == "tail":
        return await cmd_tail(args)
    if args.command in ("replay", "follow"):
        return await cmd_monitor(args, follow=args.command == "follow")
    if args.command == "demo":
        return await cmd_demo(args)
    if args.command == "serve":
        from streamer.cli.serve import run_serve_command

        return await run_serve_command(args)
    if args.command == "status":
        from streamer.status.command import run_status

        return await run_status(args)
    if args.command == "topology":
        from streamer.cli.topology import run_topology

        return await run_topology(args)
    raise ConfigError(f"unknown command {args.command}")


def _dash_values(argv: list[str]) -> list[str]:
    """`--dest -?events=...`, `--timezone -08:00` as `--dest=...`: argparse takes a value starting with `-` for an
    option."""
    out: list[str] = []
    for item in argv:
        previous = out[-1] if out else ""
        if (previous in ("-d", "--dest") and item.startswith("-?")) or \
                (previous == "--timezone" and item[:1] == "-" and item[1:2].isdigit()):
            out[-1] = f"{previous}={item}" if previous.startswith("--") else f"{previous}{item}"
            continue
        out.append(item)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "monitord":
        from streamer.monitord.command import main as monitord_main

        return monitord_main(argv[1:])
    if argv and argv[0] == "install-monitord":
        from streamer.monitord.launcher import main as install_main

        return install_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(_dash_values(argv))
    if not args.command:
        parser.print_help()
        return Exit.USAGE
    setup_logging(getattr(args, "verbose", 0))
    try:
        return run(dispatch(args))
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except Exception as exc:
        return report_failure(exc, verbose=getattr(args, "verbose", 0))


def report_failure(exc: BaseException, *, verbose: int = 0) -> int:
    """A user's mistake or the world (a bad URL, a missing file, a server that said no): one line, exit 2.
    Anything else is a bug in streamer: said as one, exit 1, the traceback with -v (masked as logs are)."""
    expected = isinstance(exc, (ConfigError, FilterError, EndpointError, SourceError, OSError)) or (
        isinstance(exc, ValueError) and type(exc).__module__.startswith("streamer."))  # our own errors' messages
    if expected:
        sys.stderr.write(f"streamer: error: {mask(str(exc))}\n")
        return Exit.USAGE
    sys.stderr.write(f"streamer: internal error: {type(exc).__name__}: {mask(str(exc))}\n"
                     "streamer: this is a bug in streamer, not in your input: please report it")
    if verbose:
        import traceback

        sys.stderr.write(":\n" + mask("".join(traceback.format_exception(exc))))
    else:
        sys.stderr.write(" with the output of the same command run with -v\n")
    return Exit.FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
