"""What both kinds of turn share: asking the agent, delivering, liveness stamps, history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import TurnAborted
from core.usage import TokenUsage
from sessions.states import DeliveryState
from sessions.views import DeliveryOutcome, MessageView
from state.runtime import Runtime
from workers.agents.base import Agent, TurnFailed, TurnKind, TurnRequest
from workers.heartbeat_tools import SessionHeartbeatTools
from workers.locks import Lease
from workers.logfields import fields, log
from workers.ports import Address, Channel

HISTORY_TURNS = 20
# What the model sees of the conversation: what was said, not the gateway's notices (failures,
# empty-reply notices, heartbeat-change announcements), which are our words, not the agent's.
CONVERSATION_KINDS = frozenset({"user", "heartbeat", "assistant"})
# The visible mark of a message an older turn may already have sent (contract, rule 12): a chat
# platform cannot drop a repeat by itself, so the person reading it is told.
REPEAT_MARK = "(possible repeat) "
# Why a delivery the platform accepted is ``suppressed``: it knew the key and dropped a repeat.
DUPLICATE_NOTE = "dropped by the platform as a repeat of its delivery key"


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
    def __init__(self, rt: Runtime, agent: Agent, channel: Channel) -> None:
        self.rt = rt
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
        return SessionHeartbeatTools(
            self.rt,
            session_id,
            kind,
            origin=(address.chat, address.thread),
            write=self.rt.settings.agent_heartbeat_write,
        )

    def confirm(self, lease: Lease) -> None:
        """The first step of a delivery: stamp ``delivering`` (a platform that hangs shows
        here, not as a silent agent), then ask Redis whether the lock is still ours.

        The stamp comes first because it can block (a hung Redis holds it for the socket
        timeout); nothing that can block may sit between the confirmation and the send.
        """
        self.stamp(lease.session_id, "delivering")
        lease.keeper.confirm()

    def deliver(self, lease: Lease, address: Address, text: str, what: Delivery) -> DeliveryOutcome:
        """Send, if the lock was confirmed recently enough (``TurnAborted`` if not: nothing
        leaves); how it ended, for its delivery record. A platform failure is recorded on the
        turn, never left to kill the session."""
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
            )
        except Exception as exc:
            log.warning(
                "delivery to %s failed: %s",
                address.chat,
                exc,
                extra=fields("deliver.failed", sid, what.fire_id),
            )
            return DeliveryOutcome(what.key, DeliveryState.FAILED, error=f"delivery failed: {exc}")
        if receipt is not None and receipt.duplicate:
            state, why = DeliveryState.SUPPRESSED, DUPLICATE_NOTE
        else:
            state, why = DeliveryState.SENT, None
        message_id = receipt.message_id if receipt is not None else None
        return DeliveryOutcome(what.key, state, platform_message_id=message_id, error=why)

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
            self.rt.liveness.stamp(sid, self.rt.now_ms(), phase, self.rt.worker)
        except Exception:  # a stamp must never break a turn
            log.debug("liveness stamp failed", exc_info=True, extra=fields("liveness.failed", sid))

    def history(self, current: MessageView) -> tuple[tuple[str, str], ...]:
        """The conversation before ``current`` (the turn's own message, passed on its own, so the
        agent sees it exactly once — a heartbeat's prompt as much as a user's text)."""
        messages = self.rt.store.list_messages(
            current.session_id, limit=HISTORY_TURNS, before=current.id
        )
        return conversation_before(current, messages)

    def _step(self, lease: Lease, phase: str, address: Address | None) -> None:
        lease.keeper.check()
        self.stamp(lease.session_id, phase)
        if address is not None:  # rule 8: heartbeat turns pass no address, so show nothing
            self.best_effort(self.channel.progress, address, phase, session_id=lease.session_id)


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
