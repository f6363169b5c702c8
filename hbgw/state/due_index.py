"""The due index: when each session's heartbeat is next due, sharded over Redis ZSETs.

Each shard ``ns:{due:i}`` (``ns:{due:i.j}`` on a Redis Cluster: ``Keys.spread_due_shard``)
maps session id -> due time (ms). A session lives in shard
``shard_of(session_id, shards)``; every replica computes the same shard. Claims go through
``claim_due.lua``: the due members are leased (their score pushed to now + lease) rather than
removed, so a fire nobody settles becomes due again. Settling a fire is ``schedule`` with the
next due time.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import redis
from redis.commands.core import Script

from hbgw.state.cluster import is_cluster_client
from hbgw.state.failures import is_expected, log_failure
from hbgw.state.keys import Keys, shard_of
from hbgw.state.scripts import load_script

__all__ = ["Claim", "ClaimRound", "DueIndex"]

log = logging.getLogger("hbgw.index")

Claim = tuple[str, int]
"""(session id, the due time in ms it was claimed at)."""


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _due(score: str | bytes) -> int:
    # A ms timestamp prints as plain digits; Redis may print another score in exponent form.
    return int(score) if score.isdigit() else int(float(score))


def _pairs(flat: Sequence[str | bytes]) -> list[Claim]:
    # Beat parses every claimed member here (a million in a big tick): one pass over two
    # slices, the str fast path inline instead of a call per element.
    members, scores = flat[0::2], flat[1::2]
    if all(type(m) is str for m in members):
        return [(m, _due(d)) for m, d in zip(members, scores, strict=True)]  # type: ignore[misc]
    return [(_text(m), _due(d)) for m, d in zip(members, scores, strict=True)]


@dataclass(frozen=True)
class ClaimRound:
    claims: list[Claim]
    # The smallest due time left in the shards claimed (leases included); None: all empty.
    earliest_ms: int | None


def _partial(failed: Sequence[BaseException], claimed: Sequence[Claim]) -> None:
    """Raise the first failure unless it is expected and some claims came back (kept)."""
    if not claimed or not all(is_expected(exc) for exc in failed):
        raise failed[0]
    log_failure(
        log,
        f"{len(failed)} due shards were not claimed this tick (a Redis node away); the "
        f"{len(claimed)} claims of the others go ahead",
        failed[0],
        action="index.claim_partial",
    )


class DueIndex:
    def __init__(self, client: redis.Redis, keys: Keys, shards: int) -> None:
        if shards < 1:
            raise ValueError(f"shards must be >= 1, got {shards}")
        self.client = client
        self.keys = keys
        self.shards = shards
        # A cluster client gets the slot-spread names (``Keys.spread_due_shard``); every
        # process of a deployment reaches the state the same way, so all agree on them.
        spread = is_cluster_client(client)
        self._keys = [
            keys.spread_due_shard(i, shards) if spread else keys.due_shard(i) for i in range(shards)
        ]
        self._claim: Script = load_script(client, "hbgw.state", "lua/claim_due.lua")

    def shard_key(self, session_id: str) -> str:
        return self._keys[shard_of(session_id, self.shards)]

    def key(self, shard: int) -> str:
        """The Redis key of due shard ``shard``."""
        return self._keys[shard]

    def schedule(self, session_id: str, due_ms: int) -> None:
        """Set (or overwrite, including a claim's lease) the session's due time."""
        self.client.zadd(self.shard_key(session_id), {session_id: int(due_ms)})

    def schedule_many(self, due: Mapping[str, int]) -> None:
        """``schedule`` for many sessions in one round trip, one ZADD per shard."""
        by_shard: defaultdict[str, dict[str, int]] = defaultdict(dict)
        for session_id, due_ms in due.items():
            by_shard[self.shard_key(session_id)][session_id] = int(due_ms)
        if not by_shard:
            return
        pipe = self.client.pipeline(transaction=False)
        for key, members in by_shard.items():
            pipe.zadd(key, members)
        pipe.execute()

    def remove(self, session_id: str) -> bool:
        """Drop the session from the index; True when it was there."""
        return bool(self.client.zrem(self.shard_key(session_id), session_id))

    def due_ms(self, session_id: str) -> int | None:
        score = self.client.zscore(self.shard_key(session_id), session_id)
        return None if score is None else int(score)

    def due_many(self, session_ids: Sequence[str], chunk: int = 10_000) -> dict[str, int]:
        """Due times of many sessions (absent ones omitted): one ZMSCORE per shard, pipelined
        in chunks (Redis 6.2+); a command per session cost more to build than Redis to answer."""
        out: dict[str, int] = {}
        for start in range(0, len(session_ids), chunk):
            by_shard: defaultdict[str, list[str]] = defaultdict(list)
            for session_id in session_ids[start : start + chunk]:
                by_shard[self.shard_key(session_id)].append(session_id)
            pipe = self.client.pipeline(transaction=False)
            for key, members in by_shard.items():
                pipe.zmscore(key, members)
            for members, scores in zip(by_shard.values(), pipe.execute(), strict=True):
                for session_id, score in zip(members, scores, strict=True):
                    if score is not None:
                        out[session_id] = int(score)
        return out

    def claim(self, shard: int, now_ms: int, lease_ms: int, limit: int) -> list[Claim]:
        """Lease at most ``limit`` members of ``shard`` due at ``now_ms``, earliest first."""
        self._check(shard, lease_ms, limit)
        flat = self._claim(keys=[self._keys[shard]], args=[now_ms, lease_ms, limit])
        return _pairs(flat)

    def claim_all(
        self, now_ms: int, lease_ms: int, limit: int, *, shards: Iterable[int] | None = None
    ) -> list[Claim]:
        """Lease every member due at ``now_ms`` in ``shards`` (default: all), earliest first."""
        return self.claim_round(now_ms, lease_ms, limit, shards=shards).claims

    def claim_round(
        self, now_ms: int, lease_ms: int, limit: int, *, shards: Iterable[int] | None = None
    ) -> ClaimRound:
        """``claim_all``, and the earliest due time left in ``shards`` after it (the leases
        just made included), read in the same round trips: beat sleeps until then.

        ``limit`` bounds one script call (how long Redis is blocked), not the total: a shard that
        returns a full batch is asked again, in the next pipelined round. Since claimed members
        move past ``now_ms``, each round only sees members not claimed yet, and the loop ends.
        The script goes by its sha alone (no SCRIPT EXISTS before each pipeline, as redis-py's
        pipelined scripts send): a Redis that lost it answers NOSCRIPT, and that shard is asked
        again after the script is loaded.

        On a Redis Cluster the shards live on several primaries: when one is away (failing
        over), the claims the others answered are returned (and the failure logged), not
        dropped with the whole pipeline, which would leave them leased and unfired until the
        lease ends. Nothing answered, or a failure that is a defect: raised.
        """
        self._check(0, lease_ms, limit)
        claimed: list[Claim] = []
        failed: list[BaseException] = []
        heads: dict[int, int | None] = {}
        pending = self._shard_list(shards)
        reloaded = False
        while pending:
            answers = self._claim_pass(pending, now_ms, lease_ms, limit)
            again: list[int] = []
            lost_script = False
            for shard, answer, head in zip(pending, answers[0::2], answers[1::2], strict=True):
                if isinstance(answer, redis.exceptions.NoScriptError) and not reloaded:
                    again.append(shard)  # it did not run: asked again once the script is back
                    lost_script = True
                elif isinstance(answer, Exception):
                    failed.append(answer)
                else:
                    batch = _pairs(answer)
                    claimed.extend(batch)
                    if len(batch) >= limit:
                        again.append(shard)
                    if not isinstance(head, Exception):
                        heads[shard] = int(head[0][1]) if head else None
            if lost_script:
                self.client.script_load(self._claim.script)  # Redis restarted without it
                reloaded = True
            pending = again
        if failed:
            _partial(failed, claimed)
        claimed.sort(key=itemgetter(1, 0))
        earliest = min((h for h in heads.values() if h is not None), default=None)
        return ClaimRound(claimed, earliest)

    def _claim_pass(self, shards: list[int], now_ms: int, lease_ms: int, limit: int) -> list[Any]:
        """One pipelined round: each shard's claim, then its earliest due time left."""
        pipe = self.client.pipeline(transaction=False)
        for shard in shards:
            key = self._keys[shard]
            pipe.evalsha(self._claim.sha, 1, key, now_ms, lease_ms, limit)
            pipe.zrange(key, 0, 0, withscores=True)
        return pipe.execute(raise_on_error=False)

    def earliest_ms(self, shards: Iterable[int] | None = None) -> int | None:
        """The smallest due time over ``shards`` (default: all; claimed leases included), None
        when they are empty."""
        pipe = self.client.pipeline(transaction=False)
        for shard in self._shard_list(shards):
            pipe.zrange(self._keys[shard], 0, 0, withscores=True)
        heads = [int(score) for rows in pipe.execute() for _, score in rows]
        return min(heads, default=None)

    def backlog(self, now_ms: int, shards: Iterable[int] | None = None) -> dict[int, int]:
        """Members due at ``now_ms`` (claimed leases not) per shard of ``shards`` (default:
        all), in one round trip."""
        chosen = self._shard_list(shards)
        if not chosen:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for shard in chosen:
            pipe.zcount(self._keys[shard], "-inf", now_ms)
        return {shard: int(n) for shard, n in zip(chosen, pipe.execute(), strict=True)}

    def size(self) -> int:
        pipe = self.client.pipeline(transaction=False)
        for shard in range(self.shards):
            pipe.zcard(self._keys[shard])
        return sum(int(n) for n in pipe.execute())

    def _shard_list(self, shards: Iterable[int] | None) -> list[int]:
        if shards is None:
            return list(range(self.shards))
        chosen = sorted(set(shards))
        if chosen and (chosen[0] < 0 or chosen[-1] >= self.shards):
            raise ValueError(f"shards must be in [0, {self.shards}), got {chosen}")
        return chosen

    def _check(self, shard: int, lease_ms: int, limit: int) -> None:
        if not 0 <= shard < self.shards:
            raise ValueError(f"shard must be in [0, {self.shards}), got {shard}")
        # A lease of 0 would leave claimed members due, and claim_all would claim them forever.
        if lease_ms < 1:
            raise ValueError(f"lease_ms must be >= 1, got {lease_ms}")
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
