"""The Discord channel against the fake REST API (a real HTTP server on loopback): long text
split at 2,000 into the thread, rate limits honoured (an empty bucket waited for, a 429 waited
out, a wait too long refused), refusals typed, typing a cosmetic one-shot; and
`hbgw discord register-commands` putting the command set."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator

import pytest
from support.cli_fixtures import Hbgw
from support.discord_fixtures import APP_ID, BOT_TOKEN, CHANNEL, PUBLIC_KEY, THREAD
from support.fake_discord import Failure, FakeDiscord, fake_discord

from hbgw.core.errors import PermanentDelivery, TransientDelivery
from hbgw.gateway.platforms.discord.channel import DiscordChannel
from hbgw.gateway.platforms.discord.commands import definitions
from hbgw.workers.ports import Address

IN_THREAD = Address("discord", CHANNEL, THREAD)


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with fake_discord() as running:
        yield running


class Sleeps(list[float]):
    """An injected sleep: records each wait instead of taking it."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def channel(fake: FakeDiscord, sleeps: Sleeps | None = None) -> DiscordChannel:
    return DiscordChannel(
        BOT_TOKEN, base_url=fake.api_url, sleep=Sleeps() if sleeps is None else sleeps
    )


def send(
    ch: DiscordChannel, text: str, key: str = "msg:1", address: Address = IN_THREAD
) -> str | None:
    receipt = ch.send(address, text, session_id="s1", kind="reply", delivery_key=key)
    return receipt.message_id


def test_long_text_is_split_at_2000_into_the_thread(fake: FakeDiscord) -> None:
    text = "\n\n".join(f"paragraph {n}: " + "word " * 150 for n in range(6))
    assert len(text) > 4000
    first = send(channel(fake), text)
    posts = fake.of("message")
    assert len(posts) == 3 and all(len(p.content) <= 2000 for p in posts)
    assert "\n\n".join(p.content for p in posts) == text
    assert {p.channel for p in posts} == {THREAD}  # the thread's own channel, never the parent
    assert len({p.body["nonce"] for p in posts}) == 3 and all(
        p.body["enforce_nonce"] for p in posts
    )
    assert first == posts[0].answered["id"]  # the receipt names the reply's first part
    assert all(p.body["allowed_mentions"] == {"parse": []} for p in posts)


def test_a_nonce_does_not_give_away_the_sql_id_of_the_message(fake: FakeDiscord) -> None:
    """Pins issue 29 (low), Discord's share of it: the nonce was sha256 of the delivery key, so
    trying ``msg:1``, ``msg:2``, … turned it back into SQL's sequential message id."""
    send(channel(fake), "hi", key="msg:64")
    [post] = fake.of("message")
    guesses = {hashlib.sha256(f"msg:{n}\x1f0".encode()).hexdigest()[:25] for n in range(1000)}
    assert post.body["nonce"] not in guesses and len(post.body["nonce"]) == 25


def test_a_repeat_of_a_delivery_returns_the_message_already_posted(fake: FakeDiscord) -> None:
    ch = channel(fake)
    once, again = send(ch, "hi", key="fire-7"), send(ch, "hi", key="fire-7")
    assert once == again and send(ch, "hi", key="fire-8") != once


def test_an_empty_bucket_is_waited_for_before_the_next_send(fake: FakeDiscord) -> None:
    sleeps = Sleeps()
    ch = channel(fake, sleeps)
    fake.fail_next("message", Failure(200, remaining=0, reset_after=0.8))
    send(ch, "one", key="k1")
    assert sleeps == []
    send(ch, "two", key="k2")  # same bucket, same channel: waits for the refill
    assert len(sleeps) == 1 and 0.5 < sleeps[0] <= 0.8
    send(ch, "elsewhere", key="k3", address=Address("discord", "777"))  # another channel: no wait
    assert len(sleeps) == 1


def test_a_429_is_waited_out_for_its_retry_after(fake: FakeDiscord) -> None:
    sleeps = Sleeps()
    fake.fail_next("message", Failure(429, retry_after=2.5))
    assert send(channel(fake, sleeps), "hi") is not None
    assert sleeps == [2.5]
    assert [c.status for c in fake.of("message")] == [429, 200]


