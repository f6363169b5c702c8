"""Who may open a session on which chat, and where outbound may go (issue 29, finding 1):
HBGW_OWNER_CHATS parsed and refused by its entry, the owner-token rule, the outbound
allowlists, and Slack's escaping — pure rules, no server."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hbgw.core.owner_chats import OwnerChats
from hbgw.core.settings import Settings
from hbgw.gateway.api.auth import Principal, chat_refusal
from hbgw.gateway.platforms.outbound import OutboundChats
from hbgw.gateway.platforms.slack.channel import escape
from hbgw.workers.ports import Address

BOUND = OwnerChats.parse("alice=slack:C012ABC,telegram:-100123;bob=discord:1234567890")


def test_bindings_parse_into_owner_platform_chat() -> None:
    assert BOUND.bound == {
        ("alice", "slack", "C012ABC"),
        ("alice", "telegram", "-100123"),
        ("bob", "discord", "1234567890"),
    }
    assert BOUND.binds("alice", "slack", "C012ABC")
    assert not BOUND.binds("bob", "slack", "C012ABC")  # another owner's chat
    assert not BOUND.binds(None, "slack", "C012ABC")
    assert OwnerChats.parse(" ; ").bound == frozenset()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("alice", "entry 1 ('alice') is not owner=platform:chat"),
        ("alice=slack:C1;bob=discrd:1", "entry 2 ('bob=discrd:1') names the platform 'discrd'"),
        ("alice=slack", "has 'slack', which is not platform:chat"),
        ("alice=cli:me", "api and cli sessions need no binding"),
        ("a:b=slack:C1", "that no HBGW_API_TOKENS owner can be"),
        ("alice=slack:C 1", "which is not one chat id"),
    ],
)
def test_a_typo_stops_the_start_naming_its_entry(text: str, words: str) -> None:
    """A malformed binding must fail at start, not leave an owner silently unbound."""
    with pytest.raises(ValidationError) as refused:
        Settings(owner_chats=text)
    assert words in str(refused.value) and "HBGW_OWNER_CHATS" in str(refused.value)


def test_an_owner_token_opens_chat_platform_sessions_only_on_bound_chats() -> None:
    """Pins finding 1: any owner token made the bots post into any chat."""
    alice, admin = Principal("alice"), Principal(None, admin=True)
    for platform in ("slack", "telegram", "discord", "webhook"):
        refusal = chat_refusal(alice, platform, "VICTIM", BOUND)
        assert refusal is not None and "HBGW_OWNER_CHATS" in refusal and "admin" in refusal
        assert chat_refusal(admin, platform, "VICTIM", BOUND) is None
    assert chat_refusal(alice, "slack", "C012ABC", BOUND) is None
    assert chat_refusal(alice, "api", "anything", BOUND) is None
    assert chat_refusal(alice, "cli", "me", BOUND) is None


def test_the_allowlists_bind_outbound() -> None:
    """Pins finding 1: HBGW_TELEGRAM_CHATS, HBGW_SLACK_TEAMS and HBGW_DISCORD_GUILDS filtered
    inbound only."""
    rules = OutboundChats(frozenset({"-100123"}), frozenset({"T0OK"}), frozenset({"77"}), BOUND)
    assert rules.refusal(Address("telegram", "-100123")) is None
    assert "HBGW_TELEGRAM_CHATS" in (rules.refusal(Address("telegram", "-100999")) or "")
    assert rules.refusal(Address("slack", "C9", owner="slack:T0OK")) is None
    assert rules.refusal(Address("slack", "C9", owner="slack:T0BAD")) is not None
    assert rules.refusal(Address("slack", "C9", owner="alice")) is not None
    assert rules.refusal(Address("slack", "C9", owner=None)) is not None
    assert rules.refusal(Address("slack", "C012ABC", owner="alice")) is None  # bound
    assert rules.refusal(Address("discord", "5", owner="discord:77")) is None
    assert "HBGW_DISCORD_GUILDS" in (rules.refusal(Address("discord", "5", "discord:dm")) or "")
    assert rules.refusal(Address("discord", "1234567890", owner="bob")) is None
    assert rules.refusal(Address("webhook", "x", owner="alice")) is None
    assert rules.refusal(Address("cli", "me")) is None
    anything = OutboundChats()
    assert anything.refusal(Address("slack", "C9", owner="alice")) is None
    assert anything.refusal(Address("telegram", "-1")) is None


def test_slack_text_is_escaped_as_slack_documents() -> None:
    """Pins finding 1: Slack text went out unescaped (<!channel>, disguised links)."""
    text = "a & b <!channel> <@U1> <!subteam^S1> <https://evil.example|https://slack.com/login>"
    assert escape(text) == (
        "a &amp; b &lt;!channel&gt; &lt;@U1&gt; &lt;!subteam^S1&gt; "
        "&lt;https://evil.example|https://slack.com/login&gt;"
    )
    assert escape("&lt;") == "&amp;lt;"  # escaped once, as written
