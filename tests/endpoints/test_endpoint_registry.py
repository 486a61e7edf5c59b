"""The endpoint registry is computed from the endpoint classes: each declares its schemes and its options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamer.endpoints import CLASSES, REGISTRY, EndpointError, Registry, create_endpoint, endpoint_class
from streamer.endpoints.options import BUS, help_text
from streamer.util.urls import EndpointURL

ROOT = Path(__file__).resolve().parents[2]
KNOWN = ("amqp, amqps, file, mariadb, mariadb+pymysql, mysql, mysql+asyncmy, mysql+mysqldb, mysql+pymysql, "
         "postgres, postgresql, sqlite")


def test_every_scheme_maps_to_the_class_that_declares_it() -> None:
    table = REGISTRY.table()
    assert {scheme: cls.__name__ for scheme, cls in table.items()} == {
        "file": "FileEndpoint", "term": "TerminalEndpoint", "sqlite": "SQLiteEndpoint",
        "postgresql": "PostgresEndpoint", "postgres": "PostgresEndpoint",
        "amqp": "AMQPEndpoint", "amqps": "AMQPEndpoint",
        "mysql": "MySQLEndpoint", "mariadb": "MySQLEndpoint", "mysql+pymysql": "MySQLEndpoint",
        "mysql+mysqldb": "MySQLEndpoint", "mysql+asyncmy": "MySQLEndpoint", "mariadb+pymysql": "MySQLEndpoint",
    }
    assert {f"{cls.__module__}:{cls.__name__}" for cls in table.values()} == set(CLASSES)
    assert all(scheme in cls.schemes for scheme, cls in table.items())


def test_every_endpoint_class_declares_its_options_and_help_lists_them() -> None:
    """Options are data on the class (`declared_options`), and `--help` shows every one of them."""
    text = help_text()
    for cls in set(REGISTRY.table().values()):
        assert cls.declared_options is not None, f"{cls.__name__} declares no options"
        for option in BUS + cls.declared_options:
            assert f"  {option.name}={option.kind}" in text, (cls.__name__, option.name)


def test_an_unknown_scheme_names_every_known_one() -> None:
    with pytest.raises(EndpointError, match=rf"^unknown endpoint scheme 'ftp' \(known: {KNOWN.replace('+', '[+]')}\)$"):
        create_endpoint(EndpointURL.parse("ftp://host/x"))


def test_a_scheme_imports_only_the_classes_up_to_its_own() -> None:
    """`file://` resolves without importing the AMQP or MySQL endpoints (or their drivers)."""
    code = ("import sys; from streamer.endpoints import endpoint_class; print(endpoint_class('file').__name__); "
            "print(sorted(m for m in ('streamer.endpoints.amqp.endpoint', 'streamer.endpoints.db.mysql', 'aio_pika', 'asyncmy') "
            "if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["FileEndpoint", "[]"]


def test_a_registry_refuses_two_classes_claiming_a_scheme_and_a_class_without_one() -> None:
    twice = Registry(("streamer.endpoints.db.postgres:PostgresEndpoint", "tests_registry_fixture:Postgres2"))
    sys.modules["tests_registry_fixture"] = fixture = type(sys)("tests_registry_fixture")
    try:
        from streamer.endpoints.base import Endpoint

        class Postgres2(Endpoint):
            schemes = ("postgres",)

            async def write(self, batch) -> None: ...

        class Nameless(Endpoint):
            async def write(self, batch) -> None: ...

        fixture.Postgres2, fixture.Nameless = Postgres2, Nameless
        assert twice.resolve("postgresql").__name__ == "PostgresEndpoint"
        with pytest.raises(TypeError, match=r"^postgres:// is claimed by both PostgresEndpoint and Postgres2$"):
            twice.resolve("nothing")
        with pytest.raises(TypeError, match=r"^tests_registry_fixture:Nameless declares no URL scheme"):
            Registry(("tests_registry_fixture:Nameless",)).resolve("x")
    finally:
        del sys.modules["tests_registry_fixture"]


def test_a_class_whose_module_cannot_be_imported_is_recorded_and_the_others_resolve() -> None:
    registry = Registry(("streamer.endpoints.files:FileEndpoint", "streamer.endpoints.nosuchdriver:Endpoint"))
    assert registry.resolve("nosuch") is None
    assert registry.unavailable == {"streamer.endpoints.nosuchdriver:Endpoint":
                                    "No module named 'streamer.endpoints.nosuchdriver'"}
    assert endpoint_class("file") is registry.resolve("file")
