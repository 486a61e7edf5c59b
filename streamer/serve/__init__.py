"""`streamer serve`: one process for every workflow of a submit host.

Discovery (inotify on the watched roots, the master workflow DB) finds root
workflows; the supervisor follows each with its own `WorkflowSource`, bus and
per-workflow endpoints (its SQLite DB, jobstate.log, ...) plus the shared ones
(one AMQP exchange, one central PostgreSQL), resumes them after a restart or
crash from their checkpoints, and lets each go when its DAGMan exits.
"""

from streamer.serve.config import ServeConfig, load_serve_config
from streamer.serve.state import ServeState

__all__ = ["ServeConfig", "ServeState", "load_serve_config"]
