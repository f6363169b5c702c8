"""Prometheus ``/metrics`` of a real beat, a real worker (``hbgw`` processes) and a real API
after a small run: each metric is there, with plausible values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen

import httpx
import pytest
from support.api_fixtures import TOKENS, api_overrides
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving
from support.metrics_reading import Samples, free_port, free_port_run, scrape, value, with_name

from hbgw.core.metrics import DELIVERY_PLATFORMS
from hbgw.gateway.api.app import create_app
from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import DELIVERY_OUTCOMES
from hbgw.up import local_stack

pytestmark = pytest.mark.timeout(300)

SHARDS = 4
SECRETS = {
    "HBGW_OPENAI_API_KEY": "sk-metrics-test-5e3c1f",
    "HBGW_FLOWER_PASSWORD": "flower-pw-9d02aa",
    "HBGW_API_TOKENS": "alice:tok-worker-log-77b1",
    "HBGW_ADMIN_TOKEN": "tok-admin-log-3e9d",
}


@contextmanager
def role(gw: Gateway, args: list[str], port: int, log: Path) -> Iterator[Popen[bytes]]:
    env = {**gw.env(), **SECRETS, "HBGW_METRICS_PORT": str(port), "HBGW_LOG_FORMAT": "json"}
    proc = spawn_hbgw(args, env=env, log=log)
    try:
        yield proc
    finally:
        stop_all([proc], timeout=20)


def test_beat_worker_and_api_metrics_after_a_small_run(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, agent="echo", due_shards=SHARDS, **api_overrides()
    )
    gw = Gateway(settings, redis_url)
    beat_url = f"http://127.0.0.1:{free_port()}/metrics"
    worker_url = f"http://127.0.0.1:{free_port()}/metrics"
    worker_log = tmp_path / "worker.log"
    app = create_app(settings, celery_app=gw.app, redis_url=redis_url)
    with (
        role(gw, ["worker", "--name", "w1"], _port(worker_url), worker_log),
        role(gw, ["beat"], _port(beat_url), tmp_path / "beat.log"),
        serving(app) as api_url,
    ):
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 60, "the worker")
        sessions = [gw.session(chat=f"C{i}") for i in range(3)]
        for sid in sessions:
            gw.due_now(sid, seconds=60)
        held = gw.session(chat="CHELD")
        gw.rt.gate.set_estop(True, held)  # its fire is reserved, then refunded
        gw.due_now(held, seconds=60)
        _send_a_message(api_url)
        worker = wait_until(lambda: _worker_done(worker_url), 90, "fires and a user turn")
        beat = wait_until(lambda: _beat_done(beat_url), 60, "beat's claims and backlog")
        api = scrape(f"{api_url}/metrics")
    gw.close()
    _check_worker(worker)
    _check_beat(beat)
    posted = (
        ("method", "POST"),
        ("route", "/v1/sessions/{session_id}/messages"),
        ("status", "202"),
    )
    assert with_name(api, "hbgw_api_requests_total").get(posted, 0) >= 1, api
    _check_logs(worker_log)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _send_a_message(api_url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    with httpx.Client(base_url=api_url, headers=headers, timeout=30) as client:
        # C1: a chat the operator bound to alice (api_overrides: HBGW_OWNER_CHATS)
        created = client.post("/v1/sessions", json={"platform": "slack", "chat": "C1"})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        sent = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"})
        assert sent.status_code == 202, sent.text


def _worker_done(url: str) -> Samples | None:
    samples = scrape(url)
    fires = value(samples, "hbgw_fires_total", outcome="completed") or 0
    users = sum(with_name(samples, "hbgw_user_turns_total").values())
    refunds = value(samples, "hbgw_refunds_total", reason="emergency_stop") or 0
    # Counted once each record is written: three heartbeats and one reply.
    sent = value(samples, "hbgw_deliveries_total", platform="file", outcome="sent") or 0
    return samples if fires >= 3 and users >= 1 and refunds >= 1 and sent >= 4 else None


def _beat_done(url: str) -> Samples | None:
    samples = scrape(url)
    claimed = value(samples, "hbgw_claim_batch_size_sum") or 0
    return samples if claimed >= 4 else None


def _check_worker(samples: Samples) -> None:
    assert value(samples, "hbgw_fire_lag_seconds_count") == 3
    # Backdated by one second past due: a lag under a minute is plausible, not a fixed bound.
    assert 0 <= (value(samples, "hbgw_fire_lag_seconds_sum") or -1) < 3 * 60
    assert (value(samples, "hbgw_turn_seconds_count", kind="heartbeat") or 0) >= 3
    assert (value(samples, "hbgw_turn_seconds_count", kind="user") or 0) >= 1
    assert value(samples, "hbgw_user_turns_total", outcome="reply") == 1
    assert value(samples, "hbgw_live_workers") == 1
    assert value(samples, "hbgw_deliveries_total", platform="file", outcome="sent") == 4
    # Closed label values, every series there from the start.
    deliveries = with_name(samples, "hbgw_deliveries_total")
    assert {dict(labels)["platform"] for labels in deliveries} == set(DELIVERY_PLATFORMS)
    assert {dict(labels)["outcome"] for labels in deliveries} == set(DELIVERY_OUTCOMES)
    refunded = value(samples, "hbgw_fires_total", outcome="refunded") or 0
    # A refund counts its outcome first, then its reason: a scrape may fall between the two.
    assert refunded >= (value(samples, "hbgw_refunds_total", reason="emergency_stop") or 0) >= 1


def _check_beat(samples: Samples) -> None:
    assert (value(samples, "hbgw_claim_batch_size_count") or 0) >= 1
    assert value(samples, "hbgw_live_workers") == 1
    backlog = with_name(samples, "hbgw_due_backlog")
    assert sorted(dict(labels)["shard"] for labels in backlog) == [str(i) for i in range(SHARDS)]
    assert all(v >= 0 for v in backlog.values())


def _check_logs(path: Path) -> None:
    """Every JSON record has an action field; fire records name session and fire; no secret."""
    text = path.read_text()
    for secret in SECRETS.values():
        assert secret.split(":")[-1] not in text
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert records
    assert all("action" in r for r in records)
    done = [r for r in records if r["action"] == "fire.done"]
    assert len(done) == 3
    assert all(r["session"] and r["fire_id"] and r["worker"] == "w1" for r in done)


def test_up_gives_beat_and_each_worker_a_metrics_port_of_its_own(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    base = free_port_run(3)
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent="echo", metrics_port=base)
    with local_stack(settings, workers=2) as stack:
        urls = [f"http://127.0.0.1:{base + i}/metrics" for i in range(3)]

        def all_see_both_workers() -> bool:
            return all(value(scrape(url), "hbgw_live_workers") == 2 for url in urls)

        wait_until(all_see_both_workers, 60, "beat, w1 and w2 to serve /metrics")
        assert all(proc.poll() is None for proc in stack.procs.values())
