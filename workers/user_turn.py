"""One user turn under a held lock, on the turn skeleton (``workers/turn.py``): the agent
answers a queued message.

begin: the message (skipped when answered already), its session, a typing indicator. Then the
skeleton: agent → confirm the lock and ``begin_reply`` (fenced: the message's durable mark and
the delivery records ``pending``) → the heartbeat announcements, each stored with its outcome
as it leaves → the reply → finish: the reply stored with its outcome, the message marked done
(one fenced transaction). The mark also snaps back a heartbeat that is backing off: the user
spoke.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hbgw.core.errors import NotFound
from hbgw.core.metrics import count_delivery, gateway_metrics
from hbgw.sessions.states import DeliveryState, MessageState
from hbgw.sessions.store import Ledger, MessageRecords
from hbgw.sessions.views import DeliveryOutcome, MessageView, ReplyStart
from hbgw.workers.agents.base import TurnRequest
from hbgw.workers.heartbeat_tools import SessionHeartbeatTools
from hbgw.workers.injection import EMPTY_REPLY_NOTICE, FAILED_TURN_NOTICE, is_silent
from hbgw.workers.locks import Lease
from hbgw.workers.logfields import fields
from hbgw.workers.ports import Address
from hbgw.workers.turn import Composed, Outgoing, Sent, Turn, outbound_of
from hbgw.workers.turn_io import HISTORY_TURNS, Answer, Delivery, TurnIO, conversation_before
from hbgw.workers.turn_redis import wake_and_idle

log = logging.getLogger("hbgw.runner")


@dataclass(frozen=True)
class Asked:
    """A user turn under way: the message it answers, where the answer goes, its tools."""

    message: MessageView
    address: Address
    tools: SessionHeartbeatTools
    history: tuple[tuple[str, str], ...]  # what the agent sees of the conversation before it


class UserTurn(Turn[Asked]):
    kind = "user"

    def __init__(self, io: TurnIO, messages: MessageRecords, ledger: Ledger) -> None:
        """``ledger``: the reply's fenced mark (``begin_reply``) and its take-back."""
        super().__init__(io)
        self.messages = messages
        self.ledger = ledger

    def run(self, lease: Lease, message_id: int) -> None:
        asked = self._begin(lease, message_id)
        if asked is not None:
            self.execute(lease, asked)

    def _begin(self, lease: Lease, message_id: int) -> Asked | None:
        io, sid = self.io, lease.session_id
        try:
            # The message, its session and the history before it: one transaction.
            read = self.messages.message_turn(message_id, sid, history=HISTORY_TURNS)
        except NotFound:
            return None
        message, session = read.message, read.session
        if message.state == MessageState.DONE:
            return None  # answered by a turn that died before it took it off the in-flight list
        address = Address(
            session.platform, session.chat, session.thread, str(message_id), session.owner
        )
        io.best_effort(io.channel.typing, address, session_id=sid)
        io.hold_stamp(lease, "user:start")
        history = conversation_before(message, read.history)
        return Asked(message, address, io.toolbox(sid, "user", address), history)

    # -- the skeleton's steps -----------------------------------------------------------------

    def request(self, plan: Asked) -> TurnRequest:
        message = plan.message
        return TurnRequest(
            message.session_id, "user", message.text, plan.history, heartbeat=plan.tools
        )

    def progress_to(self, plan: Asked) -> Address | None:
        return plan.address

    def address(self, plan: Asked) -> Address:
        return plan.address

    def compose(self, plan: Asked, answer: Answer) -> Composed:
        key = reply_key(plan.message.id)
        reply, kind = answer.text, "reply"
        if answer.failure is not None:
            reply, kind = f"{FAILED_TURN_NOTICE}{answer.failure}", "failure"
        elif is_silent(reply):
            # Rule 7: a human gets a visible notice, never silence.
            reply, kind = EMPTY_REPLY_NOTICE, "notice"
        # A heartbeat the agent changed is said in the chat, before the reply.
        before = tuple(
            Outgoing(notice, Delivery("notice", f"{key}:notice:{n}"))
            for n, notice in enumerate(plan.tools.announcements, 1)
        )
        return Composed(answer, Outgoing(reply, Delivery(kind, key)), before)

    def mark(self, lease: Lease, plan: Asked, composed: Composed) -> ReplyStart | None:
        # SQL agrees this turn still holds the session (StaleFence ends a stale turn here) and
        # the message still waits for its answer; it then keeps the mark that this grant is
        # about to send (durable: a newer grant that finds it knows this one's outcome is
        # unknown) and the delivery records, pending.
        p, channel = self.parts, self.io.label(plan.address.platform)
        start = self.ledger.begin_reply(
            lease.session_id,
            plan.message.key,
            lease.fence,
            p.clock(),
            channel=channel,
            outbound=outbound_of(composed),
        )
        if start is not None:
            count_delivery(channel, DeliveryState.UNKNOWN.value, start.unknown)
            if start.snapped:  # the user spoke: a heartbeat backing off is back at its interval
                p.due.apply(lease.session_id, start.next_due)
        return start

    def store_sent(self, lease: Lease, out: Outgoing, outcome: DeliveryOutcome) -> None:
        """An announcement is kept in SQL with its outcome (even when the turn fails
        afterwards: the change was made)."""
        self.messages.add_message(
            lease.session_id,
            role="assistant",
            kind="notice",
            text=out.text,
            now=self.parts.clock(),
            fence=lease.fence,
            delivered=outcome,
        )

    def finish(
        self,
        lease: Lease,
        plan: Asked,
        composed: Composed,
        sent: Sent | None,
        outcome: DeliveryOutcome,
    ) -> None:
        assert sent is not None  # a user turn always says something (rule 7)
        sid, kind = lease.session_id, sent.reply.delivery.kind
        delivered = outcome.state is not DeliveryState.FAILED
        # One fenced transaction: the reply, what the turn spent (a failed one included), the
        # delivery's outcome, and the message marked done.
        self.messages.add_message(
            sid,
            role="assistant",
            kind="assistant" if kind == "reply" and delivered else "notice",
            text=sent.reply.text,
            reply_to=plan.message.key,
            now=self.parts.clock(),
            fence=lease.fence,
            usage=composed.answer.usage,
            delivered=outcome,
        )
        gateway_metrics().user_turns.labels(kind).inc()
        # With the drain's next step: the reply (and its notices) reach the API's streams, the
        # session is stamped idle.
        wake_and_idle(self.parts, lease)

    def aborted(self, lease: Lease, plan: Asked, mark: ReplyStart | None, sent: int) -> None:
        """A turn stopped before some of its sends takes back what it marked for them (best
        effort: a mark left behind only makes the next grant's reply a false "possible
        repeat", a record left pending only ``unknown`` for a while). No outcome is counted:
        the next grant sends them."""
        if mark is None:
            return
        message_id = plan.message.id
        key = reply_key(message_id)
        keys = [f"{key}:notice:{n}" for n in range(1, len(plan.tools.announcements) + 1)]
        unsent = [*keys, key][sent:]
        try:
            self.ledger.drop_reply_mark(
                plan.message.key,
                lease.fence,
                mark.earlier,
                self.parts.clock(),
                unsent=unsent,
                nothing_sent=not sent,
            )
        except Exception as exc:
            log.warning(
                "could not take back the reply mark of message %s: %s",
                message_id,
                exc,
                extra=fields("turn.unmark_failed", lease.session_id),
            )


REPLY_KEY_PREFIX = "msg:"


def reply_key(message_id: int) -> str:
    """The delivery key of the reply to user message ``message_id``: the same on every attempt."""
    return f"{REPLY_KEY_PREFIX}{message_id}"


def reply_key_message(key: str) -> tuple[int, str] | None:
    """The user message a delivery key of its turn names (``reply_key``, or an announcement's
    ``msg:<id>:notice:<n>``) and what follows the id; None for any other key (a fire id)."""
    if not key.startswith(REPLY_KEY_PREFIX):
        return None
    number, sep, rest = key.removeprefix(REPLY_KEY_PREFIX).partition(":")
    if not (number.isascii() and number.isdigit()):
        return None
    return int(number), sep + rest
