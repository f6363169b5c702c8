"""Issue 15: stall alerts leave beat's tick, are signed, and never put the webhook's URL in a log.

A webhook that never answered held beat's tick for the timeout of every alert (four alerts,
16 s, past HBGW_BEAT_TTL): the beat looked dead and dispatched nothing.
"""

from __future__ import annotations

import hmac
import io
import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from support.broker import take_fires
from support.harness import Gateway, gateway_settings
from support.http_server import serving
from support.webhook_fixtures import LOOPBACK_ALLOWED, loopback_guard

from hbgw.beat.alerts import SIGNATURE_HEADER, AlertSender, sign
from hbgw.beat.reconcile import Reconciler
from hbgw.core.logs import configure_logging
from hbgw.core.metrics import gateway_metrics

MINUTE = 60_000
SECRET = "whsec-test-91c2"


@contextmanager
def silent_webhook() -> Iterator[str]:
    """A loopback port whose kernel completes connections that nobody ever reads or answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/alerts/s3cr3t-token"


@contextmanager
def signed_receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    app, received = FastAPI(), []

    @app.post("/alerts/{token}")
    async def alert(request: Request) -> Response:
        received.append((dict(request.headers), await request.body()))
        return Response(status_code=204)

    with serving(app) as base:
        yield f"{base}/alerts/s3cr3t-token", received


def _stall(gw: Gateway, count: int) -> None:
    now = gw.rt.now_ms()
    for i in range(count):
        gw.rt.liveness.stamp(f"s-stuck-{i}", now - 20 * MINUTE, "tool:web_fetch", "w1")


def test_a_webhook_that_never_answers_does_not_hold_beats_tick(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with silent_webhook() as url:
        settings = gateway_settings(
            tmp_path,
            redis_url,
            redis_ns,
            alert_webhook=url,
            webhook_allow_networks=LOOPBACK_ALLOWED,
        )
        gw = Gateway(settings, redis_url)
        try:
            gw.rt.registry.refresh("w1", gw.rt.now_ms() + MINUTE)
            sid = gw.session()
            gw.due_now(sid)
            _stall(gw, 4)
            started = time.monotonic()
            gw.tick()
            took = time.monotonic() - started
            # Before: 4 alerts x 5 s each inside the tick. The bound is the beat's TTL, which
            # a tick must never outlast (its shards would move to another beat).
            assert took < settings.beat_ttl / 2, f"the tick took {took:.1f}s"
            assert [s for s, _ in take_fires(gw.app, gw.rt.keys.worker_queue("w1"))] == [sid]
        finally:
            gw.close()


def test_a_full_queue_drops_alerts_and_counts_them(tmp_path: Path) -> None:
    dropped = gateway_metrics().alerts.labels("dropped")
    before = dropped._value.get()
    with silent_webhook() as url:
        sender = AlertSender(url, None, loopback_guard(), timeout=30, size=2)
        accepted = [sender.submit({"session": f"s{i}"}) for i in range(6)]
    # One alert is in flight (or not yet taken), two wait: the rest are dropped at once.
    assert accepted[:2] == [True, True] and accepted.count(False) >= 3
    assert dropped._value.get() - before == accepted.count(False)


def test_every_alert_is_signed_and_the_url_is_never_logged(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with signed_receiver() as (url, received):
        # Upper-case host: httpx logs the URL normalised, which a plain string match misses.
        shown = url.replace("127.0.0.1", "LOCALHOST")
        settings = gateway_settings(
            tmp_path, redis_url, redis_ns, alert_webhook=shown, alert_webhook_secret=SECRET,
            webhook_allow_networks=LOOPBACK_ALLOWED,
            log_format="json", log_level="DEBUG",
        )  # fmt: skip
        stream = io.StringIO()
        configure_logging(settings, stream=stream)
        gw = Gateway(settings, redis_url)
        try:
            gw.rt.registry.refresh("w1", gw.rt.now_ms() + MINUTE)
            _stall(gw, 1)
            reconciler = Reconciler(
                gw.rt.settings, gw.rt.registry, gw.rt.liveness, gw.rt.gate, gw.rt.redis
            )
            assert reconciler.run(gw.rt.now_ms()).alerted == ["s-stuck-0"]
            assert reconciler.alerts is not None and reconciler.alerts.flush(20)
        finally:
            gw.close()
    ((headers, body),) = received
    assert json.loads(body)["session"] == "s-stuck-0"
    _assert_signed(headers[SIGNATURE_HEADER.lower()], body)
    logs = stream.getvalue()
    assert "s3cr3t-token" not in logs and "alerts/" not in logs, logs


def _assert_signed(header: str, body: bytes) -> None:
    fields = dict(part.split("=", 1) for part in header.split(","))
    timestamp = int(fields["t"])
    assert abs(time.time() - timestamp) < 300
    expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, "sha256").hexdigest()
    assert hmac.compare_digest(fields["v1"], expected)
    assert sign(SECRET, timestamp, body) == header


def test_the_receiver_code_in_operations_md_verifies_a_signature() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    section = doc.split("## Alert webhook", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the documented snippet, as a receiver would paste it
    body = b'{"event":"hbgw.turn_stalled"}'
    header = sign(SECRET, int(time.time()), body)
    assert namespace["verify"](SECRET.encode(), header, body)
    assert not namespace["verify"](SECRET.encode(), header, body + b" ")
    assert not namespace["verify"](
        SECRET.encode(), sign(SECRET, int(time.time()) - 3600, body), body
    )
