"""HBGW_CHANNEL: the channel of the platforms that have no client of their own (console or
file), as before platforms existed."""

from __future__ import annotations

from hbgw.core.clock import Clock, utcnow
from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.gateway.channels.console import ConsoleChannel
from hbgw.gateway.channels.file import FileChannel
from hbgw.workers.ports import Channel


def make_local_channel(settings: Settings, *, clock: Clock = utcnow) -> Channel:
    """``clock``: the process's shared clock, so a delivery's time compares with the ledger's."""
    if settings.channel == "console":
        return ConsoleChannel()
    if settings.channel == "file":
        path = settings.channel_file or settings.home / "deliveries.jsonl"
        return FileChannel(path, clock=clock)
    raise BadInput(f"Unknown channel {settings.channel!r}: HBGW_CHANNEL is console or file.")
