"""Redis' eviction policy (issue 29, finding 7): every role reads ``maxmemory-policy`` at start
and each connection reads it again as it is made; anything but ``noeviction`` is refused with a
sentence that says how to fix it, unless HBGW_REDIS_ACCEPT_EVICTION names that very policy
(then: a warning and the ``hbgw_redis_eviction_accepted`` gauge).

Before the fix every role started on an ``allkeys-lru`` Redis without a word, and 211 of the
gateway's keys were evicted under load. Each test runs on a private Redis (the shared one keeps
``noeviction``; a test never changes its configuration).
"""

from __future__ import annotations

import functools
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client import CollectorRegistry
from support.harness import wait_until
from support.private_redis import PrivateRedis, running_redis
from support.tls_redis import free_port

from hbgw.core.errors import UnsafeRedis
from hbgw.core.metrics import redis_eviction_gauge
from hbgw.core.settings import Settings
from hbgw.procs import settings_env, stop_all
from hbgw.state.connection import connect, refuse_evicting_redis_at
from hbgw.state.eviction import EvictingRedis, read_policy

FIX = "redis-cli CONFIG SET maxmemory-policy noeviction"
ROLES = {
    "worker": ["worker", "--name", "w1"],
    "beat": ["beat"],
    "api": ["api", "--port", "0"],
}


@pytest.fixture
def lru_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    with running_redis(
        tmp_path / "lru", "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"
    ) as server:
        yield server


def _settings(tmp_path: Path, url: str, **more: object) -> Settings:
    return Settings(home=tmp_path, redis_url=url, **more)  # type: ignore[arg-type]


def _hbgw(*args: str) -> list[str]:
    return [sys.executable, "-m", "hbgw", *args]


