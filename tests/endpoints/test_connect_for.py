"""A database never reached gives up after `connect_for` (30 s), one reached after `retry_for` (300 s): both
documented, both named when the endpoint gives up (issue 26 item 16)."""

from __future__ import annotations

import asyncio

import pytest

from streamer.cli.help import DEST_URLS
from streamer.endpoints import EndpointError, create_endpoint
from streamer.util.urls import EndpointURL
from tests.support.ownservers import free_port


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_a_server_never_reached_gives_up_after_connect_for_and_names_it(scheme: str) -> None:
    """Nothing listens on the port (a mistyped one): the endpoint gives up after connect_for, not after the
    retry_for it was given, and says which setting ended it (not `retry_for=30` where 300 was given)."""
    url = f"{scheme}://root@127.0.0.1:{free_port()}/stampede?connect_for=1&retry_for=300"
    endpoint = create_endpoint(EndpointURL.parse(url))
    with pytest.raises(EndpointError) as caught:
        asyncio.run(endpoint.open())
    message = str(caught.value)
    assert "connect_for=1" in message and "retry_for=30)" not in message, message


def test_help_documents_connect_for_and_retry_for() -> None:
    for scheme in ("postgresql", "mysql, mariadb"):
        (line,) = [line for line in DEST_URLS.splitlines() if line.strip().startswith(scheme + " ")]
        assert "retry_for=300" in line and "connect_for=30" in line, line

