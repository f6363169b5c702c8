"""Every Redis key name, in one place.

Layout (``ns`` is ``Settings.namespace``, ``hbgw`` by default; ``sid`` a session id)::

    ns:{s:sid}:lock      STRING  turn lock: holder token, PX lease
    ns:{s:sid}:fence     STRING  fence counter, INCR on every lock grant; never decreases
    ns:{s:sid}:inbox     LIST    queued user message ids, oldest first
    ns:{s:sid}:inflight  LIST    the message id a turn is running (back to the inbox if it dies)
    ns:{s:sid}:pending   STRING  the one fire id waiting for the session to go idle
    ns:{s:sid}:pending_jobs HASH cron job member -> its fire id waiting for idle (beside it)
    ns:{s:sid}:estop     STRING  emergency stop for this session (present = on)
    ns:{s:sid}:stall     STRING  stamp time (ms) of the stall last alerted, with a TTL
    ns:{s:sid}:rate      STRING  messages the API accepted this minute (INCR, PEXPIRE 60 s)
    ns:{s:sid}:events    CHANNEL pub/sub: "read SQL now" to the session's open event streams
    ns:{due:i}           ZSET    due-index shard i: member sid (or job:<id>), score due in ms
    ns:{due:i.j}         ZSET    the same on a Redis Cluster: j picked so that the n shards'
                                 slots spread evenly over the slot space (``spread_due_shard``)
    ns:workers           ZSET    worker name -> last seen, ms
    ns:beats             ZSET    beat replica name -> last seen, ms (who claims which due shard)
    ns:estop             STRING  global emergency stop (present = on)
    ns:inbox_sessions    SET     sessions that may have queued messages (a sweeper's hint)
    ns:liveness          HASH    sid -> JSON liveness stamp
    ns:{restore}:sweep   HASH    beat's restore sweep: epoch, phase, cursor, started, next, steps
    ns:{restore}:lease   STRING  the beat replica running a restore step: token, PX lease
    ns:{retention}:lease STRING  the beat replica running the retention step: token, PX interval
    ns:inbound:<p>:<id>  STRING  a platform's event id seen (SET NX, EX): its retries are dropped

Idle is not a key: a session is idle when its lock is free and its inbox and in-flight list are
empty, so a scheduled idle session costs its due-index entry and its fence counter only.

Keys between braces are Redis Cluster hash tags: the slot is computed from the tag alone, so all
keys of one session live in one slot, and each due shard in its own. Every Lua script touches
the keys of a single session, a single shard, or the restore sweep (its two keys share the tag
``{restore}``), which is what Redis Cluster requires of a script. Other global keys are only
ever used by plain commands.

On a cluster the due shards take ``spread_due_shard`` names: ``{due:i}`` alone lands where
CRC16 puts it (16 shards fall 10/3/3 on three primaries), while shard i of n named
``{due:i.j}`` has its slot in the i-th n-th of the slot space, so primaries that own equal
slot ranges (as ``redis-cli --cluster create`` and ``--cluster rebalance`` make them) hold
equal numbers of shards. A standalone or Sentinel Redis keeps the plain names (no migration).

``worker_queue`` is not a Redis key but a Celery queue name; it lives here so that every name
derived from the namespace is built by this module.
"""

from __future__ import annotations

import zlib
from functools import cache

from hbgw.core.errors import BadInput

__all__ = ["Keys", "shard_of", "spread_tag"]

# Characters SCAN MATCH treats as glob syntax; escaped so a namespace matches only itself.
_GLOB_SPECIALS = "\\*?[]"


