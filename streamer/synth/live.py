"""Pieces of a dagman.out for follow-mode tests: the log as DAGMan would grow it.

DAGMan flushes whole lines, but a reader can still observe a partial line (the
write is not atomic with respect to our polls), so chunks deliberately cut lines.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path


def split_chunks(text: str, *, pieces: int = 20, seed: int = 0) -> list[str]:
    """Split `text` into `pieces` non-empty chunks at seeded offsets, most of them mid-line."""
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), pieces - 1)) if pieces > 1 else []
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def iter_dagman_chunks(out_dir: str | Path, *, pieces: int = 20, seed: int = 0,
                       truncate: bool = True) -> Iterator[str]:
    """Rewind the generated dagman.out and yield chunks; the caller appends each, then pauses.

    With `truncate` the file is emptied first, so a follower starts on an empty log
    and sees it grow exactly as the yielded chunks are appended by the test.
    """
    out = Path(out_dir)
    log = next(out.glob("*.dag.dagman.out"))
    text = log.read_text()
    if truncate:
        log.write_text("")
    yield from split_chunks(text, pieces=pieces, seed=seed)
