"""`hbgw flower`: refuses to start open to the network; with basic auth, a real Flower process
answers /api/workers only with the credentials and lists a real `hbgw worker`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.metrics_reading import free_port

from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.flower import flower_plan
from hbgw.procs import spawn_hbgw, stop_all

USER, PASSWORD = "ops", "flower-secret-4b1e"


def _hbgw(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hbgw", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--host", "0.0.0.0"], "Flower would be open to anyone who reaches 0.0.0.0:"),
        (["--host", "10.1.2.3", "--unauthenticated-loopback"], "only allows a loopback address"),
    ],
)
def test_flower_without_auth_off_loopback_is_refused(
    tmp_path: Path, args: list[str], says: str
) -> None:
    env = {**os.environ, "HBGW_HOME": str(tmp_path)}
    result = _hbgw(["flower", "--port", str(free_port()), *args], env)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert "HBGW_FLOWER_PASSWORD" in result.stderr


@pytest.mark.timeout(180)
def test_flower_with_basic_auth_lists_the_gateway_worker(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, agent="echo"), redis_url)
    port = free_port()
    env = {**gw.env(), "HBGW_FLOWER_USER": USER, "HBGW_FLOWER_PASSWORD": PASSWORD}
    procs = [
        spawn_hbgw(["worker", "--name", "w1"], env=gw.env(), log=tmp_path / "worker.log"),
        spawn_hbgw(["flower", "--port", str(port)], env=env, log=tmp_path / "flower.log"),
    ]
    url = f"http://127.0.0.1:{port}/api/workers"
    try:
        wait_until(lambda: _status(url, None) == 401, 60, "Flower to answer")
        assert _status(url, (USER, "wrong")) == 401
        workers = wait_until(lambda: _workers(url), 60, "Flower to list the worker")
        assert [name for name in workers if name.startswith("w1@")], workers
        sid = gw.session()
        gw.due_now(sid)
        wait_until(lambda: gw.tick() is not None and gw.runs(sid), 60, "the fire to reach w1")
        # An operator reads the task as the fire it carries: its fire id, not a bare list.
        task = wait_until(lambda: _task_named(url, "hbgw.fire_heartbeats"), 60, "the task")
        assert task["args"] == f"fires=['{gw.runs(sid)[0].fire_id}']", task
        # The credential travels in the environment, never on the command line `ps` shows.
        assert PASSWORD not in Path(f"/proc/{procs[1].pid}/cmdline").read_text()
    finally:
        stop_all(procs, timeout=20)
        gw.close()
    assert PASSWORD not in (tmp_path / "flower.log").read_text()


def _status(url: str, auth: tuple[str, str] | None) -> int | None:
    try:
        return httpx.get(url, auth=auth, timeout=10).status_code
    except httpx.HTTPError:
        return None


def _task_named(workers_url: str, name: str) -> dict[str, Any] | None:
    tasks_url = workers_url.replace("/api/workers", "/api/tasks")
    answer = httpx.get(tasks_url, auth=(USER, PASSWORD), timeout=20)
    assert answer.status_code == 200, answer.text
    tasks: dict[str, dict[str, Any]] = answer.json()
    return next((t for t in tasks.values() if t.get("name") == name and t.get("args")), None)


def _workers(url: str) -> dict[str, Any] | None:
    answer = httpx.get(url, params={"refresh": "1"}, auth=(USER, PASSWORD), timeout=20)
    assert answer.status_code == 200, answer.text
    listed: dict[str, Any] = answer.json()
    return listed or None


def test_the_basic_auth_credential_is_in_the_environment_never_in_argv(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, flower_user=USER, flower_password=PASSWORD)
    plan = flower_plan(settings, {}, host="0.0.0.0", port=5600)
    assert plan.env["FLOWER_BASIC_AUTH"] == f"{USER}:{PASSWORD}"
    assert not [arg for arg in plan.argv if PASSWORD in arg]
    assert plan.argv[:3] == ["flower", "--address=0.0.0.0", "--port=5600"]


def test_oauth_settings_of_flower_count_as_authentication(tmp_path: Path) -> None:
    oauth = {"FLOWER_AUTH_PROVIDER": "flower.views.auth.GithubLoginHandler", "FLOWER_AUTH": ".*"}
    plan = flower_plan(Settings(home=tmp_path), oauth, host="0.0.0.0")
    assert (plan.auth, plan.env) == ("oauth", {})


def test_an_operator_choice_of_task_columns_wins(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, flower_password=PASSWORD)
    assert any(a.startswith("--tasks_columns=") for a in flower_plan(settings, {}).argv)
    chosen = flower_plan(settings, {"FLOWER_TASKS_COLUMNS": "name,uuid"})
    assert not any(a.startswith("--tasks_columns=") for a in chosen.argv)


@pytest.mark.parametrize(
    ("user", "password", "says"),
    [("ops", "a,b", "cannot contain ','"), ("o:ps", "pw", "without ':' or ','")],
)
def test_credentials_flower_would_split_are_refused(
    tmp_path: Path, user: str, password: str, says: str
) -> None:
    settings = Settings(home=tmp_path, flower_user=user, flower_password=password)
    with pytest.raises(BadInput, match=says):
        flower_plan(settings, {})
