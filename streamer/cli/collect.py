"""`streamer load amqp://…/QUEUE --dest …`: the collector command (see `amqpqueue.py`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streamer.config.command import dest_url
from streamer.config.settings import ConfigError
from streamer.config.statedir import destinations_of, user_state_dir
from streamer.endpoints import endpoint_class
from streamer.endpoints.options import declared
from streamer.util.urls import mask, with_password

WAIT_PARENTS = 30.0
"""Seconds a database endpoint of a collector waits for an event's workflow/job rows (`?wait_parents`)."""


async def run_collector(args: argparse.Namespace, settings: Any) -> int:
    from streamer.run.pipeline import Run, RunOptions
    from streamer.run.summary import print_summary
    from streamer.run.wiring import build_endpoints
    from streamer.sources.amqp.queue import QueueSource

    if len(args.files) > 1:
        raise ConfigError(f"{mask(args.files[0])}: a queue is collected on its own (one queue per streamer load)")
    if args.checkpoint or settings.checkpoint:
        raise ConfigError("--checkpoint does not apply to a queue: a message is acknowledged to the broker "
                          "once every endpoint has it, which is the collector's checkpoint")
    for spec in settings.endpoints:  # collectors sharing a queue: a job's events may come before its job.info
        url = spec.url
        if (any(o.name == "wait_parents" for o in declared(endpoint_class(url.scheme)))
                and "wait_parents" not in url.options and "wait_parents" not in spec.options):
            spec.options["wait_parents"] = WAIT_PARENTS
    source = QueueSource(with_password(dest_url(args.files[0])),
                         destinations=destinations_of(settings.endpoints), state_dir=user_state_dir())
    options = RunOptions(on_error=settings.on_error, progress=None if not args.quiet else False,
                         metrics=getattr(args, "metrics", None))
    result = await Run(source, build_endpoints(settings.endpoints), options).run()
    if not args.quiet:
        print_summary(result, sys.stderr, bad_lines=source.stats_bad)
    return result.exit_code
