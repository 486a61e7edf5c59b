"""The native codec of events, chosen once at import: the compiled `_codec`, or none.

`CODEC` is the C extension built from `_codec.c` when it is there and
`STREAMER_PURE_PYTHON` is not set (streamer.util.compiled), else None and every
caller runs its Python code. It is an accelerator only: each function returns
None (or counts what it left) for anything it does not handle, and the Python
modules (bp.py, jsonenc.py, canonical.py) decide those and stay the one
definition of the formats. The protocol below is everything callers may use.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, cast

from streamer.util.compiled import fast_module


class NativeCodec(Protocol):
    """What `_codec.c` offers (see its header comment for each function's contract)."""

    def configure(self, event_type: type, plans: dict[str, Any], plan_for: Callable[[str], Any],
                  integer: Callable[[Any], Any], number: Callable[[Any], Any], timestamp: Callable[[Any], Any],
                  parse_ts: Callable[[Any], Any], /) -> None: ...

    def split_line(self, line: str, /) -> dict[str, str] | None: ...

    def parse_event(self, line: str, /) -> Any: ...

    def join_lines(self, events: list[Any], /) -> bytes | None: ...

    def format_fields(self, head: str, fields: dict[str, Any], /) -> str | None: ...

    def json_object(self, fields: dict[str, Any], keys: tuple[str, ...], event_id: str, name: str, /
                    ) -> bytes | None: ...

    def canonical(self, name: str, fields: dict[str, Any], /) -> bytes | None: ...

    def event_id(self, name: str, fields: dict[str, Any], /) -> str | None: ...

    def hash_hex(self, data: bytes, /) -> str: ...

    def ensure_ids(self, events: list[Any], /) -> int: ...

    def encode_events(self, events: list[Any], shapes: dict[Any, Any], renamed_keys: Callable[..., Any], /
                      ) -> int: ...


CODEC: NativeCodec | None = cast("NativeCodec | None", fast_module("streamer.events._codec"))
"""The compiled codec in use, or None (pure Python: same results, slower)."""
