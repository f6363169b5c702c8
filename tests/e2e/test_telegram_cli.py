"""`hbgw telegram …` against the fake Bot API: set-webhook registers the webhook with the secret
token for messages only, delete-webhook removes it, and `poll` — a real process — takes updates
by getUpdates into the same sessions as the webhook would, answers a command in its topic, and
stops on Ctrl-C; a webhook still set, a refusal, a missing setting: one sentence each."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_fixtures import Hbgw
from support.fake_telegram import TOKEN, Failure, FakeTelegram, fake_telegram
from support.harness import Gateway, wait_until
from support.telegram_fixtures import (
    OWNER,
    SECRET,
    TOPIC,
    message_update,
    telegram_settings_values,
)

from hbgw.core.clock import utcnow


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTelegram]:
    with fake_telegram() as served:
        monkeypatch.setenv("HBGW_TELEGRAM_BOT_TOKEN", TOKEN)
        monkeypatch.setenv("HBGW_TELEGRAM_SECRET_TOKEN", SECRET)
        monkeypatch.setenv("HBGW_TELEGRAM_API_URL", served.url)
        yield served


def test_set_webhook_registers_the_secret_for_messages(hbgw: Hbgw, fake: FakeTelegram) -> None:
    done = hbgw("telegram", "set-webhook", "https://hbgw.example.com")
    assert done.code == 0, done.err
    url = "https://hbgw.example.com/platforms/telegram/webhook"
    assert fake.registered() == {"url": url, "secret_token": SECRET, "allowed_updates": ["message"]}
    assert done.out.startswith(f"Telegram will post this bot's messages to {url},")
    assert SECRET not in done.out and TOKEN not in done.out + done.err
    other = hbgw("telegram", "set-webhook", "https://tunnel.example/platforms/telegram/webhook")
    assert (
        other.code == 0
        and (fake.registered() or {})["url"] == "https://tunnel.example/platforms/telegram/webhook"
    )

    removed = hbgw("telegram", "delete-webhook")
    assert removed.code == 0 and fake.registered() is None
    assert removed.out.startswith("The webhook is removed")


def test_errors_are_sentences(
    hbgw: Hbgw, fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.fail_next(
        "setWebhook",
        Failure(400, "Bad Request: bad webhook: HTTPS url must be provided for webhook"),
    )
    refused = hbgw("telegram", "set-webhook", "http://hbgw.example.com")
    assert refused.code == 2
    assert refused.err == (
        "Error: Telegram refused setWebhook: Bad Request: bad webhook: HTTPS url must be provided "
        "for webhook.\n"
    )
    assert hbgw("telegram", "set-webhook", "hbgw.example.com").err.startswith(
        "Error: 'hbgw.example.com' is not a URL; give the gateway's public address"
    )
    fake.webhook = {"url": "https://hbgw.example.com/platforms/telegram/webhook"}
    conflict = hbgw("telegram", "poll", "--wait", "1")
    assert conflict.code == 2
    assert "deleteWebhook is needed first" in conflict.err
    assert "run `hbgw telegram delete-webhook`" in conflict.err
    monkeypatch.setenv("HBGW_TELEGRAM_API_URL", "http://127.0.0.1:9")
    away = hbgw("telegram", "delete-webhook")
    assert away.code == 1 and "did not answer" in away.err and TOKEN not in away.err
    monkeypatch.delenv("HBGW_TELEGRAM_BOT_TOKEN")
    monkeypatch.delenv("HBGW_TELEGRAM_SECRET_TOKEN")
    unset = hbgw("telegram", "set-webhook", "https://hbgw.example.com")
    assert unset.code == 2 and unset.err.startswith("Error: Telegram is not configured")


def test_poll_takes_updates_into_sessions_and_stops_on_ctrl_c(
    gateway: Gateway, tmp_path: Path
) -> None:
    with fake_telegram() as fake:
        env = gateway.env()
        env.update({f"HBGW_{k.upper()}": str(v) for k, v in telegram_settings_values(fake).items()})
        fake.push(
            message_update(500, "/hb every 1m summarize the topic"),
            message_update(501, "hello from the topic"),
        )
        log = tmp_path / "poll.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hbgw", "telegram", "poll", "--wait", "1"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(lambda: fake.sends(message_thread_id=TOPIC), 60, "the command's answer")
            session = gateway.store.sessions.session_at(
                platform="telegram", chat="-1001234567890", thread=str(TOPIC),
                now=utcnow(), owner=OWNER, create=False,
            )  # fmt: skip
            assert session is not None
            texts = wait_until(
                lambda: [
                    m.text for m in gateway.store.messages.list_messages(session.id, limit=10)
                ],
                30,
                "the stored message",
            )
            assert texts == ["hello from the topic"]
            # Both confirmed: the next getUpdates asks from the one after the last.
            wait_until(lambda: fake.of("getUpdates")[-1].params.get("offset") == 502, 30, "offset")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    printed = log.read_text()
    assert "Stopped polling; 2 updates taken." in printed
    assert TOKEN not in printed and SECRET not in printed
    assert fake.sends()[0].params["text"].startswith("♥ Heartbeat set (every 1m")
    status = gateway.store.heartbeats.heartbeat_status(session.id, utcnow()).to_json()
    assert status["prompt"] == "summarize the topic"
