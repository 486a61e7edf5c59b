"""Endpoint URLs: parsing, options from the query string, and password masking."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

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
