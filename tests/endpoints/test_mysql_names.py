"""A database name is quoted as a SQL name, never pasted into SQL (issue 27 item 1): a `--workflow-dest`
template may fill it from a workflow's braindump."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from streamer.endpoints.db.mysql import MySQLEndpoint
from streamer.util.urls import EndpointURL
from tests.endpoints.test_mysql import _query

pytestmark = pytest.mark.mysql


async def test_a_database_name_with_a_quote_stays_a_name(mysql_server: str) -> None:
    name = f'streamer_q"{uuid.uuid4().hex[:8]}"; DROP DATABASE mysql; --'[:60]
    encoded = quote(name, safe="")
    endpoint = MySQLEndpoint(EndpointURL.parse(f"{mysql_server}/{encoded}"))
    try:
        await endpoint.open()
        await endpoint.close()
        found = await _query(mysql_server, None, "SELECT schema_name FROM information_schema.schemata "
                                                 f"WHERE schema_name LIKE 'streamer_q%{name[11:19]}%'")
        assert found == [(name,)]
    finally:
        await _query(mysql_server, None, 'DROP DATABASE IF EXISTS "' + name.replace('"', '""') + '"')
