"""One user turn under a held lock: the agent answers a queued message, in its own thread."""

from __future__ import annotations

from core.errors import NotFound
from sessions.states import MessageState
from workers.agents.base import TurnRequest
from workers.injection import EMPTY_REPLY_NOTICE, is_silent
from workers.locks import Lease
from workers.ports import Address
from workers.turn_io import TurnIO


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
        request = TurnRequest(sid, "user", message.text, io.history(sid, before=message_id))
        reply, failure = io.ask(lease, request, address)
        kind = "reply"
        if failure is not None:
            reply, kind = f"⚠ The turn failed: {failure}", "failure"
        elif is_silent(reply):
            # Rule 7: a human gets a visible notice, never silence.
            reply, kind = EMPTY_REPLY_NOTICE, "notice"
        # Nothing leaves before SQL agrees this turn still holds the session (StaleFence ends
        # a stale turn here) and the message still waits for its answer.
        lease.keeper.confirm()
        if not rt.store.check_reply(sid, message_id, fence):
            return
        undelivered = io.deliver(address, reply, sid, kind)
        rt.store.add_message(
            sid,
            role="assistant",
            kind="assistant" if kind == "reply" and not undelivered else "notice",
            text=reply,
            reply_to=message_id,
            now=rt.clock(),
            fence=fence,
        )
        rt.store.mark_message_done(message_id, fence=fence)
        io.stamp(sid, "idle")
