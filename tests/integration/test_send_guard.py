"""The send guard (``workers.ports.SendGuard``): a channel that makes more than one request for
one send — a retry after a failure that may pass, a 429's wait, the next part of a long reply —
asks the guard first, and a ``TurnAborted`` from it (the session's lock could not be
confirmed afresh) ends the send: nothing more leaves. The chaos long run found the webhook
channel's own retries posting 9 s after the lock had moved on. Each channel against its fake
on loopback, through its official client or documented API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.discord_fixtures import BOT_TOKEN
from support.fake_discord import Failure as DiscordFailure
from support.fake_discord import fake_discord
from support.fake_slack import Failure as SlackFailure
from support.fake_slack import fake_slack
from support.fake_telegram import TOKEN, fake_telegram
from support.fake_telegram import Failure as TelegramFailure
from support.fake_webhook_receiver import FakeReceiver, Scripted, fake_receiver
from support.harness import wait_until
from support.slack_fixtures import slack_deployment
from support.webhook_fixtures import loopback_guard

from hbgw.core.errors import TurnAborted
from hbgw.gateway.platforms.discord.channel import DiscordChannel
from hbgw.gateway.platforms.slack.channel import SlackChannel
from hbgw.gateway.platforms.telegram.channel import TelegramChannel
from hbgw.gateway.platforms.webhook.channel import Policy, WebhookChannel
from hbgw.gateway.public_ids import PublicIds, id_key
from hbgw.sessions.states import LostLockDetail, RunState
from hbgw.workers.ports import Address

IDS = PublicIds(lambda: id_key("ids-key-of-the-test"))


class LockGone:
    """A guard whose lock moved on: every call refuses, and is counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        raise TurnAborted("the lock moved on; nothing more is sent")


def no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture
def receiver() -> Iterator[FakeReceiver]:
    with fake_receiver() as fake:
        yield fake


def test_the_webhook_channel_asks_before_a_retry(receiver: FakeReceiver) -> None:
    url = receiver.hook()
    policy = Policy(1.0, 3, 10.0)
    ch = WebhookChannel("s" * 32, lambda _sid: url, policy, IDS, loopback_guard(), sleep=no_sleep)
    try:
        receiver.next(Scripted(500))
        guard = LockGone()
        with pytest.raises(TurnAborted):
            ch.send(Address("webhook", "C1"), "hi", session_id="s1", kind="reply",
                    delivery_key="k1", guard=guard)  # fmt: skip
        assert guard.calls == 1 and len(receiver.requests) == 1
    finally:
        ch.close()


def test_slack_asks_after_a_429_wait_and_before_the_next_part() -> None:
    with fake_slack() as fake:
        ch = SlackChannel("xoxb-guard", base_url=fake.api_url, sleep=no_sleep)
        fake.fail_next("chat.postMessage", SlackFailure(status=429, retry_after=1))
        guard = LockGone()
        with pytest.raises(TurnAborted):
            ch.send(Address("slack", "C1"), "hi", session_id="s1", kind="reply",
                    delivery_key="k1", guard=guard)  # fmt: skip
        assert guard.calls == 1 and len(fake.of("chat.postMessage")) == 1
        long = "para one.\n\n" + "x" * 5000
        with pytest.raises(TurnAborted):
            ch.send(Address("slack", "C1"), long, session_id="s1", kind="reply",
                    delivery_key="k2", guard=LockGone())  # fmt: skip
        assert len(fake.posts()) == 1  # the first part only


def test_telegram_asks_after_a_429_wait() -> None:
    with fake_telegram() as fake:
        ch = TelegramChannel(TOKEN, base_url=fake.url, timeout=5, sleep=no_sleep)
        fake.fail_next("sendMessage", TelegramFailure(429, "Too Many Requests", retry_after=1))
        guard = LockGone()
        with pytest.raises(TurnAborted):
            ch.send(Address("telegram", "-1001"), "hi", session_id="s1", kind="reply",
                    delivery_key="k1", guard=guard)  # fmt: skip
        assert guard.calls == 1 and len(fake.of("sendMessage")) == 1


def test_discord_asks_after_a_429_wait_and_before_the_next_part() -> None:
    with fake_discord() as fake:
        ch = DiscordChannel(BOT_TOKEN, base_url=fake.api_url, sleep=no_sleep)
        fake.fail_next("message", DiscordFailure(429, retry_after=0.5))
        with pytest.raises(TurnAborted):
            ch.send(Address("discord", "111"), "hi", session_id="s1", kind="reply",
                    delivery_key="k1", guard=LockGone())  # fmt: skip
        assert len(fake.of("message")) == 1
        with pytest.raises(TurnAborted):
            ch.send(Address("discord", "111"), "y" * 2500, session_id="s1", kind="reply",
                    delivery_key="k2", guard=LockGone())  # fmt: skip
        assert [c.status for c in fake.of("message")] == [429, 200]  # one part of two


def test_a_turn_whose_lock_moves_on_during_a_429_wait_sends_nothing_more(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """End to end: a worker's heartbeat turn meets a 429 (Retry-After 1 s); while it waits,
    its lock is gone (deleted, as an expiry would). After the wait the guard cannot confirm the
    lock: no second post, and the run says its reply may have left."""
    with slack_deployment(tmp_path, redis_url, redis_ns) as slack:
        fake, gw = slack.fake, slack.gw
        fake.fail_next("chat.postMessage", SlackFailure(status=429, retry_after=1))
        sid = gw.session(chat="C0CHAN", thread="1700000000.000100")
        with gw.worker("w1"):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
            gw.due_now(sid)
            gw.tick()
            wait_until(lambda: fake.of("chat.postMessage"), 30, "the first post (a 429)")
            gw.rt.client.delete(gw.rt.keys.lock(sid))  # the lock moves on during the wait
            [run] = gw.final_runs(sid)
        assert [c.status for c in fake.of("chat.postMessage")] == [429]
        assert (run.state, run.detail) == (RunState.FAILED, LostLockDetail.DURING_DELIVERY)
