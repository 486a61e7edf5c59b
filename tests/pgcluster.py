"""A PostgreSQL cluster of a test's own, on a free port, that the test may stop and restart.

Made with Debian's `pg_createcluster` (trust authentication) and removed with
`pg_dropcluster` at the end. Outside CI a machine without those tools skips
the test; in CI it fails (conftest.unavailable).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from conftest import unavailable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    def __init__(self, version: str, name: str, port: int) -> None:
        self.version, self.name, self.port = version, name, port
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def ctl(self, *args: str) -> None:
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, *args],
                       check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self.ctl("start")

    def stop(self, mode: str = "fast") -> None:
        self.ctl("stop", "-m", mode)

    def restart(self) -> None:
        self.ctl("restart", "-m", "fast")


@pytest.fixture
def own_postgres() -> Iterator[Cluster]:
    if not shutil.which("pg_createcluster") or not os.path.isdir("/etc/postgresql"):
        unavailable("pg_createcluster (Debian's postgresql-common) is not installed")
    versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: [int(p) for p in v.split(".") if p.isdigit()])
    if not versions:
        unavailable("no PostgreSQL version under /etc/postgresql")
    cluster = Cluster(versions[-1], f"streamer{secrets.token_hex(4)}", free_port())
    created = subprocess.run(
        ["pg_createcluster", cluster.version, cluster.name, "-p", str(cluster.port), "--", "--auth=trust"],
        capture_output=True, text=True, timeout=120)
    if created.returncode != 0:
        unavailable(f"pg_createcluster failed: {created.stderr.strip()}")
    try:
        cluster.start()
        yield cluster
    finally:
        subprocess.run(["pg_dropcluster", "--stop", cluster.version, cluster.name], capture_output=True, timeout=120)
        shutil.rmtree(Path("/var/lib/postgresql") / cluster.version / cluster.name, ignore_errors=True)
