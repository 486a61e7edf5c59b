"""deploy/rabbitmq/site-topology.json is what `streamer topology --partitions 4 --definitions` declares (the file
a site imports and the command cannot drift apart), and the partition exchange hashes the root workflow header."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_definitions_are_the_topology_command_s() -> None:
    done = subprocess.run([sys.executable, "-m", "streamer", "topology", "amqp://localhost/pegasus/workflows",
                           "--partitions", "4", "--definitions"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed == json.loads((ROOT / "deploy" / "rabbitmq" / "site-topology.json").read_text())
    [hashing] = [e for e in printed["exchanges"] if e["type"] == "x-consistent-hash"]
    assert hashing["arguments"] == {"hash-header": "root_wf_uuid"}
    queues = {q["name"]: q["arguments"] for q in printed["queues"]}
    assert [n for n in queues if n.startswith("workflows.part.") and n[-1].isdigit()] == \
        [f"workflows.part.{i}" for i in range(4)]
    assert queues["workflows.part.0"] == {"x-queue-type": "quorum", "x-delivery-limit": 20,
                                          "x-dead-letter-exchange": "workflows.part.dead"}
    bindings = {(b["source"], b["destination"], b["routing_key"]) for b in printed["bindings"]}
    assert ("workflows", hashing["name"], "#") in bindings
    assert {(hashing["name"], f"workflows.part.{i}", "1") for i in range(4)} <= bindings


def test_topology_usage_errors_are_plain() -> None:
    for args, words in ((["--partitions", "0"], "--partitions must be at least 1"),
                        (["--partitions", "2", "--queue-type", "classic", "--delivery-limit", "3"],
                         "delivery_limit needs queue_type=quorum")):
        done = subprocess.run([sys.executable, "-m", "streamer", "topology", "amqp://u:secret@h1,h2/%2F/wf", *args,
                               "--definitions"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert "secret" not in done.stderr and "Traceback" not in done.stderr
