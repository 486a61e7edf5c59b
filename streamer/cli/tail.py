"""`streamer tail`: print events as they arrive, from an event file (like tail -F) or an AMQP exchange."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from streamer.cli.help import epilog
from streamer.cli.load import check_input
from streamer.cli.options import HelpFormatter, Once, common
from streamer.util.urls import is_amqp
from streamer.config.command import dest_url, report, warn_unmatched
from streamer.config.settings import ConfigError


def add_tail_command(commands: Any) -> None:
    tail = commands.add_parser("tail", help="print events as they arrive (event file or AMQP broker)",
                               description="Print events from an event file (like tail -F) or from an "
                                           "AMQP exchange, one readable line each. Chimbuko provenance "
                                           "records show function, rank, io step, runtime and anomaly score.",
                               epilog=epilog("tail"), formatter_class=HelpFormatter)
    tail.add_argument("source", metavar="FILE|AMQP-URL")
    tail.add_argument("--events", metavar="PATTERNS", default="*", action=Once,
                      help="only events matching these globs")
    tail.add_argument("--format", choices=("pretty", "bp", "json"), default="pretty")
    tail.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    tail.add_argument("--from-start", action="store_true", help="files: print what is already there first")
    tail.add_argument("--no-follow", action="store_true", help="files: print and exit at the end")
    tail.add_argument("--queue", metavar="NAME", help="AMQP: read this durable queue instead of a private one")
    common(tail)


async def run_tail(args: argparse.Namespace) -> int:
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
    amqp = is_amqp(args.source)
    if amqp:
        try:
            from streamer.sources.amqp.tail import AMQPSource
        except ImportError as exc:
            raise ConfigError(f"AMQP tail is not available: {exc}") from None
        from streamer.util.urls import with_password

        source = AMQPSource(with_password(dest_url(args.source)), events=args.events, queue=args.queue)
    else:
        from streamer.sources.provenance import ProvenanceSource, end_position, open_source

        path = Path(args.source)
        check_input(path, not args.no_follow, command="tail")
        files = open_source([path], follow=not args.no_follow, report=report)
        if not args.from_start and not args.no_follow:
            start = _tail_start(path)
            if start is not None and isinstance(files, ProvenanceSource):
                start = end_position(path, start.line)
            if start is not None:
                files.start_at(path, start)
        source = files
    # a tail runs until stopped: Ctrl-C ends it normally
    result = await Run(source, [unfiltered(terminal)], RunOptions(progress=False, live=amqp or source.follow)).run()
    return result.exit_code


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
