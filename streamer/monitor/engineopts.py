"""`EngineOptions`: the few ways pegasus-monitord's command line changes what the engine does.

- `adjust` (`-a/--adjust`): seconds added to every DAGMan timestamp.
- `jobstate_name` (`-j/--job`): the jobstate.log written under another name (an absolute path:
  that one file, for the root workflow only).
- `output_dir` (`-o/--output-dir`): jobstate.log goes to `<run dir>/<output_dir>/<wf_uuid>-<name>`,
  where `pegasus-analyzer --monitord --output-dir` reads it.
- `store_stdout` (off with `--skip-stdout`): no `stdout.text`/`stderr.text` in `job_inst.main.end`
  and `job_inst.composite`, and a job without kickstart output has its `.out` file left unread.
- `keep_state` (`--keep-state`): a DAGMan restart keeps the finished jobs' state (monitord skips its
  `start_wf()` then).
- `line_delay` (`-S/--sim MS`): seconds the tracker sleeps after each dagman.out line (monitord's
  developer emulation of a slowly written log; the sleep is in the parsing thread or process).

The defaults are monitord's defaults; the dataclass pickles, so the child-process runner gets it too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from streamer.util import safenames

JOBSTATE_LOG = "jobstate.log"


@dataclass(frozen=True)
class EngineOptions:
    adjust: float = 0
    jobstate_name: str = JOBSTATE_LOG
    output_dir: str | None = None
    store_stdout: bool = True
    keep_state: bool = False
    line_delay: float = 0

    def jobstate_path(self, run_dir: str, wf_uuid: str | None) -> str:
        """Where the workflow in `run_dir` writes its jobstate.log (monitord's rule). The wf_uuid comes
        from the braindump: one that would leave the output directory raises `safenames.UnsafeName`."""
        if self.output_dir is None:
            return os.path.join(run_dir, self.jobstate_name)
        uuid = safenames.component(str(wf_uuid), "wf_uuid")
        directory = os.path.join(run_dir, self.output_dir)
        os.makedirs(directory, exist_ok=True)  # a sub-workflow's run dir has none yet
        return os.path.join(directory, f"{uuid}-{self.jobstate_name}")


DEFAULT = EngineOptions()
