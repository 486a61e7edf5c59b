"""Shared fixtures: where ../shared lives, and the servers tests need.

Rules (DEVELOPERS.md): with CI=true a missing server or corpus FAILS the test;
outside CI it is skipped with the reason.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from streamer.util import compiled

compiled.activate()  # as the entry point does: the mypyc build when there (tests/util/test_compiled.py), first
pytest_plugins = ["tests.support.schedule"]  # the long poles first on each xdist worker (and the durations table)

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("STREAMER_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus"
GOLDEN = SHARED / "golden"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

if "STREAMER_STATE_DIR" not in os.environ:  # state of replays that write nothing into their submit dir: per process,
    os.environ["STREAMER_STATE_DIR"] = tempfile.mkdtemp(prefix="streamer-test-state-")  # not the user's, not shared

hypothesis_settings.register_profile("ci", max_examples=100, deadline=None)
hypothesis_settings.register_profile("dev", max_examples=10, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "dev"))
"""Hypothesis: every example count in CI, a tenth locally (tests/support/examples.py scales explicit counts)."""

PG_HOST = os.environ.get("STREAMER_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("STREAMER_PG_PORT", "5432"))
AMQP_HOST = os.environ.get("STREAMER_AMQP_HOST", "127.0.0.1")
AMQP_PORT = int(os.environ.get("STREAMER_AMQP_PORT", "5672"))
MYSQL_HOST = os.environ.get("STREAMER_MYSQL_HOST", "127.0.0.1")
MYSQL_PORT = int(os.environ.get("STREAMER_MYSQL_PORT", "3306"))


def unavailable(reason: str, *, module: bool = False) -> None:
    """Skip outside CI, fail in CI (`module=True`: the whole test module, called at its top)."""
    if IN_CI:
        pytest.fail(f"required in CI: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module)


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def shared() -> Path:
    if not CORPUS.is_dir() or not GOLDEN.is_dir():
        unavailable(f"corpus not found at {SHARED} (set STREAMER_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def corpus(shared: Path) -> Path:
    return shared / "corpus"


@pytest.fixture(scope="session")
def golden(shared: Path) -> Path:
    return shared / "golden"


@pytest.fixture
def postgres_dsn() -> str:
    if not port_open(PG_HOST, PG_PORT):
        unavailable(f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}")
    user = os.environ.get("STREAMER_PG_USER", "postgres")
    return f"postgresql://{user}@{PG_HOST}:{PG_PORT}/postgres"


@pytest.fixture
def mysql_server() -> str:
    """`mysql://root@host:port` of the MariaDB/MySQL server (no database)."""
    if not port_open(MYSQL_HOST, MYSQL_PORT):
        unavailable(f"MariaDB/MySQL not reachable at {MYSQL_HOST}:{MYSQL_PORT}")
    user = os.environ.get("STREAMER_MYSQL_USER", "root")
    return f"mysql://{user}@{MYSQL_HOST}:{MYSQL_PORT}"


@pytest.fixture
def amqp_url() -> str:
    if not port_open(AMQP_HOST, AMQP_PORT):
        unavailable(f"RabbitMQ not reachable at {AMQP_HOST}:{AMQP_PORT}")
    return f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/%2F"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (to run `python -m streamer` in subprocesses)."""
    return sys.executable


@pytest.fixture(autouse=True)
def restore_logging():
    """`streamer.cli.main.main()` installs its stderr handler on the root logger: put pytest's back afterwards."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def pg_db(postgres_dsn: str):
    """A fresh PostgreSQL database per test, dropped afterwards."""
    from tests.support.pghelp import fresh_database

    async with fresh_database(postgres_dsn) as url:
        yield url


@pytest.fixture
def in_utc(monkeypatch: pytest.MonkeyPatch):
    """Times on screen in UTC whatever the machine's zone (they are shown in the local zone, TZ)."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


FAULT_WORDS = re.compile(r"(?:^|_)(?:kill9?|killed|restarts?|restarted|stopped|sigterm|sigkill)(?=_|\[|$)")
"""A test named for stopping or killing something."""
FAULT_NAMES = {"own_postgres", "own_rabbitmq", "own_cluster", "SIGKILL", "SIGTERM", "send_signal", "kill"}
"""Names a test's code uses when it starts servers of its own or signals a process."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `slow` every test that stops, kills or clusters servers (it starts its own, `tests/support/ownservers`)
    or signals a process: `-m "not slow"` is the quick loop, CI runs everything."""
    for item in items:
        if FAULT_WORDS.search(item.name) or _code_names(getattr(item, "function", None)) & FAULT_NAMES:
            item.add_marker(pytest.mark.slow)


def _code_names(function: object) -> set[str]:
    """Every name a function's code (nested functions included) refers to."""
    names: set[str] = set()
    stack = [getattr(function, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        names.update(code.co_names)
        stack.extend(const for const in code.co_consts if hasattr(const, "co_names"))
    return names
