"""`streamer replay|follow|load` of a DAGMan jobstate.log (the plain-DAGMan source).

Kept out of the commands' modules (`load.py`, `replay.py`): each recognises a jobstate.log (by its name
or its first line) and hands it here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streamer.config.command import collect_endpoints, report
from streamer.config.settings import ConfigError
from streamer.config.statedir import destinations_of


def is_jobstate_log(path: Path) -> bool:
    """A DAGMan/monitord jobstate.log: by content when it exists, else by name."""
    from streamer.monitor.plain.dagmanlog import sniff

    if path.is_dir():
        return False
    if path.name.endswith(".dagman.out"):
        return False
    if path.is_file() and path.stat().st_size > 0:
        return sniff(path)
    return path.name.endswith("jobstate.log")


async def run_jobstate(args: argparse.Namespace, path: Path, *, follow: bool, command: str) -> int:
    """Replay or follow one jobstate.log into the endpoints of `args`."""
    from streamer.monitor.plain.jobstate import JobstateSource, default_state_path
    from streamer.run.pipeline import RunOptions
    from streamer.run.summary import print_summary
    from streamer.run.workflow import WorkflowRun

    if not follow and not path.exists():
        raise ConfigError(f"{path}: no such file")
    state = getattr(args, "state", None) or getattr(args, "checkpoint", None)
    if state is None and command in ("replay", "follow"):
        state = default_state_path(path)
    source = JobstateSource(path, follow=follow, state_path=state, strict=getattr(args, "strict", False),
                            until_finished=command == "follow" and not getattr(args, "keep_alive", False),
                            report=report, resume=command != "replay" or getattr(args, "resume", False))
    defaults_urls = [source.default_db_url()] if command in ("replay", "follow") else None
    if source.converter.from_braindump and defaults_urls and not (args.dest or args.config or args.conf):
        # its default database is the submit dir's, which `streamer replay DIR` fills from every log
        raise ConfigError(f"{path}: in a Pegasus submit dir (braindump): replay the directory "
                          f"(streamer {command} {path.parent}), or give --dest to read only this jobstate.log")
    settings = collect_endpoints(args, defaults=defaults_urls)
    if not settings.endpoints:
        raise ConfigError("no endpoint: give --dest URL (e.g. --dest file:///tmp/events.jsonl), --config or --conf")
    workflow = WorkflowRun(source, replay=command == "replay" and not getattr(args, "append", False))
    await workflow.decide(destinations_of(settings.endpoints))  # the state resumed from must be these endpoints'
    for note in source.notes:
        report(note)
    if command in ("replay", "follow") and not args.dest and not args.config and not args.conf and not args.quiet:
        sys.stderr.write(f"streamer: no --dest: writing {settings.endpoints[0].url.masked}\n")
    options = RunOptions(on_error=settings.on_error, progress=None if not args.quiet else False)
    result = await workflow.run(settings.endpoints, options)
    if not args.quiet:
        print_summary(result, sys.stderr, bad_lines=source.bad)
    if getattr(args, "strict", False) and source.bad and result.exit_code == 0:
        return 1
    return result.exit_code
