"""Liveness stamps: time, phase and worker of every running turn, on every step."""

from __future__ import annotations

import json

import redis

from state.keys import Keys


class Liveness:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def stamp(self, session_id: str, at_ms: int, phase: str, worker: str) -> None:
        value = json.dumps({"at_ms": at_ms, "phase": phase, "worker": worker})
        self.client.hset(self.keys.liveness(), session_id, value)
