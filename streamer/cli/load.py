"""`streamer load`: publish the events of .bp / .jsonl files (or Chimbuko provenance exports, one DAGMan
jobstate.log, one RabbitMQ queue) to endpoints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from streamer.cli.help import epilog
from streamer.cli.jobstate import is_jobstate_log, run_jobstate
from streamer.cli.options import HelpFormatter, common, endpoint_options
from streamer.util.urls import is_amqp
from streamer.config.command import collect_endpoints, report
from streamer.config.settings import ConfigError


def add_load_command(commands: Any) -> None:
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
    endpoint_options(load)
    load.add_argument("-f", "--follow", action="store_true",
                      help="keep reading as the files grow (rotation, truncation, late creation handled)")
    load.add_argument("--checkpoint", metavar="PATH",
                      help="resume from / save the acknowledged position here, with the length of every "
                           "file endpoint (no loss; files cut back on resume, so each event is in them once)")
    load.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    common(load)


async def run_load(args: argparse.Namespace) -> int:
    from streamer.run.pipeline import Run, RunOptions
    from streamer.run.summary import print_summary
    from streamer.run.wiring import build_endpoints
    from streamer.sources.provenance import open_source

    settings = collect_endpoints(args)
    if not settings.endpoints:
        raise ConfigError("no endpoint: give --dest URL (e.g. --dest file:///tmp/events.jsonl), --config or --conf")
    if any(is_amqp(name) for name in args.files):
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
        check_input(path, args.follow, command="load")
    inputs = _distinct_inputs(args.files)
    source = open_source(inputs, follow=args.follow, checkpoint=args.checkpoint or settings.checkpoint,
                         strict=args.strict, report=report,
                         destinations=[spec.url.raw for spec in settings.endpoints])
    options = RunOptions(on_error=settings.on_error, progress=None if not args.quiet else False, metrics=args.metrics)
    result = await Run(source, build_endpoints(settings.endpoints), options).run()
    if not args.quiet:
        print_summary(result, sys.stderr, bad_lines=source.stats.bad)
    if args.strict and source.stats.bad and result.exit_code == 0:
        return 1
    return result.exit_code


def check_input(path: Path, follow: bool, *, command: str) -> None:
    """Usage error for an input that can never be read (a missing one only when not following), or that is no
    event file at all (a dagman.out, a Stampede DB: the message names what reads it); `load` and `tail`."""
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
