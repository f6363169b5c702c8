"""Deliver to a signed webhook: one POST of JSON to the session's URL (``PUT
/v1/sessions/{id}/webhook``), else HBGW_WEBHOOK_URL, signed like the inbound side
(``signature.py``), with the delivery record's key as ``Idempotency-Key``.

* Ids of messages are public ones (``gateway/public_ids.py``), the same the API shows: the
  ``reply_to`` and the key of a reply (``msg:<id>``) never carry SQL's sequential id, which
  would tell the receiver how many messages every tenant sends. The key is still the same on
  every attempt and every retry of the delivery record: the id it shows is.

* A 429 (after its ``Retry-After``), 408, 5xx, a timeout or a dropped connection is sent again
  by tenacity: exponential back-off with jitter, at most HBGW_WEBHOOK_RETRIES more times and
  HBGW_WEBHOOK_RETRY_SECONDS in all. A timeout may have been received, so every attempt carries
  the same key (and the same body): the receiver drops what it has seen. Past the retries the
  send fails ``TransientDelivery``.
* Any other 4xx (401, 403, 404, 410, …) and a redirect fail ``PermanentDelivery``: the route is
  gone until a person changes the URL or the receiver. So does a session with no URL at all.
* An answer of ``{"duplicate": true}``, a 208, or a 409 that names the key is the receiver
  saying it had the message already: ``Receipt(duplicate=True)``. A JSON ``id`` in a 2xx answer
  is the receipt's message id.
* ``typing`` and ``progress`` send nothing, on any turn: a webhook gets messages only.
* The URL is never logged (its path or query often holds a token): logs name its origin.
* Connections go only to addresses outside the gateway's network or on the operator's
  allowlist (``core/outbound.py``), checked on the address connected to; a refused one fails
  ``PermanentDelivery``.
* What a failure says is what a tenant reads in the runs view and the heartbeat's status, so
  it says no more than "could not be delivered" and a reference: the receiver's answer, a
  refused connection or an inside address would map the gateway's network for whoever set the
  URL. The log line of the failure carries the detail under the same ``reference``.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from hbgw.core.clock import Clock, iso, pause, utcnow
from hbgw.core.errors import DeliveryFailed, OutboundRefused, PermanentDelivery, TransientDelivery
from hbgw.core.outbound import OutboundGuard
from hbgw.core.outbound_http import guarded_transport
from hbgw.core.settings import Settings
from hbgw.gateway.platforms.webhook.redact import origin
from hbgw.gateway.platforms.webhook.signature import signed_headers
from hbgw.gateway.platforms.webhook.urls import StoredUrls
from hbgw.gateway.public_ids import PublicIds, deployment_ids
from hbgw.workers.ports import Address, Receipt, SendGuard
from hbgw.workers.user_turn import reply_key, reply_key_message

log = logging.getLogger("hbgw.webhook")

PLATFORM = "webhook"
REPEAT_HEADER = "X-Hbgw-Possible-Repeat"
BACKOFF = 0.5  # seconds: the first wait's scale; then doubling, with jitter, up to MAX_BACKOFF
MAX_BACKOFF = 8.0
RETRIED = frozenset({408, 425, 429, 500, 502, 503, 504})


class _Again(Exception):
    """An attempt that may work later: its failure, and the wait the receiver asked for."""

    def __init__(self, failure: TransientDelivery, retry_after: float | None = None) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.retry_after = retry_after


@dataclass(frozen=True)
class Policy:
    timeout: float
    retries: int
    budget: float  # seconds for the whole delivery, its waits included


class WebhookChannel:
    name = PLATFORM

    def __init__(
        self,
        secret: str,
        urls: Callable[[str], str | None],
        policy: Policy,
        ids: PublicIds,
        guard: OutboundGuard,
        *,
        clock: Clock = utcnow,
        sleep: Callable[[float], None] = pause,
    ) -> None:
        self.secret = secret
        self.urls = urls
        self.policy = policy
        self.ids = ids
        self.clock = clock
        self.sleep = sleep
        # No redirects: a 3xx would send the signed body somewhere nobody configured (an
        # inside address among them). Every connection passes the guard.
        self.client = httpx.Client(
            follow_redirects=False,
            headers={"User-Agent": "hbgw-webhook"},
            transport=guarded_transport(guard),
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        clock: Clock = utcnow,
        urls: StoredUrls | None = None,
        ids: PublicIds | None = None,
    ) -> WebhookChannel:
        secret = settings.webhook_secret
        assert secret is not None  # built only when the webhook platform is configured
        policy = Policy(
            settings.webhook_timeout, settings.webhook_retries, settings.webhook_retry_seconds
        )
        urls = urls or StoredUrls(settings)
        ids = ids or deployment_ids(settings)
        guard = OutboundGuard(settings.outbound_allowlist)
        return cls(secret.get_secret_value(), urls, policy, ids, guard, clock=clock)

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
        """POST the message to the session's URL, again on a failure that may pass."""
        url = self._url(session_id)
        delivery_key, reply_to = self._public(delivery_key, address.reply_to)
        payload = {
            "session_id": session_id,
            "chat": address.chat,
            "thread": address.thread,
            "reply_to": reply_to,
            "kind": kind,
            "text": text,
            "delivery_key": delivery_key,
            "possible_repeat": possible_repeat,
            "ref": ref,
            "sent_at": iso(self.clock()),
        }
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        started = time.monotonic()
        retrying = Retrying(
            sleep=self.sleep,
            stop=lambda state: self._stop(state, started),
            wait=lambda state: self._wait(state, started),
            retry=retry_if_exception_type(_Again),
            # Every attempt after the first confirms the lock afresh (it may have moved on
            # while this one waited); a TurnAborted from it ends the send, not retried.
            before=lambda state: guard() if guard and state.attempt_number > 1 else None,
            before_sleep=lambda state: _log_retry(state, url, session_id),
            reraise=True,
        )
        try:
            return retrying(self._attempt, url, body, delivery_key, possible_repeat, started)
        except _Again as exc:
            raise _withheld(exc.failure, url, session_id) from exc
        except PermanentDelivery as exc:
            raise _withheld(exc, url, session_id) from exc

    def _url(self, session_id: str) -> str:
        try:
            url = self.urls(session_id)
        except Exception as exc:  # the store: away for a moment, or failing
            raise TransientDelivery(
                f"The session's webhook URL could not be read ({type(exc).__name__}); the "
                "message was not sent.",
                platform=PLATFORM,
                reason="url_unread",
            ) from exc
        if url is None:
            raise PermanentDelivery(
                f"Session {session_id} has no webhook URL: set one with PUT "
                f"/v1/sessions/{session_id}/webhook, or HBGW_WEBHOOK_URL for every session.",
                platform=PLATFORM,
                reason="no_url",
            )
        return url

    def _public(self, delivery_key: str, reply_to: str | None) -> tuple[str, str | None]:
        """The key and the ``reply_to`` with the message's public id in place of SQL's."""
        try:
            return public_key(delivery_key, self.ids), public_reply_to(reply_to, self.ids)
        except Exception as exc:  # the ids' key is read from the store once: it may be away
            raise TransientDelivery(
                f"The key of the public ids could not be read ({type(exc).__name__}); the "
                "message was not sent.",
                platform=PLATFORM,
                reason="ids_unread",
            ) from exc

    def _attempt(self, url: str, body: bytes, key: str, repeat: bool, started: float) -> Receipt:
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            **signed_headers(self.secret, int(self.clock().timestamp()), body),
        }
        if repeat:
            headers[REPEAT_HEADER] = "1"
        left = self.policy.budget - (time.monotonic() - started)
        timeout = max(0.1, min(self.policy.timeout, left))
        try:
            response = self.client.post(url, content=body, headers=headers, timeout=timeout)
        except OutboundRefused as exc:
            raise PermanentDelivery(
                f"The webhook at {origin(url)} was not connected to: {exc}",
                platform=PLATFORM,
                reason="inside_address",
            ) from exc
        except httpx.TimeoutException as exc:
            raise _Again(_transient(
                f"The webhook at {origin(url)} did not answer within {timeout:g} s; it may have "
                "received the message.", "timeout"
            )) from exc  # fmt: skip
        except httpx.InvalidURL as exc:  # a host our check read and httpx does not (010.8.8.8)
            raise PermanentDelivery(
                f"The webhook URL {origin(url)} could not be used ({exc}).",
                platform=PLATFORM,
                reason="invalid_url",
            ) from exc
        except httpx.TransportError as exc:
            raise _Again(_transient(
                f"The webhook at {origin(url)} could not be reached ({type(exc).__name__}); the "
                "message may not have been received.", "unreachable"
            )) from exc  # fmt: skip
        return self._answer(url, response, key)

    def _answer(self, url: str, response: httpx.Response, key: str) -> Receipt:
        status = response.status_code
        answer = _json(response)
        if 200 <= status < 300:
            duplicate = status == 208 or answer.get("duplicate") is True
            found = answer.get("id")
            message_id = str(found) if isinstance(found, str | int) and found != "" else None
            return Receipt(message_id=message_id, duplicate=duplicate)
        if status == 409 and _names_key(response, answer, key):
            return Receipt(duplicate=True)
        if status in RETRIED:
            raise _Again(
                _transient(
                    f"The webhook at {origin(url)} answered HTTP {status}.", f"http_{status}"
                ),
                _retry_after(response, self.clock()),
            )
        raise PermanentDelivery(
            f"The webhook at {origin(url)} refused the message for good (HTTP {status}): "
            "check the session's webhook URL and the receiver.",
            platform=PLATFORM,
            reason=f"http_{status}",
        )

    def _stop(self, state: RetryCallState, started: float) -> bool:
        if state.attempt_number > self.policy.retries:
            return True
        asked = _asked_wait(state)
        left = self.policy.budget - (time.monotonic() - started)
        # A wait the receiver asked for that outlasts the budget: asking sooner would be
        # refused again, so the send fails now.
        return left <= 0 or (asked is not None and asked > left)

    def _wait(self, state: RetryCallState, started: float) -> float:
        asked = _asked_wait(state)
        pause = asked if asked is not None else _BACKOFF(state)
        left = self.policy.budget - (time.monotonic() - started)
        return max(0.0, min(pause, left))

    def typing(self, address: Address, *, session_id: str) -> None:
        return None

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        return None

    def close(self) -> None:
        self.client.close()


