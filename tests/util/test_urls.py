"""`util/urls.EndpointURL`: a URL parsed once, into the parts every endpoint and source reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer.util.urls import EndpointURL, Host, URLError, is_amqp, with_password


def test_a_broker_list_with_credentials_path_and_options() -> None:
    url = EndpointURL.parse("amqps://al%40ice:p%3Ass@H1:5672,h2,[::1]:99/pegasus%2Fv/ex?events=stampede.*&x=")
    assert (url.scheme, url.kind, url.user, url.password) == ("amqps", "amqp", "al@ice", "p:ss")
    assert url.hosts == (Host("h1", "5672"), Host("h2"), Host("::1", "99"))
    assert [h.port_number(5671) for h in url.hosts] == [5672, 5671, 99]
    assert (url.path, url.segments) == ("/pegasus%2Fv/ex", ["pegasus%2Fv", "ex"])
    assert url.options == {"events": "stampede.*", "x": ""}
    assert url.base == "amqps://al%40ice:p%3Ass@H1:5672,h2,[::1]:99/pegasus%2Fv/ex"
    assert url.masked == "amqps://al%40ice:***@H1:5672,h2,[::1]:99/pegasus%2Fv/ex?events=stampede.*&x="
    assert str(url) == repr(url)[len("EndpointURL('"):-2] == url.masked  # printed, never with its password


def test_no_user_info_no_port_and_the_terminal_forms() -> None:
    url = EndpointURL.parse("postgres://db.example.org/stampede")
    assert (url.user, url.password, url.hosts, url.kind) == (None, None, (Host("db.example.org"),), "postgresql")
    assert url.pg_dsn == "postgresql://db.example.org/stampede"
    assert EndpointURL.parse("mysql://u@h/db").password is None and EndpointURL.parse("mysql://u:@h/db").password == ""
    for text in ("-", "-?fields=all", "term:?fields=all"):
        term = EndpointURL.parse(text)
        assert (term.scheme, term.base) == ("term", "-")
    assert EndpointURL.parse("-?fields=all").options == {"fields": "all"}


def test_a_bad_port_is_the_endpoints_to_refuse() -> None:
    host = EndpointURL.parse("amqp://h:99999,h2:x/ex").hosts
    for bad in host:
        with pytest.raises(ValueError):
            bad.port_number(5672)


def test_the_value_is_frozen_and_compares_by_its_text() -> None:
    url = EndpointURL.parse("file:///tmp/a.jsonl?encoding=bp")
    with pytest.raises(dataclasses.FrozenInstanceError):
        url.raw = "file:///etc/passwd"  # type: ignore[misc]
    url.options["encoding"] = "json"  # a copy: the URL's own options do not change
    assert url.options == {"encoding": "bp"}
    assert url == EndpointURL.parse(" file:///tmp/a.jsonl?encoding=bp ") and hash(url) == hash(EndpointURL.parse(url.raw))


def test_given_makes_a_bare_path_a_file_url(tmp_path: Path) -> None:
    assert EndpointURL.given(str(tmp_path / "x.bp")).raw == f"file://{tmp_path}/x.bp"
    assert EndpointURL.given("-").scheme == "term"
    with pytest.raises(URLError, match="not an endpoint URL"):
        EndpointURL.parse("/tmp/x.bp")


def test_with_password_rebuilds_the_url_from_its_parts(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cr@t/x\n")
    url = with_password(EndpointURL.parse(f"amqp://bob@h1,h2:5673/%2F/ex?password_file={secret}&window=5"))
    assert (url.user, url.password, url.hosts) == ("bob", "s3cr@t/x", (Host("h1"), Host("h2", "5673")))
    assert url.options == {"window": "5"} and url.segments == ["%2F", "ex"]
    with pytest.raises(URLError, match="needs a user name in the URL"):
        with_password(EndpointURL.parse(f"amqp://h/%2F/ex?password_file={secret}"))


def test_is_amqp_tells_a_broker_from_a_file() -> None:
    assert is_amqp("amqp://h/x") and is_amqp("amqps://h/x")
    assert not is_amqp("amqp.jsonl") and not is_amqp("/data/amqp://x")
