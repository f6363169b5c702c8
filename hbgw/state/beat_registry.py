"""Which beat replica claims which due-index shard: a balanced rendezvous assignment.

Beats claim atomically (``claim_due.lua``), so any number may run, but replicas that all claim
every shard only contend for the same keys. Instead, every beat refreshes its entry in a Redis
sorted set on each tick, and computes from the live list who owns each shard: each beat claims
and sweeps only its own shards, and a beat that stops refreshing for ``ttl_ms`` loses its shards
to the others.

The assignment (``assign_shards``) is a pure function of the set of live names and the shard
count, so every replica computes the same one with no coordination. It is balanced: with ``n``
live beats and ``S`` shards each beat owns ``S // n`` or ``S // n + 1`` (fewer shards than
beats: some own one, the others none). Plain rendezvous hashing (a shard to the beat with the
highest hash of (beat, shard)) moves the fewest shards on a membership change, but its split is
lumpy — 16 shards over four beats came out 4/5/2/5, and the busiest beat bounds a round. So each
beat keeps its rendezvous preferences but has a capacity: every (beat, shard) pair is taken in
order of that hash, highest first, and a shard goes to the first beat of its pairs that still
has room (the first ``S % n`` beats to reach ``S // n + 1`` take the remainder). Given those
capacities that is a stable matching of shards to beats by the hash (no beat and shard both
prefer each other to what they hold), and a change of membership moves the new or departed
beat's shards plus a few that the shifted capacities push on (tests bound it at twice that
beat's share plus one per beat; plain rendezvous moved only the share, but left one beat 2.5×
the shards of another).

Two beats may briefly disagree about a shard while membership changes (each reads the set on
its own tick). Both then claim it, and the atomic claim hands each due member to one of them:
disagreement costs contention, never a duplicate fire — whichever assignment a beat computes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import socket
from collections.abc import Iterable, Sequence
from typing import Any

import redis
from redis.client import Pipeline

from hbgw.state.keys import Keys

__all__ = [
    "BeatRegistry",
    "assign_shards",
    "beat_name",
    "shard_balance",
    "shards_of",
]


def beat_name() -> str:
    """A name no other beat process has: host, pid, and a random suffix (pids are reused)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _score(beat: str, shard: int) -> bytes:
    """The rendezvous hash of (beat, shard): the same digest ``hbgw/state/ownership.py`` uses."""
    return hashlib.blake2b(f"{beat}\x00due:{shard}".encode(), digest_size=8).digest()


def assign_shards(beats: Sequence[str], shards: int) -> tuple[str, ...]:
    """The owner of each shard of ``range(shards)`` among the live ``beats`` (empty when none).

    Depends only on the set of names, not on their order or repeats: every replica that reads
    the same live list computes the same owners. Membership changes rarely and beat asks every
    tick, so the answer is cached per (names, shards).
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    return _assign(tuple(sorted(set(beats))), shards)


@functools.lru_cache(maxsize=32)
def _assign(beats: tuple[str, ...], shards: int) -> tuple[str, ...]:
    if not beats:
        return ()
    base, extra = divmod(shards, len(beats))
    pairs = sorted(((_score(b, s), b, s) for b in beats for s in range(shards)), reverse=True)
    owner: dict[int, str] = {}
    held = dict.fromkeys(beats, 0)
    at_most = base + 1 if extra else base  # until ``extra`` beats hold base + 1
    for _, beat, shard in pairs:
        if shard in owner or held[beat] >= at_most:
            continue
        owner[shard] = beat
        held[beat] += 1
        if held[beat] == base + 1:
            extra -= 1
            if extra == 0:
                at_most = base  # the remainder is handed out: the rest stop at base
        if len(owner) == shards:
            break
    return tuple(owner[s] for s in range(shards))


def shards_of(beat: str, beats: Sequence[str], shards: int) -> list[int]:
    """The shards out of ``range(shards)`` that ``beat`` owns among ``beats``."""
    return [s for s, owner in enumerate(assign_shards(beats, shards)) if owner == beat]


def shard_balance(owned: Sequence[int]) -> float:
    """Fewest shards a beat owns over the most (1.0: even); with more beats than shards, the
    beats that must own none are left out, so an assignment as even as possible scores 1.0."""
    counts = sorted(owned, reverse=True)
    total = sum(counts)
    if not counts or total == 0:
        return 1.0
    counted = counts[: min(len(counts), total)]
    return round(counted[-1] / counted[0], 3)


def names(members: Iterable[Any]) -> list[str]:
    """A registry's members as sorted names: every process ranks the same list alike."""
    return sorted(str(m) for m in members)


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
        pipe = self.client.pipeline(transaction=False)
        self.queue_refresh(pipe, beat, now_ms)
        return names(pipe.execute()[-1])

    def queue_refresh(self, pipe: Pipeline, beat: str, now_ms: int) -> None:
        """``refresh_and_list``'s commands on a pipeline the caller runs with more (beat's tick
        reads the live workers in the same round trip); its last answer, through ``names``, is
        the live beats."""
        key = self.keys.beats()
        pipe.zadd(key, {beat: now_ms})
        pipe.zremrangebyscore(key, "-inf", f"({now_ms - 10 * self.ttl_ms}")
        pipe.zrangebyscore(key, now_ms - self.ttl_ms, "+inf")

    def live(self, now_ms: int) -> list[str]:
        return names(self.client.zrangebyscore(self.keys.beats(), now_ms - self.ttl_ms, "+inf"))

    def remove(self, beat: str) -> None:
        """Leave at once (a clean stop): the others take the shards on their next tick."""
        self.client.zrem(self.keys.beats(), beat)
