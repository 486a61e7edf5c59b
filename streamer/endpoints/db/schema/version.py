"""Which Stampede schema version a database holds, and the upgrade to ours (14).

Pegasus reads a database's version from the **latest** `dbversion` row (the
highest `id`), not from the highest number: `pegasus-db-admin downgrade`
appends rows 13, 12, ... after the 14 it started from, so `MAX(version_number)`
would call a downgraded database current and streamer would write into a
schema Pegasus's tools call incompatible.

A database older than ours is refused with the exact `pegasus-db-admin update`
command that upgrades it, or upgraded in place when the endpoint has
`upgrade_schema` (CLI `--upgrade-schema`), by the steps Pegasus's own
migrations 9..14 take on tables and columns:

- v11: `integrity_metrics` is renamed `integrity`;
- v12: the obsolete `sequences` table is dropped;
- v13: `invocation` gets `maxrss` and `avg_cpu`;
- v14: the `trigger` table (created with every other missing table);

then a `dbversion` row `14.0` is appended, as `pegasus-db-admin update` does.
Pegasus 5 never reads a database below version 8 (DB_MIN_VERSION): such a
database, and one newer than ours, is refused.

`SchemaCheck` holds these decisions once for the SQLite, PostgreSQL and MySQL
endpoints; each runs the SQL with its own driver, inside its own transaction or
lock.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from streamer.endpoints.base import EndpointError
from streamer.endpoints.db.schema.stampede import BY_NAME, SCHEMA_VERSION, SchemaMismatch, check

MIN_UPGRADABLE = 8
"""Pegasus 5's DB_MIN_VERSION: the oldest schema its migrations start from."""

LATEST_VERSION_SQL = "SELECT version, version_number FROM dbversion ORDER BY id DESC LIMIT 1"
"""The version Pegasus reads: that of the last row written."""

UPGRADED_VERSION_TEXT = f"{SCHEMA_VERSION}.0"


def parse_version(row: tuple | None) -> int | None:
    """(version text, version_number) of the latest row -> the schema version, None when no row."""
    if row is None:
        return None
    text, number = row[0], row[1]
    try:
        return int(float(text))
    except (TypeError, ValueError):
        return int(number) if number is not None else None


def admin_url(endpoint_url: str) -> str:
    """The URL `pegasus-db-admin` takes for this database (SQLAlchemy's form, options dropped)."""
    base = endpoint_url.split("?", 1)[0]
    if base.startswith("mariadb://"):
        base = "mysql://" + base[len("mariadb://"):]
    return base


def needs_upgrade(version: int | None, endpoint_url: str, *, allowed: bool) -> bool:
    """True when the database must be upgraded (and `allowed` says so); raises SchemaMismatch when refused."""
    if version is None or version == SCHEMA_VERSION:
        return False
    url = admin_url(endpoint_url)
    if version > SCHEMA_VERSION:
        raise SchemaMismatch(
            f"Stampede schema version {version} (written by a newer Pegasus) found, streamer writes version "
            f"{SCHEMA_VERSION}: downgrade it with `pegasus-db-admin downgrade -V 5.0.1 {url}`, or use another database")
    if version < MIN_UPGRADABLE:
        raise SchemaMismatch(
            f"Stampede schema version {version} found: older than any schema Pegasus 5 upgrades "
            f"(version {MIN_UPGRADABLE}); use another database")
    if not allowed:
        raise SchemaMismatch(
            f"Stampede schema version {version} found, streamer writes version {SCHEMA_VERSION}: "
            f"upgrade it with `pegasus-db-admin update {url}` (or run streamer with --upgrade-schema, "
            f"or add ?upgrade_schema=true to the URL)")
    return True


def upgrade_statements(existing: dict[str, list[str]], dialect: str = "sqlite") -> list[str]:
    """SQL that brings the tables of a version 8..13 database to version 14 (missing tables aside:
    the caller creates those, as for a new database)."""
    out: list[str] = []
    if "integrity_metrics" in existing and "integrity" not in existing:
        out.append("ALTER TABLE integrity_metrics RENAME TO integrity")
    if "sequences" in existing:
        out.append("DROP TABLE sequences")
    columns = [c.lower() for c in existing.get("invocation", [])]
    if columns:
        if "maxrss" not in columns:
            out.append("ALTER TABLE invocation ADD COLUMN maxrss INTEGER")
        if "avg_cpu" not in columns:
            out.append("ALTER TABLE invocation ADD COLUMN avg_cpu NUMERIC(16, 6)")
    return out


COLUMNS_SQL = ("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = {} "
               "ORDER BY table_name, ordinal_position")
"""Tables and their columns in order, from a server's catalog: `.format` the current schema's expression."""


def tables_of(rows: Iterable[Any]) -> dict[str, list[str]]:
    """(table, column) rows in column order -> {table: [columns]}."""
    existing: dict[str, list[str]] = {}
    for table, column in rows:
        existing.setdefault(table, []).append(column)
    return existing


class SchemaCheck:
    """Create, upgrade or refuse a database's Stampede schema. A driver runs, in one transaction or lock:

        check = SchemaCheck(endpoint_name, upgrade=..., dialect=...)
        existing = <tables and their columns>
        if check.reads_version(existing):
            check.found(<the row of LATEST_VERSION_SQL>)
        <run check.upgrade_sql(existing)>
        missing = check.missing(<tables and columns read again> if check.upgraded else existing)
        <create the missing tables (and indexes)>; <insert check.version_row() into dbversion unless None>

    A refusal (another schema, a version Pegasus would not upgrade, an upgrade not allowed) is an
    `EndpointError` naming the endpoint."""

    def __init__(self, endpoint_name: str, *, upgrade: bool, dialect: str) -> None:
        self.endpoint_name = endpoint_name
        self.allowed = upgrade
        self.dialect = dialect
        self.version: int | None = None
        self.upgraded = False

    def reads_version(self, existing: dict[str, list[str]]) -> bool:
        """Whether the database has Pegasus's `dbversion` table to read the version from."""
        return existing.get("dbversion") == list(BY_NAME["dbversion"].column_names)

    def found(self, row: Any) -> None:
        self.version = parse_version(row)

    def upgrade_sql(self, existing: dict[str, list[str]]) -> list[str]:
        """The statements of the upgrade, or none when the version is ours (or there is none)."""
        try:
            if not needs_upgrade(self.version, self.endpoint_name, allowed=self.allowed):
                return []
        except SchemaMismatch as exc:
            raise EndpointError(f"{self.endpoint_name}: {exc}") from None
        self.version, self.upgraded = SCHEMA_VERSION, True
        return upgrade_statements(existing, self.dialect)

    def missing(self, existing: dict[str, list[str]]) -> set[str]:
        """The tables to create; refuses tables that are another schema's."""
        try:
            return set(check(existing, self.version))
        except SchemaMismatch as exc:
            raise EndpointError(f"{self.endpoint_name}: {exc}") from None

    def version_row(self) -> tuple[int, str, int] | None:
        """(version_number, version, version_timestamp) to append to `dbversion`: for a new or upgraded schema."""
        if self.version is not None and not self.upgraded:
            return None
        return SCHEMA_VERSION, UPGRADED_VERSION_TEXT if self.upgraded else str(SCHEMA_VERSION), int(time.time())
