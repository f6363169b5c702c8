"""Liveness stamps: time, phase and worker of every running turn, on every step."""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis

from state.keys import Keys


@dataclass(frozen=True)
class Stamp:
    session_id: str
    at_ms: int
    phase: str
    worker: str


class Liveness:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def stamp(self, session_id: str, at_ms: int, phase: str, worker: str) -> None:
        value = json.dumps({"at_ms": at_ms, "phase": phase, "worker": worker})
        self.client.hset(self.keys.liveness(), session_id, value)

    def all(self) -> list[Stamp]:
        raw = self.client.hgetall(self.keys.liveness())
        stamps = []
        for sid, value in raw.items():
            data = json.loads(value)
            stamps.append(Stamp(str(sid), int(data["at_ms"]), data["phase"], data["worker"]))
        return sorted(stamps, key=lambda s: s.at_ms)
