"""The session's heartbeat as an agent's tools see it: read it always, change it only if allowed.

A heartbeat written by a model is a prompt-injection risk: text the model read (a web page, a
file, a message from someone else) can ask it to schedule work that then runs unattended,
forever. So the write tools exist only behind ``HBGW_AGENT_HEARTBEAT_WRITE`` (off by default),
every change is announced in the conversation, and a heartbeat turn may never change the
heartbeat at all: otherwise a heartbeat could reschedule or re-prompt itself from what it read
while nobody was watching. The refusal happens here, at execution, so the tool list the model
sees stays byte-identical between user and heartbeat turns (rule 5, the prompt cache).

Writes go through the same grammar and store calls as a typed ``/heartbeat`` (limits and error
sentences are identical); a grammar or state error is the tool's answer, not a failed turn.
"""

from __future__ import annotations

from collections.abc import Callable

from hbgw.core.clock import Clock
from hbgw.core.errors import BadInput
from hbgw.sessions import replies
from hbgw.sessions.grammar import Clear, GrammarLimits, SetHeartbeat, parse_command
from hbgw.sessions.heartbeat_commands import apply_command
from hbgw.sessions.store import Heartbeats
from hbgw.state.due_settle import DueSettle
from hbgw.state.turn_gate import TurnGate
from hbgw.workers.agents.base import TurnKind

HEARTBEAT_TURN_REFUSAL = "Refused: a heartbeat turn may not change the heartbeat."
WRITES_OFF = "Refused: changing the heartbeat is turned off here (HBGW_AGENT_HEARTBEAT_WRITE)."
ANNOUNCEMENT = "🔧 The agent changed this session's heartbeat: {reply}"


class SessionHeartbeatTools:
    """One turn's view of its session's heartbeat; ``announcements`` collects every change."""

    def __init__(
        self,
        session_id: str,
        kind: TurnKind,
        *,
        heartbeats: Heartbeats,
        gate: TurnGate,
        due: DueSettle,
        clock: Clock,
        limits: Callable[[], GrammarLimits],
        origin: tuple[str, str | None],
        write: bool,
    ) -> None:
        """``gate``: the emergency stop ``get`` reports; ``limits``: read at each change, as a
        typed /heartbeat reads them."""
        self.heartbeats = heartbeats
        self.gate = gate
        self.due = due
        self.clock = clock
        self.limits = limits
        self.session_id = session_id
        self.kind = kind
        self.origin = origin
        self.write = write
        self.announcements: list[str] = []

    def get(self) -> str:
        sid = self.session_id
        status = self.heartbeats.heartbeat_status(sid, self.clock())
        return replies.status_reply(status, estop=self.gate.estop_active(sid))

    def set(self, schedule: str, prompt: str) -> str:
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        words = " ".join(f"{schedule} {prompt}".split())
        try:
            command = parse_command(f"/heartbeat {words}", self.limits())
        except BadInput as exc:
            return f"Error: {exc}"
        if not isinstance(command, SetHeartbeat):
            # ``status``, ``clear``… as a "prompt" would run another command under set's name.
            return "Error: set_heartbeat needs a schedule and a prompt, for example 10m check CI."
        return self._apply(command)

    def clear(self) -> str:
        refusal = self._refusal()
        return refusal if refusal is not None else self._apply(Clear())

    def _refusal(self) -> str | None:
        if self.kind == "heartbeat":
            return HEARTBEAT_TURN_REFUSAL
        return None if self.write else WRITES_OFF

    def _apply(self, command: SetHeartbeat | Clear) -> str:
        sid = self.session_id
        try:
            reply = apply_command(
                self.heartbeats,
                sid,
                command,
                self.clock(),
                origin_chat=self.origin[0],
                origin_thread=self.origin[1],
            )
        except BadInput as exc:
            return f"Error: {exc}"
        self.due.settle(sid)  # the due index learns the change, as after a typed /heartbeat
        self.announcements.append(ANNOUNCEMENT.format(reply=reply))
        return reply
