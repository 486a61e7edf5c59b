"""The workflow monitor: a Pegasus submit directory -> Stampede events, like pegasus-monitord.

Modules: `braindump`, `staticbp`, `dagman` (line classifier), `submitfile`,
`kickstart` (YAML/XML records), `jobstate` (jobstate.log writer/reader),
`job` + `workflow` (the per-workflow state machine), `tracker` (all
workflows of a run, sub-workflow discovery, offsets) and `source`
(`WorkflowSource`, the asyncio source with checkpoints).
"""

from .source import WorkflowSource

__all__ = ["WorkflowSource"]