_BACKOFF = wait_random_exponential(multiplier=BACKOFF, max=MAX_BACKOFF)


def _withheld(failure: DeliveryFailed, url: str, session_id: str) -> DeliveryFailed:
    """``failure`` as a tenant may read it: "could not be delivered" and a reference; the
    detail goes to the operator's log under that reference."""
    reference = f"wh-{secrets.token_hex(5)}"
    log.warning(
        "webhook delivery to %s failed (reference %s): %s",
        origin(url),
        reference,
        failure,
        extra={"action": "webhook.failed", "session": session_id, "reference": reference},
    )
    sentence = (
        f"The message could not be delivered to the session's webhook (reference {reference}); "
        "the operator finds the cause in the gateway's log under that reference."
    )
    return type(failure)(sentence, platform=PLATFORM, reason=failure.reason)


def public_key(delivery_key: str, ids: PublicIds) -> str:
    """A reply's key (``msg:<id>``, ``msg:<id>:notice:<n>``) with the message's public id; any
    other key (a fire id: a session id and a due time) as it is."""
    found = reply_key_message(delivery_key)
    if found is None:
        return delivery_key
    message_id, rest = found
    return f"{reply_key(ids.show(message_id) or 0)}{rest}"


def public_reply_to(reply_to: str | None, ids: PublicIds) -> str | None:
    """The public id of the message a reply answers (``Address.reply_to``: SQL's, as text)."""
    if reply_to is None or not (reply_to.isascii() and reply_to.isdigit()):
        return reply_to
    return str(ids.show(int(reply_to)))


