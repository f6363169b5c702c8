"""Beat's liveness reconciler: the stalled gauge, one webhook alert per stall, freeing sessions
whose worker is gone. Stalls are made by backdating stamps, never by waiting."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from support.harness import Gateway, gateway_settings
from support.http_server import serving
from support.webhook_fixtures import LOOPBACK_ALLOWED

from hbgw.beat.reconcile import Reconciler
from hbgw.core.metrics import gateway_metrics

MINUTE = 60_000


@contextmanager
def alert_receiver(status: int = 204) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real HTTP endpoint on loopback that keeps every alert it is sent."""
    app, received = FastAPI(), []

    @app.post("/alerts/{token}")
    async def alert(request: Request) -> Response:
        received.append(await request.json())
        return Response(status_code=status)

    with serving(app) as base:
        yield f"{base}/alerts/s3cr3t-token", received


@contextmanager
def deployment(
    tmp_path: Path, redis_url: str, redis_ns: str, webhook: str | None
) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path,
        redis_url,
        redis_ns,
        alert_webhook=webhook,
        webhook_allow_networks=LOOPBACK_ALLOWED,
    )
    gw = Gateway(settings, redis_url)
    try:
        yield gw
    finally:
        gw.close()


def _stalled(verdict: str) -> float | None:
    registry = gateway_metrics().registry
    return registry.get_sample_value("hbgw_stalled_sessions", {"verdict": verdict})


def test_a_dead_turn_is_counted_and_alerted_once_per_stall(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with (
        alert_receiver() as (url, received),
        deployment(tmp_path, redis_url, redis_ns, url) as gw,
    ):
        now = gw.rt.now_ms()
        gw.rt.registry.refresh("w1", now + MINUTE)  # live through every pass below
        gw.rt.liveness.stamp("s-stuck", now - 16 * MINUTE, "tool:web_fetch", "w1")
        gw.rt.liveness.stamp("s-slow", now - 6 * MINUTE, "thinking", "w1")
        gw.rt.liveness.stamp("s-fine", now - 1000, "thinking", "w1")
        reconciler = Reconciler(
            gw.rt.settings, gw.rt.registry, gw.rt.liveness, gw.rt.gate, gw.rt.redis
        )
        report = reconciler.run(now)
        assert reconciler.alerts is not None and reconciler.alerts.flush(20)
        assert (report.stale, report.dead, report.alerted) == (1, 1, ["s-stuck"])
        assert (_stalled("stale"), _stalled("dead")) == (1, 1)
        (alert,) = received
        assert alert["event"] == "hbgw.turn_stalled"
        assert (alert["session"], alert["verdict"], alert["phase"]) == (
            "s-stuck",
            "dead?",
            "tool:web_fetch",
        )
        # The next passes see the same stall: no second alert, and the owner still holds it.
        assert reconciler.run(now + 30_000).alerted == []
        assert (
            Reconciler(gw.rt.settings, gw.rt.registry, gw.rt.liveness, gw.rt.gate, gw.rt.redis)
            .run(now + 60_000)
            .alerted
            == []
        )  # another beat replica
        assert len(received) == 1 and report.freed == []
        # It stamped again, then stalled again: a new stall, a new alert.
        gw.rt.liveness.stamp("s-stuck", now - 15 * MINUTE, "delivering", "w1")
        assert reconciler.run(now).alerted == ["s-stuck"]
        assert reconciler.alerts.flush(20)
        assert [a["phase"] for a in received] == ["tool:web_fetch", "delivering"]
        gw.rt.liveness.stamp("s-stuck", now, "idle", "w1")
        gw.rt.liveness.stamp("s-slow", now, "thinking", "w1")
        assert (reconciler.run(now).dead, _stalled("stale"), _stalled("dead")) == (0, 0, 0)


def test_a_session_whose_worker_is_gone_is_freed_for_its_new_owner(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with deployment(tmp_path, redis_url, redis_ns, None) as gw:
        now = gw.rt.now_ms()
        gw.rt.registry.refresh("w2", now)
        gw.rt.gate.enqueue_user("s-orphan", "42")
        gw.rt.client.srem(gw.rt.keys.inbox_sessions(), "s-orphan")  # the sweeper's hint is gone
        gw.rt.liveness.stamp("s-orphan", now - 5000, "thinking", "w-crashed")
        gw.rt.liveness.stamp("s-hook", now - 5000, "tool:Bash", "hook", external=True)
        report = Reconciler(
            gw.rt.settings, gw.rt.registry, gw.rt.liveness, gw.rt.gate, gw.rt.redis
        ).run(now)
        assert (report.dead, report.freed) == (1, ["s-orphan"])
        assert [s.session for s in gw.rt.liveness.all()] == ["s-hook"]
        assert gw.rt.client.sismember(gw.rt.keys.inbox_sessions(), "s-orphan")


def test_turns_that_ended_long_ago_leave_the_hash(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with deployment(tmp_path, redis_url, redis_ns, None) as gw:
        now = gw.rt.now_ms()
        gw.rt.registry.refresh("w1", now)
        gw.rt.liveness.stamp("s-old", now - 16 * MINUTE, "idle", "w1")
        gw.rt.liveness.stamp("s-recent", now - MINUTE, "idle", "w1")
        assert (
            Reconciler(gw.rt.settings, gw.rt.registry, gw.rt.liveness, gw.rt.gate, gw.rt.redis)
            .run(now)
            .dead
            == 0
        )
        assert [s.session for s in gw.rt.liveness.all()] == ["s-recent"]


def test_a_failing_webhook_is_one_log_line_without_its_url(
    tmp_path: Path, redis_url: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        alert_receiver(status=503) as (url, received),
        deployment(tmp_path, redis_url, redis_ns, url) as gw,
    ):
        now = gw.rt.now_ms()
        gw.rt.registry.refresh("w1", now)
        gw.rt.liveness.stamp("s-stuck", now - 20 * MINUTE, "thinking", "w1")
        with caplog.at_level(logging.WARNING, logger="hbgw.reconcile"):
            reconciler = Reconciler(
                gw.rt.settings, gw.rt.registry, gw.rt.liveness, gw.rt.gate, gw.rt.redis
            )
            report = reconciler.run(now)
            assert reconciler.alerts is not None and reconciler.alerts.flush(20)
        assert report.dead == 1 and report.alerted == ["s-stuck"] and len(received) == 1
        failed = [r for r in caplog.records if getattr(r, "action", "") == "reconcile.alert_failed"]
        assert len(failed) == 1 and "HTTP 503" in failed[0].getMessage()
        assert "s3cr3t" not in caplog.text


def test_beat_ticks_run_the_reconciler(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    with (
        alert_receiver() as (url, received),
        deployment(tmp_path, redis_url, redis_ns, url) as gw,
    ):
        now = gw.rt.now_ms()
        gw.rt.liveness.stamp("s-stuck", now - 20 * MINUTE, "tool:Bash", "w1")
        gw.tick()
        assert gw.beat.reconciler.alerts is not None and gw.beat.reconciler.alerts.flush(20)
        assert [a["session"] for a in received] == ["s-stuck"]
        assert gw.beat.next_reconcile_ms > now
