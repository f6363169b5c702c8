"""Slack's request signature: ``X-Slack-Signature: v0=HMAC-SHA256(secret, "v0:<ts>:<body>")``
with ``X-Slack-Request-Timestamp: <ts>``, checked by ``slack_sdk.signature.SignatureVerifier``.

The replay window (5 minutes either way) is judged by the process's clock — the API's shared
clock (Redis ``TIME``), handed in — not by slack_sdk's own reading of this host's: one clock
for everything the gateway dates. The timestamp is read here first so that a replay and a
forgery are told apart (the metric says which); then the verifier checks the HMAC in constant
time over the exact bytes received.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier

from hbgw.core.clock import Clock
from hbgw.gateway.platforms.guard import Reject

REPLAY_WINDOW = 300  # seconds, Slack's own


class _Now(SlackClock):
    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def now(self) -> float:
        return self.clock().timestamp()


class SlackSignature:
    def __init__(self, signing_secret: str, clock: Clock) -> None:
        self.clock = clock
        self.verifier = SignatureVerifier(signing_secret, clock=_Now(clock))

    def problem(self, headers: Mapping[str, str], body: bytes) -> Reject | None:
        """None when the request is Slack's and fresh; otherwise why it is refused."""
        stamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        # isdigit() alone takes "²", and int() of it raised: a 500 without authentication.
        well_formed = stamp.isascii() and stamp.isdigit() and len(stamp) <= 12
        if not well_formed or not signature.startswith("v0="):
            return Reject.SIGNATURE
        if abs(self.clock().timestamp() - int(stamp)) > REPLAY_WINDOW:
            return Reject.REPLAY
        try:
            valid = self.verifier.is_valid(body=body, timestamp=stamp, signature=signature)
        except UnicodeDecodeError:
            return Reject.SIGNATURE  # slack_sdk decodes the body as UTF-8 to sign it
        return None if valid else Reject.SIGNATURE


def request_id(headers: Mapping[str, str], body: bytes) -> str:
    """The id of a verified request: the same for a replay of it (the signature covers the
    timestamp and the body, so a replay carries both unchanged), different for any other —
    Slack puts a fresh ``trigger_id`` in each slash command's body. Slash commands have no
    event id of their own; this one de-duplicates them within the replay window."""
    stamp = headers.get("x-slack-request-timestamp", "").encode()
    return "slash:" + hashlib.sha256(stamp + b":" + body).hexdigest()[:32]
