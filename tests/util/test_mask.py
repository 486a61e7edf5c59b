"""`urls.mask`: passwords hidden by the URL's structure, in time linear in the text (issue 27, items 2 and 3)."""

from __future__ import annotations

import time

import pytest

from streamer.util.urls import EndpointURL, mask

NASTY = ["Ab@Secret9", "a/b", "pass word", "p:q:r", "100%sure", "has#hash", "what?now", "pässwörd\u2603",
         "@@", "x@y/z w", "end@", "s3cr3t"]
"""Passwords with the characters that broke masking: `@`, `/`, `:`, `%`, space, `#`, `?`, unicode."""


@pytest.mark.parametrize("password", NASTY)
@pytest.mark.parametrize("scheme", ["postgresql", "amqp", "amqps", "mysql"])
def test_every_password_is_masked_by_the_urls_structure(scheme: str, password: str) -> None:
    url = f"{scheme}://u:{password}@host:5432/db"
    assert mask(url) == f"{scheme}://u:***@host:5432/db"
    line = f"cannot reach {url}: connection refused"
    assert mask(line) == f"cannot reach {scheme}://u:***@host:5432/db: connection refused"
    assert mask(mask(line)) == mask(line)


def test_the_tail_of_a_password_with_at_signs_does_not_leak() -> None:
    assert mask("postgresql://u:Ab@Secret9@host/db") == "postgresql://u:***@host/db"


def test_two_urls_on_one_line_and_lines_apart() -> None:
    text = "from amqp://a:p/1@h1/v/x to postgresql://b:p 2@h2/db\nthen mysql://c:p#3@h3/d"
    assert mask(text) == "from amqp://a:***@h1/v/x to postgresql://b:***@h2/db\nthen mysql://c:***@h3/d"


@pytest.mark.parametrize("text", [
    "file:///tmp/a.bp", "sqlite:////data/x@y.db", "amqp://host:5672/%2F/x", "postgresql://postgres@127.0.0.1:5432/db",
    "http://host:8080/path", "no url here: a@b", "ts=1 event=stampede.xwf.start xwf.id=x", "://:@", "a://", "",
])
def test_text_without_a_password_is_unchanged(text: str) -> None:
    assert mask(text) == text


def test_a_user_name_with_an_at_sign_keeps_its_password_hidden() -> None:
    assert mask("amqp://me@example.org:pw@host/v/x") == "amqp://me@example.org:***@host/v/x"


def test_endpoint_url_prints_masked_whatever_the_password() -> None:
    for password in NASTY:
        url = EndpointURL.parse(f"postgresql://u:{password}@host/db?events=stampede.*")
        assert password not in str(url) and password not in repr(url) and "u:***@host" in str(url)


def _cpu(text: str) -> float:
    started = time.process_time()
    mask(text)
    return time.process_time() - started


@pytest.mark.parametrize("unit", ["a.", "a", "a:", "a://", "a://b:", "a://b:c", "://b:@", "x://u:p@", "@", ":@"])
def test_masking_is_linear_in_the_text(unit: str) -> None:
    """64 KiB of any repeated piece costs about 4 x 16 KiB of it, not 16 x (the old pattern took 4 s on
    64 KiB of letters and dots). Measured as the ratio of two sizes, so a slow machine does not matter;
    the bound is generous (a quadratic scan gives 16)."""
    small, large = unit * (16_384 // len(unit)), unit * (65_536 // len(unit))
    _cpu(small)
    for _ in range(3):  # the best of three ratios: a busy neighbour only slows one of them
        ratio = _cpu(large) / max(_cpu(small), 1e-4)
        if ratio < 8:
            break
    assert ratio < 8, f"{unit!r}: 64 KiB cost {ratio:.1f} x 16 KiB"


def test_a_megabyte_line_is_masked() -> None:
    line = "ts=2012-03-13T12:50:26Z event=" + "a." * 500_000 + " amqp://u:p@w@h/x"
    assert mask(line).endswith(" amqp://u:***@h/x")