def test_429s_past_the_retries_or_too_long_are_transient(fake: FakeDiscord) -> None:
    sleeps = Sleeps()
    fake.fail_next("message", *[Failure(429, retry_after=0.1)] * 4)
    with pytest.raises(TransientDelivery) as busy:
        send(channel(fake, sleeps), "hi")
    assert busy.value.reason == "ratelimited" and len(fake.of("message")) == 4
    fake.fail_next("message", Failure(429, retry_after=120))
    with pytest.raises(TransientDelivery, match="rate limiting"):
        send(channel(fake), "hi")
    assert len(fake.of("message")) == 5  # a two-minute wait is not taken: one try


@pytest.mark.parametrize(
    ("failure", "kind", "reason"),
    [
        (Failure(403, code=50013), PermanentDelivery, "missing_permissions"),
        (Failure(403, code=50001), PermanentDelivery, "missing_access"),
        (Failure(404, code=10003), PermanentDelivery, "unknown_channel"),
        (Failure(401, code=0), PermanentDelivery, "http_401"),
        (Failure(503), TransientDelivery, "http_503"),
        (Failure(500), TransientDelivery, "http_500"),
    ],
)
def test_refusals_are_typed(
    fake: FakeDiscord, failure: Failure, kind: type[Exception], reason: str
) -> None:
    fake.fail_next("message", failure)
    with pytest.raises(kind) as refused:
        send(channel(fake), "hi")
    assert getattr(refused.value, "reason", None) == reason
    assert len(fake.of("message")) == 1  # no repeat of a refusal


def test_an_unreachable_api_is_transient() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    ch = DiscordChannel(BOT_TOKEN, base_url=f"http://127.0.0.1:{port}/api/v10", timeout=2)
    with pytest.raises(TransientDelivery) as away:
        send(ch, "hi")
    assert away.value.reason == "unreachable"


def test_typing_is_one_shot_and_skipped_while_the_bucket_is_empty(fake: FakeDiscord) -> None:
    sleeps = Sleeps()
    ch = channel(fake, sleeps)
    fake.fail_next("typing", Failure(204, remaining=0, reset_after=5))
    ch.typing(IN_THREAD, session_id="s1")
    ch.typing(IN_THREAD, session_id="s1")  # the bucket is spent: no call, no wait
    assert [c.channel for c in fake.of("typing")] == [THREAD] and sleeps == []
    ch.progress(IN_THREAD, "thinking", session_id="s1")
    assert [c.kind for c in fake.calls] == ["typing"]


def _discord_env(monkeypatch: pytest.MonkeyPatch, fake: FakeDiscord) -> None:
    monkeypatch.setenv("HBGW_DISCORD_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("HBGW_DISCORD_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("HBGW_DISCORD_APPLICATION_ID", APP_ID)
    monkeypatch.setenv("HBGW_DISCORD_API_URL", fake.api_url)


def test_register_commands_puts_the_command_set(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, fake: FakeDiscord
) -> None:
    _discord_env(monkeypatch, fake)
    done = hbgw("discord", "register-commands")
    assert done.code == 0, done
    assert done.out == "Registered heartbeat, hb, cron, ask, Ask the agent globally.\n"
    guild = hbgw("discord", "register-commands", "--guild", "2002")
    assert guild.code == 0 and guild.out.endswith("in guild 2002.\n")
    [globally, in_guild] = fake.of("commands")
    assert globally.ids == {"app": APP_ID} and in_guild.ids == {"app": APP_ID, "guild": "2002"}
    assert globally.body == definitions() and globally.auth == f"Bot {BOT_TOKEN}"
    fake.fail_next("commands", Failure(401, code=0))
    refused = hbgw("discord", "register-commands")
    assert refused.code == 2 and refused.err.startswith("Error: Discord refused the bot token")
    bad_guild = hbgw("discord", "register-commands", "--guild", "my-server")
    assert bad_guild.code == 2 and "is not a guild id" in bad_guild.err


def test_register_commands_needs_the_settings(hbgw: Hbgw) -> None:
    result = hbgw("discord", "register-commands")
    assert result.code == 2
    assert result.err.startswith(
        "Error: Set HBGW_DISCORD_BOT_TOKEN and HBGW_DISCORD_APPLICATION_ID"
    )
