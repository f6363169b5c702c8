"""The allowlists bind outbound too: a delivery to a chat outside them never reaches the platform.

HBGW_TELEGRAM_CHATS names chats, so a Telegram delivery is checked by its chat id. Slack's and
Discord's allowlists name workspaces (HBGW_SLACK_TEAMS) and guilds (HBGW_DISCORD_GUILDS), which
a channel or thread id does not tell; the session does: the signed inbound that made it wrote
the workspace or guild into its owner (``slack:<team>``, ``discord:<guild>``; an owner token's
name never holds a colon, so no token can pose as one). A session made otherwise — by the
admin token or on a chat HBGW_OWNER_CHATS binds — delivers while its owner is bound to the
chat, which is the operator's word that the chat belongs there. Anything else is refused for
good (``PermanentDelivery``, reason ``not_allowed``), before any request to the platform.
An empty allowlist lets every chat of its platform through, as it does inbound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hbgw.core.owner_chats import OwnerChats
from hbgw.core.settings import Settings
from hbgw.workers.ports import Address


@dataclass(frozen=True)
class OutboundChats:
    telegram_chats: frozenset[str] = frozenset()
    slack_teams: frozenset[str] = frozenset()
    discord_guilds: frozenset[str] = frozenset()
    owner_chats: OwnerChats = field(default_factory=OwnerChats)

    @classmethod
    def from_settings(cls, settings: Settings) -> OutboundChats:
        return cls(
            settings.telegram_chat_ids,
            settings.slack_team_ids,
            settings.discord_guild_ids,
            settings.owner_chat_bindings,
        )

    def refusal(self, address: Address) -> str | None:
        """Why nothing may be sent to ``address``; None when its platform's allowlist lets it."""
        platform, chat = address.platform, address.chat
        if platform == "telegram":
            if self.telegram_chats and chat not in self.telegram_chats:
                return (
                    f"Telegram chat {chat} is not in HBGW_TELEGRAM_CHATS; nothing is sent "
                    "there. An operator adds the chat to HBGW_TELEGRAM_CHATS to allow it."
                )
            return None
        realms = {"slack": (self.slack_teams, "HBGW_SLACK_TEAMS", "workspace")}
        realms["discord"] = (self.discord_guilds, "HBGW_DISCORD_GUILDS", "guild")
        if platform not in realms or not realms[platform][0]:
            return None
        allowed, setting, word = realms[platform]
        realm = (address.owner or "").removeprefix(f"{platform}:")
        if realm != address.owner and realm in allowed:
            return None  # made by the platform's signed inbound from an allowed workspace/guild
        if self.owner_chats.binds(address.owner, platform, chat):
            return None
        return (
            f"The {platform} chat {chat} is not known to be in a {word} of {setting}; nothing "
            f"is sent there. It is known when a message from the chat made the session, or "
            f"when an operator binds the chat to the session's owner in HBGW_OWNER_CHATS."
        )
