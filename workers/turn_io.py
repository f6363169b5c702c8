"""What both kinds of turn share: asking the agent, delivering, liveness stamps, history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis

from hbgw.core.errors import DeliveryFailed, PermanentDelivery, TurnAborted
from hbgw.core.metrics import DELIVERY_PLATFORMS, count_delivery
from hbgw.core.usage import TokenUsage
from hbgw.sessions.states import DeliveryState
from hbgw.sessions.views import DeliveryOutcome, MessageView, Resend
from hbgw.workers.agents.base import Agent, TurnFailed, TurnKind, TurnRequest
from hbgw.workers.heartbeat_tools import SessionHeartbeatTools
from hbgw.workers.locks import Lease
from hbgw.workers.logfields import fields, log
from hbgw.workers.ports import Address, Channel
from hbgw.workers.turn_parts import RetryPolicy, TurnParts

HISTORY_TURNS = 20
# What the model sees of the conversation: what was said, not the gateway's notices (failures,
# empty-reply notices, heartbeat-change announcements), which are our words, not the agent's.
CONVERSATION_KINDS = frozenset({"user", "heartbeat", "assistant"})
# The visible mark of a message an older turn may already have sent (contract, rule 12): a chat
# platform cannot drop a repeat by itself, so the person reading it is told.
REPEAT_MARK = "(possible repeat) "
# Why a delivery the platform accepted is ``suppressed``: it knew the key and dropped a repeat.
DUPLICATE_NOTE = "dropped by the platform as a repeat of its delivery key"
# The reasons of a ``TransientDelivery`` whose request may have reached the platform (no answer
# came back): its retry carries the possible-repeat mark. Any other transient reason is an
# answer (429, 5xx, an error code) that proves nothing was posted: its retry is not marked.
MAYBE_POSTED = frozenset({"unreachable", "timeout"})
# A platform that refused for good every message of the session (not its chat alone).
WHOLE_SESSION = frozenset({"not_served"})


def as_sent(text: str, possible_repeat: bool) -> str:
    """The text as it leaves (and as SQL keeps it): marked when it may be a repeat."""
    return REPEAT_MARK + text if possible_repeat else text


@dataclass(frozen=True)
class Delivery:
    """What one send is: its kind, its delivery key (the same for every attempt at one
    message), whether an older turn may have sent it already, and the fire it answers."""

    kind: str
    key: str
    possible_repeat: bool = False
    fire_id: str | None = None


@dataclass(frozen=True)
class Answer:
    """The agent's reply, or the failure that stands for it, and the tokens spent either way."""

    text: str
    usage: TokenUsage | None = None
    failure: Exception | None = None


