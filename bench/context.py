"""What every benchmark gets: the profile, a private Redis, the PostgreSQL URL, a scratch dir."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

QUICK = "quick"
FULL = "full"

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass
class BenchContext:
    profile: str  # QUICK or FULL
    redis_url: str  # a private server: benchmarks may FLUSHALL it
    work_dir: Path
    pg_url: str | None = None  # None when PostgreSQL does not answer
    notes: list[str] = field(default_factory=list)

    @property
    def quick(self) -> bool:
        return self.profile == QUICK

    def sizes(self, quick: list[int], full: list[int]) -> list[int]:
        return quick if self.quick else full

    def redis(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, db=db, decode_responses=True)

    def note(self, text: str) -> None:
        self.notes.append(text)


def pg_url_if_up() -> str | None:
    """``HBGW_BENCH_PG_URL`` or the local test database, when it answers."""
    url = os.environ.get("HBGW_BENCH_PG_URL", DEFAULT_PG_URL)
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
    except Exception:
        return None
    return url


Result = dict[str, Any]
