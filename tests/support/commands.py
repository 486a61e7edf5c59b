"""Running streamer as a user does: `python -m streamer ...` in a child process, and waiting for a condition.

One definition for every test module (they had four subprocess runners, five replay variants, three
wait loops). A traceback on stderr is a bug whatever the exit code, so `streamer` asserts there is none
unless a test says it expects one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "streamer", *args]


def streamer(*args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
             timeout: float = 120, check: bool = False, input: str | None = None,
             traceback_ok: bool = False) -> subprocess.CompletedProcess[str]:
    """`streamer ARGS` to the end; `check`: exit 0 asserted (stderr shown); `env` adds to this environment."""
    done = subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, input=input,
                          env={**os.environ, **env} if env is not None else None)
    if not traceback_ok:
        assert "Traceback" not in done.stderr, done.stderr
        assert "Traceback" not in done.stdout, done.stdout
    if check:
        assert done.returncode == 0, done.stderr
    return done


def start_streamer(*args: str, env: Mapping[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`streamer ARGS` started, stdout and stderr piped (the caller waits, signals or kills it)."""
    return subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env} if env is not None else None, **popen)


def replay(directory: Path, *dests: str, extra: tuple[str, ...] = (), timezone: str | None = "UTC",
           quiet: bool = True, check: bool = True, **run: Any) -> subprocess.CompletedProcess[str]:
    """`streamer replay DIRECTORY --dest D...` (DAGMan's times read in `timezone`; -q)."""
    args = ["replay", str(directory), *(x for dest in dests for x in ("--dest", dest))]
    if timezone is not None:
        args += ["--timezone", timezone]
    if quiet:
        args.append("-q")
    return streamer(*args, *extra, check=check, **run)


def wait_for(check: Callable[[], T], what: str = "the condition", timeout: float = 60,
             interval: float = 0.05) -> T:
    """Poll `check` until it returns something true, and return that; fail naming `what` after `timeout`."""
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < end, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(interval)
