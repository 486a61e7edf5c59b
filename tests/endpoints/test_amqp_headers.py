"""Every published message names its workflow and its root workflow in AMQP headers (issue 24 item 3), so
RabbitMQ itself (a consistent-hash exchange on `root_wf_uuid`) can split the stream by workflow; the routing
key and the body stay monitord's."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pamqp import frame as pframe
from pamqp.commands import Basic
from pamqp.header import ContentHeader

from streamer.endpoints import create_endpoint
from streamer.endpoints.amqp.channel import content_header_frame, headers_table
from streamer.events import Event, bp
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import Capture, unique


def test_content_header_with_headers_is_what_pamqp_encodes() -> None:
    headers = headers_table("wf-1", "root-9")
    ours = content_header_frame(3, 1234, "abc123", 1700000000, headers)
    props = Basic.Properties(content_type="application/json", delivery_mode=2, message_id="abc123",
                             timestamp=datetime.fromtimestamp(1700000000, timezone.utc),
                             headers={"wf_uuid": "wf-1", "root_wf_uuid": "root-9"})
    assert ours == pframe.marshal(ContentHeader(0, 1234, props), 3)


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_every_message_names_its_workflow_and_root(amqp_url: str, golden: Path, tmp_path: Path) -> None:
    lines = (golden / "hierarchical_wf_success.bp").read_text().splitlines()
    events: list[Event] = [bp.parse_line(line) for line in lines if line.strip()]
    roots = {e.fields["xwf.id"]: e.fields["root.xwf.id"] for e in events if e.name == "stampede.wf.plan"}
    assert len(set(roots)) > 1 and len(set(roots.values())) == 1  # a root and its sub-workflows
    exchange = unique("streamer-test-headers")
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        endpoint = create_endpoint(EndpointURL.parse(f"{amqp_url}/{exchange}?events=*&spool={tmp_path / 'spool'}"))
        await endpoint.open()
        for start in range(0, len(events), 50):
            await endpoint.write(events[start:start + 50])
        await endpoint.close()
        messages = await capture.wait_for(len(events))
    assert len(messages) == len(events)
    for message, event in zip(messages, events):
        body = json.loads(message.body)
        assert message.routing_key == event.name == body["event"]
        assert message.headers == {"wf_uuid": body["xwf_id"], "root_wf_uuid": roots[body["xwf_id"]]}, event.name
        assert "wf_uuid" not in body and "root_wf_uuid" not in body
