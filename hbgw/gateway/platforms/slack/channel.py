"""Deliver to Slack with ``slack_sdk``'s ``WebClient.chat_postMessage``: into the session's
channel and thread (``thread_ts``), a new message, never a broadcast to the channel.

* Long text is split at ``SPLIT_AT`` characters (Slack truncates a message's text past
  40,000 and advises under 4,000), at a paragraph, line or word break (``split.py``); the
  parts go out in order, each into the same thread.
* A 429 is waited out for its ``Retry-After`` and sent again, at most ``RATE_LIMIT_RETRIES``
  times and only when the wait is at most ``MAX_RETRY_AFTER`` seconds: a send holds a turn's
  thread (and its session lock). A 429 is the one answer that proves nothing was posted, so
  it is the only one repeated here; a timeout or a dropped connection may have posted, and is
  left to the caller (``TransientDelivery``).
* Failures are typed: ``PermanentDelivery`` when the route is gone (the bot was removed, the
  channel archived or unknown, the token revoked, HTTP 403/404), ``TransientDelivery`` when
  sending later may work (429 past its retries, 5xx, timeouts, an error code not known here).
* Text is escaped as Slack documents (``&`` → ``&amp;``, ``<`` → ``&lt;``, ``>`` → ``&gt;``):
  a model's reply or a user's echoed text cannot mention ``@channel``/``@here``/``@everyone``,
  a user or a group (``<!channel>``, ``<@U…>``, ``<!subteam^…>``), or show one link as another
  (``<https://evil|https://slack.com/login>``). HBGW_SLACK_ALLOW_MENTIONS=true keeps the markup.
* Slack has no typing indicator for apps outside its assistant threads, and drafts would be
  messages: ``typing`` and ``progress`` show nothing, on any turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import RateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from hbgw.core.clock import pause
from hbgw.core.errors import DeliveryFailed, PermanentDelivery, TransientDelivery
from hbgw.core.settings import Settings
from hbgw.gateway.platforms.split import split_text
from hbgw.workers.ports import Address, Receipt, SendGuard

PLATFORM = "slack"
SPLIT_AT = 3900
RATE_LIMIT_RETRIES = 3
MAX_RETRY_AFTER = 30.0

# Slack's error codes (``{"ok": false, "error": …}``) that no repeat can cure.
PERMANENT_ERRORS = frozenset(
    {
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "missing_scope",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
        "team_access_not_granted",
        "ekm_access_denied",
        "org_login_required",
        "cannot_reply_to_message",
    }
)


class BoundedRateLimits(RateLimitErrorRetryHandler):
    """slack_sdk's 429 handler, bounded: a ``Retry-After`` above ``max_wait`` is not waited
    for (the send fails transient at once), and the wait is exactly what Slack asked."""

    def __init__(self, max_retry_count: int, max_wait: float, sleep: Callable[[float], None]):
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait = max_wait
        self.sleep = sleep
        # The send guard of the send this thread is making (one WebClient serves every turn
        # thread): after the wait, the lock is confirmed afresh before the request goes again.
        self.sending = threading.local()

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        return retry_after(response) <= self.max_wait

    def prepare_for_next_attempt(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        assert response is not None  # _can_retry only says yes to a 429 answer
        state.next_attempt_requested = True
        self.sleep(retry_after(response))
        guard = getattr(self.sending, "guard", None)
        if guard is not None:
            guard()  # raises TurnAborted out of the client: nothing more is sent
        state.increment_current_attempt()


def retry_after(response: HttpResponse) -> float:
    """Seconds Slack asked to wait (1 when it did not say, as slack_sdk assumes)."""
    for name, values in response.headers.items():
        if name.lower() == "retry-after" and values:
            try:
                return max(0.0, float(values[0]))
            except ValueError:
                break
    return 1.0


class SlackChannel:
    name = PLATFORM

    def __init__(
        self,
        token: str,
        *,
        base_url: str = "https://slack.com/api/",
        timeout: float = 10.0,
        sleep: Callable[[float], None] = pause,
        allow_mentions: bool = False,
    ) -> None:
        self.allow_mentions = allow_mentions
        limits = self.limits = BoundedRateLimits(RATE_LIMIT_RETRIES, MAX_RETRY_AFTER, sleep)
        # Only the 429 handler: slack_sdk's default also repeats a request after a reset
        # connection, which may post the message twice.
        self.client = WebClient(
            token=token, base_url=base_url, timeout=int(timeout), retry_handlers=[limits]
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackChannel:
        token = settings.slack_bot_token
        assert token is not None  # built only when Slack is configured
        return cls(
            token.get_secret_value(),
            base_url=settings.slack_api_url,
            timeout=settings.slack_timeout,
            allow_mentions=settings.slack_allow_mentions,
        )

    def send(
        self,
        address: Address,
        text: str,
        *,
        session_id: str,
        kind: str,
        delivery_key: str,
        possible_repeat: bool = False,
        ref: str | None = None,
        guard: SendGuard | None = None,
    ) -> Receipt:
        """Post ``text`` (in parts when long) into the address's channel and thread; the
        receipt names the first part's ``ts``, the message a reader sees the reply start at."""
        first: str | None = None
        self.limits.sending.guard = guard
        try:
            for n, part in enumerate(split_text(text, SPLIT_AT)):
                if n and guard is not None:
                    guard()  # the next part: the lock confirmed afresh
                shown = part if self.allow_mentions else escape(part)
                answer = self.post(address.chat, shown, address.thread)
                if first is None:
                    ts = answer.get("ts")
                    first = str(ts) if ts is not None else None
        finally:
            self.limits.sending.guard = None
        return Receipt(message_id=first)

    def post(self, channel: str, text: str, thread_ts: str | None) -> dict[str, Any]:
        """One ``chat.postMessage``; its answer, or a typed ``DeliveryFailed``."""
        try:
            answer = self.client.chat_postMessage(channel=channel, text=text, thread_ts=thread_ts)
        except SlackApiError as exc:
            raise classify(exc) from exc
        except (SlackClientError, OSError, TimeoutError) as exc:
            raise TransientDelivery(
                f"Slack did not answer ({type(exc).__name__}: {exc}); the message may not "
                "have been posted.",
                platform=PLATFORM,
                reason="unreachable",
            ) from exc
        return dict(answer.data) if isinstance(answer.data, dict) else {}

    def typing(self, address: Address, *, session_id: str) -> None:
        return None

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        return None