class TurnIO:
    def __init__(self, parts: TurnParts, agent: Agent, channel: Channel) -> None:
        self.parts = parts
        self.agent = agent
        self.channel = channel

    def ask(self, lease: Lease, request: TurnRequest, address: Address | None) -> Answer:
        """The agent's reply, or the failure that stands for it (a failed turn, never silence)."""
        try:
            reply = self.agent.run(request, lambda phase: self._step(lease, phase, address))
        except TurnAborted:
            raise
        except Exception as exc:
            return Answer("", exc.usage if isinstance(exc, TurnFailed) else None, exc)
        lease.keeper.check()
        return Answer(reply.text, reply.usage)

    def toolbox(self, session_id: str, kind: TurnKind, address: Address) -> SessionHeartbeatTools:
        """The session's heartbeat as this turn's tools see it (writes only if configured)."""
        p = self.parts
        return SessionHeartbeatTools(
            session_id,
            kind,
            heartbeats=p.heartbeats,
            gate=p.gate,
            due=p.due,
            clock=p.clock,
            limits=p.limits,
            origin=(address.chat, address.thread),
            write=p.heartbeat_write,
        )

    def confirm(self, lease: Lease) -> None:
        """The first step of a delivery: stamp ``delivering`` (a platform that hangs shows
        here, not as a silent agent), then ask Redis whether the lock is still ours — both in
        one round trip, the stamp ahead of the confirmation.

        Nothing that can block sits between the confirmation and the send: the stamp goes out
        with the confirmation, never after it (a hung Redis holds both, and confirms nothing).
        """
        p, sid = self.parts, lease.session_id
        lease.keeper.take_held()  # superseded by this stamp; waits for a renewal sending it

        def stamp(pipe: redis.client.Pipeline) -> None:
            p.stamp(sid, p.now_ms(), "delivering", pipe=pipe)

        lease.keeper.confirm(first=stamp)

    def reconfirm(self, lease: Lease) -> None:
        """A channel's send guard (``workers.ports.SendGuard``): before a request after the
        first of one send — a retry, the next part, after a rate-limit wait — Redis confirms
        the lock now, and the confirmation is checked as fresh; ``TurnAborted`` otherwise."""
        lease.keeper.confirm()
        lease.keeper.cleared()

    def deliver(
        self, lease: Lease, address: Address, text: str, what: Delivery, *, attempts: int = 1
    ) -> DeliveryOutcome:
        """Send, if the lock was confirmed recently enough (``TurnAborted`` if not: nothing
        leaves); how it ended, for its delivery record. A platform failure is recorded on the
        turn, never left to kill the session: ``retrying`` while ``attempts`` (this one
        included) stay within HBGW_DELIVERY_RETRIES + 1, else ``failed``; ``failed`` at once
        when the route refused it for good."""
        sid = lease.session_id
        lease.keeper.cleared()  # in memory: nothing can block between this and the send
        try:
            receipt = self.channel.send(
                address,
                text,
                session_id=sid,
                kind=what.kind,
                delivery_key=what.key,
                possible_repeat=what.possible_repeat,
                ref=what.fire_id,
                guard=lambda: self.reconfirm(lease),
            )
        except TurnAborted as exc:
            # The guard found the lock gone mid-send: nothing more left, but an earlier request
            # of this send (a part, an attempt that timed out) may have.
            exc.mid_send = True  # type: ignore[attr-defined]
            raise
        except Exception as exc:
            log.warning(
                "delivery to %s failed: %s",
                address.chat,
                exc,
                extra=fields("deliver.failed", sid, what.fire_id),
            )
            resend = Resend(
                text,
                address.chat,
                address.thread,
                address.reply_to,
                self.parts.clock() + backoff(self.parts.retries, attempts),
                what.possible_repeat or may_have_posted(exc),
            )
            return failure_outcome(self.parts.retries, what.key, exc, attempts, resend)
        if receipt is not None and receipt.duplicate:
            state, why = DeliveryState.SUPPRESSED, DUPLICATE_NOTE
        else:
            state, why = DeliveryState.SENT, None
        message_id = receipt.message_id if receipt is not None else None
        return DeliveryOutcome(what.key, state, platform_message_id=message_id, error=why)

    def label(self, platform: str) -> str:
        """The channel that delivers to ``platform`` (a chat platform's own client, else the
        local console or file channel), as the delivery record and the metric name it."""
        route = getattr(self.channel, "route_name", None)  # the registry's; a bare channel's name
        name = str(route(platform)) if callable(route) else self.channel.name
        return name if name in DELIVERY_PLATFORMS else "other"

    def count(self, platform: str, outcome: DeliveryOutcome) -> None:
        count_delivery(self.label(platform), outcome.state.value)

    def refused_for_good(self, session_id: str, address: Address, outcome: DeliveryOutcome) -> None:
        """The route refused a message for good: pause the heartbeat that fires into it, with
        the platform's sentence, so no fire spends tokens on a chat nobody can read."""
        if not outcome.permanent or outcome.error is None:
            return
        p, why = self.parts, outcome.error.removeprefix("delivery failed: ")
        chat = None if outcome.reason in WHOLE_SESSION else address.chat
        try:
            paused = p.heartbeats.pause_for_route(session_id, chat, why, p.clock())
            if paused is not None:
                p.due.settle(session_id)
        except Exception as exc:  # the next fire fails the same way and pauses it then
            log.warning(
                "pausing the heartbeat failed: %s",
                exc,
                extra=fields("deliver.pause_failed", session_id),
            )
            return
        if paused is not None:
            log.warning("heartbeat paused: %s", why, extra=fields("deliver.route_gone", session_id))

    def best_effort(self, call: Callable[..., None], *args: Any, session_id: str) -> None:
        """Typing indicators and progress are cosmetic: a failing platform must not stop a turn."""
        try:
            call(*args, session_id=session_id)
        except Exception as exc:
            log.debug(
                "channel signal failed: %s", exc, extra=fields("deliver.signal_failed", session_id)
            )

    def stamp(self, sid: str, phase: str) -> None:
        try:
            self.parts.stamp(sid, self.parts.now_ms(), phase)
        except Exception:  # a stamp must never break a turn
            log.debug("liveness stamp failed", exc_info=True, extra=fields("liveness.failed", sid))

    def hold_stamp(self, lease: Lease, phase: str) -> None:
        """A stamp that rides on the turn's next round trip (``LockKeeper.hold``): stamped now,
        landing within a renewal period at the latest."""
        p, sid, at_ms = self.parts, lease.session_id, self.parts.now_ms()
        lease.keeper.hold(
            lambda pipe: p.stamp(sid, at_ms, phase, pipe=pipe),
            restore=lambda pipe: p.stamp(sid, at_ms, phase, pipe=pipe, missing_only=True),
        )

    def _step(self, lease: Lease, phase: str, address: Address | None) -> None:
        lease.keeper.check()
        self.hold_stamp(lease, phase)
        if address is not None:  # rule 8: heartbeat turns pass no address, so show nothing
            self.best_effort(self.channel.progress, address, phase, session_id=lease.session_id)


