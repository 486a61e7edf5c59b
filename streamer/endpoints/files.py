"""`file://` endpoint: JSON lines or BP, appended, one write per batch (aiofiles).

Encoding comes from `?encoding=json|bp`, else from the suffix (`.jsonl`,
`.json`, `.ndjson` -> JSON; anything else -> BP, monitord's default).
`?fsync=true` makes every checkpoint fsync the file. `?mode=append` adds to
the file, `?mode=truncate` starts it afresh; without `mode` a file is appended
to, except in a replay (`streamer replay`, the `replay` option), which
overwrites it as `pegasus-monitord -r --dest file.bp` does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote, urlsplit

import aiofiles

from ..events import Event, bp, jsonenc
from ..events.event import ensure_ids
from ..urls import EndpointURL
from .base import Endpoint, EndpointError

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


def file_path(url: EndpointURL) -> Path:
    """`file:///abs/x.bp` -> /abs/x.bp; `file://rel/x.bp` and `file:rel/x.bp` -> rel/x.bp."""
    parts = urlsplit(url.base)
    path = unquote(parts.netloc + parts.path) if parts.netloc not in ("", "localhost") else unquote(parts.path)
    if not path:
        raise EndpointError(f"{url.masked}: no file path")
    return Path(path)


def encoding_for(path: Path, requested: str | None) -> str:
    if requested:
        value = requested.lower()
        if value not in ("json", "bp"):
            raise EndpointError(f"unknown encoding {requested!r} (use json or bp)")
        return value
    return "json" if path.suffix.lower() in JSON_SUFFIXES else "bp"


def encode_batch(events: Sequence[Event], encoding: str) -> bytes:
    """One newline-terminated record per event."""
    if encoding == "json":
        return jsonenc.join(events)
    return bp.join(list(events))


class FileEndpoint(Endpoint):
    schemes = ("file",)

    def __init__(self, url: EndpointURL, options: dict | None = None) -> None:
        super().__init__(url, options)
        self.path = file_path(url)
        self.encoding = encoding_for(self.path, self.option("encoding"))
        self.fsync = self.flag("fsync")
        self._file = None
        self._dirty = False

    async def open(self) -> None:
        if self.path.is_dir():
            raise EndpointError(f"{self.path}: is a directory")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            mode = self._open_mode()
            self._file = await aiofiles.open(self.path, mode)
        except OSError as exc:
            raise EndpointError(f"{self.path}: cannot open for writing: {exc.strerror or exc}") from None

    def _open_mode(self) -> str:
        requested = self.option("mode")
        if requested is None:
            return "wb" if self.flag("replay") else "ab"
        value = str(requested).lower()
        if value not in ("append", "truncate"):
            raise EndpointError(f"{self.url.masked}: unknown mode {requested!r} (use append or truncate)")
        return "wb" if value == "truncate" else "ab"

    def prepare(self, events: Sequence[Event]) -> None:
        if self.encoding == "json":
            jsonenc.prepare(list(events))  # cached on the events, with their ids
        else:
            ensure_ids(list(events))  # the BP text is the line read, or written at `write`

    async def write(self, batch: Sequence[Event]) -> None:
        if self._file is None:
            await self.open()
        data = self.encode_each(batch, lambda events: encode_batch(events, self.encoding), b"".join)
        try:
            await self._file.write(data)
            await self._file.flush()
        except OSError as exc:
            raise EndpointError(f"{self.path}: write failed: {exc.strerror or exc}") from None
        self._dirty = True

    async def flush(self) -> None:
        if self._file is not None and self.fsync and self._dirty:
            await self._file.flush()
            os.fsync(self._file.fileno())
            self._dirty = False

    async def close(self) -> None:
        if self._file is not None:
            await self.flush()
            await self._file.close()
            self._file = None
