"""The heartbeat cost settings (``HBGW_HEARTBEAT_DAILY_TOKENS``, ``HBGW_ALLOWED_MODELS``), a part
of ``Settings`` kept in a module of its own like the jobs' and each platform's."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CostSettings(BaseModel):
    heartbeat_daily_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget per UTC day of every heartbeat set without 'budget' whose "
        "owner has no default budget (hbgw heartbeat budget); blank: no cap (contract: Policies).",
    )
    allowed_models: str | None = Field(
        default=None,
        description="Comma-separated models a heartbeat may choose with 'model NAME'; blank: "
        "none (every heartbeat uses the agent's own).",
    )

    @property
    def allowed_model_names(self) -> tuple[str, ...]:
        return tuple(m.strip() for m in (self.allowed_models or "").split(",") if m.strip())
