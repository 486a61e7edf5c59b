"""Servers of a test's own, on free ports, that the test may stop, restart and kill.

The shared PostgreSQL and RabbitMQ serve every engineer's tests at once, so
fault tests never touch them: they start a second PostgreSQL cluster
(`pg_createcluster`, data in the test's temporary directory) or a second
RabbitMQ node (its own `RABBITMQ_NODENAME`, ports, mnesia and log
directories) and remove it afterwards. Missing binaries skip the test, or
fail it under `CI=true` (`conftest.unavailable`).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.conftest import port_open, unavailable

PG_VERSION_DIR = Path("/usr/lib/postgresql")


def free_port() -> int:
    """A free TCP port away from the ranges servers here use (5432, 5672, 25672, 35672-35682)."""
    for _ in range(200):
        port = random.randint(40000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if not port_open("127.0.0.1", port, 0.2):
            return port
    raise RuntimeError("no free port")


def _run(*cmd: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=check)


# ---------------------------------------------------------------- PostgreSQL

class PgCluster:
    def __init__(self, version: str, name: str, port: int, data: Path) -> None:
        self.version, self.name, self.port, self.data = version, name, port, data

    def pid(self) -> int:
        """The postmaster's process id (its backends are its children)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, action: str, *options: str) -> None:
        """`pg_ctlcluster [options] VERSION NAME action` (e.g. `stop`, `-m`, `fast`)."""
        _run("pg_ctlcluster", *options, self.version, self.name, action)

    def wait_ready(self, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while not port_open("127.0.0.1", self.port, 0.5):
            if time.monotonic() > end:
                raise TimeoutError(f"PostgreSQL cluster {self.name} not up after {timeout} s")
            time.sleep(0.2)


@contextmanager
def own_postgres() -> Iterator[PgCluster]:
    if shutil.which("pg_createcluster") is None or not PG_VERSION_DIR.is_dir():
        unavailable("pg_createcluster not found (needed for a PostgreSQL cluster of the test's own)")
    versions = sorted((p.name for p in PG_VERSION_DIR.iterdir() if (p / "bin" / "postgres").exists()), key=float)
    if not versions:
        unavailable("no PostgreSQL server binaries under /usr/lib/postgresql")
    version = versions[-1]
    name = f"streamer_{os.getpid()}_{random.randint(0, 1 << 30):x}"
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="streamer-pg-"))  # not under pytest's 0700 tmp: postgres must enter
    os.chmod(data, 0o755)
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    _run("pg_createcluster", version, name, "-p", str(port), "-d", str(data / "main"), "--start",
         "--", "--auth=trust")
    cluster = PgCluster(version, name, port, data / "main")
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        _run("pg_dropcluster", version, name, "--stop", check=False)
        shutil.rmtree(data, ignore_errors=True)


# ---------------------------------------------------------------- RabbitMQ

