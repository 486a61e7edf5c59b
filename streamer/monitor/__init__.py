"""The workflow monitor: a Pegasus submit directory -> Stampede events, like pegasus-monitord.

Packages and modules: `parsers` (files -> values: `dagman` line classifier,
`braindump`, `staticbp`, `submitfile`, `kickstart` YAML/XML records,
`plaindag`, `jobstate` writer/reader), `engine` (one workflow's lines ->
events, one module per concern), `tracker` (all workflows of a run,
sub-workflow discovery, offsets), `runner` (thread or child process) and
`source` (`WorkflowSource`, the asyncio source with checkpoints).
"""

from .source import WorkflowSource

__all__ = ["WorkflowSource"]
