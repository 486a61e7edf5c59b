"""The `streamer status` sub-command's arguments and help (registered by `main.py`)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from streamer.util.exitcodes import help_block

DESCRIPTION = """\
Show the progress of workflows: pegasus-status's numbers without condor_q.

SOURCE is one of
  a submit directory (or its *.dagman.out)  the DAGMan progress tables of every
      *.dag.dagman.out under it, read as pegasus-status reads them: the same
      UNREADY READY PRE QUEUED POST SUCCESS FAILURE %DONE, state and DAG name,
      for the root DAG and each sub-workflow
  an event file (.bp / .jsonl)               the same table computed from the
      Stampede events (job instance states), per workflow (xwf.id, label,
      submit host and directory)
  amqp://user:pass@host:5672/vhost/exchange  the same from events published to
      RabbitMQ, e.g. by `streamer follow` on another host

Without --watch the status is printed once (an AMQP stream is read from its
first event until it has been quiet for --idle seconds). --watch shows a live view until the
workflows end or Ctrl-C: a table updated in place with a progress bar per
workflow, sub-workflows as a tree, held jobs with their hold reasons and the
last failures (job, exit code, host, first line of stderr). When stdout is not
a terminal, --watch prints a line whenever the numbers change instead.
"""

EPILOG = """\
examples:
  streamer status run0001                       # like pegasus-status -Q run0001
  streamer status run0001 --long                # one row per DAG and per job
  streamer status run0001 --json                # pegasus-status --jsonrv's document
  streamer status run0001 --watch               # live, until DAGMan exits
  streamer status /var/log/wf/events.jsonl --watch
  streamer status 'amqp://viewer:PASS@broker/pegasus/workflows' --watch
  streamer status 'amqp://viewer:PASS@broker/pegasus/workflows' --json --idle 10

--json prints {"totals": {...}, "dags": {"root": {...}, "<sub dag>": {...}}} with
the keys unready, ready, pre, queued, post, succeeded, failed, percent_done,
total and, per DAG, dagname and state (Running, Success, Failure); from events
it adds "workflows": per xwf.id its label, submit host and directory, parent
and counts.

""" + help_block("status")


def add_status_command(commands: Any, formatter: type[argparse.HelpFormatter],
                       common: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    cmd = commands.add_parser("status", help="progress of workflows (pegasus-status without condor_q), live with "
                                             "--watch", description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=formatter)
    cmd.add_argument("source", metavar="SUBMIT_DIR|EVENT_FILE|AMQP_URL")
    cmd.add_argument("-w", "--watch", action="store_true",
                     help="live view until the workflows end or Ctrl-C (plain lines when not a terminal)")
    cmd.add_argument("-j", "--json", action="store_true", help="print pegasus-status's JSON document")
    cmd.add_argument("-l", "--long", action="store_true",
                     help="one row per DAG and per job (job, state, retries, site, host, duration)")
    cmd.add_argument("--events", metavar="PATTERNS", default="*",
                     help="event sources: only events matching these globs count (default: all)")
    cmd.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                     help="--watch: seconds between two refreshes (default: 1)")
    cmd.add_argument("--idle", type=float, default=3.0, metavar="SECONDS",
                     help="AMQP and event files: the stream counts as over after this long without an event, "
                          "once its workflows ended (default: 3)")
    cmd.add_argument("--queue", metavar="NAME", help="AMQP: read this existing queue instead of a private one")
    cmd.add_argument("--timezone", metavar="TZ",
                     help="submit dirs: zone of DAGMan's zone-less times in job details (default: the offset "
                          "braindump.yml records, as replay and follow; times are shown in the local zone, TZ)")
    common(cmd)
    return cmd