class Keys:
    """Key names under one namespace."""

    __slots__ = ("namespace",)

    def __init__(self, namespace: str) -> None:
        if not namespace or "{" in namespace or "}" in namespace:
            # A brace in the prefix would become the hash tag of every key and put the whole
            # deployment in one cluster slot.
            raise BadInput(
                f"Invalid Redis namespace {namespace!r}: use a non-empty name without braces, "
                "such as 'hbgw' (HBGW_NAMESPACE)."
            )
        self.namespace = namespace

    def __repr__(self) -> str:
        return f"Keys({self.namespace!r})"

    # -- per session: one hash tag per session ------------------------------------------------

    def _session(self, session_id: str, leaf: str) -> str:
        return f"{self.namespace}:{{s:{session_id}}}:{leaf}"

    def lock(self, session_id: str) -> str:
        return self._session(session_id, "lock")

    def fence(self, session_id: str) -> str:
        return self._session(session_id, "fence")

    def inbox(self, session_id: str) -> str:
        return self._session(session_id, "inbox")

    def inflight(self, session_id: str) -> str:
        return self._session(session_id, "inflight")

    def pending(self, session_id: str) -> str:
        return self._session(session_id, "pending")

    def pending_jobs(self, session_id: str) -> str:
        return self._session(session_id, "pending_jobs")

    def message_rate(self, session_id: str) -> str:
        return self._session(session_id, "rate")

    def events(self, session_id: str) -> str:
        """Pub/sub channel waking the session's event streams (not a stored key)."""
        return self._session(session_id, "events")

    def stall_alerted(self, session_id: str) -> str:
        return self._session(session_id, "stall")

    def estop(self, session_id: str | None = None) -> str:
        """The per-session emergency-stop flag, or the global one when ``session_id`` is None."""
        if session_id is None:
            return f"{self.namespace}:estop"
        return self._session(session_id, "estop")

    # -- global ---------------------------------------------------------------------------------

    def due_shard(self, shard: int) -> str:
        if shard < 0:
            raise ValueError(f"shard must be >= 0, got {shard}")
        return f"{self.namespace}:{{due:{shard}}}"

    def spread_due_shard(self, shard: int, shards: int) -> str:
        """Due shard ``shard`` of ``shards`` on a Redis Cluster: its slot in the shard's own
        n-th of the slot space (the layout note above)."""
        return f"{self.namespace}:{{{spread_tag(shard, shards)}}}"

    def workers(self) -> str:
        return f"{self.namespace}:workers"

    def beats(self) -> str:
        return f"{self.namespace}:beats"

    def inbox_sessions(self) -> str:
        return f"{self.namespace}:inbox_sessions"

    def liveness(self) -> str:
        return f"{self.namespace}:liveness"

    def restore_sweep(self) -> str:
        """Where the restore sweep stands; its ``epoch`` vanishes when Redis loses its data."""
        return f"{self.namespace}:{{restore}}:sweep"

    def restore_lease(self) -> str:
        return f"{self.namespace}:{{restore}}:lease"

    def retention_lease(self) -> str:
        return f"{self.namespace}:{{retention}}:lease"

    def inbound_event(self, platform: str, event_id: str) -> str:
        """A verified inbound event of ``platform`` (Slack's ``event_id``), kept for its retries."""
        return f"{self.namespace}:inbound:{platform}:{event_id}"

    def worker_queue(self, worker_name: str) -> str:
        """Celery queue consumed by one worker (not a Redis key)."""
        return f"{self.namespace}.worker.{worker_name}"

    def match_all(self) -> str:
        """SCAN MATCH pattern for every key of this namespace."""
        escaped = "".join(f"\\{c}" if c in _GLOB_SPECIALS else c for c in self.namespace)
        return f"{escaped}:*"


def shard_of(session_id: str, shards: int) -> int:
    """Due-index shard of a session.

    CRC-32 rather than ``hash()``: Python salts string hashes per process, and every beat and
    worker replica must agree on the shard.
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    return zlib.crc32(session_id.encode("utf-8")) % shards


@cache
def spread_tag(shard: int, shards: int) -> str:
    """``due:<shard>.<j>`` with the smallest j whose slot is in the shard's n-th of the 16384
    slots (about n tries; at most 1024 shards, so every range holds 16 slots)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard must be in [0, {shards}), got {shard}")
    # Imported here: the hook's `hbgw stamp --dir` reads key names and must not load redis.
    from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

    low = shard * REDIS_CLUSTER_HASH_SLOTS // shards
    high = (shard + 1) * REDIS_CLUSTER_HASH_SLOTS // shards
    j = 0
    while not low <= key_slot(f"due:{shard}.{j}".encode()) < high:
        j += 1
    return f"due:{shard}.{j}"
