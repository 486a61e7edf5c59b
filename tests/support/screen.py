"""A real terminal for tests of what a person sees: a tmux pane on a private tmux server.

The pane runs bash; tests type commands into it and read the screen with
`tmux capture-pane`, waiting for what the screen must show, never for a fixed time.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from tests.conftest import unavailable


class Terminal:
    """A tmux pane running bash, on a private tmux server."""

    def __init__(self, tmp_path: Path, width: int = 150, height: int = 40) -> None:
        tmux = shutil.which("tmux")
        if tmux is None:
            unavailable("tmux is not installed (scripts/test.sh installs it)")
        self.base = [str(tmux), "-S", str(tmp_path / "tmux.sock"), "-f", "/dev/null"]
        subprocess.run([*self.base, "new-session", "-d", "-s", "status", "-x", str(width), "-y", str(height),
                        "-e", "LANG=C.UTF-8", "-e", "PS1=$ ", "bash --norc --noprofile"], check=True, timeout=30)

    def tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, check=True, timeout=30).stdout

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "status", "-l", line)
        self.tmux("send-keys", "-t", "status", "Enter")

    def screen(self, joined: bool = False) -> str:
        """The pane's text; `joined`: lines the terminal wrapped are joined back (tmux -J)."""
        return self.tmux("capture-pane", "-p", *(["-J"] if joined else []), "-t", "status")

    def flag(self, name: str) -> str:
        return self.tmux("display-message", "-p", "-t", "status", f"#{{{name}}}").strip()

    def wait_for(self, test: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if test(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"the screen never showed {what}:\n{screen}")

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal(tmp_path: Path):
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.close()
