"""Issue 29, finding 5: a session's chat and thread ids in their platform's own format.

A Discord chat ``1/../../guilds/777/prune?x=`` made the worker send
``POST /api/v10/guilds/777/prune?x=/messages`` with the bot token: the id was a path segment.
Each platform's ids are checked where sessions are made (``check_session_names``), and the
Discord channel refuses a stored id that is no snowflake before any request."""

from __future__ import annotations

import pytest

from hbgw.core.errors import BadInput, PermanentDelivery
from hbgw.gateway.platforms.discord.channel import messages_route, typing_route
from hbgw.gateway.platforms.discord.rest import segment
from hbgw.gateway.platforms.telegram.channel import thread_id
from hbgw.sessions.validation import check_session_names

TRAVERSAL = "1/../../guilds/777/prune?x="


@pytest.mark.parametrize(
    ("platform", "chat", "thread", "words"),
    [
        ("discord", TRAVERSAL, None, "not a discord chat id — give a Discord snowflake"),
        ("discord", "3003", "4004/../../guilds/777", "not a discord thread id"),
        ("discord", "123456789012345678901", None, "up to 20 digits"),
        ("discord", "３００３", None, "not a discord chat id"),  # full-width digits
        ("telegram", "-100/../x", None, "not a telegram chat id — give a Telegram chat id"),
        ("telegram", "--42", None, "not a telegram chat id"),
        ("telegram", "42", "-7", "not a telegram thread id — give a Telegram topic id"),
        ("telegram", "42", "²", "not a telegram thread id"),
        ("slack", "c0chan", None, "not a slack chat id — give a Slack conversation id"),
        ("slack", "C0CHAN/../x", None, "not a slack chat id"),
        ("slack", "C0CHAN", "1700000000.000100/../x", "not a slack thread id"),
    ],
)
def test_a_chat_or_thread_outside_its_platform_format_is_refused(
    platform: str, chat: str, thread: str | None, words: str
) -> None:
    with pytest.raises(BadInput, match=r"^The (chat|thread) '") as refused:
        check_session_names(platform=platform, chat=chat, thread=thread, owner=None)
    assert words in str(refused.value)


@pytest.mark.parametrize(
    ("platform", "chat", "thread"),
    [
        ("discord", "1234567890123456789", None),
        ("discord", "3003", "4004"),
        ("telegram", "-1001234567890", "42"),
        ("telegram", "42", None),
        ("slack", "C0123ABCDEF", "1700000000.000100"),
        ("slack", "D0123ABCD", None),
        ("webhook", "partner/room 7", "any thread"),  # names their owners choose, as before
        ("api", "terminal-alice", None),
        ("cli", "me", None),
    ],
)
def test_ids_in_their_platform_format_are_accepted(
    platform: str, chat: str, thread: str | None
) -> None:
    check_session_names(platform=platform, chat=chat, thread=thread, owner="alice")


def test_the_discord_channel_refuses_a_stored_id_that_is_no_snowflake() -> None:
    """An old row made before the check: no path is built from it."""
    for build in (messages_route, typing_route):
        with pytest.raises(PermanentDelivery, match="is not a snowflake") as refused:
            build(TRAVERSAL)
        assert refused.value.reason == "bad_channel_id"
    assert messages_route("3003").path == "/channels/3003/messages"


def test_other_discord_path_segments_are_percent_encoded() -> None:
    assert segment("a/../b?c=#") == "a%2F..%2Fb%3Fc%3D%23"


def test_a_telegram_topic_of_unicode_digits_is_no_topic() -> None:
    """``"²".isdigit()`` is true, and ``int("²")`` raised in the channel."""
    assert thread_id("²") is None and thread_id("42") == 42
