"""`streamer serve`: the command-line part (options, help); the work is in `supervisor.py`."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Callable

from streamer.util.exitcodes import help_block

EXAMPLES = """\
examples:
  streamer serve --watch /home/pegasus/runs --dest 'amqp://streamer:PASS@broker/pegasus/workflows'
  streamer serve --watch /scratch/runs --workflow-dest sqlite --workflow-dest 'file://{submit_dir}/events.jsonl'
  streamer serve --config /etc/streamer/streamer.toml      # [serve] table + shared [[endpoint]]s
  kill -HUP $(pidof -s streamer)                           # re-read the configuration, nothing lost

""" + help_block("serve")


def add_serve_command(commands: Any, formatter: type, common: Callable[[Any], None],
                      endpoint_options: Callable[[Any], None]) -> None:
    cmd = commands.add_parser(
        "serve", help="follow every workflow of a submit host (one process, resumes after restarts)",
        description="Watch roots (inotify) and the master workflow DB for Pegasus workflows and follow each "
                    "until DAGMan exits, sub-workflows included, in one process: per-workflow endpoints "
                    "(by default its SQLite Stampede DB and jobstate.log, as monitord) plus the shared "
                    "--dest endpoints. Every followed workflow resumes from its checkpoint after a restart "
                    "or crash; SIGHUP re-reads the configuration.",
        epilog=EXAMPLES, formatter_class=formatter)
    cmd.add_argument("--watch", action="append", default=[], metavar="DIR",
                     help="a root to search for new workflows (repeatable)")
    endpoint_options(cmd)
    cmd.add_argument("--workflow-dest", action="append", default=[], metavar="TEMPLATE",
                     help="a per-workflow endpoint (repeatable): 'sqlite' (monitord's DB next to the "
                          "workflow, the default) or a URL with {submit_dir}, {dag}, {wf_uuid}")
    cmd.add_argument("--no-workflow-dest", action="store_true", help="no per-workflow endpoint (shared ones only)")
    cmd.add_argument("--master-db", metavar="URL",
                     help="also follow workflows registered in this master workflow DB (sqlite:// or postgresql://)")
    cmd.add_argument("--master-poll", type=float, metavar="SECONDS", help="master DB poll interval (default 5)")
    cmd.add_argument("--state-dir", metavar="DIR",
                     help="the list of followed workflows and the lock (default $STREAMER_STATE_DIR/serve)")
    cmd.add_argument("--no-jobstate", action="store_true", help="do not write jobstate.log")
    cmd.add_argument("--no-recursive", action="store_true", help="do not follow sub-workflows")
    cmd.add_argument("--timezone", metavar="TZ",
                     help="zone of DAGMan's zone-less times: an IANA name, UTC or an offset (-08:00); "
                          "default: each workflow's braindump.yml offset (as replay and follow)")
    cmd.add_argument("--parser", choices=("thread", "process", "auto"),
                     help="where each workflow's parsing runs (default: worker threads of this process)")
    common(cmd)


async def run_serve_command(args: argparse.Namespace, collect_endpoints: Callable[..., Any]) -> int:
    from streamer.serve.config import load_serve_config
    from streamer.serve.supervisor import describe, run_serve

    config = load_serve_config(args, collect_endpoints)
    if not args.quiet and not args.verbose:  # which workflow it starts and finishes following: said by default
        logging.getLogger("streamer.serve").setLevel(logging.INFO)
    if not args.quiet:
        for line in describe(config):
            sys.stderr.write(f"streamer serve: {line}\n")
    return await run_serve(config, reload=lambda: load_serve_config(args, collect_endpoints))