def escape(text: str) -> str:
    """``text`` as plain words in Slack's markup: the three characters its formatting reads
    (https://api.slack.com/reference/surfaces/formatting#escaping), ``&`` first."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def classify(exc: SlackApiError) -> DeliveryFailed:
    """A Slack refusal as a permanent or transient failure, with a sentence that says which."""
    status = int(getattr(exc.response, "status_code", 0) or 0)
    code = _error_code(exc)
    if code in PERMANENT_ERRORS or status in (401, 403, 404, 410):
        return PermanentDelivery(
            f"Slack refused the message for good ({code or f'HTTP {status}'}): invite the app "
            "to the channel, or check its token and scopes.",
            platform=PLATFORM,
            reason=code or f"http_{status}",
        )
    if status == 429 or code == "ratelimited":
        return TransientDelivery(
            "Slack is rate limiting this app past the retries a send may wait for; it can be "
            "sent later.",
            platform=PLATFORM,
            reason="ratelimited",
        )
    return TransientDelivery(
        f"Slack did not take the message ({code or f'HTTP {status}'}); it can be sent later.",
        platform=PLATFORM,
        reason=code or f"http_{status}",
    )


def _error_code(exc: SlackApiError) -> str:
    try:
        code = exc.response.get("error")
    except (AttributeError, TypeError, ValueError):
        return ""
    return code if isinstance(code, str) else ""
