"""The channel of a deployment: one per served platform, chosen by the session's platform.

A turn's ``Address`` names its platform; the registry hands the send to that platform's
channel and to no other. Platforms with a client of their own (Slack, Telegram, Discord, signed
webhooks) use it once their settings are present; every other served platform is delivered by
HBGW_CHANNEL (console or file), which records what a platform would have received. A platform
that is not served is refused: ``send`` raises ``PermanentDelivery`` (its reason
``not_served``), with the sentence of ``PlatformNotEnabled``; nothing falls back to another
route. A chat outside the platform's allowlist is refused the same way (reason
``not_allowed``, ``hbgw/gateway/platforms/outbound.py``), with one log line, before its channel
is asked: no request reaches the platform, and typing and progress show nothing there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hbgw.core.clock import Clock, utcnow
from hbgw.core.errors import PermanentDelivery, PlatformNotEnabled
from hbgw.core.settings import Settings
from hbgw.gateway.channels.local import make_local_channel
from hbgw.gateway.platforms.discord.channel import DiscordChannel
from hbgw.gateway.platforms.outbound import OutboundChats
from hbgw.gateway.platforms.served import Served
from hbgw.gateway.platforms.slack.channel import SlackChannel
from hbgw.gateway.platforms.telegram.channel import TelegramChannel
from hbgw.gateway.platforms.webhook.channel import WebhookChannel
from hbgw.gateway.platforms.webhook.urls import StoredUrls
from hbgw.gateway.public_ids import deployment_ids
from hbgw.sessions.store import StoredSecrets, WebhookRoutes
from hbgw.workers.ports import Address, Channel, Receipt, SendGuard

log = logging.getLogger("hbgw.channels")


class ChannelRegistry:
    def __init__(
        self,
        served: Served,
        own: Mapping[str, Channel],
        local: Channel,
        outbound: OutboundChats | None = None,
    ) -> None:
        self.served = served
        self.own = dict(own)
        self.local = local
        self.outbound = outbound or OutboundChats()
        # The name delivery records and metrics show: the local channel's while it is the only
        # one (console, file), "platforms" once a platform client delivers too.
        self.name = "platforms" if self.own else local.name

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        clock: Clock = utcnow,
        webhooks: WebhookRoutes | None = None,
        secrets: StoredSecrets | None = None,
    ) -> ChannelRegistry:
        """``webhooks``: where a webhook session's URL is read, ``secrets``: where the key of
        its public ids is (a worker's Runtime's store; unset, opened when first needed)."""
        served = Served.from_settings(settings)
        own: dict[str, Channel] = {}
        if served.has_own_client("slack") and served.serves("slack"):
            own["slack"] = SlackChannel.from_settings(settings)
        if served.has_own_client("telegram") and served.serves("telegram"):
            own["telegram"] = TelegramChannel.from_settings(settings)
        if served.has_own_client("discord") and served.serves("discord"):
            own["discord"] = DiscordChannel.from_settings(settings)
        if served.has_own_client("webhook") and served.serves("webhook"):
            urls, ids = StoredUrls(settings, webhooks), deployment_ids(settings, secrets)
            own["webhook"] = WebhookChannel.from_settings(settings, clock=clock, urls=urls, ids=ids)
        local = make_local_channel(settings, clock=clock)
        return cls(served, own, local, OutboundChats.from_settings(settings))

    def channel_for(self, platform: str) -> Channel:
        """The one channel that delivers ``platform``; ``PlatformNotEnabled`` if none does."""
        self.served.check(platform)
        return self.own.get(platform, self.local)

    def route_name(self, platform: str) -> str:
        """The name of the channel that delivers ``platform`` (delivery records and the
        ``hbgw_deliveries_total`` label): its own client's, else the local channel's."""
        return platform if platform in self.own else self.local.name

    def send(
        self,
        address: Address,
        text: str,
        *,
        session_id: str,
        kind: str,
        delivery_key: str,
        possible_repeat: bool = False,
        ref: str | None = None,
        guard: SendGuard | None = None,
    ) -> Receipt | None:
        try:
            channel = self.channel_for(address.platform)
        except PlatformNotEnabled as exc:
            raise PermanentDelivery(
                str(exc), platform=address.platform, reason="not_served"
            ) from exc
        refusal = self.outbound.refusal(address)
        if refusal is not None:
            log.warning(
                "delivery refused: %s",
                refusal,
                extra={"action": "deliver.not_allowed", "session": session_id},
            )
            raise PermanentDelivery(refusal, platform=address.platform, reason="not_allowed")
        return channel.send(
            address,
            text,
            session_id=session_id,
            kind=kind,
            delivery_key=delivery_key,
            possible_repeat=possible_repeat,
            ref=ref,
            guard=guard,
        )

    def close(self) -> None:
        """Close the platform clients' connection pools (a worker's shutdown): each own channel
        that keeps one has a ``close``; the local channels keep none."""
        for channel in self.own.values():
            close = getattr(channel, "close", None)
            if close is not None:
                close()

    def typing(self, address: Address, *, session_id: str) -> None:
        channel = self.channel_for(address.platform)
        if self.outbound.refusal(address) is None:  # the send says why, once
            channel.typing(address, session_id=session_id)

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        channel = self.channel_for(address.platform)
        if self.outbound.refusal(address) is None:
            channel.progress(address, text, session_id=session_id)