def _transient(sentence: str, reason: str) -> TransientDelivery:
    return TransientDelivery(sentence, platform=PLATFORM, reason=reason)


def _asked_wait(state: RetryCallState) -> float | None:
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None else None
    return exc.retry_after if isinstance(exc, _Again) else None


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        found = response.json()
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _names_key(response: httpx.Response, answer: dict[str, Any], key: str) -> bool:
    """A 409 that is about this delivery's key (a receiver's duplicate), not another conflict."""
    if answer.get("duplicate") is True:
        return True
    named = {answer.get("idempotency_key"), answer.get("delivery_key")}
    return key in named or response.headers.get("idempotency-key") == key


def _retry_after(response: httpx.Response, now: datetime) -> float | None:
    """Seconds the receiver asked to wait (``Retry-After``: seconds or an HTTP date)."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now).total_seconds())
    except (TypeError, ValueError):
        return None


def _log_retry(state: RetryCallState, url: str, session_id: str) -> None:
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None else None
    why = exc.failure if isinstance(exc, _Again) else exc
    log.warning(
        "webhook delivery attempt %d to %s failed, sending again in %.1f s: %s",
        state.attempt_number,
        origin(url),
        state.upcoming_sleep,
        why,
        extra={"action": "webhook.retry", "session": session_id},
    )
