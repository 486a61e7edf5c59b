"""Subprocess of the kill -9 tests: load a synthetic stream into a database.

    python tests/support/dbload_child.py URL GOLDEN_DIR COPIES BATCH [CHECKPOINT_FILE]

Prints `acked N` after each acknowledged batch (the parent kills us at some
point). With a checkpoint file, the index of the last acknowledged batch is
written there *after* the acknowledgement, like a source's checkpoint: a kill
between the two re-sends a batch the database already committed. Without
one, every run re-sends the whole stream from the start.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: streamer and tests

from streamer.endpoints import create_endpoint  # noqa: E402
from streamer.util.urls import EndpointURL
from tests.support.dbstream import batches, synthetic  # noqa: E402


async def main() -> None:
    url, golden, copies, size = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    checkpoint = Path(sys.argv[5]) if len(sys.argv) > 5 else None
    start = int(checkpoint.read_text()) + 1 if checkpoint and checkpoint.exists() else 0
    chunks = batches(list(synthetic(golden, copies)), size)
    endpoint = create_endpoint(EndpointURL.parse(url))
    await endpoint.open()
    for index in range(start, len(chunks)):
        await endpoint.write(chunks[index])
        print(f"acked {index}", flush=True)
        if checkpoint:
            tmp = checkpoint.with_suffix(".tmp")
            tmp.write_text(str(index))
            os.replace(tmp, checkpoint)
    await endpoint.close()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
