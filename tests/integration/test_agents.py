"""Agent configuration errors are the operator's to fix: a sentence and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hbgw.cli.main import main
from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings, get_settings
from hbgw.workers.agents import make_agent


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
    for name, value in {
        "HBGW_HOME": str(tmp_path),
        "HBGW_REDIS_URL": redis_url,
        "HBGW_NAMESPACE": redis_ns,
        "HBGW_AGENT": "command",
        "HBGW_AGENT_COMMAND": "   ",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(["worker", "--name", "w-blank"])
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "HBGW_AGENT_COMMAND" in err


def test_a_worker_refuses_to_run_the_command_agent_as_root(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 29, finding 3: a command agent that runs as root reads every secret of the
    worker; before the fix the worker started it as its own user, root included."""
    for name, value in {
        "HBGW_HOME": str(tmp_path),
        "HBGW_REDIS_URL": redis_url,
        "HBGW_NAMESPACE": redis_ns,
        "HBGW_AGENT": "command",
        "HBGW_AGENT_COMMAND": "cat",
        "HBGW_AGENT_USER": "root",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(["worker", "--name", "w-root-agent"])
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
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
