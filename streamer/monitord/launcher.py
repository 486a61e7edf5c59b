"""`streamer install-monitord DIR`: a `pegasus-monitord` in DIR that starts streamer.

pegasus-dagman starts the first `pegasus-monitord` it finds in
`$PEGASUS_HOME/bin`, then on `PATH` (and sets `PEGASUS_HOME` to its own
install), so DIR is normally `$PEGASUS_HOME/bin`. An existing monitord there is
kept as `pegasus-monitord.orig` (`--uninstall` puts it back).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

NAME = "pegasus-monitord"
BACKUP = "pegasus-monitord.orig"
MARK = "# written by `streamer install-monitord`"

DESCRIPTION = """\
Write a pegasus-monitord launcher into DIR so that pegasus-dagman starts
`streamer monitord` (with the same arguments) instead of Pegasus's monitord.
pegasus-dagman looks in $PEGASUS_HOME/bin first, then on PATH:

  streamer install-monitord "$(pegasus-config --bin)"     # i.e. $PEGASUS_HOME/bin
  streamer install-monitord --uninstall "$(pegasus-config --bin)"

An existing pegasus-monitord in DIR is kept as pegasus-monitord.orig.
"""


def launcher_text(python: str) -> str:
    return (f"#!/bin/sh\n{MARK}\n"
            "# pegasus-dagman runs `pegasus-monitord -N <dagman.out>`: hand every argument to streamer.\n"
            f"exec {shlex.quote(python)} -m streamer monitord \"$@\"\n")


def install(directory: Path, python: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / NAME
    if target.exists() and not is_ours(target):
        backup = directory / BACKUP
        if backup.exists():
            raise FileExistsError(f"{target} is not streamer's and {backup} exists already: move one of them away")
        os.rename(target, backup)
    tmp = target.with_name(NAME + ".tmp")
    tmp.write_text(launcher_text(python or sys.executable))
    tmp.chmod(0o755)
    os.replace(tmp, target)
    return target


def uninstall(directory: Path) -> str:
    target, backup = directory / NAME, directory / BACKUP
    if target.exists() and not is_ours(target):
        return f"{target} is not streamer's launcher; left alone"
    target.unlink(missing_ok=True)
    if backup.exists():
        os.rename(backup, target)
        return f"restored {target} from {backup.name}"
    return f"removed {target}"


def is_ours(path: Path) -> bool:
    try:
        return MARK in path.read_text(errors="replace")[:400]
    except OSError:
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="streamer install-monitord", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", metavar="DIR", help="where pegasus-dagman looks: $PEGASUS_HOME/bin")
    parser.add_argument("--uninstall", action="store_true", help="remove the launcher (restore the original)")
    parser.add_argument("--python", metavar="PATH", help="interpreter with streamer installed (default: this one)")
    args = parser.parse_args(argv)
    directory = Path(args.directory).expanduser()
    try:
        if args.uninstall:
            print(f"streamer: {uninstall(directory)}")
            return 0
        target = install(directory, args.python)
    except OSError as exc:
        sys.stderr.write(f"streamer install-monitord: error: {exc}\n")
        return 2
    print(f"streamer: wrote {target}: pegasus-dagman now starts `streamer monitord`")
    return 0
