"""Several brokers in one AMQP URL (issue 24 item 2): parsing, the failover order, connecting to the first node
that answers, a publisher that moves to the next node when its node is lost (no spooling while one is up),
and the node in use in the log (no password) and in the metrics."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamer.amqp.connection import AMQPURLError, BrokerUnavailable, connect, failover_order, node_of, parse_target
from streamer.endpoints import create_endpoint
from streamer.events import Event, bp
from streamer.util.urls import EndpointURL
from tests.support.amqphelp import Capture, Forwarder, unique
from tests.conftest import AMQP_HOST, AMQP_PORT
from tests.support.ownservers import free_port


def test_several_hosts_parse_in_order() -> None:
    t = parse_target(EndpointURL.parse("amqp://u:p%40ss@h1:5681,H2:5682,h3/%2F/wf"))
    assert t.nodes == [("h1", 5681), ("h2", 5682), ("h3", 5672)]
    assert (t.host, t.port, t.user, t.password, t.vhost, t.exchange) == ("h1", 5681, "u", "p@ss", "/", "wf")
    assert t.display == "amqp://u@h1:5681,h2:5682,h3:5672/%2F/wf"
    assert "p@ss" not in t.display and "p%40ss" not in t.display
    tls = parse_target(EndpointURL.parse("amqps://a,b:1234,[::1]:99/v/x"))
    assert tls.nodes == [("a", 5671), ("b", 1234), ("::1", 99)] and tls.display.startswith("amqps://guest@a:5671,")
    one = parse_target(EndpointURL.parse("amqp://u:p@broker:5673/pegasus/workflows"))
    assert one.nodes == [("broker", 5673)] and one.display == "amqp://u@broker:5673/pegasus/workflows"


@pytest.mark.parametrize("url, words", [
    ("amqp://u:secret@h1:5681,h2:x/%2F/wf", "bad port 'x' for broker h2"),
    ("amqp://u:secret@h1,,h3/%2F/wf", "no broker host"),
    ("amqp://u:secret@h1:99999/%2F/wf", "bad port '99999'"),
    ("amqp://u:secret@/%2F/wf", "no broker host"),
])
def test_bad_host_lists_are_usage_errors_without_the_password(url: str, words: str) -> None:
    with pytest.raises(AMQPURLError) as error:
        parse_target(EndpointURL.parse(url))
    assert words in str(error.value) and "secret" not in str(error.value)


def test_failover_order_starts_after_the_node_lost() -> None:
    t = parse_target(EndpointURL.parse("amqp://h1:1,h2:2,h3:3/%2F/wf"))
    assert failover_order(t) == [("h1", 1), ("h2", 2), ("h3", 3)]
    assert failover_order(t, after="h1:1") == [("h2", 2), ("h3", 3), ("h1", 1)]
    assert failover_order(t, after="h2:2") == [("h3", 3), ("h1", 1), ("h2", 2)]
    assert failover_order(t, after="h3:3") == [("h1", 1), ("h2", 2), ("h3", 3)]
    assert failover_order(t, after="elsewhere:9") == [("h1", 1), ("h2", 2), ("h3", 3)]


@pytest.mark.rabbitmq
async def test_connect_takes_the_first_node_that_answers(amqp_url: str, caplog: pytest.LogCaptureFixture) -> None:
    dead = free_port()
    target = parse_target(EndpointURL.parse(f"amqp://guest:guest@127.0.0.1:{dead},{AMQP_HOST}:{AMQP_PORT}/%2F/x"))
    caplog.set_level(logging.INFO, "streamer.amqp")
    connection = await connect(target, {"connect_timeout": 3})
    try:
        assert node_of(connection) == f"{AMQP_HOST}:{AMQP_PORT}"
    finally:
        await connection.close()
    assert f"connected to {AMQP_HOST}:{AMQP_PORT}" in caplog.text and "guest:guest" not in caplog.text
    with pytest.raises(BrokerUnavailable) as error:
        await connect(parse_target(EndpointURL.parse(f"amqp://guest:guest@127.0.0.1:{dead},127.0.0.1:{free_port()}/%2F/x")),
                      {"connect_timeout": 3})
    assert f"127.0.0.1:{dead}:" in str(error.value) and not error.value.permanent


def golden_events(golden: Path) -> list[Event]:
    lines = (golden / "hierarchical_wf_success.bp").read_text().splitlines()
    return [bp.parse_line(line) for line in lines if line.strip()]


@pytest.mark.rabbitmq
@pytest.mark.corpus
async def test_publisher_fails_over_to_the_next_node_without_spooling(amqp_url: str, golden: Path,
                                                                       tmp_path: Path) -> None:
    events = golden_events(golden)
    first, second = Forwarder(), Forwarder()
    ports = [await first.start(), await second.start()]
    first.up = second.up = True
    exchange = unique("streamer-test-failover")
    endpoint = create_endpoint(EndpointURL.parse(f"amqp://guest:guest@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/%2F/{exchange}"
                               f"?events=*&spool={tmp_path}&retry_max=0.2&window=50"))
    try:
        async with Capture(amqp_url, exchange) as capture:
            await capture.start()
            await endpoint.open()
            half = len(events) // 2
            await endpoint.write(events[:half])
            assert endpoint.node == f"127.0.0.1:{ports[0]}"
            first.down()  # the first node is lost for good: the next batch goes through the second
            await endpoint.write(events[half:])
            assert len(endpoint.spool) == 0 and endpoint.spooled == 0
            assert endpoint.node == f"127.0.0.1:{ports[1]}"
            await endpoint.close()
            messages = await capture.wait_for(len(events))
        assert {m.message_id for m in messages} == {e.id for e in events}
        assert first.accepted == 1 and second.accepted == 1
    finally:
        await first.close()
        await second.close()


def test_several_brokers_in_the_toml_config_and_pegasus_properties(tmp_path: Path) -> None:
    from streamer.config.settings import from_properties, load_toml

    url = "amqp://u:secret@rmq1:5681,rmq2:5682,rmq3/pegasus/workflows"
    toml = tmp_path / "streamer.toml"
    toml.write_text(f'[[endpoint]]\nurl = "{url}"\nspool = "{tmp_path / "s1"}"\n')
    props = tmp_path / "pegasus.properties"
    props.write_text(f"pegasus.catalog.workflow.amqp.url = {url}?spool={tmp_path / 's2'}\n")
    for spec in [*load_toml(toml).endpoints, *from_properties(props).endpoints]:
        endpoint = create_endpoint(spec.url, spec.options)
        assert endpoint.target.nodes == [("rmq1", 5681), ("rmq2", 5682), ("rmq3", 5672)]
        assert "secret" not in endpoint.name
