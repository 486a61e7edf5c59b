"""What an endpoint still waits for when the user interrupts a run, and what a second interrupt leaves behind.

Duck-typed on the spooling endpoints (AMQP, and the spooling layer around the
others): an endpoint with a `spool` and a `drain_timeout` waits at exit for its
broker or server to take what is spooled. The
pipeline says so at the first Ctrl-C, and what stays in the spool at the second.
"""

from __future__ import annotations

from typing import Any


def _spooled(endpoint: Any) -> int | None:
    spool = getattr(endpoint, "spool", None)
    if spool is None or not hasattr(endpoint, "drain_timeout"):
        return None
    try:
        return len(spool)
    except Exception:  # noqa: BLE001 - a closed spool: nothing to say
        return None


def waiting_for(endpoint: Any) -> str | None:
    """`waiting up to 300 s for the broker ...`, or None when the endpoint waits for nothing."""
    count = _spooled(endpoint)
    if count is None:
        return None
    down = endpoint.health() is not None
    if not count and not down:
        return None
    who = "the broker" if hasattr(endpoint, "publisher") else "the server"
    if not count:  # down, and nothing spooled yet: what is in flight is read again by the next run
        return (f"{endpoint.name}: waiting up to {endpoint.drain_timeout:g} s for {who} (unreachable; nothing "
                f"spooled yet); Ctrl-C again stops at once, and the next run reads again what was not delivered")
    if down and not getattr(endpoint, "patient", True):  # safe on disk: waiting for a server away helps nobody
        return (f"{endpoint.name}: {who} is unreachable: {count:,} spooled events stay in {endpoint.spool_dir} "
                "for the next run")
    return (f"{endpoint.name}: waiting up to {endpoint.drain_timeout:g} s for {who} to take {count:,} spooled "
            f"events; Ctrl-C again leaves them in {endpoint.spool_dir}")


def stop_waiting(endpoint: Any) -> None:
    """The user interrupted the run: an endpoint whose server is away stops waiting for it at close (what it
    spooled stays for the next run); one that is delivering finishes its drain."""
    interrupt = getattr(endpoint, "interrupt", None)
    if callable(interrupt):
        interrupt()


def left_behind(endpoint: Any) -> str | None:
    """What a second interrupt leaves in the endpoint's spool, or None."""
    count = _spooled(endpoint)
    if not count:
        return None
    return (f"{endpoint.name}: {count:,} events stay in {endpoint.spool_dir} "
            "(the next run with this spool delivers them first)")
