"""Endpoint URLs: parsing, options from the query string, and password masking."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit


_USER = re.compile(r"[^:/?#\s]*")
"""A URL's user name: what follows `//` up to `:` (one character class, so matching it is linear)."""
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


class URLError(ValueError):
    """A URL streamer cannot use (not a URL, a password it cannot read or must refuse): the user's to fix."""


def mask(text: str) -> str:
    """Replace every password in URLs inside `text` with `***` (safe to log), in time linear in `text`.

    By the URL's structure, not by what a password may hold: after `scheme://user:` the password runs to
    the *last* `@` before the end of the line or the next URL, so a password with `@`, `/`, `:`, `%`, a
    space, `#`, `?` or any other character is hidden whole (`postgresql://u:Ab@Secret9@host/db` ->
    `postgresql://u:***@host/db`). When a line holds another `@` after the URL, more than the password is
    hidden: in doubt, mask more. Each character is looked at a bounded number of times (no backtracking).
    """
    if "://" not in text:
        return text
    out: list[str] = []
    done = 0
    start = text.find("://")
    while start != -1:
        following = text.find("://", start + 3)
        if start == 0 or text[start - 1] not in _SCHEME_CHARS:
            start = following
            continue
        user = _USER.match(text, start + 3)
        colon = user.end() if user else start + 3
        if colon >= len(text) or text[colon] != ":":
            start = following
            continue
        end = len(text) if following == -1 else following
        for newline in ("\n", "\r"):
            found = text.find(newline, colon, end)
            end = found if found != -1 else end
        at = text.rfind("@", colon, end)
        if at != -1:
            out += [text[done:colon + 1], "***"]
            done = at
        start = following
    out.append(text[done:])
    return "".join(out)


@dataclass
class EndpointURL:
    """A `--dest` URL split into scheme, the URL without its query, and options."""

    raw: str
    scheme: str
    base: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def masked(self) -> str:
        return mask(self.raw)

    def __str__(self) -> str:  # never print a password by accident
        return self.masked

    def __repr__(self) -> str:
        return f"EndpointURL({self.masked!r})"

    @classmethod
    def parse(cls, raw: str) -> "EndpointURL":
        raw = raw.strip()
        if raw == "-" or raw.startswith("-?"):
            options = dict(parse_qsl(raw[2:], keep_blank_values=True))
            return cls(raw=raw, scheme="term", base="-", options=options)
        if raw.startswith("term:") and "://" not in raw:
            options = dict(parse_qsl(raw.partition("?")[2], keep_blank_values=True))
            return cls(raw=raw, scheme="term", base="-", options=options)
        if "://" not in raw:
            raise URLError(f"not an endpoint URL: {mask(raw)!r} (expected scheme://..., e.g. file:///tmp/events.jsonl)")
        parts = urlsplit(raw)
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment))
        # file:relative and sqlite:///relative keep their path verbatim
        return cls(raw=raw, scheme=parts.scheme.lower(), base=base, options=options)


PLACEHOLDER = "change-me"
"""How the example passwords of deploy/ (.env.example, streamer.env.example) begin."""


def refuse_placeholder(url: EndpointURL, password: str | None) -> None:
    """URLError when `password` is still a `change-me-…` placeholder of deploy/'s examples: a deployment
    must not run with a password anyone can read in the repository."""
    if password is not None and unquote(password).startswith(PLACEHOLDER):
        raise URLError(f"{url.masked}: the password is still the placeholder from deploy/'s examples "
                         f"({PLACEHOLDER}-...); set a real one (deploy/.env, or the password file)")


SECRET_OPTIONS = ("password_file", "password_env")
"""URL options (or config keys) that give an endpoint's password without writing it on the command line."""


def with_password(url: EndpointURL, options: dict[str, Any] | None = None) -> EndpointURL:
    """`url` with the password that `password_file=PATH` or `password_env=NAME` names put into it.

    A password written in `--dest` shows in the process list (`ps`) of every
    user of the machine; one read from a file (mode 0600, or a container
    secret) or from the environment does not. The options are consumed (the
    endpoint never sees them); the URL keeps its user name, which it must have.
    Raises URLError naming what is missing.
    """
    given = {key: value for key, value in {**url.options, **(options or {})}.items() if key in SECRET_OPTIONS}
    if not given:
        refuse_placeholder(url, urlsplit(url.raw).password)
        return url
    if len(given) > 1:
        raise URLError(f"{url.masked}: give password_file or password_env, not both")
    if options:
        for key in SECRET_OPTIONS:
            options.pop(key, None)
    key, source = next(iter(given.items()))
    if key == "password_file":
        try:
            password = Path(str(source)).expanduser().read_text().rstrip("\r\n")
        except OSError as exc:
            raise URLError(f"{url.masked}: password_file {source}: {exc.strerror or exc}") from None
    else:
        from_env = os.environ.get(str(source))
        if from_env is None:
            raise URLError(f"{url.masked}: password_env: the environment variable {source} is not set")
        password = from_env
    refuse_placeholder(url, password)
    parts = urlsplit(url.raw)
    user, at, host = parts.netloc.rpartition("@")
    if not at:
        raise URLError(f"{url.masked}: {key} needs a user name in the URL (e.g. {parts.scheme}://USER@{host}/...)")
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in SECRET_OPTIONS])
    netloc = f"{user.partition(':')[0]}:{quote(password, safe='')}@{host}"
    return EndpointURL.parse(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))
