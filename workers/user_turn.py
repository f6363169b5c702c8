"""One user turn under a held lock: the agent answers a queued message, in its own thread."""

from __future__ import annotations

import logging
import time

from core.errors import NotFound, TurnAborted
from core.metrics import gateway_metrics
from sessions.states import MessageState
from sessions.views import ReplyStart
from workers.agents.base import TurnRequest
from workers.heartbeat_tools import SessionHeartbeatTools
from workers.injection import EMPTY_REPLY_NOTICE, FAILED_TURN_NOTICE, is_silent
from workers.locks import Lease
from workers.logfields import fields
from workers.ports import Address
from workers.turn_io import Delivery, TurnIO, as_sent

log = logging.getLogger("hbgw.runner")


class UserTurn:
    def __init__(self, io: TurnIO) -> None:
        self.io = io
        self.rt = io.rt

    def run(self, lease: Lease, message_id: int) -> None:
        rt, io, sid, fence = self.rt, self.io, lease.session_id, lease.fence
        try:
            message = rt.store.get_message(message_id)
        except NotFound:
            return
        if message.state == MessageState.DONE:
            return  # answered by a turn that died before it could take it off the in-flight list
        session = rt.store.get_session(sid)
        address = Address(session.platform, session.chat, session.thread, str(message_id))
        io.best_effort(io.channel.typing, address, session_id=sid)
        io.stamp(sid, "user:start")
        started = time.monotonic()
        tools = io.toolbox(sid, "user", address)
        request = TurnRequest(sid, "user", message.text, io.history(message), heartbeat=tools)
        answer = io.ask(lease, request, address)
        reply, kind = answer.text, "reply"
        if answer.failure is not None:
            reply, kind = f"{FAILED_TURN_NOTICE}{answer.failure}", "failure"
        elif is_silent(reply):
            # Rule 7: a human gets a visible notice, never silence.
            reply, kind = EMPTY_REPLY_NOTICE, "notice"
        # Nothing leaves before Redis confirms the lock and SQL agrees this turn still holds the
        # session (StaleFence ends a stale turn here) and the message still waits for its
        # answer; SQL then keeps the mark that this grant is about to send (durable: a newer
        # grant that finds it knows this one's outcome is unknown).
        io.confirm(lease)
        start = rt.store.begin_reply(sid, message_id, fence)
        if start is None:
            return
        undelivered = self._send(lease, address, tools, message_id, start, reply, kind)
        rt.store.add_message(
            sid,
            role="assistant",
            kind="assistant" if kind == "reply" and not undelivered else "notice",
            text=as_sent(reply, start.possible_repeat),
            reply_to=message_id,
            now=rt.clock(),
            fence=fence,
            usage=answer.usage,  # what the turn spent, a failed one included
        )
        rt.wake_streams(sid)  # the reply (and its notices) reach the API's streams now
        rt.store.mark_message_done(message_id, fence=fence)
        metrics = gateway_metrics()
        metrics.turn_duration.labels("user").observe(time.monotonic() - started)
        metrics.user_turns.labels(kind).inc()
        io.stamp(sid, "idle")

    def _send(
        self,
        lease: Lease,
        address: Address,
        tools: SessionHeartbeatTools,
        message_id: int,
        start: ReplyStart,
        reply: str,
        kind: str,
    ) -> str | None:
        """The notices, then the reply; None when delivered, else why not. A turn stopped
        before anything left takes its durable mark back (best effort: a mark left behind only
        makes the next grant's reply a false "possible repeat")."""
        repeat, sent = start.possible_repeat, [0]
        try:
            self._announce(lease, address, tools, message_id, repeat, sent)
            what = Delivery(kind, reply_key(message_id), repeat)
            return self.io.deliver(lease, address, as_sent(reply, repeat), what)
        except TurnAborted:
            if not sent[0]:
                self._unmark(lease, message_id, start.earlier)
            raise

    def _unmark(self, lease: Lease, message_id: int, earlier: int | None) -> None:
        try:
            self.rt.store.drop_reply_mark(message_id, lease.fence, earlier)
        except Exception as exc:
            log.warning(
                "could not take back the reply mark of message %s: %s",
                message_id,
                exc,
                extra=fields("turn.unmark_failed", lease.session_id),
            )

    def _announce(
        self,
        lease: Lease,
        address: Address,
        tools: SessionHeartbeatTools,
        message_id: int,
        repeat: bool,
        sent: list[int],
    ) -> None:
        """A heartbeat the agent changed is said in the chat, before the reply, and kept in SQL
        (even when the turn failed afterwards: the change was made)."""
        rt, sid = self.rt, lease.session_id
        for n, notice in enumerate(tools.announcements, 1):
            text = as_sent(notice, repeat)
            key = f"{reply_key(message_id)}:notice:{n}"
            self.io.deliver(lease, address, text, Delivery("notice", key, repeat))
            sent[0] += 1
            rt.store.add_message(
                sid, role="assistant", kind="notice", text=text, now=rt.clock(), fence=lease.fence
            )
            # That write can block: the next send needs a fresh confirmation of its own.
            self.io.confirm(lease)


def reply_key(message_id: int) -> str:
    """The delivery key of the reply to user message ``message_id``: the same on every attempt."""
    return f"msg:{message_id}"
