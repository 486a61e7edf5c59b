"""pegasus-monitord 5.x's command line, as `streamer monitord` accepts it.

Every option of monitord is accepted. Those that have a meaning in streamer
keep monitord's; the others are accepted with one log line saying so. An
unknown option or a bad value is logged and ignored rather than being a usage
error: pegasus-dagman starts the monitor unattended, and a monitor that dies at
start leaves a running workflow unmonitored.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from typing import NoReturn

from streamer.util.exitcodes import help_block

log = logging.getLogger("streamer.monitord")

ENCODINGS = ("bp", "json", "bson")

USAGE = "streamer monitord [OPTIONS] WORKFLOW.dag.dagman.out"

DESCRIPTION = """\
A drop-in replacement for pegasus-monitord: same options, same properties,
same files. pegasus-dagman starts it as `pegasus-monitord -N <dagman.out>`
(install the launcher with `streamer install-monitord $PEGASUS_HOME/bin`).

It follows the workflow's dagman.out (and its sub-workflows') until DAGMan
exits, writes jobstate.log, monitord.started/.done/.pid, publishes the
Stampede events to the endpoints the properties name (default: the SQLite
<dag>.stampede.db in the submit dir), runs the notify file's notification
scripts, and registers the workflow in the master (dashboard) database.
"""

EPILOG = """\
properties (first readable of --conf, the braindump's properties file,
~/.pegasusrc, ~/.pegasus/pegasus.conf; -Dkey=value before the options override):
  pegasus.catalog.workflow.url / pegasus.monitord.output   the Stampede DB (or -d)
  pegasus.catalog.workflow.<name>.url  (+ .events)           more endpoints
  pegasus.monitord.encoding  bp|json|bson                     file endpoints' encoding
  pegasus.monitord.stdout.disable.parsing  true               as --skip-stdout
  pegasus.monitord.events  false                              as --no-events
  pegasus.monitord.notifications[.max|.timeout]               as the options below
  pegasus.catalog.master.url / pegasus.dashboard.output       the master (dashboard) DB
  pegasus.catalog[.workflow[.<name>]|.*].timeout              endpoint wait (s)
  pegasus.monitord.arguments  "--opt ..."                     more command-line options
  pegasus.monitord.timezone  America/Los_Angeles|-08:00|UTC  zone of DAGMan's times (streamer's own;
                                      default: the offset braindump.yml records, as streamer replay)
${name} in a value: an earlier property or -D, user.home & co, the environment variable, else empty.

