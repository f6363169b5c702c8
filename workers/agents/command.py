"""An agent that runs a configured command per turn: prompt on stdin, reply on stdout.

The child gets a minimal environment: the variables named in HBGW_AGENT_ENV_ALLOW (PATH, HOME,
locale, TZ, TMPDIR by default) and the turn's own data (HBGW_TURN_KIND, HBGW_TURN_SESSION).
The worker's environment holds the database URL, the Redis password and API tokens; a command
that did what its prompt said once used them to change another owner's heartbeat. It runs as
another user (``agent_user``), so it cannot read them from the worker's /proc or files either.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from hbgw.core.errors import AgentError, BadInput
from hbgw.workers.agents.agent_user import AgentUser
from hbgw.workers.agents.base import AgentReply, StepCallback, TurnRequest

DEFAULT_ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")

BLANK_COMMAND = (
    "HBGW_AGENT_COMMAND is empty; set it to the command to run per turn "
    "(it reads the prompt on stdin and prints the reply)."
)


class CommandAgent:
    name = "command"

    def __init__(
        self,
        command: str,
        *,
        timeout: float,
        env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW,
        user: AgentUser | None = None,
    ) -> None:
        """``user``: the account the child runs as; None runs it as the worker's own (an
        operator's explicit choice, ``agent_user``)."""
        self.argv = shlex.split(command)
        if not self.argv:
            raise BadInput(BLANK_COMMAND)
        self.timeout = timeout
        self.env_allow = env_allow
        self.user = user

    def child_env(self, request: TurnRequest) -> dict[str, str]:
        """The allowed variables of this process, then the turn's data; nothing else."""
        env = {name: os.environ[name] for name in self.env_allow if name in os.environ}
        if self.user is not None and "HOME" in env:
            env["HOME"] = self.user.home  # the worker's home is not the child's to use
        env["HBGW_TURN_KIND"] = request.kind
        env["HBGW_TURN_SESSION"] = request.session_id
        return env

    def run(self, request: TurnRequest, on_step: StepCallback) -> AgentReply:
        on_step(f"tool:{os.path.basename(self.argv[0])}")
        env = self.child_env(request)
        user = self.user
        try:
            # close_fds (the default, said here because it matters): the child gets its three
            # pipes and none of the worker's sockets or files.
            done = subprocess.run(
                self.argv,
                input=request.text,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=env,
                check=False,
                close_fds=True,
                user=user.uid if user else None,
                group=user.gid if user else None,
                extra_groups=[] if user else None,
                cwd=user.workdir if user else None,
            )
        except subprocess.TimeoutExpired as exc:
            raise AgentError(f"The agent command timed out after {self.timeout:g}s.") from exc
        except PermissionError as exc:
            # Worked when the worker ran it, fails as the agent's user: say whose rights count.
            whose = (
                f" as HBGW_AGENT_USER={user.name}, who must be able to read and run it"
                if user
                else ""
            )
            raise AgentError(f"The agent command could not start{whose}: {exc}.") from exc
        except OSError as exc:
            raise AgentError(f"The agent command could not start: {exc}.") from exc
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or [""]
            raise AgentError(f"The agent command exited with {done.returncode}: {tail[0]}")
        return AgentReply(done.stdout.strip())
