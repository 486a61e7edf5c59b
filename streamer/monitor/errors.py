"""The monitor's own errors, kept out of the modules mypyc compiles (setup.py, `COMPILED`).

A class deriving from `RuntimeError` cannot be a native class of a compiled
module; here they stay ordinary classes, picklable across the parsing child's
pipe, and `except RuntimeError` still catches them.
"""

from __future__ import annotations


class WorkflowError(RuntimeError):
    """A workflow directory the monitor cannot follow (no braindump, no wf_uuid or dag)."""


class MonitorWorkerError(RuntimeError):
    """The child process that parses the workflow's logs died or could not start."""
