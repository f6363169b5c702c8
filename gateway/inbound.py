"""What the edge does with an inbound message: answer a /heartbeat command, or queue a turn."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.clock import to_ms
from core.errors import InvalidState
from sessions.grammar import GrammarLimits, is_heartbeat_command
from sessions.heartbeat_commands import handle_slash
from sessions.states import MessageState, SessionStatus
from sessions.store import Store
from state.dispatch import Dispatcher
from state.runtime import Runtime


@dataclass(frozen=True)
class Answered:
    session_id: str
    text: str


@dataclass(frozen=True)
class Queued:
    session_id: str
    message_id: int


def receive(
    store: Store,
    session_id: str,
    text: str,
    now: datetime,
    limits: GrammarLimits,
    *,
    rt: Runtime | None = None,
    dispatcher: Dispatcher | None = None,
) -> Answered | Queued:
    """Slash commands are answered at once; anything else becomes a user turn via the owner.

    Without Redis (``rt`` None) the message is stored and the heartbeat change reaches the due
    index on the next restore pass.
    """
    session = store.resolve_active(session_id)
    if session.status != SessionStatus.ACTIVE:
        raise InvalidState(f"Session {session.id} is {session.status}; it takes no messages.")
    sid = session.id
    if is_heartbeat_command(text):
        reply = handle_slash(
            store, sid, text, now, limits, origin_chat=session.chat, origin_thread=session.thread
        )
        if rt is not None:
            rt.settle(sid)
        return Answered(sid, reply)
    message = store.add_message(
        sid, role="user", kind="user", text=text, now=now, state=MessageState.QUEUED
    )
    if rt is not None:
        rt.gate.enqueue_user(sid, str(message.id))
        owner = rt.registry.owner(sid, to_ms(now))
        if owner is not None and dispatcher is not None:
            dispatcher.drain(owner, sid)
    return Queued(sid, message.id)
