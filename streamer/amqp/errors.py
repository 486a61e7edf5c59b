"""What a failed AMQP connection means, in plain words, and whether retrying can fix it.

A refused login, a vhost that does not exist (or that the user may not use)
and a refused permission are final at once: retrying for `drain_timeout`
seconds would only hide them. aiormq reports the broker's refusal of a vhost
as `Expected one of ['Connection.OpenOk'], got <Connection.Close object at
0x…>` (the reply text is lost), which is translated here.
"""

from __future__ import annotations

from typing import Any

from streamer.util.urls import mask

_PERMANENT = ("ACCESS_REFUSED", "PRECONDITION_FAILED", "NOT_FOUND", "NOT_ALLOWED", "authentication",
              "Authentication")


def classify(exc: BaseException, target: Any) -> tuple[str, bool]:
    """(reason fit for the user, permanent) for an exception raised while connecting to `target`."""
    text = mask(str(exc) or type(exc).__name__)
    name = type(exc).__name__
    vhost, user = getattr(target, "vhost", "/"), getattr(target, "user", "guest")
    code = exc.args[0] if name == "ConnectionClosed" and exc.args else None
    if ("Connection.OpenOk" in text and "Connection.Close" in text) or name == "ConnectionNotAllowed" or code == 530:
        return f"vhost {vhost!r} not found or not allowed for user {user!r}", True
    if name == "ProbableAuthenticationError" or "Login was refused" in text:
        return f"login refused for user {user!r} (ACCESS_REFUSED: wrong user name or password)", True
    if name == "AuthenticationError":
        return f"the broker accepts none of the login mechanisms streamer offers ({text})", True
    if "ACCESS_REFUSED" in text or code == 403:
        return f"access refused for user {user!r} in vhost {vhost!r}: {text}", True
    return text, any(p in text for p in _PERMANENT)


_REFUSALS = ("ConnectionNotAllowed", "ConnectionNotImplemented", "AuthenticationError", "ProbableAuthenticationError",
             "IncompatibleProtocolError", "ConnectionSyntaxError", "ConnectionCommandInvalid", "ConnectionFrameError")


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` is a connection broken under us — reset, closed by a node shutting down, timed out, a channel
    left unusable by that — which another node, or the same one later, can mend; not the broker refusing what
    was asked (a login, a vhost, a command it does not implement), which no retry mends."""
    if type(exc).__name__ in _REFUSALS or classify(exc, None)[1]:
        return False
    return isinstance(exc, (ConnectionError, TimeoutError)) or type(exc).__name__ == "ChannelInvalidStateError"


def channel_refusal(exc: BaseException | None, target: Any, doing: str, permission: str) -> str | None:
    """The plain words for the broker closing a channel on a permission refusal (`doing` the exchange, which
    needs `permission`), or None when `exc` is not one: retrying cannot fix it, so it is final at once."""
    if exc is None:
        return None
    text = mask(str(exc) or type(exc).__name__)
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if "ACCESS_REFUSED" not in text and code != 403:
        return None
    vhost, user = getattr(target, "vhost", "/"), getattr(target, "user", "guest")
    return (f"{doing} exchange {target.exchange!r} in vhost {vhost!r} refused for user {user!r}: the user has no "
            f"{permission} permission on it (ACCESS_REFUSED; rabbitmqctl set_permissions)")
