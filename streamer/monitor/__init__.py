"""The workflow monitor: a Pegasus submit directory -> Stampede events, like pegasus-monitord.

Packages and modules: `parsers` (files -> values: `dagman` line classifier,
`braindump`, `staticbp`, `submitfile`, `kickstart` YAML/XML records,
`plaindag`, `jobstate` writer/reader), `engine` (one workflow's lines ->
events, one module per concern), `tracker` (all workflows of a run,
sub-workflow discovery, offsets), `runner` (thread or child process) and
`source` (`WorkflowSource`, the asyncio source with checkpoints).

`WorkflowSource` is loaded on first use: the parsing child process (`runner`) imports
this package, and needs neither the source nor asyncio's bus side.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WorkflowSource"]


def __getattr__(name: str) -> Any:
    if name == "WorkflowSource":
        from streamer.monitor.source import WorkflowSource

        return WorkflowSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
