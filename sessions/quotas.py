"""The per-owner quotas: how many sessions, heartbeats and cron jobs one owner may hold.

Every path that makes one counts — the HTTP API, each platform's inbound messages and slash
commands, the model's ``set_heartbeat`` tool, ``/cron add`` in a chat — because the store
checks them (``sessions/store/owner_quotas.py``), in the transaction that adds the row. The
operator (the API's admin token, the ``hbgw`` command on the database) is not held to them: it
works on ``Store.operator``. Each refusal is a ``QuotaExceeded`` whose sentence names the
setting; the API answers it ``429 quota_exceeded``, a chat with the sentence, the model's tool
with an error it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hbgw.core.errors import QuotaExceeded

if TYPE_CHECKING:
    from hbgw.core.settings import Settings

SESSIONS_SETTING = "HBGW_API_MAX_SESSIONS_PER_OWNER"
HEARTBEATS_SETTING = "HBGW_API_MAX_HEARTBEATS_PER_OWNER"
JOBS_SETTING = "HBGW_API_MAX_JOBS_PER_OWNER"


@dataclass(frozen=True)
class OwnerQuotas:
    """Most sessions not closed, heartbeats not cleared and cron jobs active or paused of one
    owner; 0: no limit. The default holds nobody (the operator's store)."""

    sessions: int = 0
    heartbeats: int = 0
    jobs: int = 0

    @property
    def any(self) -> bool:
        return bool(self.sessions or self.heartbeats or self.jobs)


def quotas_from_settings(settings: Settings) -> OwnerQuotas:
    return OwnerQuotas(
        sessions=settings.api_max_sessions_per_owner,
        heartbeats=settings.api_max_heartbeats_per_owner,
        jobs=settings.api_max_jobs_per_owner,
    )


def sessions_exceeded(limit: int) -> QuotaExceeded:
    return _exceeded("sessions", limit, SESSIONS_SETTING)


def heartbeats_exceeded(limit: int) -> QuotaExceeded:
    return _exceeded("heartbeats", limit, HEARTBEATS_SETTING)


def jobs_exceeded(limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"This owner already has {limit} cron jobs, the most allowed ({JOBS_SETTING}); "
        "cancel some first (/cron list shows them), or ask the operator for more."
    )


def _exceeded(what: str, limit: int, setting: str) -> QuotaExceeded:
    return QuotaExceeded(
        f"This owner already has {limit} {what}, the most allowed ({setting}); "
        "close some first, or ask the operator for more."
    )
