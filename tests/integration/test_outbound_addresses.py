"""Issue 29, finding 2: server-side requests to the inside through per-session webhook URLs.

On main a tenant's ``PUT /v1/sessions/{id}/webhook`` took ``http://127.0.0.1:<flower>/…`` (and
``2130706433``, ``0x7f.1``, ``127.1``, ``[::1]``, ``[::ffff:127.0.0.1]``, ``localhost``,
``0.0.0.0``, ``169.254.169.254``), the worker POSTed there, and ``GET …/runs`` told the tenant
``ConnectError`` from ``HTTP 405`` from ``HTTP 401`` — a map of the inside ports. Here, on a
real API, real workers and a real receiver on loopback, without the operator's allowlist:
every notation is refused when set (422, a sentence, nothing stored); a URL that reaches the
store all the same (a name that resolves inside only later) is refused at connect time with
no request reaching the receiver; the runs view says "could not be delivered" with a
reference the log explains; the stall alerts are refused too. With the allowlist
(``127.0.0.1/32``) the same receiver is reached.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Request, Response
from support.fake_webhook_receiver import FakeReceiver, fake_receiver
from support.harness import wait_until
from support.http_server import serving
from support.webhook_fixtures import (
    ADMIN,
    NOTHING_INSIDE,
    SECRET,
    Webhook,
    loopback_guard,
    webhook_deployment,
)

from hbgw.beat.alerts import AlertSender
from hbgw.core.clock import utcnow
from hbgw.core.errors import PermanentDelivery
from hbgw.core.metrics import gateway_metrics
from hbgw.core.outbound import Allowlist, OutboundGuard
from hbgw.gateway.platforms.webhook.channel import Policy, WebhookChannel
from hbgw.gateway.public_ids import PublicIds, id_key
from hbgw.workers.ports import Address

NOTHING = OutboundGuard(Allowlist())

# The attack's notations of loopback, and the metadata service.
NOTATIONS = (
    "127.0.0.1",
    "2130706433",
    "0x7f.1",
    "127.1",
    "0177.0.0.1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "localhost",
    "localhost.",
    "0.0.0.0",
    "169.254.169.254",
)


@pytest.fixture
def closed(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Webhook]:
    """A webhook deployment whose operator allowed no inside address."""
    with webhook_deployment(
        tmp_path, redis_url, redis_ns, webhook_allow_networks=NOTHING_INSIDE
    ) as deployment:
        yield deployment


IDS = PublicIds(lambda: id_key("ids-key-of-the-test"))


def _session(webhook: Webhook) -> str:
    said = webhook.message("m-hb", "/heartbeat every 1m check the deploy")
    assert said.status_code == 200 and said.json()["ok"] is True, said.text
    session = webhook.gw.store.sessions.session_at(
        platform="webhook", chat="room-1", thread="t-1", now=utcnow(), owner="webhook", create=False
    )
    assert session is not None
    return session.id


def test_every_notation_of_loopback_is_refused_when_set_and_nothing_is_stored(
    closed: Webhook,
) -> None:
    sid = _session(closed)
    port = closed.receiver.url.rsplit(":", 1)[1]
    for host in NOTATIONS:
        answer = closed.route(sid, f"http://{host}:{port}/api/worker/shutdown/w1")
        assert answer.status_code == 422, (host, answer.text)
        said = answer.json()["error"]["message"]
        assert "inside the gateway's own network" in said, said
        assert "HBGW_WEBHOOK_ALLOW_NETWORKS" in said
    assert closed.gw.store.webhooks.webhook_url(sid) is None
    with closed.client() as client:
        shown = client.get(f"/v1/sessions/{sid}/webhook", headers=ADMIN).json()
    assert shown["url"] is None
    assert closed.receiver.requests == []


def test_a_url_that_resolves_inside_at_connect_time_reaches_nothing_and_the_runs_view_says_no_more(
    closed: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    """``localhost`` stands for a name that resolved outside when it was set and inside when
    the worker connects (DNS rebinding): written to the store past the API's check."""
    receiver, gw = closed.receiver, closed.gw
    sid = _session(closed)
    port = receiver.url.rsplit(":", 1)[1]
    gw.store.webhooks.set_webhook_url(sid, f"http://localhost:{port}/hooks/in", utcnow())
    caplog.set_level(logging.WARNING, "hbgw.webhook")
    with gw.worker("w1"):
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
        gw.tick()  # set a minute ago by the API's clock: due now
        [run] = gw.final_runs(sid, timeout=60)
    assert receiver.requests == []  # no request reached the loopback receiver
    with closed.client() as client:
        runs = client.get(f"/v1/sessions/{sid}/runs", headers=ADMIN).json()["runs"]
    [delivery] = [r["delivery"] for r in runs if r["fire_id"] == run.fire_id]
    assert delivery["state"] == "failed"
    error = delivery["error"]
    assert "could not be delivered" in error
    for detail in ("127.0.0.1", "localhost", "loopback", port, "Connect", "HTTP"):
        assert detail not in error, (detail, error)
    found = re.search(r"reference (wh-[0-9a-f]+)", error)
    assert found is not None, error
    [logged] = [r for r in caplog.records if getattr(r, "reference", None) == found.group(1)]
    assert "loopback address" in logged.getMessage() and "localhost" in logged.getMessage()


