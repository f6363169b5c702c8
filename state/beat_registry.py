"""Which beat replica claims which due-index shard: rendezvous hashing over the live beats.

Beats claim atomically (``claim_due.lua``), so any number may run, but replicas that all claim
every shard only contend for the same keys. Instead, every beat refreshes its entry in a Redis
sorted set on each tick, and a shard belongs to the live beat with the highest hash of
(beat, shard): each beat claims and sweeps only its own shards, adding a beat moves only the
shards it wins, and a beat that stops refreshing for ``ttl_ms`` loses its shards to the others.

Two beats may briefly disagree about a shard while membership changes (each reads the set on
its own tick). Both then claim it, and the atomic claim hands each due member to one of them:
disagreement costs contention, never a duplicate fire.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Sequence

import redis

from state.keys import Keys
from state.ownership import rendezvous_owner

__all__ = ["BeatRegistry", "beat_name", "shard_owner", "shards_of"]


def beat_name() -> str:
    """A name no other beat process has: host, pid, and a random suffix (pids are reused)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _shard_token(shard: int) -> str:
    return f"due:{shard}"


def shard_owner(shard: int, beats: Sequence[str]) -> str | None:
    """The beat that claims ``shard`` among ``beats`` (None when there is none)."""
    return rendezvous_owner(_shard_token(shard), list(beats))


def shards_of(beat: str, beats: Sequence[str], shards: int) -> list[int]:
    """The shards out of ``range(shards)`` that ``beat`` owns among ``beats``."""
    live = list(beats)
    return [s for s in range(shards) if rendezvous_owner(_shard_token(s), live) == beat]


class BeatRegistry:
    """Live beat replicas: a sorted set of beat name -> last refresh (ms)."""

    def __init__(self, client: redis.Redis, keys: Keys, *, ttl_ms: int) -> None:
        if ttl_ms < 1:
            raise ValueError(f"ttl_ms must be >= 1, got {ttl_ms}")
        self.client = client
        self.keys = keys
        self.ttl_ms = ttl_ms

    def refresh_and_list(self, beat: str, now_ms: int) -> list[str]:
        """Refresh ``beat`` and return the live beats, itself included, in one round trip.

        Refreshing before reading is what re-registers a beat at once when its entry is gone
        (Redis restarted empty, or the beat stalled past the TTL and was dropped as stale).
        Entries stale for ten TTLs are removed on the way, so dead names do not pile up.
        """
        key = self.keys.beats()
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(key, {beat: now_ms})
        pipe.zremrangebyscore(key, "-inf", f"({now_ms - 10 * self.ttl_ms}")
        pipe.zrangebyscore(key, now_ms - self.ttl_ms, "+inf")
        members = pipe.execute()[-1]
        return sorted(str(m) for m in members)

    def live(self, now_ms: int) -> list[str]:
        members = self.client.zrangebyscore(self.keys.beats(), now_ms - self.ttl_ms, "+inf")
        return sorted(str(m) for m in members)

    def remove(self, beat: str) -> None:
        """Leave at once (a clean stop): the others take the shards on their next tick."""
        self.client.zrem(self.keys.beats(), beat)
