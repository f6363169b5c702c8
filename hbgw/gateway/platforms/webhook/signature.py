"""The one signature of signed webhooks, both ways: the inbound check and the outbound POST use
``sign`` (docs/platforms.md, Signed webhooks, spells it out for other gateways).

    X-Hbgw-Timestamp: <unix seconds>
    X-Hbgw-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>." + body)>

over the exact bytes of the body. A request is fresh when its timestamp is within
``REPLAY_WINDOW`` seconds of the verifier's clock, either way (the gateway's shared clock,
handed in). The signature is compared in constant time; the timestamp is read first so a replay
and a forgery are told apart (the metric says which).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from hbgw.gateway.platforms.guard import Reject

TIMESTAMP_HEADER = "X-Hbgw-Timestamp"
SIGNATURE_HEADER = "X-Hbgw-Signature"
VERSION = "v1"
REPLAY_WINDOW = 300  # seconds, either way
_MAX_STAMP_DIGITS = 12


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The ``X-Hbgw-Signature`` value of ``body`` sent at ``timestamp`` (unix seconds; as the
    header spells it, when verifying)."""
    message = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def signed_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Both headers of a signed request."""
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: sign(secret, timestamp, body)}


def problem(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> Reject | None:
    """None when ``body`` was signed with ``secret`` within the replay window of ``now``;
    otherwise why it is refused (``headers``: case-insensitive, as Starlette's and httpx's)."""
    stamp = headers.get(TIMESTAMP_HEADER.lower()) or headers.get(TIMESTAMP_HEADER) or ""
    given = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER) or ""
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > _MAX_STAMP_DIGITS:
        return Reject.SIGNATURE
    if not given.startswith(f"{VERSION}="):
        return Reject.SIGNATURE
    if abs(now - int(stamp)) > REPLAY_WINDOW:
        return Reject.REPLAY
    expected = sign(secret, stamp, body)
    if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
        return Reject.SIGNATURE
    return None