def test_the_allowlist_lets_the_loopback_receiver_through(receiver: FakeReceiver) -> None:
    to = Address("webhook", "room-1", "t-1")
    policy = Policy(1.0, 0, 5.0)
    refusing = WebhookChannel(
        SECRET, lambda _sid: receiver.hook(), policy, IDS, OutboundGuard(Allowlist())
    )
    allowing = WebhookChannel(SECRET, lambda _sid: receiver.hook(), policy, IDS, loopback_guard())
    try:
        with pytest.raises(PermanentDelivery) as failed:
            refusing.send(to, "hi", session_id="s1", kind="reply", delivery_key="k1")
        assert failed.value.reason == "inside_address" and receiver.requests == []
        receipt = allowing.send(to, "hi", session_id="s1", kind="reply", delivery_key="k2")
        assert receipt.message_id == "hook-1" and len(receiver.requests) == 1
    finally:
        refusing.close()
        allowing.close()


def test_a_url_httpx_cannot_read_fails_for_good_and_sends_nothing() -> None:
    """``010.8.8.8`` is 8.8.8.8 to the address check (octal, as the OS reads it) but not a URL
    httpx takes: the delivery fails for good with a reference, no exception escapes."""
    ch = WebhookChannel(
        SECRET, lambda _sid: "http://010.8.8.8/hook", Policy(1.0, 2, 5.0), IDS, NOTHING
    )
    try:
        with pytest.raises(PermanentDelivery, match="could not be delivered") as failed:
            ch.send(Address("webhook", "room-1"), "hi", session_id="s1", kind="reply",
                    delivery_key="k1")  # fmt: skip
        assert failed.value.reason == "invalid_url"
    finally:
        ch.close()


def test_an_alert_is_not_redirected_inside(caplog: pytest.LogCaptureFixture) -> None:
    """Redirects are not followed at all: a receiver allowed on loopback that answers 302 to
    another inside path does not get the alert POSTed there."""
    app, hits = FastAPI(), []

    @app.post("/alerts")
    async def moved() -> Response:
        hits.append("alerts")
        return Response(status_code=302, headers={"Location": "/api/worker/shutdown/w1"})

    @app.post("/api/worker/shutdown/w1")
    async def shutdown() -> Response:
        hits.append("shutdown")
        return Response(status_code=200)

    with serving(app) as base:
        sender = AlertSender(f"{base}/alerts", None, loopback_guard(), timeout=5)
        assert sender.submit({"session": "s-stuck"}) and sender.flush(20)
    assert hits == ["alerts"]


@pytest.fixture
def receiver() -> Iterator[FakeReceiver]:
    with fake_receiver() as fake:
        yield fake


def test_the_alert_webhook_is_refused_without_the_allowlist(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, received = FastAPI(), []

    @app.post("/alerts")
    async def alert(request: Request) -> Response:
        received.append(await request.body())
        return Response(status_code=204)

    failed = gateway_metrics().alerts.labels("failed")
    before = failed._value.get()
    caplog.set_level(logging.WARNING, "hbgw.reconcile")
    with serving(app) as base:
        sender = AlertSender(f"{base}/alerts", None, OutboundGuard(Allowlist()), timeout=5)
        assert sender.submit({"session": "s-stuck"})
        assert sender.flush(20)
        assert received == []
        allowed = AlertSender(f"{base}/alerts", None, loopback_guard(), timeout=5)
        assert allowed.submit({"session": "s-stuck"}) and allowed.flush(20)
        assert len(received) == 1
    assert failed._value.get() - before == 1
    [refused] = [r for r in caplog.records if r.__dict__.get("action") == "reconcile.alert_refused"]
    assert "loopback address" in refused.getMessage()
