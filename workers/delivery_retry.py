"""Delivery retries under the session lock: a message the platform failed for now is sent
again — the same text, the same delivery key, to the same address — and the model is never
asked again.

A drain grant's fence claim reads the session's retries that are due (``claim_fence``); the
session loop runs them first, before the inbox and any fire, so the retried message keeps its
place before newer ones, and no turn is interrupted (they run between turns, under the lock).
Each retry is sent like every send: confirm the lock in Redis, the fenced mark in SQL
(``begin_retry``: ``pending``, one more attempt), cleared in memory, send, and the fenced outcome
(``finish_retry``: ``sent``, ``retrying`` again with a longer wait, or ``failed`` once
HBGW_DELIVERY_RETRIES are spent or the route refused it for good, which pauses the heartbeat).

A retry whose earlier attempt may have been posted (no answer came back) goes out as a possible
repeat: the visible mark and ``possible_repeat`` for the channel, under the same key.
"""

from __future__ import annotations

import contextlib

from hbgw.core.errors import TurnAborted
from hbgw.sessions.states import DeliveryState
from hbgw.sessions.store import Deliveries
from hbgw.sessions.views import DeliveryOutcome, DeliveryView, Resend, RetryAttempt
from hbgw.workers.locks import Lease
from hbgw.workers.logfields import fields, log
from hbgw.workers.ports import Address
from hbgw.workers.turn_io import REPEAT_MARK, Delivery, TurnIO

# Most retries one grant sends before its inbox: a session's backlog of failed sends is small.
RETRIES_PER_GRANT = 20


class DeliveryRetrier:
    def __init__(self, io: TurnIO, deliveries: Deliveries) -> None:
        self.io = io
        self.deliveries = deliveries

    def retry(self, lease: Lease, record: DeliveryView) -> None:
        io, deliveries, clock = self.io, self.deliveries, self.io.parts.clock
        io.confirm(lease)
        attempt = deliveries.begin_retry(record.id, lease.fence, clock())
        if attempt is None:
            return  # sent meanwhile by another grant
        address, text, what = resend_of(attempt)
        try:
            outcome = io.deliver(lease, address, text, what, attempts=attempt.delivery.attempts)
        except TurnAborted as exc:
            # Put the retry back while the fence is still ours (a newer grant's claim otherwise
            # finds it pending; beat then says ``unknown``). Stopped mid-send by the guard,
            # part of it may have left: the next attempt is marked a possible repeat.
            sent_some = bool(getattr(exc, "mid_send", False))
            with contextlib.suppress(Exception):
                again = _again(attempt, maybe_sent=sent_some)
                deliveries.finish_retry(lease.session_id, lease.fence, again, clock())
            raise
        deliveries.finish_retry(lease.session_id, lease.fence, outcome, clock())
        log.info(
            "delivery %s retried: %s",
            what.key,
            outcome.state,
            extra=fields("deliver.retried", lease.session_id, what.fire_id),
        )
        io.count(address.platform, outcome)
        io.refused_for_good(lease.session_id, address, outcome)


def resend_of(attempt: RetryAttempt) -> tuple[Address, str, Delivery]:
    """Where the retry goes, its text (marked when an earlier attempt may have been posted)
    and what the send is (the same key; the fire id for a heartbeat's)."""
    record = attempt.delivery
    assert record.text is not None and record.chat is not None  # a retrying record keeps them
    address = Address(attempt.platform, record.chat, record.thread, record.reply_to, attempt.owner)
    text = record.text
    if record.maybe_sent and not text.startswith(REPEAT_MARK):
        text = REPEAT_MARK + text
    fire_id = record.delivery_key if record.run_id is not None else None
    what = Delivery(record.kind, record.delivery_key, record.maybe_sent, fire_id)
    return address, text, what


def _again(attempt: RetryAttempt, *, maybe_sent: bool = False) -> DeliveryOutcome:
    """The retry as it was before this grant took it: retrying, due at once."""
    record = attempt.delivery
    assert record.text is not None and record.chat is not None
    resend = Resend(
        record.text,
        record.chat,
        record.thread,
        record.reply_to,
        record.next_attempt_at or record.updated_at,
        bool(record.maybe_sent) or maybe_sent,
    )
    return DeliveryOutcome(
        record.delivery_key, DeliveryState.RETRYING, error=record.error, resend=resend
    )
