"""One exception hierarchy. Every message is a sentence a person can act on."""

from __future__ import annotations


class HbgwError(Exception):
    """Base of every error this project raises on purpose."""

    exit_code = 1


class BadInput(HbgwError):
    """The caller asked for something invalid; the message says what to change."""

    exit_code = 2


class GrammarError(BadInput):
    """A slash command, interval or cron expression could not be understood."""


class IntervalError(GrammarError):
    """An interval is malformed or below the minimum."""


class CronError(GrammarError):
    """A cron expression or timezone is invalid; the message names the field."""


class CommandError(GrammarError):
    """A /heartbeat command is malformed (missing prompt, prompt too long, ...)."""


class NotFound(BadInput):
    """A session (or other named thing) does not exist."""


class InvalidState(BadInput):
    """The request does not fit the current state (pause without a heartbeat, ...)."""


class QuotaExceeded(BadInput):
    """An owner is at a per-owner limit (HBGW_API_MAX_*_PER_OWNER); the message names it."""


class StoreError(HbgwError):
    """The durable store failed or is not usable."""


class OutcomeUnknown(StoreError):
    """The connection dropped during COMMIT: the change may or may not have been saved."""


class SchemaBehind(StoreError):
    """The database schema is older than this code."""


class UnsafeRedis(HbgwError):
    """Redis runs with a setting the gateway cannot keep its promises on (an evicting
    ``maxmemory-policy``): the role refuses it, with the command that fixes it."""

    exit_code = 2


class StaleFence(HbgwError):
    """A write carried a fence older than the session's newest one: another turn owns it."""


class AgentError(HbgwError):
    """The agent could not produce a reply; the turn fails with this message."""


class TurnAborted(HbgwError):
    """A running turn lost its session lock; it must stop and write nothing more."""


class NotWired(HbgwError):
    """A process part was used without what the wiring in ``hbgw/`` hands it."""


class PlatformNotEnabled(BadInput):
    """A session's platform is not one this deployment serves (HBGW_PLATFORMS, its settings)."""


class DeliveryFailed(HbgwError):
    """A platform did not take a message; ``permanent`` says whether sending again can help."""

    permanent = False

    def __init__(self, message: str, *, platform: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.platform = platform
        self.reason = reason  # the platform's own word for it (not_in_channel, http_503, ...)


class PermanentDelivery(DeliveryFailed):
    """The route is gone (bot removed, channel archived or unknown, token revoked, 403/404):
    every later send fails the same way until a person changes something."""

    permanent = True


class TransientDelivery(DeliveryFailed):
    """The platform is busy or away (rate limit past its retries, 5xx, a timeout): the same
    message may go out later."""


class OutboundRefused(HbgwError):
    """An outbound request would reach an address inside the gateway's own network (loopback,
    private, link-local, …) that HBGW_WEBHOOK_ALLOW_NETWORKS does not name; nothing was sent."""
