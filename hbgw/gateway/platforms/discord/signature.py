"""Discord's interaction signature: ``X-Signature-Ed25519`` (hex) is the application's Ed25519
signature of ``X-Signature-Timestamp + body``, checked with PyNaCl against the public key.

The signature is checked first, over the exact bytes received; then the timestamp must be within
``REPLAY_WINDOW`` of the gateway's shared clock (Redis ``TIME``, handed in). Discord itself does
not bound the age of a signed request, so without the window a captured interaction could be
replayed forever; five minutes either way, like Slack's. A forgery and a replay are told apart
(the metric says which). Discord checks an endpoint by sending requests with a bad signature
and expects each to be refused with 401.
"""

from __future__ import annotations

from collections.abc import Mapping

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from hbgw.core.clock import Clock
from hbgw.gateway.platforms.guard import Reject

REPLAY_WINDOW = 300  # seconds
SIGNATURE_HEX = 128  # an Ed25519 signature is 64 bytes


class DiscordSignature:
    def __init__(self, public_key_hex: str, clock: Clock) -> None:
        self.clock = clock
        self.key = VerifyKey(bytes.fromhex(public_key_hex))

    def problem(self, headers: Mapping[str, str], body: bytes) -> Reject | None:
        """None when the request is the application's and fresh; otherwise why it is refused."""
        stamp = headers.get("x-signature-timestamp", "")
        signature = headers.get("x-signature-ed25519", "")
        if (
            not (stamp.isascii() and stamp.isdigit())
            or len(stamp) > 12
            or len(signature) != SIGNATURE_HEX
        ):
            return Reject.SIGNATURE
        try:
            self.key.verify(stamp.encode() + body, bytes.fromhex(signature))
        except (BadSignatureError, ValueError):
            return Reject.SIGNATURE
        if abs(self.clock().timestamp() - int(stamp)) > REPLAY_WINDOW:
            return Reject.REPLAY
        return None
