"""Exit codes of every streamer command, declared once.

The commands return these values, `streamer COMMAND --help` lists what each means for that command
(`help_block`), and `docs/reference/exit-codes.md` is generated from the same tables (`python -m streamer.docs`).
A signal N that cuts a replay short exits 128 + N, as a shell reports it (`signalled`).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    DAGMAN_GONE = 42
    PID_IN_USE = 43
    INTERRUPTED = 130
    TERMINATED = 143


NAMES: Final[dict[Exit, str]] = {
    Exit.OK: "success",
    Exit.FAILED: "a failure while running (an endpoint, the input, a broker), or an internal error: a bug in "
                 "streamer, said as one (`-v` shows the traceback)",
    Exit.USAGE: "bad usage or input, found before anything is delivered",
    Exit.DAGMAN_GONE: "streamer monitord: DAGMan died without writing its exit line (monitord's code)",
    Exit.PID_IN_USE: "streamer monitord: another monitor holds monitord.pid (monitord's code)",
    Exit.INTERRUPTED: "interrupted by SIGINT (Ctrl-C): 128 + 2",
    Exit.TERMINATED: "interrupted by SIGTERM: 128 + 15",
}
"""What each code means in general; `COMMANDS` says what it means for each command."""


def signalled(signum: int) -> int:
    """The exit code of a run cut short by signal `signum` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


_INTERRUPTED = "interrupted by Ctrl-C (143: SIGTERM) before the end of the input; 0 when following"

COMMANDS: Final[dict[str, tuple[tuple[Exit, str], ...]]] = {
    "load": (
        (Exit.OK, "every event delivered to every endpoint"),
        (Exit.FAILED, "an endpoint failed (also with --on-error isolate), or a malformed line under --strict"),
        (Exit.USAGE, "bad usage or input: unknown option, bad URL or filter, missing or unreadable file"),
        (Exit.INTERRUPTED, _INTERRUPTED),
    ),
    "collect": (
        (Exit.OK, "ended by SIGINT/SIGTERM, or by ?idle= once the queue was quiet"),
        (Exit.FAILED, "an endpoint failed; the broker refused the login, the queue is missing (without "
                      "declare=true) or the broker was unreachable at start"),
        (Exit.USAGE, "bad usage: an unknown URL option, --checkpoint (the acknowledgements are the checkpoint)"),
    ),
    "replay": (
        (Exit.OK, "the whole workflow log was read and delivered (whatever the workflow's own status)"),
        (Exit.FAILED, "an endpoint failed, or the log could not be read to the end"),
        (Exit.USAGE, "bad usage: no such submit dir, unknown time zone, bad URL or filter"),
        (Exit.INTERRUPTED, "interrupted by Ctrl-C (143: SIGTERM) during a replay; 0 when following"),
    ),
    "tail": (
        (Exit.OK, "the end of the file (--no-follow), Ctrl-C, or the reader of stdout went away"),
        (Exit.FAILED, "the broker connection failed while tailing"),
        (Exit.USAGE, "bad usage: missing file, bad AMQP URL or filter, refused login or vhost"),
    ),
    "status": (
        (Exit.OK, "the table was printed; also after Ctrl-C in --watch"),
        (Exit.USAGE, "a missing path, a directory that is no submit directory, an unreachable broker"),
    ),
    "serve": (
        (Exit.OK, "stopped by SIGINT/SIGTERM after every workflow let go at its checkpoint"),
        (Exit.USAGE, "bad usage: an unknown [serve] key, a missing root, nothing to serve"),
    ),
    "monitord": (
        (Exit.OK, "the workflow ended (whatever DAGMan's status)"),
        (Exit.FAILED, "stopped by a signal, an endpoint failed, or bad input (monitord's code for SIGINT)"),
        (Exit.DAGMAN_GONE, "DAGMan died without writing its exit line"),
        (Exit.PID_IN_USE, "another monitor holds monitord.pid"),
    ),
    "install-monitord": (
        (Exit.OK, "the launcher was written (or removed with --uninstall)"),
        (Exit.USAGE, "the launcher could not be written or removed (the message says why)"),
    ),
    "demo": (
        (Exit.OK, "the demo ran"),
        (Exit.FAILED, "it failed (the message says why)"),
    ),
}
"""Command -> (code, what it means there). `follow` shares `replay`'s codes."""


def codes_of(command: str) -> tuple[tuple[Exit, str], ...]:
    return COMMANDS["replay" if command == "follow" else command]


def help_block(command: str) -> str:
    """The `exit codes:` section of a command's --help."""
    return "exit codes:\n" + "".join(f"  {int(code):<4} {text}\n" for code, text in codes_of(command))