def test_every_role_refuses_an_evicting_redis_with_the_fix(
    tmp_path: Path, lru_redis: PrivateRedis
) -> None:
    """Before the fix each role started on allkeys-lru and its keys were evicted."""
    env = settings_env(_settings(tmp_path, lru_redis.url))
    procs = {
        role: subprocess.Popen(
            _hbgw(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for role, args in ROLES.items()
    }
    try:
        for role, proc in procs.items():
            output, _ = proc.communicate(timeout=120)
            text = " ".join(output.decode().split())  # the sentence, unwrapped
            assert proc.returncode == 2, (role, text)
            assert "runs with maxmemory-policy allkeys-lru" in text, (role, text)
            assert FIX in text, (role, text)
            assert "HBGW_REDIS_ACCEPT_EVICTION=allkeys-lru" in text, (role, text)
            assert "Traceback" not in text, (role, text)
    finally:
        stop_all(list(procs.values()))


def _metric(url: str) -> str:
    try:
        return httpx.get(url, timeout=2).text
    except httpx.HTTPError:
        return ""


ACCEPTED_SERIES = 'hbgw_redis_eviction_accepted{policy="allkeys-lru"} 1.0'


def _shows_acceptance(port: int) -> bool:
    return ACCEPTED_SERIES in _metric(f"http://127.0.0.1:{port}/metrics")


def test_every_role_starts_on_an_accepted_policy_with_a_warning_and_the_gauge(
    tmp_path: Path, lru_redis: PrivateRedis
) -> None:
    """The operator's explicit acceptance: each role runs, says so, and shows it on /metrics."""
    settings = _settings(tmp_path, lru_redis.url, redis_accept_eviction="allkeys-lru")
    logs = {role: tmp_path / f"{role}.log" for role in ROLES}
    ports = {"worker": free_port(), "beat": free_port()}
    procs = {}
    try:
        for role, args in ROLES.items():
            env = settings_env(settings, metrics_port=str(ports.get(role, 0)))
            with logs[role].open("wb") as out:
                procs[role] = subprocess.Popen(
                    _hbgw(*args), env=env, stdout=out, stderr=subprocess.STDOUT
                )
        for role, port in ports.items():
            wait_until(functools.partial(_shows_acceptance, port), 90, f"{role}'s gauge")
        listening = wait_until(
            lambda: re.search(r"API listening on (http://[0-9.:]+)", logs["api"].read_text()), 90
        )
        api_metrics = f"{listening.group(1)}/metrics"
        wait_until(lambda: ACCEPTED_SERIES in _metric(api_metrics), 30, "the API's gauge")
        for role, proc in procs.items():
            assert proc.poll() is None, (role, logs[role].read_text())
            text = logs[role].read_text()
            warned = [line for line in text.splitlines() if "redis.eviction_accepted" in line]
            assert warned, (role, text)
            assert "WARNING" in warned[0], (role, warned)
    finally:
        stop_all(list(procs.values()))


def test_a_reconnect_to_a_server_whose_policy_changed_is_refused(tmp_path: Path) -> None:
    """Before the fix only nothing checked; a server switched to allkeys-lru after the start
    was used without a word. Each new connection now reads the policy."""
    with running_redis(tmp_path / "r", "--maxmemory-policy", "noeviction") as server:
        client = connect(server.url, _settings(tmp_path, server.url))
        admin = server.client()
        try:
            assert client.set("k", "v")
            admin.config_set("maxmemory-policy", "allkeys-lru")
            admin.client_kill_filter(_type="normal", skipme=True)  # every client reconnects
            with pytest.raises(EvictingRedis, match=re.escape(FIX)):
                client.get("k")
            assert isinstance(EvictingRedis("x"), redis.ConnectionError)  # waited out as such
            admin.config_set("maxmemory-policy", "noeviction")  # fixed: the next one is taken
            assert client.get("k") == "v"
        finally:
            client.close()
            admin.close()


def test_an_accepted_policy_is_the_only_one_accepted(tmp_path: Path) -> None:
    """Naming allkeys-lru does not accept volatile-lru: a later change is caught again."""
    with running_redis(tmp_path / "r", "--maxmemory-policy", "volatile-lru") as server:
        settings = _settings(tmp_path, server.url, redis_accept_eviction="allkeys-lru")
        gauge = redis_eviction_gauge(CollectorRegistry())
        with pytest.raises(UnsafeRedis) as refused:
            refuse_evicting_redis_at(settings, [server.url], gauge)
        assert "maxmemory-policy volatile-lru" in str(refused.value)
        assert "accepts allkeys-lru only" in str(refused.value)


def test_a_renamed_config_command_falls_back_to_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Managed Redis often renames CONFIG: the policy is read from INFO memory instead."""
    flags = ("--maxmemory-policy", "allkeys-lfu", "--rename-command", "CONFIG", "")
    with running_redis(tmp_path / "r", *flags) as server:
        plain = server.client()
        try:
            with pytest.raises(redis.ResponseError):
                plain.config_get("maxmemory-policy")  # really gone
            assert read_policy(plain) == "allkeys-lfu"
        finally:
            plain.close()
        refused = _settings(tmp_path, server.url)
        with pytest.raises(EvictingRedis, match="maxmemory-policy allkeys-lfu"):
            refuse_evicting_redis_at(
                refused, [server.url], redis_eviction_gauge(CollectorRegistry())
            )
        accepted = _settings(tmp_path, server.url, redis_accept_eviction="allkeys-lfu")
        registry = CollectorRegistry()
        with caplog.at_level(logging.WARNING, logger="hbgw.redis"):
            refuse_evicting_redis_at(accepted, [server.url], redis_eviction_gauge(registry))
        assert (
            registry.get_sample_value("hbgw_redis_eviction_accepted", {"policy": "allkeys-lfu"})
            == 1.0
        )
        assert any("allkeys-lfu" in r.getMessage() for r in caplog.records)


def test_noeviction_sets_no_series(tmp_path: Path) -> None:
    with running_redis(tmp_path / "r", "--maxmemory-policy", "noeviction") as server:
        registry = CollectorRegistry()
        settings = _settings(tmp_path, server.url)
        refuse_evicting_redis_at(settings, [server.url], redis_eviction_gauge(registry))
        assert (
            registry.get_sample_value("hbgw_redis_eviction_accepted", {"policy": "noeviction"})
            is None
        )


def test_a_broker_redis_apart_from_the_state_is_checked_too(
    tmp_path: Path, lru_redis: PrivateRedis
) -> None:
    """HBGW_BROKER_URL on an evicting Redis: Celery's queues and bindings live there, so the
    roles refuse it at start as they refuse an evicting state Redis."""
    with running_redis(tmp_path / "state", "--maxmemory-policy", "noeviction") as state:
        settings = _settings(tmp_path, state.url, broker_url=lru_redis.url)
        env = settings_env(settings)
        proc = subprocess.run(
            _hbgw("worker", "--name", "w1"), env=env, capture_output=True, timeout=120
        )
    text = " ".join((proc.stdout + proc.stderr).decode().split())
    assert proc.returncode == 2, text
    assert f"127.0.0.1:{lru_redis.port}" in text and "maxmemory-policy allkeys-lru" in text, text
