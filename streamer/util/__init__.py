"""Low-level helpers that know nothing of streamer: atomic writes, input limits, the runtime
(loop, signals, logging), URL parsing and masking."""
