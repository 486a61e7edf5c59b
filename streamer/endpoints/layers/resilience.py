"""Retrying a database batch through the faults that concurrency and networks cause.

Many writers share one Stampede database (one streamer per workflow, many
submit hosts). Their transactions can meet in ways that are nobody's fault
and go away on a second try:

- **deadlock** (PostgreSQL `40P01`): two transactions waited on each other;
  the server aborted one of them;
- **serialization failure** (`40001`);
- **lock timeout** (PostgreSQL `55P03`, SQLite `database is locked` /
  `database table is locked` after its busy timeout);
- **dropped connection** (server restart, `pg_terminate_backend`, network);
- **stale ids** (`STALE_IDS`): another writer inserted a workflow's job, job instance, task or host rows
  after this one cached that workflow's ids (a collector that came and went between two of our batches).

A batch is one transaction, so a failed attempt left nothing behind and
writing the batch again is safe (the loader's inserts are idempotent on
natural keys, so even a COMMIT whose acknowledgement was lost is harmless).
The one retry loop is `core/retry.py` (`retrying` here is it, speaking as an
endpoint): it runs an attempt, and on a `TransientError` waits (exponential
back-off with full jitter, so writers that collided do not collide again in
step) and runs it again, for up to `retry_for` seconds. A fault is reported (a warning naming the endpoint) only
once it has persisted `quiet_for` seconds; one that outlives `retry_for`
raises `Unavailable` (an `EndpointError`) saying what kept failing and for how
long: it fails the endpoint, or, under the spooling layer (`spooling.py`),
sends the batch to the spool.

Each kind of endpoint classifies its driver's exceptions in one function —
`postgres_fault`, `sqlite_fault` here, `mysql.mysql_fault`, and for AMQP
`amqperrors.classify` (through `amqpconn.BrokerUnavailable.permanent`) — and
raises `TransientError` for the retriable ones; everything else is permanent
and is not retried. The AMQP endpoint's reconnecting and re-publishing and the
spooling layer's replay use the same loop.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Awaitable, Callable, Sequence

from streamer.core import retry
from streamer.core.retry import Exhausted, Reporting, RetryPolicy, RetryStats, TransientError
from streamer.util.urls import mask
from streamer.endpoints.base import EndpointError

log = logging.getLogger("streamer.endpoints.db")

DEADLOCK = "deadlock"
SERIALIZATION = "serialization failure"
LOCK_TIMEOUT = "lock timeout"
CONNECTION = "connection lost"
STALE_IDS = "rows another writer inserted"
"""A new row conflicting on its natural key in a table the loader inserts into only for keys it found absent
(`plan.FRESH_TABLES`): another writer inserted it after this one cached the workflow's ids. The attempt
forgets the cached ids; the next one re-reads them."""


class Unavailable(Exhausted, EndpointError):
    """A retriable fault outlasted `retry_for`: the endpoint cannot take batches now, but a later try may.

    Without a spool it fails the endpoint as any error does; with one
    (`?spool=DIR`, `spooling.py`) the batch is spooled and replayed once the
    endpoint is back. `kind` is the fault's (`CONNECTION`, `DEADLOCK`, ...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(kind, message)
        self.rest: Sequence[Any] | None = None
        """The events of the batch not delivered, when the endpoint knows (AMQP: those not confirmed);
        None: the whole batch."""


class Rejected(EndpointError):
    """The endpoint refused the content of a batch for good (a value its column cannot hold, a constraint
    it cannot satisfy, a message the broker cannot route): writing the same events again cannot succeed.

    Without a dead-letter file it fails the endpoint as any error does; with one
    (`?dead_letter=PATH`, `deadletter.py`) the refused events are set aside there
    and the endpoint goes on."""


def rejects_content(exc: BaseException) -> bool:
    """Whether a driver's exception refuses the data rather than the connection or the schema:
    PostgreSQL/SQLite/MySQL data exceptions (SQLSTATE class 22) and integrity violations (class 23)."""
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str):
        return state[:2] in ("22", "23")
    return isinstance(exc, (sqlite3.IntegrityError, sqlite3.DataError)) or type(exc).__name__ in (
        "IntegrityError", "DataError")


_PG_STATES = {"40P01": DEADLOCK, "40001": SERIALIZATION, "55P03": LOCK_TIMEOUT}


def postgres_fault(exc: BaseException, connection_errors: tuple[type[BaseException], ...]) -> str | None:
    """The transient kind of an asyncpg exception, or None when it is a real error."""
    state = getattr(exc, "sqlstate", None)
    if state in _PG_STATES:
        return _PG_STATES[state]
    if isinstance(exc, connection_errors):
        return CONNECTION
    if isinstance(state, str) and state[:2] in ("08", "57"):  # connection exception, operator intervention
        return CONNECTION
    return None


def sqlite_fault(exc: BaseException) -> str | None:
    """`database is locked` (busy timeout spent) and `database table is locked` are transient."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            return LOCK_TIMEOUT
    return None


def first_connection(retry_for: float, connect_for: float) -> RetryPolicy:
    """How long a database endpoint tries to reach its server the first time: `connect_for` (a mistyped host
    or port should not keep a command waiting `retry_for`), or `retry_for` when that is shorter (a spool's
    grace); the setting that decided is named when it gives up."""
    if connect_for < retry_for:
        return RetryPolicy(retry_for=connect_for, setting="connect_for")
    return RetryPolicy(retry_for=retry_for)


ENDPOINTS = Reporting(exhausted=Unavailable, redact=mask, logger=log)
"""How the endpoints' retry loops speak: `Unavailable` when a fault outlasts `retry_for`, URLs masked."""


async def retrying(name: str, what: str, attempt: Callable[[], Awaitable[Any]], policy: RetryPolicy,
                   stats: RetryStats | None = None,
                   between: Callable[[str], Awaitable[None]] | None = None) -> Any:
    """`core.retry.retrying` as the endpoints use it (see `ENDPOINTS`)."""
    return await retry.retrying(name, what, attempt, policy, stats, between, ENDPOINTS)


def retrying_sync(name: str, what: str, attempt: Callable[[], Any], policy: RetryPolicy,
                  stats: RetryStats | None = None) -> Any:
    """`core.retry.retrying_sync` as the SQLite endpoint uses it (see `ENDPOINTS`)."""
    return retry.retrying_sync(name, what, attempt, policy, stats, ENDPOINTS)


__all__ = ["CONNECTION", "DEADLOCK", "ENDPOINTS", "LOCK_TIMEOUT", "SERIALIZATION", "STALE_IDS", "Rejected",
           "RetryPolicy", "RetryStats", "TransientError", "Unavailable", "first_connection", "postgres_fault",
           "rejects_content", "retrying", "retrying_sync", "sqlite_fault"]
