"""Issue 15: the command agent's child sees only allowed variables and the turn's own data.

It used to inherit the worker's whole environment — the database URL, the Redis password and
the API tokens — and a command that followed its prompt changed another owner's heartbeat.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings

from hbgw.workers.agents import make_agent
from hbgw.workers.agents.base import TurnRequest

SECRETS = {
    "HBGW_DATABASE_URL": "postgresql://hbgw:db-secret@db/hbgw",
    "HBGW_REDIS_URL": "redis://:redis-secret@redis:6379/0",
    "HBGW_API_TOKENS": "alice:tok-secret",
    "HBGW_ADMIN_TOKEN": "admin-secret",
    "HBGW_OPENAI_API_KEY": "sk-secret",
    "HBGW_ALERT_WEBHOOK": "https://hooks.example/T0/secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}

DUMP = "import json, os, sys; sys.stdin.read(); print(json.dumps(dict(os.environ)))"


def _dump_command() -> str:
    return f"{sys.executable} -c '{DUMP}'"


def test_the_child_sees_no_secret_of_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    settings = gateway_settings(
        tmp_path, "redis://127.0.0.1:1/0", "env", agent_command=_dump_command()
    )
    agent = make_agent(settings)
    reply = agent.run(TurnRequest("s-1", "heartbeat", "check CI"), lambda _phase: None)
    env = json.loads(reply.text)
    leaked = {name for name in env if name in SECRETS or name.startswith("HBGW_")}
    assert leaked == {"HBGW_TURN_KIND", "HBGW_TURN_SESSION"}
    assert (env["HBGW_TURN_KIND"], env["HBGW_TURN_SESSION"]) == ("heartbeat", "s-1")
    assert env["LANG"] == "C.UTF-8" and "PATH" in env
    assert not any(secret in reply.text for secret in SECRETS.values())


def test_an_operator_allows_more_variables_but_never_a_gateway_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -i key")
    settings = gateway_settings(
        tmp_path, "redis://127.0.0.1:1/0", "env", agent_command=_dump_command(),
        agent_env_allow="PATH, GIT_SSH_COMMAND",
    )  # fmt: skip
    reply = make_agent(settings).run(TurnRequest("s-1", "user", "hi"), lambda _phase: None)
    assert json.loads(reply.text)["GIT_SSH_COMMAND"] == "ssh -i key"
    with pytest.raises(ValueError, match="HBGW_DATABASE_URL cannot be passed to the command agent"):
        gateway_settings(tmp_path, "redis://x", "env", agent_env_allow="PATH,HBGW_DATABASE_URL")


def test_a_real_worker_turn_runs_the_child_without_secrets(
    tmp_path: Path, redis_url: str, redis_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "child-env.json"
    script = tmp_path / "agent.py"
    script.write_text(
        f"import json, os, sys\nsys.stdin.read()\n"
        f"open({str(out)!r}, 'w').write(json.dumps(dict(os.environ)))\nprint('ok')\n"
    )
    settings = gateway_settings(
        tmp_path,
        redis_url,
        redis_ns,
        agent_command=f"{sys.executable} {script}",
        database_url=f"sqlite:///{tmp_path / 'gw.sqlite3'}",  # not the one in the environment
    )
    gw = Gateway(settings, redis_url)
    try:
        with gw.worker("w1"):
            sid = gw.session()
            gw.due_now(sid)
            gw.tick()
            gw.final_runs(sid)
    finally:
        gw.close()
    env = json.loads(out.read_text())
    assert not [
        name for name in env if name.startswith("HBGW_") and not name.startswith("HBGW_TURN_")
    ]
    assert not set(env) & set(SECRETS)
