"""`--metrics HOST:PORT`: Prometheus counters equal to what was delivered; /healthz follows the broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamer.config.command import MetricsError, parse_address
from streamer.util.urls import EndpointURL
from tests.support.ownservers import free_port, own_rabbitmq
from tests.support.commands import wait_for

XWF = "1e2a3b4c-0000-4000-8000-0000000000{:02d}"


def lines(start: int, count: int) -> str:
    """`count` BP events: an xwf.start and job.info events, distinct ids."""
    out = []
    for i in range(start, start + count):
        if i % 5 == 0:
            out.append(f"ts=2023-11-14T22:13:{i % 60:02d}.000000Z event=stampede.xwf.start level=Info "
                       f"xwf.id={XWF.format(i % 100)} restart_count={i}")
        else:
            out.append(f"ts=2023-11-14T22:13:{i % 60:02d}.000000Z event=stampede.job.info level=Info "
                       f"xwf.id={XWF.format(1)} job.id=j{i} submit_file=j.sub type=1 type_desc=compute clustered=0 "
                       "max_retries=3 task_count=1 executable=/bin/true")
    return "".join(line + "\n" for line in out)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return 0, ""


def samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_what_was_delivered(tmp_path: Path) -> None:
    source = tmp_path / "in.bp"
    source.write_text(lines(0, 40))
    port = free_port()
    a, b = f"file://{tmp_path}/a.jsonl", f"file://{tmp_path}/b.jsonl?events=stampede.xwf.*"
    run = subprocess.Popen([sys.executable, "-m", "streamer", "load", str(source), "--follow", "--dest", a,
                            "--dest", b, "--metrics", f"127.0.0.1:{port}", "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, "the metrics server")
        with source.open("a") as handle:  # more while it runs
            handle.write(lines(40, 20))
        out = ("streamer_events_out_total", (("endpoint", a),))
        wait_for(lambda: samples(port).get(out) == 60, "60 events out")
        got = samples(port)
        assert {k: v for k, v in got.items() if k[0] == "streamer_events_in_total"} == {
            ("streamer_events_in_total", (("source", "file"),)): 60}
        assert got[("streamer_events_out_total", (("endpoint", b),))] == 12  # every fifth is an xwf.start
        assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 60
        assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 12
        for endpoint in (a, b):
            labels = (("endpoint", endpoint),)
            assert got[("streamer_endpoint_buffer_events", labels)] == 0
            assert got[("streamer_endpoint_overflow_bytes", labels)] == 0
            assert got[("streamer_endpoint_errors_total", labels)] == 0
            assert got[("streamer_endpoint_lag_seconds", labels)] == 0
        assert got[("streamer_event_latency_seconds_count", ())] == 72  # one observation per event delivered
        assert got[("streamer_event_latency_seconds_bucket", (("le", "+Inf"),))] == 72
        assert got[("streamer_workflows_active", ())] == 0
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        assert get(f"http://127.0.0.1:{port}/nothing")[0] == 404
    finally:
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=30)
    assert run.returncode == 0, err


def test_bad_metrics_address() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address(":9464") == ("0.0.0.0", 9464)
    with pytest.raises(MetricsError, match="expected HOST:PORT"):
        parse_address("localhost")
    done = subprocess.run([sys.executable, "-m", "streamer", "load", "x.bp", "--dest", "-", "--metrics", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--metrics 'nope': expected HOST:PORT" in done.stderr


@pytest.mark.rabbitmq
@pytest.mark.timeout(600)
def test_healthz_follows_the_broker(tmp_path: Path) -> None:
    source = tmp_path / "in.bp"
    source.write_text(lines(0, 10))
    port = free_port()
    with own_rabbitmq() as broker:
        dest = f"{broker.url}/health-test?events=*&spool={tmp_path / 'spool'}"
        run = subprocess.Popen([sys.executable, "-m", "streamer", "load", str(source), "--follow", "--dest", dest,
                                "--metrics", f"127.0.0.1:{port}", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        health = f"http://127.0.0.1:{port}/healthz"
        try:
            wait_for(lambda: get(health)[0] == 200, "healthy at start")
            broker.stop()
            status, body = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(get(health)), "503")
            assert "broker unreachable" in body and "health-test" in body and "guest:guest" not in body
            with source.open("a") as handle:  # events while it is down: spooled
                handle.write(lines(10, 10))
            time.sleep(1)
            assert get(health)[0] == 503
            broker.start()
            wait_for(lambda: get(health)[0] == 200, "healthy again", timeout=120)
            key = ("streamer_events_out_total", (("endpoint", dest.replace("guest:guest", "guest:***")),))
            assert samples(port)[key] == 20
            assert samples(port)[("streamer_endpoint_reconnects_total", key[1])] >= 1
        finally:
            run.send_signal(signal.SIGTERM)
            _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err


def test_healthz_includes_the_source() -> None:
    """A collector whose broker is away is unhealthy even when every endpoint is fine."""
    from streamer.core.bus import Bus
    from streamer.run.metrics import Metrics

    problem: list[str] = []
    metrics, bus = Metrics(), Bus([])
    metrics.attach(bus, source="queue", health=lambda: problem[0] if problem else None)
    assert metrics.health() == []
    problem.append("amqp://c@broker:5672/pegasus/workflows-db: broker unreachable")
    assert metrics.health() == problem
    metrics.detach(bus)
    assert metrics.health() == []


def test_the_broker_node_in_use_is_a_metric(tmp_path: Path) -> None:
    """With several brokers, `streamer_amqp_node{client, node}` names the one each AMQP endpoint and collector
    uses now (issue 24 item 2)."""
    from types import SimpleNamespace

    from streamer.core.bus import Bus, make_route
    from streamer.endpoints import create_endpoint
    from streamer.events.codec import JSON_LINES
    from streamer.run.metrics import Metrics

    endpoint = create_endpoint(EndpointURL.parse(f"amqp://u:secret@h1,h3/%2F/wf?spool={tmp_path}"))
    endpoint.node = "h3:5672"  # what connecting sets
    metrics, bus = Metrics(), Bus([make_route(endpoint, codec=JSON_LINES)])
    source = SimpleNamespace(node="h2:5682", name="amqp://c@h1:5681,h2:5682/%2F/q")
    metrics.attach(bus, source="queue", node=source)
    found = {tuple(sorted(s.labels.items())): s.value for family in metrics.collect()
             if family.name == "streamer_amqp_node" for s in family.samples}
    assert found == {(("client", source.name), ("node", "h2:5682")): 1.0,
                     (("client", endpoint.name), ("node", "h3:5672")): 1.0}


def test_serve_counts_its_events_under_the_documented_source_label() -> None:
    """`streamer_events_in_total{source}` is file, workflow, jobstate, queue or amqp: serve's buses follow
    workflows (it said `source="serve"`, a value documented nowhere)."""
    from streamer.run.metrics import SOURCE_LABELS, source_label
    from streamer.serve.follower import ServeSource

    assert source_label(ServeSource.__new__(ServeSource)) == "workflow"
    assert set(SOURCE_LABELS.values()) == {"file", "workflow", "jobstate", "queue", "amqp"}


@pytest.mark.rabbitmq
async def test_a_broker_outage_shows_in_the_metrics(tmp_path: Path, amqp_url: str) -> None:
    """The broker away (a real TCP proxy to the shared RabbitMQ, refusing connections): the events the
    endpoint spooled are not counted as delivered, the spool and the broker's state have gauges, the failed
    connections count as errors, the lag grows; once the broker is back, the counters reach what it
    confirmed and the gauges clear (issue 26 item 4)."""
    import asyncio

    from tests.support.amqphelp import Capture, Forwarder, unique

    source = tmp_path / "in.bp"
    source.write_text(lines(0, 10))
    forwarder = Forwarder()
    broker_port = await forwarder.start()  # down: connections refused
    exchange = unique("metrics-outage")
    dest = f"amqp://guest:guest@127.0.0.1:{broker_port}/%2F/{exchange}?events=*&spool={tmp_path / 'spool'}"
    dest += "&retry_max=0.5&drain_timeout=5"
    labels = (("endpoint", dest.replace("guest:guest", "guest:***")),)
    port = free_port()
    async with Capture(amqp_url, exchange) as capture:
        await capture.start()
        run = subprocess.Popen([sys.executable, "-m", "streamer", "load", str(source), "--follow", "--dest", dest,
                                "--metrics", f"127.0.0.1:{port}", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def spooled() -> dict | None:
                got = samples(port) if get(f"http://127.0.0.1:{port}/healthz")[0] else {}
                return got if got.get(("streamer_endpoint_spooled_events", labels)) == 10 else None

            got = await asyncio.to_thread(wait_for, spooled, "10 events spooled", 30)
            assert got[("streamer_events_in_total", (("source", "file"),))] == 10
            assert got[("streamer_events_out_total", labels)] == 0  # spooled is not delivered
            assert got[("streamer_endpoint_up", labels)] == 0
            assert got[("streamer_endpoint_errors_total", labels)] >= 1  # the refused connections
            await asyncio.sleep(1.2)
            got = await asyncio.to_thread(samples, port)
            assert got[("streamer_endpoint_lag_seconds", labels)] >= 1  # the spooled events are waiting
            assert (await asyncio.to_thread(get, f"http://127.0.0.1:{port}/healthz"))[0] == 503
            forwarder.up = True

            def delivered() -> dict | None:
                got = samples(port)
                return got if got.get(("streamer_events_out_total", labels)) == 10 else None

            got = await asyncio.to_thread(wait_for, delivered, "10 events confirmed", 60)
            assert got[("streamer_endpoint_spooled_events", labels)] == 0
            assert got[("streamer_endpoint_up", labels)] == 1
            assert got[("streamer_endpoint_lag_seconds", labels)] == 0
            assert len(await capture.wait_for(10)) == 10
        finally:
            run.send_signal(signal.SIGTERM)
            _, err = await asyncio.to_thread(run.communicate, timeout=60)
            await forwarder.close()
    assert run.returncode == 0, err


def test_the_alert_rules_and_the_outage_panel_use_the_metrics_streamer_serves() -> None:
    """deploy/prometheus/alerts.yml and the Grafana metrics dashboard name only metrics `collect` yields."""
    import json
    import re

    import yaml

    from streamer.run.metrics import Metrics

    served = {family.name for family in Metrics().collect()} | {"up"}
    served |= {f"{name}_total" for name in served}
    root = Path(__file__).resolve().parents[2] / "deploy"
    rules = yaml.safe_load((root / "prometheus" / "alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard = json.loads((root / "grafana" / "metrics" / "streamer-metrics.json").read_text())
    panels = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t]
    used = {name for expr in exprs + panels for name in re.findall(r"\b(streamer_\w+|up)\b", expr)}
    used = {re.sub(r"_(bucket|count|sum)$", "", name) for name in used}
    assert used <= served, used - served
    for outage in ("streamer_endpoint_up", "streamer_endpoint_spooled_events"):
        assert any(outage in expr for expr in exprs) and any(outage in expr for expr in panels), outage
