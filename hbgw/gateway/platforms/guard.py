"""What every platform's inbound side shares: why a request was refused (a metric with closed
labels), and whether a verified event was seen before (its retries are dropped).

Nothing here runs before a request is verified except counting its refusal: an unauthenticated
request costs one counter increment of a series that already exists, never a key or a row.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from hbgw.core.errors import DeliveryFailed
from hbgw.core.metrics import CHAT_PLATFORMS
from hbgw.gateway.api.errors import ApiError
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
from hbgw.state.redis_part import RedisPart
from hbgw.workers.ports import Address, Channel

log = logging.getLogger("hbgw.platforms")

# Every platform an inbound route may count for; a closed set, so no request mints a series
# (core's, which the delivery metric shares).
PLATFORMS = CHAT_PLATFORMS
# How long a platform's event id is remembered: Slack retries three times within the hour.
SEEN_FOR_SECONDS = 3600


class Reject(StrEnum):
    SIGNATURE = "signature"  # missing, malformed or wrong signature
    REPLAY = "replay"  # signed, but its timestamp is outside the replay window
    TOO_LARGE = "too_large"  # the body passed HBGW_API_MAX_BODY_BYTES
    TEAM = "team"  # signed by the app, from a workspace not in the allowlist
    CHAT = "chat"  # verified, from a chat not in the allowlist (HBGW_TELEGRAM_CHATS)
    MALFORMED = "malformed"  # signed, but not the shape the platform sends


class InboundRejects:
    """``hbgw_platform_inbound_rejects_total{platform, reason}`` on the API's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.counter = Counter(
            "hbgw_platform_inbound_rejects",
            "Inbound platform requests refused before anything was stored, by platform and reason.",
            ["platform", "reason"],
            registry=registry,
        )
        for platform in PLATFORMS:  # every series exists from the start, at 0
            for reason in Reject:
                self.counter.labels(platform, reason.value)

    def count(self, platform: str, reason: Reject) -> None:
        if platform in PLATFORMS:
            self.counter.labels(platform, reason.value).inc()

    def count_path(self, path: str, reason: Reject) -> None:
        """A refusal made before routing (the body limit): the platform is the path's."""
        parts = path.split("/")
        if len(parts) > 2 and parts[1] == "platforms":
            self.count(parts[2], reason)


class NotJson(ValueError):
    """A verified body that JSON cannot read."""


def read_json(body: bytes) -> Any:
    """The body's JSON; every failure a ``ValueError`` (``NotJson``), which each route answers
    as a malformed request (400). A body nested thousands deep (``[[[[…``) makes the parser
    raise ``RecursionError``, which was a 500 and a traceback."""
    try:
        return json.loads(body)
    except RecursionError:
        raise NotJson("the body nests too deeply to be read as JSON.") from None


@dataclass(frozen=True)
class Answer:
    """A command's sentence, to post into its conversation once the platform has had its
    answer to the request (each platform answers fast and posts after)."""

    session_id: str
    address: Address
    text: str
    key: str


# The session of an answer refused before its conversation had one (the owner's session quota).
NO_SESSION = ""


def post_answer(channel: Channel, answer: Answer, platform: str) -> None:
    """Post ``answer``; a failure is logged, not raised: the command has been applied, and
    asking ``/heartbeat status`` again shows its state."""
    try:
        channel.send(
            answer.address,
            answer.text,
            session_id=answer.session_id,
            kind="notice",
            delivery_key=answer.key,
        )
    except DeliveryFailed as exc:
        log.warning(
            "the answer to a %s command was not posted: %s",
            platform,
            exc,
            extra={"action": f"{platform}.answer_failed", "session": answer.session_id},
        )


def unsigned(
    rejects: InboundRejects, platform: str, problem: Reject, *, stale: str, forged: str
) -> ApiError:
    """A request whose signature ``problem`` refused it: counted, and the 401 to raise with
    the platform's sentence for a stale (``Reject.REPLAY``) or a forged request."""
    rejects.count(platform, problem)
    return ApiError(401, "unauthorized", stale if problem is Reject.REPLAY else forged)


class SeenEvents:
    """A verified event's id, remembered in Redis (SET NX EX) so its retries are dropped.

    Without Redis (or when it fails) every delivery is taken: a user message is still stored
    once (its idempotency key is the platform's message id), and a repeated /heartbeat command
    answers the same again."""

    def __init__(self, redis: RedisPart | None, platform: str) -> None:
        self.redis = redis
        self.platform = platform

    def first(self, event_id: str) -> bool:
        """True the first time ``event_id`` is seen (and when Redis cannot tell)."""
        if self.redis is None:
            return True
        key = self.redis.keys.inbound_event(self.platform, event_id)
        try:
            return bool(self.redis.client.set(key, "1", nx=True, ex=SEEN_FOR_SECONDS))
        except TRANSIENT_REDIS_ERRORS as exc:
            log.warning(
                "event %s taken without de-duplication; Redis did not answer: %s",
                event_id,
                exc,
                extra={"action": "inbound.dedupe_failed", "platform": self.platform},
            )
            return True

    def forget(self, event_id: str) -> None:
        """The event was not taken (a failure): its retry must be."""
        if self.redis is None:
            return
        # When Redis fails here the id expires; the retry after that is taken.
        with contextlib.suppress(*TRANSIENT_REDIS_ERRORS):
            self.redis.client.delete(self.redis.keys.inbound_event(self.platform, event_id))
