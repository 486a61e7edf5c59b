"""The AMQP headers that name a message's workflow and root workflow (`wf_uuid`, `root_wf_uuid`).

monitord's messages say which workflow they belong to only inside their body; these headers say it outside, so
RabbitMQ itself can split the stream by workflow tree (a consistent-hash exchange on `root_wf_uuid`,
`amqp/topology.py`) and a collector owns whole workflows. Every Stampede event carries `root.xwf.id` but
`stampede.xwf.map.subwf_job`, which takes its workflow's root as seen in earlier events (and names the root of the
sub-workflow it maps before that sub-workflow's own plan event does).
"""

from __future__ import annotations

from streamer.endpoints.amqp.channel import headers_table
from streamer.events import Event

CACHE = 100_000
"""Encoded tables kept (one per workflow); past it the cache starts again."""


class WorkflowHeaders:
    """The encoded header table of each event, from the workflow -> root map the published events build."""

    def __init__(self) -> None:
        self.roots: dict[str, str] = {}
        """Workflow uuid -> its root's uuid."""
        self._tables: dict[str, bytes] = {}

    def of(self, event: Event) -> bytes:
        """The encoded `wf_uuid`/`root_wf_uuid` table of `event` (b"" for an event of no workflow)."""
        fields = event.fields
        uuid = fields.get("xwf.id")
        if not isinstance(uuid, str):
            return b""
        root = fields.get("root.xwf.id")
        if isinstance(root, str):
            if self.roots.get(uuid) != root:
                self.roots[uuid] = root
        else:
            root = self.roots.get(uuid, uuid)
        if event.name == "stampede.xwf.map.subwf_job":
            sub = fields.get("subwf.id")
            if isinstance(sub, str):  # a sub-workflow belongs to its parent's root before its own plan says so
                self.roots.setdefault(sub, root)
        key = f"{uuid} {root}"
        table = self._tables.get(key)
        if table is None:
            if len(self._tables) > CACHE:
                self._tables.clear()
            table = self._tables[key] = headers_table(uuid, root)
        return table
