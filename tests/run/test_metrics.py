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

from streamer.run.metrics import MetricsError, parse_address
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
                       f"xwf.id={XWF.format(1)} job.id=j{i} submit_file=j.sub type_desc=compute clustered=0 "
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

    endpoint = create_endpoint(f"amqp://u:secret@h1,h3/%2F/wf?spool={tmp_path}")
    endpoint.node = "h3:5672"  # what connecting sets
    metrics, bus = Metrics(), Bus([make_route(endpoint, codec=JSON_LINES)])
    source = SimpleNamespace(node="h2:5682", name="amqp://c@h1:5681,h2:5682/%2F/q")
    metrics.attach(bus, source="queue", node=source)
    found = {tuple(sorted(s.labels.items())): s.value for family in metrics.collect()
             if family.name == "streamer_amqp_node" for s in family.samples}
    assert found == {(("client", source.name), ("node", "h2:5682")): 1.0,
                     (("client", endpoint.name), ("node", "h3:5672")): 1.0}
