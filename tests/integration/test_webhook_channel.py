"""The webhook channel against a real receiver on loopback (no workers): what each answer
means — a duplicate, a wait longer than the budget, a redirect, a receiver that is down — which
headers every attempt carries, and that neither a record nor a log line shows the URL's token.
Its settings are secrets, and a deployment that names webhook must have its secret."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from support.fake_webhook_receiver import FakeReceiver, Scripted, fake_receiver
from support.webhook_fixtures import loopback_guard

from hbgw.core.errors import BadInput, PermanentDelivery, StoreError, TransientDelivery
from hbgw.core.logs import configured_secrets
from hbgw.core.settings import Settings
from hbgw.gateway.channels.registry import ChannelRegistry
from hbgw.gateway.platforms.served import Served
from hbgw.gateway.platforms.webhook.channel import Policy, WebhookChannel
from hbgw.gateway.platforms.webhook.signature import problem, sign
from hbgw.gateway.public_ids import PublicIds, id_key
from hbgw.workers.ports import Address

SECRET = "whsec-unit"
TO = Address("webhook", "room-1", "t-1")
# What a failure says (the tenant reads it in the runs view): no detail, a reference.
WITHHELD = r"could not be delivered to the session's webhook \(reference wh-[0-9a-f]{10}\)"
IDS = PublicIds(lambda: id_key("ids-key-of-the-test"))


@pytest.fixture
def receiver() -> Iterator[FakeReceiver]:
    with fake_receiver() as fake:
        yield fake
        while OPEN:
            OPEN.pop().close()


OPEN: list[WebhookChannel] = []


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()  # its pooled connections, before the receiver stops


def channel(url: str | None, *, retries: int = 2, budget: float = 10.0) -> WebhookChannel:
    policy = Policy(1.0, retries, budget)
    made = WebhookChannel(SECRET, lambda _sid: url, policy, IDS, loopback_guard())
    OPEN.append(made)
    return made


def send(ch: WebhookChannel, key: str = "s1:1000", **kw: object) -> object:
    return ch.send(TO, "hi", session_id="s1", kind="heartbeat", delivery_key=key, **kw)  # type: ignore[arg-type]


def test_a_duplicate_answer_is_a_duplicate_receipt(receiver: FakeReceiver) -> None:
    ch = channel(receiver.hook())
    receiver.next(
        Scripted(208, answer={}),
        Scripted(409, answer={"idempotency_key": "k2"}),
        Scripted(200, answer={"duplicate": True}),
    )
    receipts = [send(ch, key) for key in ("k1", "k2", "k3")]
    assert [r.duplicate for r in receipts] == [True, True, True]  # type: ignore[attr-defined]
    receiver.next(Scripted(409, answer={"error": "another conflict"}))
    with pytest.raises(PermanentDelivery, match=WITHHELD) as failed:
        send(ch, "k4")
    assert failed.value.reason == "http_409"


def test_every_attempt_carries_the_key_the_mark_and_a_fresh_signature(
    receiver: FakeReceiver,
) -> None:
    ch = channel(receiver.hook())
    receiver.next(Scripted(503))
    receipt = send(ch, "msg:42", possible_repeat=True, ref=None)
    assert receipt.message_id == "hook-1"  # type: ignore[attr-defined]
    first, second = receiver.requests
    for r in (first, second):
        assert r.key == f"msg:{IDS.show(42)}" and r.headers["x-hbgw-possible-repeat"] == "1"
        assert r.headers["content-type"] == "application/json"
        stamp = r.headers["x-hbgw-timestamp"]
        assert r.headers["x-hbgw-signature"] == sign(SECRET, int(stamp), r.body)
        assert problem(SECRET, r.headers, r.body, float(stamp)) is None
    assert first.body == second.body
    assert json.loads(first.body)["possible_repeat"] is True


def test_a_wait_longer_than_the_budget_fails_at_once(receiver: FakeReceiver) -> None:
    ch = channel(receiver.hook(), budget=5)
    receiver.next(Scripted(429, retry_after=60))
    with pytest.raises(TransientDelivery, match=WITHHELD) as failed:
        send(ch)
    assert failed.value.reason == "http_429" and len(receiver.requests) == 1


def test_a_redirect_and_a_client_error_are_permanent(receiver: FakeReceiver) -> None:
    ch = channel(receiver.hook())
    receiver.next(Scripted(302, location="https://elsewhere.example/"))
    with pytest.raises(PermanentDelivery, match=WITHHELD) as redirected:
        send(ch, "a")
    assert redirected.value.reason == "http_302"
    for status in (401, 403, 404):
        receiver.next(Scripted(status))
        with pytest.raises(PermanentDelivery, match=WITHHELD) as failed:
            send(ch, f"b{status}")
        assert failed.value.platform == "webhook" and failed.value.reason == f"http_{status}"
    assert len(receiver.requests) == 4  # none repeated


def test_a_receiver_that_is_down_is_tried_again_then_transient(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens on it once closed
    url = f"http://127.0.0.1:{port}/hooks/T0/XYZ?token=s3cr3t"
    ch = channel(url, retries=2)
    caplog.set_level(logging.WARNING, "hbgw.webhook")
    with pytest.raises(TransientDelivery, match=WITHHELD) as failed:
        send(ch)
    assert failed.value.reason == "unreachable"
    assert "s3cr3t" not in str(failed.value) and "XYZ" not in str(failed.value)
    retries = [r for r in caplog.records if getattr(r, "action", "") == "webhook.retry"]
    assert len(retries) == 2
    assert all("s3cr3t" not in r.getMessage() and "XYZ" not in r.getMessage() for r in retries)


def test_no_url_fails_for_good_and_typing_and_progress_send_nothing(
    receiver: FakeReceiver,
) -> None:
    with pytest.raises(PermanentDelivery, match="has no webhook URL") as failed:
        send(channel(None))
    assert failed.value.reason == "no_url"
    ch = channel(receiver.hook())
    ch.typing(TO, session_id="s1")
    ch.progress(TO, "working", session_id="s1")
    assert receiver.requests == []


def test_a_key_of_the_ids_that_cannot_be_read_sends_nothing_and_may_pass(
    receiver: FakeReceiver,
) -> None:
    """The public ids' key is read from the store on first use: the store away is a failure
    for now (the delivery is retried later), and no SQL id goes out instead."""

    def away() -> bytes:
        raise StoreError("The database connection dropped during stored_secret.")

    ch = WebhookChannel(
        SECRET,
        lambda _sid: receiver.hook(),
        Policy(1.0, 2, 10.0),
        PublicIds(away),
        loopback_guard(),
    )
    OPEN.append(ch)
    with pytest.raises(TransientDelivery, match="public ids could not be read") as failed:
        send(ch, "msg:42")
    assert failed.value.reason == "ids_unread" and receiver.requests == []


def test_settings_are_secret_checked_and_build_the_channel(tmp_path: object) -> None:
    url = "https://hooks.example/T0/B0/XYZ?token=abc"
    s = Settings(webhook_secret="whsec-x", webhook_url=url, platforms="webhook,cli")
    assert s.masked()["webhook_secret"] == "********"
    assert "abc" not in s.masked()["webhook_url"]
    assert {"whsec-x", "/T0/B0/XYZ", "abc"} <= set(configured_secrets(s))
    registry = ChannelRegistry.from_settings(s)
    made = registry.channel_for("webhook")
    assert isinstance(made, WebhookChannel)
    OPEN.append(made)
    with pytest.raises(BadInput, match="set HBGW_WEBHOOK_SECRET too"):
        Served.from_settings(Settings(platforms="webhook"))
    with pytest.raises(ValidationError, match="http:// or https://"):
        Settings(webhook_url="file:///etc/passwd")
