"""The Stampede schema (version 14) as Pegasus creates it in MySQL / MariaDB.

Rendered from the same table list as the SQLite and PostgreSQL schema
(`stampede_schema.TABLES`), with the types Pegasus's SQLAlchemy models get in
MySQL: keys `BIGINT` (`AUTO_INCREMENT` for the primary keys), `INT`,
`DECIMAL(16,6)` / `DECIMAL(10,3)`, `BOOL`, native `ENUM` columns for the
enumerations, `TEXT` / `VARCHAR(n)`; InnoDB, utf8mb4; unique constraints and
indexes inside `CREATE TABLE` (MySQL has no `CREATE INDEX IF NOT EXISTS`).
`tests/endpoints/test_mysql.py` compares the result column for column with a database
`pegasus-db-admin create` made on the same server.

Identifiers are written with double quotes, like the loader's SQL: the
endpoint's sessions run with `sql_mode` ANSI_QUOTES.
"""

from __future__ import annotations

import re

from streamer.endpoints.db.schema.stampede import TABLES, Column, Table, enum_types

_TYPES = {
    "id": "BIGINT", "key": "BIGINT", "int": "INTEGER", "bigint": "BIGINT", "text": "TEXT", "ts": "DECIMAL(16, 6)",
    "dur": "DECIMAL(10, 3)", "bool": "BOOL", "datetime": "DATETIME",
}
_UNIQUE = re.compile(r'^CONSTRAINT "(\w+)" UNIQUE \((.*)\)$')


def _column_type(table: Table, col: Column, enums: dict[str, tuple[str, str]]) -> str:
    if col.name in enums:
        return f"ENUM({enums[col.name][1]})"
    if col.kind.startswith("str:"):
        return f"VARCHAR({col.kind[4:]})"
    return _TYPES[col.kind]


def _q(name: str) -> str:
    return f'"{name}"'


def create_table_sql(table: Table) -> str:
    """`CREATE TABLE IF NOT EXISTS` of one table in MySQL."""
    enums = enum_types(table)
    lines = []
    single_pk = len(table.primary_key) == 1
    for col in table.columns:
        kind = _column_type(table, col, enums)
        extra = " NOT NULL" if col.not_null else ""
        if col.kind == "id" and single_pk and table.primary_key == (col.name,):
            extra = " NOT NULL AUTO_INCREMENT"
        lines.append(f"\t{_q(col.name)} {kind}{extra}")
    lines.append(f"\tPRIMARY KEY ({', '.join(_q(c) for c in table.primary_key)})")
    for text in table.constraints:
        unique = _UNIQUE.match(text)
        if unique:
            cols = ", ".join(_q(c.strip()) for c in unique[2].split(","))
            lines.append(f"\tUNIQUE KEY {_q(unique[1])} ({cols})")
        elif text.startswith("CONSTRAINT ") and " CHECK " in text:
            continue  # a named enumeration: the column is an ENUM
        elif text.startswith("FOREIGN KEY"):
            lines.append(f"\t{text}")
        elif text.startswith("CHECK"):
            lines.append(f"\t{text}")
    for name, column in table.indexes:
        lines.append(f"\tKEY {_q(name)} ({_q(column)})")
    body = ",\n".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {_q(table.name)} (\n{body}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


def ddl() -> list[str]:
    """Every statement that creates the schema, in dependency order."""
    return [create_table_sql(t) for t in TABLES]
