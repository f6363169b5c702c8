"""What both kinds of turn share: asking the agent, delivering, liveness stamps, history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.errors import TurnAborted
from state.runtime import Runtime
from workers.agents.base import Agent, TurnRequest
from workers.locks import Lease
from workers.logfields import fields, log
from workers.ports import Address, Channel

HISTORY_TURNS = 20


class TurnIO:
    def __init__(self, rt: Runtime, agent: Agent, channel: Channel) -> None:
        self.rt = rt
        self.agent = agent
        self.channel = channel

    def ask(
        self, lease: Lease, request: TurnRequest, address: Address | None
    ) -> tuple[str, Exception | None]:
        """The agent's reply, or the failure that stands for it (a failed turn, never silence)."""
        try:
            reply = self.agent.run(request, lambda phase: self._step(lease, phase, address))
        except TurnAborted:
            raise
        except Exception as exc:
            return "", exc
        lease.keeper.check()
        return reply, None

    def deliver(
        self, address: Address, text: str, sid: str, kind: str, fire_id: str | None = None
    ) -> str | None:
        """Send; a platform failure is recorded on the turn, never left to kill the session."""
        try:
            self.channel.send(address, text, session_id=sid, kind=kind, ref=fire_id)
        except Exception as exc:
            log.warning(
                "delivery to %s failed: %s",
                address.chat,
                exc,
                extra=fields("deliver.failed", sid, fire_id),
            )
            return f"delivery failed: {exc}"
        return None

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

    def history(self, sid: str, before: int | None = None) -> tuple[tuple[str, str], ...]:
        messages = self.rt.store.list_messages(sid, limit=HISTORY_TURNS)
        return tuple((m.role, m.text) for m in messages if before is None or m.id < before)

    def _step(self, lease: Lease, phase: str, address: Address | None) -> None:
        lease.keeper.check()
        self.stamp(lease.session_id, phase)
        if address is not None:  # rule 8: heartbeat turns pass no address, so show nothing
            self.best_effort(self.channel.progress, address, phase, session_id=lease.session_id)
