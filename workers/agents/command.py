"""An agent that runs a configured command per turn: prompt on stdin, reply on stdout."""

from __future__ import annotations

import os
import shlex
import subprocess

from core.errors import AgentError, BadInput
from workers.agents.base import AgentReply, StepCallback, TurnRequest

BLANK_COMMAND = (
    "HBGW_AGENT_COMMAND is empty; set it to the command to run per turn "
    "(it reads the prompt on stdin and prints the reply)."
)


class CommandAgent:
    name = "command"

    def __init__(self, command: str, *, timeout: float) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise BadInput(BLANK_COMMAND)
        self.timeout = timeout

    def run(self, request: TurnRequest, on_step: StepCallback) -> AgentReply:
        on_step(f"tool:{os.path.basename(self.argv[0])}")
        env = {
            **os.environ,
            "HBGW_TURN_KIND": request.kind,
            "HBGW_TURN_SESSION": request.session_id,
        }
        try:
            done = subprocess.run(
                self.argv,
                input=request.text,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise AgentError(f"The agent command timed out after {self.timeout:g}s.") from exc
        except OSError as exc:
            raise AgentError(f"The agent command could not start: {exc}.") from exc
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or [""]
            raise AgentError(f"The agent command exited with {done.returncode}: {tail[0]}")
        return AgentReply(done.stdout.strip())
