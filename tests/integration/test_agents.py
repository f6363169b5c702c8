"""Agent configuration errors are the operator's to fix: a sentence and exit code 2."""

from __future__ import annotations

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
