"""Channels: where turns are delivered, one per platform (``registry.py``)."""

from __future__ import annotations

from hbgw.core.clock import Clock, utcnow
from hbgw.core.settings import Settings
from hbgw.gateway.channels.registry import ChannelRegistry
from hbgw.sessions.store import StoredSecrets, WebhookRoutes
from hbgw.workers.ports import Address, Channel

__all__ = ["Address", "Channel", "ChannelRegistry", "make_channel"]


def make_channel(
    settings: Settings,
    *,
    clock: Clock = utcnow,
    webhooks: WebhookRoutes | None = None,
    secrets: StoredSecrets | None = None,
) -> ChannelRegistry:
    """The deployment's channel: each served platform's own, HBGW_CHANNEL for the rest
    (``webhooks``: where webhook sessions' URLs are read, ``secrets``: where the key of their
    public ids is; unset, a store is opened when needed)."""
    return ChannelRegistry.from_settings(settings, clock=clock, webhooks=webhooks, secrets=secrets)
