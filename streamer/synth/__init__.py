"""Synthetic Pegasus 5 / DAGMan submit directories for tests and benchmarks.

We may not ship real submit directories, so this package writes realistic,
self-consistent ones: braindump.yml, the .dag, .sub files, static.bp, kickstart
records, and a dagman.out in HTCondor 10.x's format, for named scenarios.
"""

from streamer.synth.generate import generate
from streamer.synth.live import iter_dagman_chunks, split_chunks
from streamer.synth.spec import SCENARIOS

__all__ = ["SCENARIOS", "generate", "iter_dagman_chunks", "split_chunks"]
