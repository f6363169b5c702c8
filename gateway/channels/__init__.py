"""Channels: where turns are delivered, one per platform (``registry.py``)."""

from __future__ import annotations

from core.clock import Clock, utcnow
from core.settings import Settings
from gateway.channels.registry import ChannelRegistry
from sessions.store import Store
from workers.ports import Address, Channel

__all__ = ["Address", "Channel", "ChannelRegistry", "make_channel"]


def make_channel(
    settings: Settings, *, clock: Clock = utcnow, store: Store | None = None
) -> ChannelRegistry:
    """The deployment's channel: each served platform's own, HBGW_CHANNEL for the rest
    (``store``: where webhook sessions' URLs are read; unset, one is opened when needed)."""
    return ChannelRegistry.from_settings(settings, clock=clock, store=store)