class RabbitNode:
    def __init__(self, base: Path, node: str, port: int, dist_port: int) -> None:
        self.base, self.node, self.port, self.dist_port = base, node, port, dist_port

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def env(self) -> dict[str, str]:
        return {**os.environ, "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": str(self.dist_port),
                "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq.conf"),
                "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"), "RABBITMQ_LOG_BASE": str(self.base / "log"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins")}

    def start(self, timeout: float = 120) -> None:
        subprocess.Popen(["rabbitmq-server"], env=self.env(), stdout=open(self.base / "server.out", "ab"),
                         stderr=subprocess.STDOUT, start_new_session=True)
        end = time.monotonic() + timeout
        while True:
            done = _run("rabbitmqctl", "-q", "-n", self.node, "await_startup", "--timeout", "30", check=False,
                        timeout=60)
            if done.returncode == 0 and port_open("127.0.0.1", self.port, 0.5):
                return
            if time.monotonic() > end:
                raise TimeoutError(f"RabbitMQ node {self.node} not up after {timeout} s: "
                                   f"{(self.base / 'server.out').read_text()[-2000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        _run("rabbitmqctl", "-q", "-n", self.node, "stop", timeout=120)
        self._wait_down()

    def pid(self) -> int:
        """The process id of the node's Erlang VM (`beam.smp`)."""
        return int((self.base / "mnesia" / f"{self.node}.pid").read_text().strip())

    def kill(self) -> None:
        """SIGKILL the node's Erlang VM (no shutdown at all)."""
        os.kill(self.pid(), signal.SIGKILL)
        self._wait_down()

    def _wait_down(self, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while port_open("127.0.0.1", self.port, 0.3) and time.monotonic() < end:
            time.sleep(0.2)


def _new_node(plugins: tuple[str, ...] = ()) -> RabbitNode:
    """A node's directories, config and names (not started)."""
    if shutil.which("rabbitmq-server") is None or shutil.which("rabbitmqctl") is None:
        unavailable("rabbitmq-server not found (needed for a RabbitMQ node of the test's own)")
    base = Path(tempfile.mkdtemp(prefix="streamer-rabbit-"))  # the rabbitmq user must enter it
    os.chmod(base, 0o755)
    (base / "mnesia").mkdir(parents=True)
    (base / "log").mkdir()
    (base / "enabled_plugins").write_text(f"[{','.join(plugins)}].\n")
    (base / "rabbitmq.conf").write_text("log.console = false\n")
    if os.geteuid() == 0:  # rabbitmq-server drops to the rabbitmq user
        _run("chown", "-R", "rabbitmq:rabbitmq", str(base))
    return RabbitNode(base, f"streamer{os.getpid()}x{random.randint(0, 1 << 30):x}@localhost", free_port(),
                      free_port())


def _remove_node(node: RabbitNode) -> None:
    if port_open("127.0.0.1", node.port, 0.3):
        _run("rabbitmqctl", "-q", "-n", node.node, "stop", check=False, timeout=120)
    pid_file = node.base / "mnesia" / f"{node.node}.pid"
    if pid_file.exists():  # never leave a VM behind
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    shutil.rmtree(node.base, ignore_errors=True)


@contextmanager
def own_rabbitmq(plugins: tuple[str, ...] = ()) -> Iterator[RabbitNode]:
    node = _new_node(plugins)
    try:
        node.start()
        yield node
    finally:
        _remove_node(node)


CONSISTENT_HASH = "rabbitmq_consistent_hash_exchange"


class RabbitCluster:
    """Nodes of one RabbitMQ cluster of the test's own (they share the rabbitmq user's Erlang cookie)."""

    def __init__(self, nodes: list[RabbitNode]) -> None:
        self.nodes = nodes

    def url(self, vhost: str = "%2F") -> str:
        """`amqp://guest:guest@127.0.0.1:P1,127.0.0.1:P2,.../vhost` (every node)."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"amqp://guest:guest@{hosts}/{vhost}"

    def node_url(self, index: int) -> str:
        return self.nodes[index].url

    def alive(self) -> list[RabbitNode]:
        return [node for node in self.nodes if port_open("127.0.0.1", node.port, 0.3)]

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """`rabbitmqctl` against a live node of the cluster; its stdout."""
        node = self.alive()[0]
        return _run("rabbitmqctl", "-q", "-n", node.node, *args, timeout=timeout).stdout

    def leader(self, queue: str) -> RabbitNode:
        """The node leading quorum queue `queue`."""
        import json

        rows = json.loads(self.ctl("list_queues", "name", "leader", "--formatter", "json"))
        name = next(row["leader"] for row in rows if row["name"] == queue)
        return next(node for node in self.nodes if node.node == name)


@contextmanager
def own_rabbitmq_cluster(size: int = 3, plugins: tuple[str, ...] = (CONSISTENT_HASH,)) -> Iterator[RabbitCluster]:
    """`size` nodes started at once, the others joined to the first (`rabbitmqctl join_cluster`); removed
    afterwards, pass or fail."""
    nodes: list[RabbitNode] = []
    try:
        for _ in range(size):
            nodes.append(_new_node(plugins))
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(size) as pool:
            list(pool.map(lambda node: node.start(), nodes))
        for node in nodes[1:]:
            _run("rabbitmqctl", "-q", "-n", node.node, "stop_app")
            _run("rabbitmqctl", "-q", "-n", node.node, "join_cluster", nodes[0].node)
            _run("rabbitmqctl", "-q", "-n", node.node, "start_app")
        yield RabbitCluster(nodes)
    finally:
        for node in nodes:
            _remove_node(node)