def backoff(policy: RetryPolicy, attempts: int) -> timedelta:
    """How long after its ``attempts``-th failed attempt a delivery is tried again: doubling
    from HBGW_DELIVERY_BACKOFF, at most HBGW_DELIVERY_BACKOFF_MAX."""
    base, most = policy.backoff, policy.backoff_max
    return timedelta(seconds=min(most, base * 2 ** min(max(attempts - 1, 0), 30)))


def may_have_posted(exc: Exception) -> bool:
    """Whether a failed send may have reached the platform all the same: no answer came back
    (a timeout, a dropped connection), or the failure is not one a platform client typed."""
    if isinstance(exc, DeliveryFailed):
        return exc.reason in MAYBE_POSTED
    return True


def failure_outcome(
    policy: RetryPolicy, key: str, exc: Exception, attempts: int, resend: Resend
) -> DeliveryOutcome:
    """A failed attempt's record: ``failed`` for good (the route refused it, or the retries
    are spent), else ``retrying`` with its ``resend``."""
    reason = exc.reason if isinstance(exc, DeliveryFailed) else None
    if isinstance(exc, PermanentDelivery):
        error = f"delivery failed: {exc}"
        return DeliveryOutcome(
            key, DeliveryState.FAILED, error=error, permanent=True, reason=reason
        )
    if attempts > policy.retries:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return DeliveryOutcome(key, DeliveryState.FAILED, error=f"delivery failed{tried}: {exc}")
    error = f"delivery retrying (attempt {attempts} failed): {exc}"
    return DeliveryOutcome(key, DeliveryState.RETRYING, error=error, reason=reason, resend=resend)


def conversation_before(
    current: MessageView, messages: Sequence[MessageView]
) -> tuple[tuple[str, str], ...]:
    """What the agent sees of ``messages`` (those before ``current``, oldest first): what was
    said in ``current``'s conversation."""
    return tuple(
        (m.role, m.text)
        for m in messages
        if m.conversation == current.conversation and m.kind in CONVERSATION_KINDS
    )
