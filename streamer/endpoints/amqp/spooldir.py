"""Where the AMQP endpoint spools while its broker is away: one directory per destination, stable across runs."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from streamer.amqp.connection import AMQPTarget
from streamer.util import safenames


def _spool_root() -> Path:
    """$STREAMER_STATE_DIR or ~/.local/state/streamer, then amqp-spool."""
    base = os.environ.get("STREAMER_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "streamer")
    return Path(base) / "amqp-spool"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _exchange_prefix(target: AMQPTarget) -> str:
    """The part of a spool directory's name shared by every broker address of one exchange (user, vhost,
    exchange): `<exchange>-<digest>`; the exchange name made safe (it comes from the user's URL)."""
    safe = safenames.portable(target.exchange)
    return f"{safe}-{_digest(f'{target.user}@/{target.vhost}/{target.exchange}')}"


def default_spool_dir(target: AMQPTarget) -> Path:
    """Stable per destination, so the next run finds what this one left: `<exchange>-<digest>-<address digest>`
    under $STREAMER_STATE_DIR or ~/.local/state/streamer (`leftover_spools` finds the other addresses')."""
    return _spool_root() / f"{_exchange_prefix(target)}-{_digest(f'{target.host}:{target.port}')}"


def leftover_spools(target: AMQPTarget) -> list[Path]:
    """Spool directories earlier runs left for this exchange at another broker address (a mistyped port, a
    broker moved) or in the layout before addresses had their own part: delivered by this run first."""
    root, own = _spool_root(), default_spool_dir(target)
    ident = f"{target.user}@{target.host}:{target.port}/{target.vhost}/{target.exchange}"
    earlier = root / f"{_exchange_prefix(target).rsplit('-', 1)[0]}-{_digest(ident)}"
    if not root.is_dir():
        return []
    found = [p for p in root.glob(f"{_exchange_prefix(target)}-*") if p != own] + [earlier]
    return sorted(p for p in set(found) if p.is_dir() and any(p.glob("*.seg")))
