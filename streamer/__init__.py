"""streamer: Pegasus/DAGMan workflow events, typed and fanned out to many endpoints."""

__version__ = "0.1.0"