signals: SIGINT/SIGTERM finish reading what DAGMan wrote, deliver it, save the
resume state and exit 1 (monitord's code for SIGINT); repeated signals do not
cut that short. SIGUSR1/SIGUSR2 raise/lower the log level, SIGHUP and SIGABRT
are logged and ignored.

""" + help_block("monitord").replace("exit codes:", "exit codes (monitord's):") + """

examples:
  streamer monitord -N run0001/diamond-0.dag.dagman.out        # as pegasus-dagman runs it
  streamer monitord -r diamond-0.dag.dagman.out                # replay: reload the DB, no notifications
  streamer monitord -r --no-events --output-dir /tmp/x wf.dag.dagman.out   # as pegasus-analyzer --monitord
"""

FAST_START = ("--fast-start: nothing to change; streamer catches up with the logs before it waits for more, "
              "which is monitord's default fast-start mode (in monitord 5.1.3 the option cannot change it either)")


@dataclass
class Options:
    dagman_out: str | None = None
    condor_daemon: bool = False
    replay: bool = False
    dest: str | None = None
    encoding: str | None = None
    conf: str | None = None
    jsd: str | None = None
    output_dir: str | None = None
    recursive: bool = True
    no_events: bool = False
    notifications: bool = True
    notifications_max: int | None = None
    notifications_timeout: int | None = None
    force: bool = False
    verbose: int = 0
    adjust: int = 0
    skip_stdout: bool = False
    keep_state: bool = False
    db_stats: bool = False
    millisleep: int | None = None
    ignored: list[str] = field(default_factory=list)
    """One message per option accepted without a meaning in streamer (or with a bad value)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # never exit on a usage problem: record it
        raise _Problem(message)


class _Problem(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="streamer monitord", usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter, add_help=True)
    parser.add_argument("dagman_out", nargs="?", metavar="DAGMAN_OUT",
                        help="DAGMan's log of the workflow (*.dag.dagman.out)")
    parser.add_argument("-N", "--condor-daemon", action="store_true",
                        help="started by pegasus-dagman: follow until DAGMan exits, become a process group leader")
    parser.add_argument("-r", "--replay", action="store_true",
                        help="read the logs to the end and exit; the databases are reloaded; no notifications, "
                             "no DAGMan pid check; monitord.log is rotated")
    group = parser.add_argument_group("output")
    group.add_argument("-d", "--dest", metavar="URL",
                       help="the Stampede endpoint instead of the properties' (file path, file://, sqlite://, "
                            "postgresql://, amqp://, or any streamer URL)")
    group.add_argument("-e", "--encoding", metavar="FORMAT", help="bp, json or bson, for file endpoints")
    group.add_argument("--conf", metavar="PROPERTIES", help="the properties file (overrides all others)")
    group.add_argument("-j", "--job", dest="jsd", metavar="FILE",
                       help="jobstate.log's name in each workflow dir (an absolute path: that file, and no "
                            "sub-workflows)")
    group.add_argument("-o", "--output-dir", metavar="DIR",
                       help="where monitord's own files go (<wf_uuid>-jobstate.log, notification log, "
                            "streamer's resume state)")
    group.add_argument("--no-recursive", action="store_true", help="do not follow sub-workflows")
    group.add_argument("--no-database", "--nodatabase", "--no-events", dest="no_events", action="store_true",
                       help="no Stampede events at all (jobstate.log and notifications only)")
    notify = parser.add_argument_group("notifications")
    notify.add_argument("--no-notifications", "--no-notification", dest="no_notify", action="store_true",
                        help="run no notification scripts")
    notify.add_argument("--notifications-max", metavar="N",
                        help="notification scripts running at once (default 10; 0 disables notifications)")
    notify.add_argument("--notifications-timeout", metavar="SECONDS",
                        help="terminate (then kill) a script running longer (default 0: no limit)")
    other = parser.add_argument_group("process")
    other.add_argument("-f", "--force", action="store_true", help="run even if monitord.pid names a live monitor")
    other.add_argument("-v", "--verbose", action="count", default=0, help="more log lines (repeatable)")
    other.add_argument("-a", "--adjust", dest="adjust", metavar="SECONDS",
                       help="add SECONDS (may be negative) to every DAGMan timestamp (time zone differences)")
    other.add_argument("--db-stats", action="store_true",
                       help="log every endpoint's statistics at the end (at INFO, whatever the log level)")
    other.add_argument("--keep-state", action="store_true",
                       help="keep finished jobs' state across DAGMan restarts (monitord's development option)")
    other.add_argument("--skip-stdout", action="store_true",
                       help="leave jobs' stdout/stderr text out of the events (and do not read .out files of "
                            "jobs without kickstart)")
    other.add_argument("--fast-start", action="store_true", help="accepted; catching up first is the default")
    other.add_argument("-S", "--sim", dest="millisleep", metavar="MS",
                       help="developer: sleep MS milliseconds after each dagman.out line (a slow log)")
    return parser


def _integer(text: str | None, name: str, problems: list[str], *, negative: bool = False) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        problems.append(f"{name}: not an integer: {text!r}; ignored")
        return None
    if value < 0 and not negative:
        problems.append(f"{name} must be >= 0, not {value}; ignored")
        return None
    return value


def parse(argv: list[str]) -> Options:
    """Options from `argv`; problems become `Options.ignored` messages, never an exit."""
    parser = build_parser()
    problems: list[str] = []
    try:
        ns, unknown = parser.parse_known_args(argv)
    except _Problem as exc:
        # e.g. an option missing its value at the very end: drop the last word and retry once
        problems.append(f"command line: {exc}; ignored")
        ns, unknown = parser.parse_known_args([a for a in argv if a != argv[-1]]) if argv else (
            parser.parse_known_args([]))
    for word in unknown:
        if word.startswith("-"):
            problems.append(f"unknown option {word}: not a pegasus-monitord option; ignored")
        elif ns.dagman_out is None:
            ns.dagman_out = word
        else:
            problems.append(f"extra argument {word!r}: only one dagman.out is monitored; ignored")
    opts = Options(
        dagman_out=ns.dagman_out, condor_daemon=ns.condor_daemon, replay=ns.replay, dest=ns.dest,
        encoding=ns.encoding, conf=ns.conf, jsd=ns.jsd, output_dir=ns.output_dir,
        recursive=not ns.no_recursive, no_events=ns.no_events, notifications=not ns.no_notify,
        force=ns.force, verbose=ns.verbose, skip_stdout=ns.skip_stdout, keep_state=ns.keep_state,
        db_stats=ns.db_stats,
    )
    adjust = _integer(ns.adjust, "-a/--adjust", problems, negative=True)
    opts.adjust = adjust or 0
    opts.millisleep = _integer(ns.millisleep, "-S/--sim", problems)
    opts.notifications_max = _integer(ns.notifications_max, "--notifications-max", problems)
    opts.notifications_timeout = _integer(ns.notifications_timeout, "--notifications-timeout", problems)
    if opts.encoding is not None and opts.encoding.lower() not in ENCODINGS:
        problems.append(f"-e/--encoding {opts.encoding!r}: not bp, json or bson; using the default")
        opts.encoding = None
    if ns.fast_start:
        problems.append(FAST_START)
    opts.ignored = problems
    return opts
