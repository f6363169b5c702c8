"""Agent configuration errors are the operator's to fix: a sentence and exit code 2."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from hbgw.cli.main import main
from hbgw.core.errors import AgentError, BadInput
from hbgw.core.settings import Settings, get_settings
from hbgw.workers.agents import make_agent
from hbgw.workers.agents.agent_user import AgentUser
from hbgw.workers.agents.base import TurnRequest
from hbgw.workers.agents.command import CommandAgent


@pytest.mark.parametrize("command", ["", "   ", "\t \n"])
def test_blank_agent_command_is_bad_input(tmp_path: Path, command: str) -> None:
    settings = Settings(home=tmp_path, agent="command", agent_command=command)
    with pytest.raises(BadInput, match="HBGW_AGENT_COMMAND") as raised:
        make_agent(settings)
    assert raised.value.exit_code == 2


def test_worker_with_blank_agent_command_exits_2(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"HBGW_HOME": str(tmp_path), "HBGW_REDIS_URL": redis_url, "HBGW_NAMESPACE": redis_ns}
    err = _worker_refused(monkeypatch, capsys, {**env, "HBGW_AGENT_COMMAND": "   "})
    assert "HBGW_AGENT_COMMAND" in err


def _worker_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> str:
    """`hbgw worker` with the command agent and ``env``: it exits 2; what it said."""
    for name, value in {"HBGW_AGENT": "command", **env}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(["worker", "--name", "w-refused"])
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    return err


def test_a_worker_refuses_to_run_the_command_agent_as_root(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 29, finding 3: a command agent that runs as root reads every secret of the
    worker; before the fix the worker started it as its own user, root included."""
    env = {"HBGW_HOME": str(tmp_path), "HBGW_REDIS_URL": redis_url, "HBGW_NAMESPACE": redis_ns}
    err = _worker_refused(
        monkeypatch, capsys, {**env, "HBGW_AGENT_COMMAND": "cat", "HBGW_AGENT_USER": "root"}
    )
    assert "HBGW_AGENT_USER=root is root, which can read every secret of the worker" in err


def test_a_command_agent_makes_its_worker_undumpable(tmp_path: Path) -> None:
    """Issue 29, finding 3: /proc/<worker>/environ and mem were open to a child of the
    worker's own uid; a non-dumpable worker closes them (checked here by the flag itself: as
    root the test's own child could read them anyway)."""
    probe = (
        "import ctypes; from hbgw.core.settings import Settings; "
        "from hbgw.workers.agents import make_agent; "
        "libc = ctypes.CDLL(None); before = libc.prctl(3, 0, 0, 0, 0); "
        f"make_agent(Settings(home={str(tmp_path)!r}, agent='command', agent_command='cat', "
        "agent_same_user=True)); print(before, libc.prctl(3, 0, 0, 0, 0))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["1", "0"], done


@pytest.mark.skipif(os.geteuid() != 0, reason="switching the agent's user needs root")
def test_a_command_its_user_cannot_run_says_whose_rights_count(tmp_path: Path) -> None:
    """Issue 29, finding 3: the command now runs as HBGW_AGENT_USER; one kept where only the
    worker's user reaches (pytest's directory, 0700) fails the turn naming that user."""
    script = tmp_path / "my-agent"
    script.write_text("#!/bin/sh\ncat\n")
    script.chmod(0o755)
    nobody = pwd.getpwnam("nobody")
    user = AgentUser("nobody", nobody.pw_uid, nobody.pw_gid, nobody.pw_dir)
    agent = CommandAgent(str(script), timeout=30, user=user)
    with pytest.raises(AgentError) as failed:
        agent.run(TurnRequest("s-1", "user", "hi"), lambda _phase: None)
    said = str(failed.value)
    assert said.startswith("The agent command could not start as HBGW_AGENT_USER=nobody, who")
    assert "Permission denied" in said
    assert (
        CommandAgent(str(script), timeout=30)
        .run(TurnRequest("s-1", "user", "hi"), lambda _phase: None)
        .text
        == "hi"
    )
