"""`streamer`: the top parser (each command registers its own, in its module), dispatch, and what a failure prints."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from streamer import __version__
from streamer.cli.demo import add_demo_command, run_demo
from streamer.cli.load import add_load_command, run_load
from streamer.cli.options import HelpFormatter, Parser, common, endpoint_options
from streamer.cli.replay import add_replay_commands, run_replay
from streamer.cli.serve import add_serve_command, run_serve_command
from streamer.cli.status import add_status_command
from streamer.cli.tail import add_tail_command, run_tail
from streamer.cli.topology import add_topology_command, run_topology
from streamer.config.settings import ConfigError
from streamer.core.filters import FilterError
from streamer.endpoints import EndpointError
from streamer.endpoints.options import help_text as option_help
from streamer.sources.base import SourceError
from streamer.util import compiled
from streamer.util.exitcodes import Exit
from streamer.util.runtime import run, setup_logging
from streamer.util.urls import mask

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


def build_parser() -> argparse.ArgumentParser:
    main_epilog = EPILOG + "\n" + option_help() + "\n"  # every URL option, from the endpoints' declarations
    parser = Parser(prog="streamer", description=DESCRIPTION, epilog=main_epilog, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"streamer {__version__} ({compiled.describe()})")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    add_load_command(commands)
    add_tail_command(commands)
    add_replay_commands(commands)
    add_status_command(commands, HelpFormatter, common)
    add_topology_command(commands, HelpFormatter)
    add_serve_command(commands, HelpFormatter, common, endpoint_options)
    # drop-in for pegasus-monitord (streamer/monitord/): parsed by its own module, see `streamer monitord -h`
    commands.add_parser("monitord", add_help=False, help="run as pegasus-monitord (same options, properties, files)")
    commands.add_parser("install-monitord", add_help=False,
                        help="write a pegasus-monitord launcher into $PEGASUS_HOME/bin that starts streamer")
    add_demo_command(commands)
    return parser


async def dispatch(args: argparse.Namespace) -> int:
    match args.command:
        case "load":
            return await run_load(args)
        case "tail":
            return await run_tail(args)
        case "replay" | "follow":
            return await run_replay(args, follow=args.command == "follow")
        case "status":
            from streamer.status.command import run_status

            return await run_status(args)
        case "topology":
            return await run_topology(args)
        case "serve":
            return await run_serve_command(args)
        case "demo" if args.live:
            from streamer.cli.demolive import run_live_demo

            return await run_live_demo(Path(args.out), duration=args.duration, quiet=args.quiet)
        case "demo":
            return await run_demo(Path(args.out), quiet=args.quiet)
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
    log.debug("streamer %s: %s", __version__, compiled.describe())
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
