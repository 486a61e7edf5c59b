"""What every command's parser is made of: the help layout, the parser that masks passwords in its errors, and
the option groups commands share (`-v`/`-q`, the endpoints)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from streamer.util.urls import mask


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=34)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors echo the arguments with passwords masked (`invalid choice:
    'amqp://u:***@h/x'` for a URL given to the wrong option); the subcommands' parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {mask(message)}\n")


class Once(argparse.Action):
    """An option that may be given once: a second `--events` would silently replace the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) not in (None, self.default):
            parser.error(f"{option_string} given twice: give one comma-separated list "
                         f"(--events 'stampede.xwf.*,stampede.inv.end')")
        setattr(namespace, self.dest, values)


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more messages (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line and no summary")


def endpoint_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("endpoints")
    group.add_argument("-d", "--dest", action="append", default=[], metavar="URL",
                       help="endpoint URL (repeatable); see the list below")
    group.add_argument("--events", metavar="PATTERNS", action=Once,
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
