"""The cron-job settings (``HBGW_API_MAX_JOBS_PER_OWNER``, ``HBGW_JOB_RETRY_DELAYS``) and the
heartbeats' default dedupe window (``HBGW_DEDUPE``), a part of ``Settings`` kept in a module of
its own like each platform's."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

MAX_RUNGS = 10


class JobSettings(BaseModel):
    api_max_jobs_per_owner: int = Field(
        default=100,
        ge=0,
        description="Most cron jobs (active or paused) of one owner, by any path; 0: any.",
    )
    job_retry_delays: str = Field(
        default="60,300,900",
        description="Seconds before each retry of a job run whose model was unreachable, "
        "comma-separated ('' none); after the last, the run has failed.",
    )
    dedupe: str = Field(
        default="24h",
        description="Dedupe window of a heartbeat set by a command that names none "
        "(contract: Policies); 0: off.",
    )

    @field_validator("job_retry_delays")
    @classmethod
    def _delays_are_seconds(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        try:
            delays = [float(p) for p in parts]
        except ValueError:
            raise ValueError(
                f"HBGW_JOB_RETRY_DELAYS is seconds separated by commas (60,300,900), not {value!r}"
            ) from None
        if len(delays) > MAX_RUNGS or any(not 0 < d <= 86400 for d in delays):
            raise ValueError(
                f"HBGW_JOB_RETRY_DELAYS takes at most {MAX_RUNGS} delays, each above 0 and at "
                "most 86400 seconds"
            )
        return ",".join(parts)

    @property
    def job_retry_ladder(self) -> tuple[float, ...]:
        return tuple(float(p) for p in self.job_retry_delays.split(",") if p)
