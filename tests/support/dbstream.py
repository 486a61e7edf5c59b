"""Large event streams for database tests and `bench/bench_db.py`.

The golden monitord streams repeated with fresh workflow uuids (derived
deterministically from the copy number, so two runs produce the same
events and the same stable ids): as many workflows as copies, the shape of
real Pegasus runs.
"""

from __future__ import annotations

import uuid as uuidlib
from pathlib import Path
from typing import Iterator

from streamer.events import Event, bp

NAMES = ("process_wf_success", "hierarchical_wf_success", "process_wf_failure", "sample_wf_held")
UUID_FIELDS = ("xwf.id", "root.xwf.id", "parent.xwf.id", "subwf.id")


def golden_events(golden: Path, name: str) -> list[Event]:
    with open(golden / f"{name}.bp", encoding="utf-8") as fh:
        return [bp.parse_line(line) for line in fh if line.strip()]


def _fresh(old: str, copy: int) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"streamer-db-test/{copy}/{old}"))


def synthetic(golden: Path, copies: int) -> Iterator[Event]:
    """The four golden streams, `copies` times, each copy with its own workflow uuids."""
    streams = [golden_events(golden, name) for name in NAMES]
    for copy in range(copies):
        mapping: dict[str, str] = {}
        for events in streams:
            for event in events:
                fields = dict(event.fields)
                for key in UUID_FIELDS:
                    old = fields.get(key)
                    if isinstance(old, str):
                        new = mapping.get(old)
                        if new is None:
                            new = mapping[old] = _fresh(old, copy)
                        fields[key] = new
                yield Event(event.name, fields)


def batches(events: list[Event], size: int) -> list[list[Event]]:
    return [events[i:i + size] for i in range(0, len(events), size)]
