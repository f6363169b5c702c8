"""The retention settings (``HBGW_RETAIN_*``): how long the fire ledger's runs (with their
delivery records) and the messages are kept, a part of ``Settings`` kept in a module of its own
like the jobs' and each platform's. ``0``: kept forever (as before retention existed)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RetentionSettings(BaseModel):
    retain_runs_days: int = Field(
        default=30,
        ge=0,
        description="Days a settled run of the fire ledger (and its delivery record) is kept; "
        "0: forever. A day or more keeps every count exact (docs/design.md: Retention).",
    )
    retain_messages_days: int = Field(
        default=0,
        ge=0,
        description="Days an answered message (and its delivery record) is kept; 0: forever. "
        "The agent sees no message older than this.",
    )
    retain_interval: float = Field(
        default=300.0,
        gt=0,
        description="Seconds between retention steps, run by one beat replica under a lease.",
    )
    retain_batch: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Most rows one retention transaction deletes (bounds SQLite's write lock).",
    )
    retain_batches: int = Field(
        default=10,
        ge=1,
        description="Most transactions of one retention step; more left: the next tick goes on.",
    )
