"""Endpoint URLs: parsing, options from the query string, and password masking."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]*)@")


def mask(text: str) -> str:
    """Replace every password in URLs inside `text` with `***` (safe to log)."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


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
            raise ValueError(f"not an endpoint URL: {mask(raw)!r} (expected scheme://..., e.g. file:///tmp/events.jsonl)")
        parts = urlsplit(raw)
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment))
        # file:relative and sqlite:///relative keep their path verbatim
        return cls(raw=raw, scheme=parts.scheme.lower(), base=base, options=options)


SECRET_OPTIONS = ("password_file", "password_env")
"""URL options (or config keys) that give an endpoint's password without writing it on the command line."""


def with_password(url: EndpointURL, options: dict[str, Any] | None = None) -> EndpointURL:
    """`url` with the password that `password_file=PATH` or `password_env=NAME` names put into it.

    A password written in `--dest` shows in the process list (`ps`) of every
    user of the machine; one read from a file (mode 0600, or a container
    secret) or from the environment does not. The options are consumed (the
    endpoint never sees them); the URL keeps its user name, which it must have.
    Raises ValueError naming what is missing.
    """
    given = {key: value for key, value in {**url.options, **(options or {})}.items() if key in SECRET_OPTIONS}
    if not given:
        return url
    if len(given) > 1:
        raise ValueError(f"{url.masked}: give password_file or password_env, not both")
    if options:
        for key in SECRET_OPTIONS:
            options.pop(key, None)
    key, source = next(iter(given.items()))
    if key == "password_file":
        try:
            password = Path(str(source)).expanduser().read_text().rstrip("\r\n")
        except OSError as exc:
            raise ValueError(f"{url.masked}: password_file {source}: {exc.strerror or exc}") from None
    else:
        from_env = os.environ.get(str(source))
        if from_env is None:
            raise ValueError(f"{url.masked}: password_env: the environment variable {source} is not set")
        password = from_env
    parts = urlsplit(url.raw)
    user, at, host = parts.netloc.rpartition("@")
    if not at:
        raise ValueError(f"{url.masked}: {key} needs a user name in the URL (e.g. {parts.scheme}://USER@{host}/...)")
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in SECRET_OPTIONS])
    netloc = f"{user.partition(':')[0]}:{quote(password, safe='')}@{host}"
    return EndpointURL.parse(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))
