"""The `streamer` command's entry point: puts the mypyc-compiled modules in use (when built, current and
allowed: streamer.util.compiled) before anything imports them, then runs the command line."""

from __future__ import annotations

from streamer.util import compiled


def main() -> int:
    compiled.activate()
    from streamer.cli.main import main as run

    return run()
