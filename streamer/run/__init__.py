"""One run: a source, a bus and its endpoints (`pipeline`), and the metrics it exports."""
