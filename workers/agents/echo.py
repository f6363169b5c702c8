"""A deterministic agent for demos and tests.

It answers ``echo: <first line>``; a heartbeat turn is answered with the silence marker when
``silent_heartbeats`` is set or when the heartbeat's instruction contains ``#quiet``.
"""

from __future__ import annotations

from pathlib import Path

from hbgw.core.clock import pause
from hbgw.core.jsonl import append_line
from hbgw.workers.agents.base import AgentReply, StepCallback, TurnRequest

QUIET_TAG = "#quiet"


class EchoAgent:
    name = "echo"

    def __init__(
        self, *, delay: float = 0.0, silent_heartbeats: bool = False, log: Path | None = None
    ) -> None:
        self.delay = delay
        self.silent_heartbeats = silent_heartbeats
        self.log = log

    def run(self, request: TurnRequest, on_step: StepCallback) -> AgentReply:
        on_step("thinking")
        if self.delay:
            # Two steps so liveness stamps move during a long turn.
            pause(self.delay / 2)
            on_step("tool:echo")
            pause(self.delay / 2)
        self._record(request)
        if request.kind == "heartbeat" and (self.silent_heartbeats or QUIET_TAG in request.text):
            return AgentReply("[SILENT]")
        first = request.text.strip().splitlines()[0] if request.text.strip() else ""
        return AgentReply(f"echo: {first}")

    def _record(self, request: TurnRequest) -> None:
        if self.log is None:
            return
        append_line(
            self.log,
            {
                "session_id": request.session_id,
                "kind": request.kind,
                "text": request.text,
                "system_prompt": request.system_prompt,
                "tools": list(request.tools),
            },
        )
