"""What the edge does with an inbound message: answer a /heartbeat or /cron command, or queue
a turn.

SQL is the truth for user messages: once the row is stored ``queued`` the message is accepted,
whatever Redis does next. Redis and the broker only make the answer come sooner; when they fail
the restore pass puts the message back into the inbox from SQL, and a retry with the same
idempotency key is recognised instead of stored twice.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import redis
from kombu.exceptions import KombuError

from hbgw.core.clock import to_ms
from hbgw.core.errors import BadInput, InvalidState
from hbgw.gateway.platforms.served import Served
from hbgw.sessions.cron_commands import handle_cron
from hbgw.sessions.grammar import GrammarLimits, is_heartbeat_command
from hbgw.sessions.grammar.cron_slash import is_cron_command
from hbgw.sessions.heartbeat_commands import handle_slash
from hbgw.sessions.states import MessageState, SessionStatus
from hbgw.sessions.store import Store
from hbgw.sessions.validation import MessageLimits, check_message, check_storable
from hbgw.sessions.views import SessionView
from hbgw.state.dispatch import Dispatcher
from hbgw.state.due_settle import DueSettle
from hbgw.state.ownership import WorkerRegistry
from hbgw.state.turn_gate import TurnGate

if TYPE_CHECKING:
    from hbgw.state.runtime import Runtime

log = logging.getLogger("hbgw.inbound")

# What Redis or the Celery broker raise when they are down, full or failing.
_HANDOFF_ERRORS = (redis.RedisError, OSError, KombuError)


@dataclass(frozen=True)
class InboundParts:
    """What the edge uses of Redis: the gate (the emergency stop a status reports, the inbox a
    message is queued on), the worker registry (who owns the session) and the due index's
    settle rule (a changed heartbeat or cron job)."""

    gate: TurnGate
    registry: WorkerRegistry
    due: DueSettle

    @classmethod
    def of(cls, rt: Runtime) -> InboundParts:
        return cls(rt.gate, rt.registry, rt.due)


@dataclass(frozen=True)
class Answered:
    session_id: str
    text: str


@dataclass(frozen=True)
class Queued:
    """A stored user message. ``handed_off``: Redis has it, so a worker can start on it now;
    otherwise the restore pass hands it over once Redis answers. ``duplicate``: the idempotency
    key was accepted before and this is that first message."""

    session_id: str
    message_id: int
    idempotency_key: str
    handed_off: bool = True
    duplicate: bool = False


def receive(
    store: Store,
    session_id: str,
    text: str,
    now: datetime,
    limits: GrammarLimits,
    *,
    parts: InboundParts | None = None,
    dispatcher: Dispatcher | None = None,
    idempotency_key: str | None = None,
    message_limits: MessageLimits = MessageLimits(),
    served: Served | None = None,
) -> Answered | Queued:
    """Slash commands are answered at once; anything else becomes a user turn via the owner.

    ``idempotency_key`` is the platform's message id, or the client's; one is made up when
    there is none. Without Redis (``parts`` None) the message is stored and the heartbeat change
    reaches the due index on the next restore pass. ``served``: the platforms this deployment
    serves; a session on another is refused (``PlatformNotEnabled``) before anything is stored.
    The store holds the session's owner to its quotas (``Store.quotas``).
    """
    check_storable(session_id, "session id")
    check_storable(text, "message")
    session = store.sessions.resolve_active(session_id)
    if session.status != SessionStatus.ACTIVE:
        raise InvalidState(f"Session {session.id} is {session.status}; it takes no messages.")
    if served is not None:
        served.check(session.platform)
    if is_heartbeat_command(text):
        return _answer_command(store, session, text, now, limits, parts)
    if is_cron_command(text):
        return _answer_cron(store, session, text, now, limits, parts)
    check_message(text, message_limits)
    key = idempotency_key if idempotency_key is not None else uuid.uuid4().hex
    accepted = store.messages.accept_message(session.id, text, now=now, idempotency_key=key)
    message = accepted.message
    handed_off = False
    if parts is not None and message.state == MessageState.QUEUED:
        # A retry may find its first attempt in the session this one continues (compressed
        # since): that message is answered where it was queued.
        handed_off = _hand_off(parts, dispatcher, message.session_id, message.id, now)
    return Queued(session.id, message.id, key, handed_off=handed_off, duplicate=accepted.duplicate)


def _answer_command(
    store: Store,
    session: SessionView,
    text: str,
    now: datetime,
    limits: GrammarLimits,
    parts: InboundParts | None,
) -> Answered:
    """A /heartbeat command, applied and answered at once; the due index follows."""
    sid = session.id
    reply = handle_slash(
        store,
        sid,
        text,
        now,
        limits,
        origin_chat=session.chat,
        origin_thread=session.thread,
        estop=_estop_holds(parts.gate if parts is not None else None, sid),
    )
    if parts is not None:
        _settle(parts.due, sid)
    return Answered(sid, reply)


def _answer_cron(
    store: Store,
    session: SessionView,
    text: str,
    now: datetime,
    limits: GrammarLimits,
    parts: InboundParts | None,
) -> Answered:
    """A /cron command, applied and answered at once; the due index learns a changed job."""
    _check_job_route(store, session, text)
    answer = handle_cron(store.jobs, session, text, now, limits)
    if parts is not None and answer.changed is not None:
        try:
            parts.due.settle_job(answer.changed)
        except _HANDOFF_ERRORS as exc:
            log.warning(
                "cron job changed in SQL; Redis did not take it: %s",
                exc,
                extra={"action": "inbound.settle_failed", "session": session.id},
            )
    return Answered(session.id, answer.text)


def _check_job_route(store: Store, session: SessionView, text: str) -> None:
    """``/cron add`` makes a job whose runs are fresh sessions on this chat, without a URL of
    their own: they post to HBGW_WEBHOOK_URL. A webhook session with its own URL (an owner's)
    would hand its jobs the operator's partner route, so it is refused with the way to do it."""
    if session.platform != "webhook" or text.split(maxsplit=2)[1:2] != ["add"]:
        return
    if store.webhooks.webhook_url(session.id) is not None:
        raise BadInput(
            "A /cron job here would post its runs to the operator's HBGW_WEBHOOK_URL, not to "
            "this session's URL; make it a job of this session instead: POST /v1/cron with "
            f'"session_id": "{session.id}".'
        )


def _estop_holds(gate: TurnGate | None, sid: str) -> bool:
    """Whether an emergency stop holds the session (status says so); unknown without Redis."""
    if gate is None:
        return False
    try:
        return gate.estop_active(sid)
    except _HANDOFF_ERRORS:
        return False


def _settle(due: DueSettle, sid: str) -> None:
    """Tell the due index about the change; when Redis fails, the restore pass does it."""
    try:
        due.settle(sid)
    except _HANDOFF_ERRORS as exc:
        log.warning(
            "heartbeat changed in SQL; Redis did not take it: %s",
            exc,
            extra={"action": "inbound.settle_failed", "session": sid},
        )


def _hand_off(
    parts: InboundParts, dispatcher: Dispatcher | None, sid: str, message_id: int, now: datetime
) -> bool:
    """Queue the id in Redis and wake the owner; False when Redis or the broker failed."""
    try:
        parts.gate.enqueue_user(sid, str(message_id))
        owner = parts.registry.owner(sid, to_ms(now))
        if owner is not None and dispatcher is not None:
            dispatcher.drain(owner, sid)
    except _HANDOFF_ERRORS as exc:
        # Expected when Redis is down or full: one line, no traceback. The row is queued in
        # SQL, so the restore pass (or beat's sweeper, if the id did reach the inbox) takes it.
        log.warning(
            "message %d stored; Redis did not take it: %s",
            message_id,
            exc,
            extra={"action": "inbound.handoff_failed", "session": sid},
        )
        return False
    return True
