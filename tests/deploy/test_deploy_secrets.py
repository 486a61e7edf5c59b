"""deploy/: no password on a command line, a Prometheus that scrapes the collector, and the `change-me-…`
placeholders of .env.example refused at start (issue 26 item 17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.test_deploy_files import COMPOSE, DEPLOY, ENV_EXAMPLE, compose_config
from tests.support.ownservers import free_port


def _example() -> dict[str, str]:
    return dict(line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
                if line and not line.startswith("#"))


@pytest.fixture(scope="module")
def full() -> dict:
    done = compose_config("--profile", "streamer", "--profile", "collector")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_streamer_and_collector_read_their_passwords_from_files(full: dict) -> None:
    """The rendered command lines (what `ps` shows on the host) hold no password; each URL names its user and
    `password_file=/run/secrets/…`, a compose secret filled from .env."""
    passwords = [value for name, value in _example().items() if "PASSWORD" in name]
    for name in ("streamer", "collector"):
        service = full["services"][name]
        command = " ".join(service["command"])
        assert not [p for p in passwords if p in command], (name, command)
        files = {s["target"] for s in service.get("secrets", [])}
        for word in service["command"]:
            if word.startswith(("amqp://", "postgresql://")):
                assert "password_file=/run/secrets/" in word, word
                target = word.split("password_file=", 1)[1].split("&", 1)[0]
                assert target in files, (name, target, files)
    for secret in full["secrets"].values():
        assert secret["environment"].endswith("_PASSWORD")


def test_prometheus_scrapes_the_collector_and_its_port_is_published(full: dict) -> None:
    services = full["services"]
    assert "prometheus" in services
    published = {port["target"] for port in services["collector"].get("ports", [])}
    assert 9464 in published
    assert all(port["host_ip"] == "127.0.0.1" for port in services["collector"]["ports"])
    mounted = {v["target"]: v["source"] for v in services["prometheus"]["volumes"] if v["type"] == "bind"}
    config = yaml.safe_load(Path(mounted["/etc/prometheus/prometheus.yml"]).read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    names = {name for job in jobs.values() for sd in job.get("dns_sd_configs", []) for name in sd["names"]}
    assert {"collector", "streamer"} <= names
    assert config["rule_files"], "the alert rules are loaded"
    for rules in config["rule_files"]:
        assert Path(mounted[str(Path(rules).parent)] if str(Path(rules).parent) in mounted
                    else mounted[rules]).exists()


def test_streamer_refuses_the_placeholder_passwords(tmp_path: Path) -> None:
    """`change-me-…` copied from .env.example unchanged is refused at start, naming the URL (masked) and the fix,
    whether written in the URL or read from password_file."""
    source = tmp_path / "x.bp"
    source.write_text("ts=2023-11-14T22:13:01.000000Z event=stampede.xwf.start level=Info "
                      "xwf.id=1e2a3b4c-0000-4000-8000-000000000001 restart_count=0\n")
    secret = tmp_path / "pw"
    secret.write_text(_example()["STREAMER_AMQP_PASSWORD"] + "\n")
    port = free_port()
    for dest in (f"amqp://streamer:{_example()['STREAMER_AMQP_PASSWORD']}@127.0.0.1:{port}/pegasus/workflows",
                 f"amqp://streamer@127.0.0.1:{port}/pegasus/workflows?password_file={secret}"):
        done = subprocess.run([sys.executable, "-m", "streamer", "load", str(source), "--dest", dest],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "STREAMER_STATE_DIR": str(tmp_path / "state")})
        assert done.returncode == 2, done.stderr
        assert "placeholder" in done.stderr and "change-me" in done.stderr, done.stderr
        assert _example()["STREAMER_AMQP_PASSWORD"] not in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("script", ["rabbitmq/render-definitions.sh", "postgres/init/10-roles.sh",
                                    "elasticsearch/setup-users.sh"])
def test_the_servers_refuse_the_placeholder_passwords(tmp_path: Path, script: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("PASSWORD")}
    env.update({k: v for k, v in _example().items() if "PASSWORD" in k or k.endswith("_USER")})
    env.update(DEFINITIONS_TEMPLATE=str(DEPLOY / "rabbitmq" / "definitions.json"),
               DEFINITIONS_TARGET=str(tmp_path / "defs.json"), POSTGRES_DB="stampede",
               ELASTICSEARCH_URL=f"http://127.0.0.1:{free_port()}", PGHOST="127.0.0.1", PGPORT=str(free_port()))
    done = subprocess.run(["bash", str(DEPLOY / script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    assert "change-me" in done.stderr and "placeholder" in done.stderr, done.stderr
    assert not (tmp_path / "defs.json").exists()


def test_compose_file_has_no_password_in_a_command() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        assert "PASSWORD" not in " ".join(map(str, service.get("command") or [])), name
