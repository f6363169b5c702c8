"""The Redis part of a runtime: the connection and the namespace's key names, nothing else.

A unit that only counts or remembers something in Redis (the message rate, a seen event id,
a stall alert's mark) is handed this, not the whole ``Runtime``: it cannot reach the SQL
store, the due index or the turn gate by accident, and a test builds it from a client alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from hbgw.state.keys import Keys


@dataclass(frozen=True)
class RedisPart:
    client: redis.Redis
    keys: Keys
