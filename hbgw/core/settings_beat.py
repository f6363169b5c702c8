"""Beat's settings: the restore pass, the due index's shards and claims, the tick's pause, the
hold for busy workers and the replicas' TTL; a part of ``Settings`` kept in a module of its
own like the jobs' and each platform's."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class BeatSettings(BaseModel):
    restore_interval: float = Field(
        default=30.0, gt=0, description="Seconds between restore passes of the due index."
    )
    restore_page: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Most SQL rows one beat tick's restore step reads; a pass takes several.",
    )
    due_shards: int = Field(default=16, ge=1, le=1024, description="Due-index shards.")
    claim_batch: int = Field(default=500, ge=1, description="Most members claimed per shard call.")
    claim_lease: float = Field(
        default=60.0, gt=0, description="Seconds before an unsettled claim becomes due again."
    )
    beat_max_sleep: float = Field(default=1.0, gt=0, description="Longest pause between ticks.")
    beat_hold: float = Field(
        default=2.0,
        ge=0,
        description="Longest a beat holds a worker's fires while that worker's queue still has a "
        "message its consumer has not taken, to send them together in one message (0: never "
        "hold). Below HBGW_CLAIM_LEASE.",
    )
    beat_ttl: float = Field(
        default=5.0,
        gt=0,
        description="Seconds without a tick before a beat replica counts as dead; its due-index "
        "shards then move to the live beats.",
    )

    @model_validator(mode="after")
    def _beat_ttl_outlasts_a_pause(self) -> BeatSettings:
        # A beat refreshes its registry entry once a tick; a TTL within one pause would make
        # every idle beat look dead between ticks and its shards flap from replica to replica.
        if self.beat_ttl <= self.beat_max_sleep:
            raise ValueError(
                f"HBGW_BEAT_TTL ({self.beat_ttl:g} s) must be longer than HBGW_BEAT_MAX_SLEEP "
                f"({self.beat_max_sleep:g} s): a beat refreshes its entry once a tick"
            )
        return self

    @model_validator(mode="after")
    def _hold_within_the_lease(self) -> BeatSettings:
        # A claim held past its lease is handed out again by the index: fired twice (the
        # ledger refuses the repeat, but the fire waited a whole lease for nothing).
        if self.beat_hold >= self.claim_lease:
            raise ValueError(
                f"HBGW_BEAT_HOLD ({self.beat_hold:g} s) must be shorter than HBGW_CLAIM_LEASE "
                f"({self.claim_lease:g} s): a claim held past its lease is due again"
            )
        return self
