"""Channels: where turns are delivered."""

from __future__ import annotations

from gateway.channels.base import Address, Channel
from gateway.channels.console import ConsoleChannel
from gateway.channels.file import FileChannel
from hbgw.errors import BadInput
from hbgw.settings import Settings

__all__ = ["Address", "Channel", "make_channel"]


def make_channel(settings: Settings) -> Channel:
    if settings.channel == "console":
        return ConsoleChannel()
    if settings.channel == "file":
        path = settings.channel_file or settings.home / "deliveries.jsonl"
        return FileChannel(path)
    raise BadInput(f"Unknown channel {settings.channel!r}: HBGW_CHANNEL is console or file.")
