"""Endpoint URLs: parsing, options from the query string, and password masking."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Host:
    """One host of a URL's netloc as written: `name` lower-cased (brackets of `[::1]` removed), `port` the text
    after its `:` ("" when none). Checked by the endpoint that uses it (`port_number`)."""

    name: str
    port: str = ""

    def port_number(self, default: int) -> int:
        """The port, `default` when none is written; ValueError when it is not a number in 0..65535."""
        if not self.port:
            return default
        if not self.port.isdigit() or int(self.port) > 65535:
            raise ValueError(self.port)
        return int(self.port)


def _hosts(netloc: str) -> tuple[Host, ...]:
    """`h1[:p1],h2[:p2],[::1]:p3` (after any `user:pass@`) -> its hosts, empty names kept (for the message)."""
    hosts = []
    for item in netloc.rpartition("@")[2].split(","):
        item = item.strip()
        if item.startswith("["):
            name, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else rest
        else:
            name, _, port = item.partition(":")
        hosts.append(Host(name.lower(), port))
    return tuple(hosts)


@dataclass(frozen=True)
class EndpointURL:
    """A `--dest` URL (or a source's), parsed once where the user's text enters (`config/settings.endpoint_url`)
    and passed down typed: every endpoint and source reads its parts from here, never from the text again.

    `raw` is the text as given (with its password: print `masked`); `base` the URL without its query;
    `netloc` what follows `//` (user info included); `user`/`password` decoded (None when not written);
    `hosts` each host of `h1:5672,h2,h3`; `path` as written (percent-encoded: `segments` splits it);
    `query` the options in order (`options` as a dict, the last of a repeated name winning)."""

    raw: str
    scheme: str
    base: str
    query: tuple[tuple[str, str], ...] = ()
    netloc: str = ""
    user: str | None = None
    password: str | None = None
    hosts: tuple[Host, ...] = ()
    path: str = ""

    @property
    def options(self) -> dict[str, str]:
        """The query's options (a new dict: the URL itself never changes)."""
        return dict(self.query)

    @property
    def segments(self) -> list[str]:
        """The path's `/`-separated parts after the first `/`, as written (percent-encoded)."""
        return self.path.split("/")[1:] if self.path else []

    @property
    def kind(self) -> str:
        """The endpoint kind: the scheme, its aliases folded (`postgres` -> `postgresql`, `amqps` -> `amqp`)."""
        return _KINDS.get(self.scheme, self.scheme)

    @property
    def pg_dsn(self) -> str:
        """`base` as libpq and asyncpg take it: the scheme written `postgresql` (`postgres://` is an alias)."""
        return "postgresql" + self.base[len(self.scheme):] if self.kind == "postgresql" else self.base

    @property
    def masked(self) -> str:
        return mask(self.raw)

    @property
    def masked_base(self) -> str:
        return mask(self.base)

    def __str__(self) -> str:  # never print a password by accident
        return self.masked

    def __repr__(self) -> str:
        return f"EndpointURL({self.masked!r})"

    @classmethod
    def parse(cls, raw: str) -> "EndpointURL":
        """The one URL parser. URLError when `raw` is not a URL (a bare path is made one by `normalise` first)."""
        raw = raw.strip()
        if raw == "-" or raw.startswith("-?"):
            return cls(raw=raw, scheme="term", base="-", query=_query(raw[2:]))
        if raw.startswith("term:") and "://" not in raw:
            return cls(raw=raw, scheme="term", base="-", query=_query(raw.partition("?")[2]))
        if "://" not in raw:
            raise URLError(f"not an endpoint URL: {mask(raw)!r} (expected scheme://..., e.g. file:///tmp/events.jsonl)")
        parts = urlsplit(raw)
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment))
        userinfo, at, _ = parts.netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        # file:relative and sqlite:///relative keep their path verbatim
        return cls(raw=raw, scheme=parts.scheme.lower(), base=base, query=_query(parts.query), netloc=parts.netloc,
                   user=unquote(user) if at else None, password=unquote(password) if at and colon else None,
                   hosts=_hosts(parts.netloc), path=parts.path)

    @classmethod
    def given(cls, text: str) -> "EndpointURL":
        """What a user wrote (`--dest`, a config's `url`): a bare path is a file, `-` the terminal, else a URL."""
        return cls.parse(normalise(text))

    def replaced(self, *, password: str, drop: tuple[str, ...] = ()) -> "EndpointURL":
        """This URL with `password` in its user info and the options `drop` left out (`with_password`)."""
        parts = urlsplit(self.raw)
        user, at, host = self.netloc.rpartition("@")
        query = urlencode([(k, v) for k, v in self.query if k not in drop])
        netloc = f"{user.partition(':')[0]}:{quote(password, safe='')}@{host}"
        return EndpointURL.parse(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


_KINDS = {"postgres": "postgresql", "amqps": "amqp"}
AMQP_SCHEMES = ("amqp://", "amqps://")
"""How an AMQP URL begins: what tells a broker from a file among a command's sources."""


def is_amqp(text: str) -> bool:
    """Does a command's source argument name a broker (`amqp://`, `amqps://`) rather than a file?"""
    return text.startswith(AMQP_SCHEMES)


def _query(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(parse_qsl(text, keep_blank_values=True))


def normalise(text: str) -> str:
    """A bare path (`/tmp/x.bp`, `out.jsonl`, `file:rel.bp`) as a `file://` URL (absolute); `-` and `term:` the
    terminal; anything with `://` as given."""
    text = text.strip()
    if text == "-" or text.startswith(("-?", "term:")) or "://" in text:
        return text
    if text.startswith("file:"):
        return "file://" + str(Path(text[len("file:"):]).expanduser().resolve())
    return "file://" + str(Path(text).expanduser().resolve())


PLACEHOLDER = "change-me"
"""How the example passwords of deploy/ (.env.example, streamer.env.example) begin."""


def refuse_placeholder(url: EndpointURL, password: str | None) -> None:
    """URLError when `password` (decoded) is still a `change-me-…` placeholder of deploy/'s examples: a deployment
    must not run with a password anyone can read in the repository."""
    if password is not None and password.startswith(PLACEHOLDER):
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
        refuse_placeholder(url, url.password)
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
    if url.user is None:
        raise URLError(f"{url.masked}: {key} needs a user name in the URL (e.g. {url.scheme}://USER@{url.netloc}/...)")
    return url.replaced(password=password, drop=SECRET_OPTIONS)
